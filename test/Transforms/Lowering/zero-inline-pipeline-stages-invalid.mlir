// RUN: zero-opt %s --split-input-file --verify-diagnostics --zero-inline-pipeline-stages=function=forward
// RUN: awk '/^\/\/ -----/ { n++ } n < 2' %s | zero-opt --split-input-file --verify-diagnostics --zero-lower-to-runtime

// The errors of zero-inline-pipeline-stages: a stage is inlined as one block
// of ops, and `function` must name a function of the module. The stage
// errors (the first two cases) end zero-lower-to-runtime too, which runs this
// pass first.

// Tests that a stage function of more than one block is refused at the
// stage.
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = call @forward_stage0(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
  // expected-error @+1 {{'func.func' op must have a single block to be lowered}}
  func.func private @forward_stage0(%x: tensor<4xf32>) -> tensor<4xf32> attributes {zero.pipeline_stage = 0 : i64} {
    return %x : tensor<4xf32>
  ^unreachable(%y: tensor<4xf32>):
    return %y : tensor<4xf32>
  }
}

// -----

// Tests that a stage function without a body (a declaration) is refused at
// the stage.
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = call @forward_stage0(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
  // expected-error @+1 {{'func.func' op must have a single block to be lowered}}
  func.func private @forward_stage0(tensor<4xf32>) -> tensor<4xf32> attributes {zero.pipeline_stage = 0 : i64}
}

// -----

// Tests that naming a function the module does not have is refused.
// expected-error @+1 {{zero-inline-pipeline-stages: no function @forward whose pipeline stages to inline}}
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
