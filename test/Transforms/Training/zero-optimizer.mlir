// RUN: zero-opt %s --zero-autodiff --zero-optimizer="clip=1.0 schedule=WarmupLR warmup-num-steps=5 warmup-type=linear" | FileCheck %s
// RUN: zero-opt %s --zero-autodiff --zero-optimizer --zero-lower-to-runtime | FileCheck %s --check-prefix=ZRT
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="type=sgd momentum=0.9 weight-decay=0" | FileCheck %s --check-prefix=SGD
// RUN: not zero-opt %s --zero-autodiff --zero-optimizer="type=lion" 2>&1 | FileCheck %s --check-prefix=BAD

// Tests that zero-optimizer appends the optimizer step to @train_step: the
// step counter (zero-initialised, incremented and stored), the learning rate of
// the step, the global gradient norm over every gradient, clip_grad_norm_'s
// coefficient min(1, max_norm / (norm + 1e-6)), and one zero.adamw per
// parameter whose three results are stored into the parameter and its two
// zero-initialised state globals. The step returns loss, grad_norm and lr.

// CHECK: ml_program.global private mutable @w({{.*}}) : tensor<3x4xf32> {zero.grad_type = tensor<3x4xf32>, zero.tensor = "w", zero.trainable}
// CHECK-DAG: ml_program.global private mutable @optimizer_step(dense<0> : tensor<i64>) : tensor<i64> {zero.role = "counter", zero.tensor = "optimizer.step"}
// CHECK-DAG: ml_program.global private mutable @w.exp_avg(dense<0.000000e+00> : tensor<3x4xf32>) : tensor<3x4xf32> {zero.role = "optimizer_state", zero.tensor = "w.exp_avg"}
// CHECK-DAG: ml_program.global private mutable @w.exp_avg_sq(dense<0.000000e+00> : tensor<3x4xf32>) : tensor<3x4xf32> {zero.role = "optimizer_state", zero.tensor = "w.exp_avg_sq"}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<f32> {onnx.name = "grad_norm"}, tensor<f32> {onnx.name = "lr"})
// CHECK: %[[DW:.+]] = onnx.MatMul %{{.+}}, %{{.+}} : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK: %[[ONE:.+]] = onnx.Constant dense<1> : tensor<i64>
// CHECK-NEXT: %[[S0:.+]] = ml_program.global_load @optimizer_step : tensor<i64>
// CHECK-NEXT: %[[T:.+]] = onnx.Add %[[S0]], %[[ONE]]
// CHECK-NEXT: ml_program.global_store @optimizer_step = %[[T]] : tensor<i64>
// CHECK-NEXT: %[[LR:.+]] = zero.lr_schedule %[[T]] {schedule = "WarmupLR", warmup_max_lr = 1.000000e-03 : f64, warmup_min_lr = 0.000000e+00 : f64, warmup_num_steps = 5 : i64, warmup_type = "linear"} : tensor<i64> -> tensor<f32>
// CHECK-NEXT: %[[NW:.+]] = onnx.ReduceSumSquare %[[DW]] {axes = array<i64: 0, 1>, keepdims = 0 : i64}
// CHECK-NEXT: %[[NB:.+]] = onnx.ReduceSumSquare %[[DB:.+]] {axes = array<i64: 0>, keepdims = 0 : i64}
// CHECK-NEXT: %[[SQ:.+]] = onnx.Add %[[NW]], %[[NB]]
// CHECK-NEXT: %[[NORM:.+]] = onnx.Sqrt %[[SQ]]
// CHECK: %[[EPS:.+]] = onnx.Constant dense<9.99999997E-7> : tensor<f32>
// CHECK-NEXT: %[[DEN:.+]] = onnx.Add %[[NORM]], %[[EPS]]
// CHECK-NEXT: %[[MAX:.+]] = onnx.Constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[COEF:.+]] = onnx.Div %[[MAX]], %[[DEN]]
// CHECK-NEXT: %[[ONEF:.+]] = onnx.Constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[SCALE:.+]] = onnx.Min %[[COEF]], %[[ONEF]]
// CHECK-NEXT: %[[P:.+]] = ml_program.global_load @w : tensor<3x4xf32>
// CHECK-DAG: %[[V:.+]] = ml_program.global_load @w.exp_avg_sq
// CHECK-DAG: %[[M:.+]] = ml_program.global_load @w.exp_avg
// CHECK-NEXT: %[[P1:.+]], %[[M1:.+]], %[[V1:.+]] = zero.adamw %[[P]], %[[DW]], %[[T]], %[[LR]], %[[SCALE]], %[[M]], %[[V]] {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, decoupled = 1 : i64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK-NEXT: ml_program.global_store @w = %[[P1]]
// CHECK-NEXT: ml_program.global_store @w.exp_avg = %[[M1]]
// CHECK-NEXT: ml_program.global_store @w.exp_avg_sq = %[[V1]]
// CHECK: zero.adamw
// CHECK: return %{{.+}}, %[[NORM]], %[[LR]] : tensor<f32>, tensor<f32>, tensor<f32>

