// RUN: zero-opt %s --zero-autodiff="accumulation=2" | FileCheck %s

// Tests that training-mode Dropout under zero-autodiff with two micro-batches
// reads one step counter and gets a stream per micro-batch: a private
// `rng_step` counter (zero.role = "counter") is loaded, incremented
// and stored once per step, before the first micro-batch; each micro-batch's
// copy of the Dropout reads that step and gets its own stream (the first
// keeps the imported one); the reverse rule selects dy / (1 - ratio) with the
// forward's own mask, 0 elsewhere.

// CHECK: ml_program.global private mutable @rng_step(dense<0> : tensor<i64>) : tensor<i64> {zero.role = "counter", zero.tensor = "rng.step"}
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x3xf32> {onnx.name = "r"})
// CHECK-NEXT: %[[ONE:.+]] = onnx.Constant dense<1> : tensor<i64>
// CHECK-NEXT: %[[OLD:.+]] = ml_program.global_load @rng_step : tensor<i64>
// CHECK-NEXT: %[[STEP:.+]] = onnx.Add %[[OLD]], %[[ONE]]
// CHECK-NEXT: ml_program.global_store @rng_step = %[[STEP]] : tensor<i64>
// CHECK: %[[W0:.+]] = ml_program.global_load @w
// CHECK-NEXT: %[[Y0:.+]], %[[M0:.+]] = onnx.TrainingDropout %[[W0]], %[[STEP]] {ratio = 2.500000e-01 : f64, seed = 5 : i64, stream = 77 : i64} : (tensor<3xf32>, tensor<i64>) -> (tensor<3xf32>, tensor<3xi1>)
// CHECK: %[[Z0:.+]] = onnx.Constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[S0:.+]] = onnx.Constant dense<1.33333337> : tensor<f32>
// CHECK-NEXT: %[[G0:.+]] = onnx.Mul %{{.+}}, %[[S0]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT: %[[D0:.+]] = onnx.Where %[[M0]], %[[G0]], %[[Z0]]
// CHECK: %[[W1:.+]] = ml_program.global_load @w
// CHECK-NEXT: %{{.+}}, %[[M1:.+]] = onnx.TrainingDropout %[[W1]], %[[STEP]] {ratio = 2.500000e-01 : f64, seed = 5 : i64, stream = 2177342782468422754 : i64}
// CHECK: %[[D1:.+]] = onnx.Where %[[M1]]
// CHECK-NEXT: onnx.Add %[[D0]], %[[D1]]
module {
  ml_program.global private @w(#ml_program.extern : tensor<3xf32>) : tensor<3xf32> {zero.tensor = "w"}
  func.func @forward(%r: tensor<2x3xf32> {onnx.name = "r"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<3xf32>
    %y, %m = onnx.TrainingDropout %w {ratio = 0.25 : f64, seed = 5 : i64, stream = 77 : i64} : (tensor<3xf32>) -> (tensor<3xf32>, tensor<3xi1>)
    %p = onnx.Mul %y, %r : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %l = onnx.ReduceSum %p {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
