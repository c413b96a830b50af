// RUN: zero-opt %s --zero-autodiff="accumulation=2" --zero-reduce-micro-steps="dp=2 stage=2" | FileCheck %s

// Tests that ZeRO-2 with gradient accumulation over 2 ranks reduce-scatters
// each micro-batch's gradients in its own backward: they are flattened, padded
// (15 -> 16, 3 -> 4) and reduce-scattered as soon as they are final in that
// micro-batch's backward (DeepSpeed reduces at every micro-step); the rank sums
// its shards of the two micro-batches at the end, and the results are those
// shards (zero.grad_shard = 2): no full-size gradient outlives its micro-batch.

// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x3xf32> {onnx.name = "x"}, %arg1: tensor<4xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}, tensor<8xf32> {onnx.name = "grad.w1", zero.grad_of = @w1, zero.grad_shard = 2 : i64}, tensor<8xf32> {onnx.name = "grad.w2", zero.grad_of = @w2, zero.grad_shard = 2 : i64}, tensor<2xf32> {onnx.name = "grad.b2", zero.grad_of = @b2, zero.grad_shard = 2 : i64})
// First micro-batch: b2, w2, w1 in backward order.
// CHECK: %[[B0:.+]] = zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<4xf32> -> tensor<2xf32>
// CHECK: %[[W20:.+]] = zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// CHECK: %[[W10:.+]] = zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// The second micro-batch's forward starts after them.
// CHECK: onnx.Slice %arg0 {ends = array<i64: 4, 3>, starts = array<i64: 2, 0>
// CHECK: %[[B1:.+]] = zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<4xf32> -> tensor<2xf32>
// CHECK: %[[W21:.+]] = zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// CHECK: %[[W11:.+]] = zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// CHECK: %[[SB:.+]] = onnx.Add %[[B0]], %[[B1]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[SW2:.+]] = onnx.Add %[[W20]], %[[W21]]
// CHECK-NEXT: %[[SW1:.+]] = onnx.Add %[[W10]], %[[W11]]
// CHECK: return %{{.+}}, %[[SW1]], %[[SW2]], %[[SB]] : tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<2xf32>
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
