// RUN: zero-opt %s --zero-autodiff --zero-optimizer --zero-report -o %t.mlir 2>&1 | FileCheck %s
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="type=sgd momentum=0.9" --zero-report -o %t.mlir 2>&1 | FileCheck %s --check-prefix=SGD

// Tests zero-report on a training step: w (3x4) and b (4) are trained, 64
// bytes (Psi_t); their gradients are as large; fp32 Adam keeps two moments per
// parameter (2 Psi_t) plus the 8-byte step counter; parameters + gradients +
// state are 16 bytes per parameter (the ZeRO paper's 16 Psi, fp32 Adam). SGD
// with momentum keeps one buffer (Psi_t).

// CHECK: training step (adamw
// CHECK: trained parameters (bytes) 64 Psi_t 64
// CHECK: gradients (bytes) 64 Psi_t 64
// CHECK: optimizer state + counter (bytes) 136 2 Psi_t + 8 136
// CHECK: parameters + gradients + state 264 4 Psi_t (16 B/param) + frozen 264
// SGD: optimizer state + counter (bytes) 72 Psi_t + 8 72
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