// In the runtime program, each update writes its parameter and state buffers
// in place (the outputs are the input buffers), the counter is copied back,
// and the roles tell the runtime what to read from the weights file.
// ZRT: zrt.program @train_step world_size = 1 attributes {training = #zero.training<loss = "loss", grad_norm = "grad_norm", lr = "lr", accumulation_steps = 1, optimizer = "adamw
// ZRT: zrt.global "w" tensor "w" : tensor<3x4xf32> into @[[W:b[0-9]+]] {gradient = tensor<3x4xf32>, role = "parameter"}
// ZRT: zrt.global "optimizer_step" tensor "optimizer.step" : tensor<i64> into @[[STEP:b[0-9]+]] {role = "counter"}
// ZRT: zrt.global "w.exp_avg_sq" tensor "w.exp_avg_sq" : tensor<3x4xf32> into @[[V:b[0-9]+]] {role = "optimizer_state"}
// ZRT: zrt.global "w.exp_avg" tensor "w.exp_avg" : tensor<3x4xf32> into @[[M:b[0-9]+]] {role = "optimizer_state"}
// ZRT: zrt.kernel "Copy" on @compute [@[[T:b[0-9]+]]] -> [@[[STEP]]]
// ZRT: zrt.kernel "LrSchedule" on @compute [@[[T]]] -> [@[[LR:b[0-9]+]]] {lr = 1.000000e-03 : f64, type = "constant"}
// ZRT: zrt.kernel "AdamW" on @compute [@[[W]], @{{b[0-9]+}}, @[[T]], @[[LR]], @{{b[0-9]+}}, @[[M]], @[[V]]] -> [@[[W]], @[[M]], @[[V]]]
// ZRT: zrt.output "grad_norm"

// SGD with momentum: one buffer per parameter, no Adam state.
// SGD: ml_program.global private mutable @w.momentum_buffer(dense<0.000000e+00> : tensor<3x4xf32>)
// SGD-NOT: exp_avg
// SGD: zero.sgd %{{.+}} {dampening = 0.000000e+00 : f64, momentum = 9.000000e-01 : f64, nesterov = 0 : i64, weight_decay = 0.000000e+00 : f64}

// BAD: error: zero-optimizer: unknown optimizer 'lion'; the optimizers are adamw, adam and sgd
module {
  ml_program.global private @w(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32> {zero.tensor = "w"}
  ml_program.global private @b(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "b"}
  func.func @forward(%x: tensor<2x3xf32> {onnx.name = "x"}, %y: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %b = ml_program.global_load @b : tensor<4xf32>
    %z = onnx.Add %h, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %p = onnx.Softmax %z {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = onnx.SoftmaxCrossEntropyLoss %p, %y : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
