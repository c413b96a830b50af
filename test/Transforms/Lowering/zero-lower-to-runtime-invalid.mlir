// RUN: zero-opt %s --split-input-file --verify-diagnostics --zero-lower-to-runtime

// The errors of zero-lower-to-runtime: zero.release decides when a
// gathered buffer dies, so releasing anything else, releasing twice, or
// using the value after its release is refused at the release.

// Tests that releasing a value that is not a gathered parameter is refused.
module attributes {zero.world_size = 1 : i64} {
  func.func @not_gathered(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
    // expected-error @+1 {{'zero.release' op releases a value that is not a gathered parameter}}
    zero.release %y : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// Tests that using a gathered parameter after its release is refused at the
// release, with a note at the use.
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {zero.full_type = tensor<4xf32>, zero.shard = #zero.shard<world = 2, numel = 4, padded_numel = 4>, zero.tensor = "w"}
  func.func @use_after_release(%x: tensor<4xf32>) -> tensor<4xf32> {
    %s = ml_program.global_load @w : tensor<2xf32>
    %g = zero.all_gather %s {world = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
    %a = onnx.Add %x, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // expected-error @+1 {{'zero.release' op releases a gathered parameter that is still used after it; move the release after its last use}}
    zero.release %g : tensor<4xf32>
    // expected-note @+1 {{used here}}
    %b = onnx.Mul %a, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

// Tests that releasing a gathered parameter twice is refused at the second
// release, with a note at the first.
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {zero.full_type = tensor<4xf32>, zero.shard = #zero.shard<world = 2, numel = 4, padded_numel = 4>, zero.tensor = "w"}
  func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
    %s = ml_program.global_load @w : tensor<2xf32>
    %g = zero.all_gather %s {world = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
    %a = onnx.Add %x, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // expected-note @+1 {{released here}}
    zero.release %g : tensor<4xf32>
    // expected-error @+1 {{'zero.release' op releases a gathered parameter that was already released}}
    zero.release %g : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// Tests that a module of several functions, none of them @forward, is refused
// with a hint to name one.
// expected-error @+1 {{zero-lower-to-runtime: no function @forward to lower (name one with function=...)}}
module {
  func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
  func.func @b(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Tests that an op of another dialect (a func.call) cannot be lowered.
module {
  func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'func.call' op cannot be lowered to the runtime: only onnx, zero and ml_program ops are supported}}
    %y = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// Tests that a function of more than one block cannot be lowered.
module {
  // expected-error @+1 {{'func.func' op must have a single block to be lowered}}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  ^unreachable(%y: tensor<4xf32>):
    return %y : tensor<4xf32>
  }
}
