// RUN: zero-opt %s --split-input-file --verify-diagnostics --zero-add-loss
// RUN: not zero-opt %s --split-input-file --zero-add-loss="output=probs" 2>&1 | FileCheck %s --check-prefix=OUTPUT
// RUN: not zero-opt %s --split-input-file --zero-add-loss="kind=focal" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not zero-opt %s --split-input-file --zero-add-loss="kind=causal-lm" 2>&1 | FileCheck %s --check-prefix=CAUSAL

// Tests that the option errors name what is wrong (on the cases below): an
// `output` that the model does not have names the outputs it has, an unknown
// loss kind is refused by the option's parser (kind is an enum option), and
// causal-lm refuses logits that are not [batch, seq, classes].
// OUTPUT: error: zero-add-loss: the model has no output 'probs' (outputs: loss)
// UNKNOWN: for the --kind option: Cannot find option named 'focal'!
// CAUSAL: error: zero-add-loss: output 'logits' has type 'tensor<2x4xf32>'; causal-lm needs floating-point logits [batch, seq, classes]

// Tests that a model that already returns its scalar loss has no logits to
// attach a loss to: the error names the output and its type.
// expected-error @+1 {{zero-add-loss: output 'loss' has type 'tensor<f32>'; cross-entropy needs floating-point logits [..., classes]}}
module {
  ml_program.global private @w(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x3xf32>) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %m = onnx.ReduceSum %h {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
    return %m : tensor<f32>
  }
}

// -----

// Tests that with several outputs and no `output` the pass asks for the
// logits' name (zero-opt's --loss option takes it after an @), listing the
// outputs.
// expected-error @+1 {{zero-add-loss: the model has 2 outputs (hidden, logits); name the logits with --loss KIND:LABELS@OUTPUT}}
module {
  ml_program.global private @w(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {onnx.name = "hidden"}, tensor<2x4xf32> {onnx.name = "logits"}) {
    %w = ml_program.global_load @w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    return %x, %h : tensor<2x3xf32>, tensor<2x4xf32>
  }
}

// -----

// Tests that integer logits are refused (the loss needs floating-point
// scores), naming the output and its type.
// expected-error @+1 {{zero-add-loss: output 'ids' has type 'tensor<2x4xi64>'; cross-entropy needs floating-point logits [..., classes]}}
module {
  func.func @forward(%x: tensor<2x4xi64>) -> (tensor<2x4xi64> {onnx.name = "ids"}) {
    return %x : tensor<2x4xi64>
  }
}

// -----

// Tests that an existing labels input must be int64 of the logits' leading
// shape: an int32 one is refused with the type it must have.
// expected-error @+1 {{zero-add-loss: input 'labels' has type 'tensor<2xi32>'; labels for logits 'tensor<2x4xf32>' must be 'tensor<2xi64>'}}
module {
  ml_program.global private @w(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x3xf32> {onnx.name = "x"}, %y: tensor<2xi32> {onnx.name = "labels"}) -> (tensor<2x4xf32> {onnx.name = "logits"}) {
    %w = ml_program.global_load @w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    return %h : tensor<2x4xf32>
  }
}

// -----

// Tests that an existing labels input of another shape than the logits'
// leading dims ([2] for [2, 4] logits) is refused with the type it must have.
// expected-error @+1 {{zero-add-loss: input 'labels' has type 'tensor<2x4xi64>'; labels for logits 'tensor<2x4xf32>' must be 'tensor<2xi64>'}}
module {
  ml_program.global private @w(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x3xf32> {onnx.name = "x"}, %y: tensor<2x4xi64> {onnx.name = "labels"}) -> (tensor<2x4xf32> {onnx.name = "logits"}) {
    %w = ml_program.global_load @w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    return %h : tensor<2x4xf32>
  }
}

// -----

// Tests that a module with several functions, none of them @forward, is
// refused: the pass works on the only function, else on @forward.
// expected-error @+1 {{zero-add-loss: no function @forward}}
module {
  func.func @a(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
  func.func @b(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
}

// -----

// Tests that a function of more than one block is refused.
module {
  // expected-error @+1 {{'func.func' op must have a single block (zero-add-loss)}}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  ^unreachable(%y: tensor<2x4xf32>):
    return %y : tensor<2x4xf32>
  }
}
