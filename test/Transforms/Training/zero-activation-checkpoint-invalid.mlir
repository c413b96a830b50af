// RUN: zero-opt %s --split-input-file --verify-diagnostics --zero-activation-checkpoint
// RUN: not zero-opt %s --split-input-file --zero-activation-checkpoint="interval=0" 2>&1 | FileCheck %s --check-prefix=INTERVAL

// Tests that an interval below 1 is refused, naming the option and the value
// (the first case has no training step: its error comes first there).
// INTERVAL: error: zero-activation-checkpoint: interval must be >= 1, got 0

// Tests that a module without a training step is refused, saying which pass
// builds it.
// expected-error @+1 {{zero-activation-checkpoint: no @train_step; run zero-autodiff first (zero-opt --train)}}
module {
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %y = onnx.Tanh %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// Tests that a training step whose ops carry no micro-batch and phase tags is
// refused, saying how to build one that does.
#layer0 = loc(fused<{module_classes = ["Block"], module_scopes = ["layers.0"]}>["model.onnx":0:0])
module {
  ml_program.global private mutable @w(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {zero.tensor = "w", zero.trainable}
  // expected-error @+1 {{zero-activation-checkpoint: the training step's ops carry no micro-batch tags; build it with zero-autodiff tag-micro-batches=true (zero-opt --train does)}}
  func.func @train_step(%x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>) {
    %w = ml_program.global_load @w : tensor<4x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %a = onnx.Tanh %h : (tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %l = onnx.ReduceSum %a {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
    %g = onnx.Constant dense<1.0> : tensor<2x4xf32>
    %one = onnx.Constant dense<1.0> : tensor<f32>
    %sq = onnx.Mul %a, %a : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %t = onnx.Sub %one, %sq : (tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %dh = onnx.Mul %g, %t : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %xt = onnx.Transpose %x {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32> loc(#layer0)
    %dw = onnx.MatMul %xt, %dh : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc(#layer0)
    return %l, %dw : tensor<f32>, tensor<4x4xf32>
  }
}

// -----

// Tests that a tagged training step whose ops record no module paths (no
// layers to form segments of) is refused.
module {
  ml_program.global private mutable @w(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {zero.tensor = "w", zero.trainable}
  // expected-error @+1 {{zero-activation-checkpoint: the model records no module paths, so it has no layers to checkpoint}}
  func.func @train_step(%x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>) {
    %w = ml_program.global_load @w : tensor<4x4xf32> {zero.micro_batch = 0 : i64, zero.phase = "forward"}
    %h = onnx.MatMul %x, %w {zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a = onnx.Tanh %h {zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = onnx.ReduceSum %a {axes = array<i64: 0, 1>, keepdims = 0 : i64, zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>) -> tensor<f32>
    %g = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.0> : tensor<2x4xf32>
    %one = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.0> : tensor<f32>
    %sq = onnx.Mul %a, %a {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %t = onnx.Sub %one, %sq {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %dh = onnx.Mul %g, %t {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %xt = onnx.Transpose %x {perm = array<i64: 1, 0>, zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %dw = onnx.MatMul %xt, %dh {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    return %l, %dw : tensor<f32>, tensor<4x4xf32>
  }
}
