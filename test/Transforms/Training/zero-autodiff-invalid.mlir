// RUN: not zero-opt %s --split-input-file --zero-autodiff 2>&1 | FileCheck %s
// RUN: not zero-opt %s --split-input-file --zero-autodiff="freeze=(" 2>&1 | FileCheck %s --check-prefix=REGEX

// Tests that an op without a reverse rule on the path from a parameter to
// the loss is refused, naming the op and its ONNX node (and, for the option
// run, that a bad --freeze regex is reported).
// zero-add-loss's errors: zero-add-loss-invalid.mlir.

// CHECK: error: loc("pool"): 'onnx.ReduceProd' op has no reverse rule (ONNX node 'pool'), but it lies between a trained parameter and the loss
// REGEX: error: zero-autodiff: --freeze '(' is not a valid regular expression
module {
  ml_program.global private @w(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x3xf32>) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %m = onnx.ReduceProd %h {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32> loc("pool")
    return %m : tensor<f32>
  }
}

// -----

// Tests that a function that does not return a scalar loss is refused with
// a message that says how to attach one.
// CHECK: error: 'func.func' op must return one floating-point scalar loss to be trained; it returns (tensor<2x4xf32>). Export the model with its loss, or attach one with --loss cross-entropy:LABELS (zero-add-loss)
module {
  ml_program.global private @w(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x3xf32>) -> (tensor<2x4xf32> {onnx.name = "logits"}) {
    %w = ml_program.global_load @w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    return %h : tensor<2x4xf32>
  }
}
