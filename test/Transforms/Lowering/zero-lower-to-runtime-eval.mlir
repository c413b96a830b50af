// RUN: awk '/^\/\/ -----/ { n++; next } n == 0' %s | zero-opt --zero-autodiff --zero-partition="dp=2 stage=3" --zero-optimizer="dp=2 stage=3 type=sgd lr=0.1" --zero-lower-to-runtime | FileCheck %s
// RUN: awk '/^\/\/ -----/ { n++; next } n == 1' %s | zero-opt --zero-lower-to-runtime | FileCheck %s --check-prefix=PP

// Tests that the instructions the loss is computed from, and only they, are
// marked `eval` (what zero-run --eval-tokens runs): at ZeRO-3 the forward's
// gathers and kernels up to SoftmaxCrossEntropyLoss; not the backward, the
// gradients' reduce-scatters, the norm's all-reduce, the update.
// CHECK:      zrt.collective "AllGather" on @comm {{.*}} {eval}
// CHECK:      zrt.kernel "MatMul" on @compute {{.*}} {eval, flops = 60 : i64}
// CHECK:      zrt.kernel "Tanh" on @compute {{.*}} {eval}
// CHECK:      zrt.kernel "SoftmaxCrossEntropyLoss" on @compute {{.*}} {eval}
// CHECK-NOT:  eval
// CHECK:      zrt.collective "ReduceScatter"
// CHECK-NOT:  eval
// CHECK:      zrt.collective "AllReduce"
// CHECK-NOT:  eval
// CHECK:      zrt.kernel "SGD"
// CHECK-NOT:  eval
// CHECK:      zrt.output "loss"
module {
  ml_program.global private @w1(#ml_program.extern : tensor<3x5xf32>) : tensor<3x5xf32> {zero.tensor = "w1"}
  ml_program.global private @w2(#ml_program.extern : tensor<5x3xf32>) : tensor<5x3xf32> {zero.tensor = "w2"}
  ml_program.global private @b2(#ml_program.extern : tensor<3xf32>) : tensor<3xf32> {zero.tensor = "b2"}
  func.func @forward(%x: tensor<2x3xf32> {onnx.name = "x"}, %y: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w1 = ml_program.global_load @w1 : tensor<3x5xf32>
    %h = onnx.MatMul %x, %w1 : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
    %a = onnx.Tanh %h : (tensor<2x5xf32>) -> tensor<2x5xf32>
    %w2 = ml_program.global_load @w2 : tensor<5x3xf32>
    %z = onnx.MatMul %a, %w2 : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
    %b2 = ml_program.global_load @b2 : tensor<3xf32>
    %o = onnx.Add %z, %b2 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %l = onnx.SoftmaxCrossEntropyLoss %o, %y : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that the slice crosses pipeline stages from each receive to its send:
// stage 0 receives the loss before stage 1 (inlined after it) sends it, and
// the k-th receive of a tag from a stage is that stage's k-th send of it
// (tag 1 carries the loss first, then a value the loss does not need). The
// backward's transfers (tags 2 and 3) and kernels are not marked.
// PP:      zrt.kernel "Relu" {{.*}} {eval, ranks = array<i64: 0>}
// PP:      zrt.collective "Send" {{.*}} {peer = 1 : i64, tag = 0 : i64} {eval, ranks = array<i64: 0>}
// PP:      zrt.collective "Recv" {{.*}} -> [[[LOSS:@b[0-9]+]]] {peer = 1 : i64, tag = 1 : i64} {eval, ranks = array<i64: 0>}
// PP:      zrt.collective "Recv" {{.*}} {peer = 1 : i64, tag = 1 : i64} {ranks = array<i64: 0>}
// PP:      zrt.collective "Recv" {{.*}} {peer = 1 : i64, tag = 2 : i64} {ranks = array<i64: 0>}
// PP:      zrt.kernel "Neg" {{.*}} {ranks = array<i64: 0>}
// PP:      zrt.collective "Send" {{.*}} {peer = 1 : i64, tag = 3 : i64} {ranks = array<i64: 0>}
// PP:      zrt.collective "Recv" {{.*}} {peer = 0 : i64, tag = 0 : i64} {eval, ranks = array<i64: 1>}
// PP:      zrt.kernel "ReduceSum" {{.*}} {eval, ranks = array<i64: 1>}
// PP:      zrt.collective "Send" {{.*}} {peer = 0 : i64, tag = 1 : i64} {eval, ranks = array<i64: 1>}
// PP:      zrt.kernel "Sigmoid" {{.*}} {ranks = array<i64: 1>}
// PP:      zrt.collective "Send" {{.*}} {peer = 0 : i64, tag = 1 : i64} {ranks = array<i64: 1>}
// PP:      zrt.collective "Send" {{.*}} {peer = 0 : i64, tag = 2 : i64} {ranks = array<i64: 1>}
// PP:      zrt.collective "Recv" {{.*}} {peer = 0 : i64, tag = 3 : i64} {ranks = array<i64: 1>}
// PP:      zrt.output "loss" from [[LOSS]]
module attributes {zero.world_size = 2 : i64, zero.pipeline_plan = #zero.pipeline_plan<stages = 2, partition = "uniform", layers = ["relu", "sum"], layer_params = [0, 0], parts = [0, 1, 2], micro_batches = 1, dp = 1, schedule = "gpipe">, zero.training = #zero.training<loss = "loss", grad_norm = "grad_norm", lr = "lr", accumulation_steps = 1, optimizer = "sgd lr=1">} {
  func.func @train_step(%x: tensor<4xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}, tensor<4xf32> {onnx.name = "grad"}, tensor<f32> {onnx.name = "other"}) {
    %l:2 = call @stage0(%x) : (tensor<4xf32>) -> (tensor<f32>, tensor<f32>)
    %g = call @stage1() : () -> tensor<4xf32>
    return %l#0, %g, %l#1 : tensor<f32>, tensor<4xf32>, tensor<f32>
  }
  func.func private @stage0(%x: tensor<4xf32>) -> (tensor<f32>, tensor<f32>) attributes {zero.pipeline_stage = 0 : i64} {
    %h = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
    zero.send %h {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    %l = zero.recv {peer = 1 : i64, tag = 1 : i64} : tensor<f32>
    %o = zero.recv {peer = 1 : i64, tag = 1 : i64} : tensor<f32>
    %d = zero.recv {peer = 1 : i64, tag = 2 : i64} : tensor<4xf32>
    %n = onnx.Neg %d : (tensor<4xf32>) -> tensor<4xf32>
    zero.send %n {peer = 1 : i64, tag = 3 : i64} : tensor<4xf32>
    return %l, %o : tensor<f32>, tensor<f32>
  }
  func.func private @stage1() -> tensor<4xf32> attributes {zero.pipeline_stage = 1 : i64} {
    %h = zero.recv {peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
    %l = onnx.ReduceSum %h {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    zero.send %l {peer = 0 : i64, tag = 1 : i64} : tensor<f32>
    %d = onnx.Sigmoid %h : (tensor<4xf32>) -> tensor<4xf32>
    %s = onnx.ReduceSum %d {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    zero.send %s {peer = 0 : i64, tag = 1 : i64} : tensor<f32>
    zero.send %d {peer = 0 : i64, tag = 2 : i64} : tensor<4xf32>
    %g = zero.recv {peer = 0 : i64, tag = 3 : i64} : tensor<4xf32>
    return %g : tensor<4xf32>
  }
}
