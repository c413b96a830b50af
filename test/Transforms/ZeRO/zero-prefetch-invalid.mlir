// RUN: not zero-opt %s --zero-prefetch="depth=-1" 2>&1 | FileCheck %s --check-prefix=DEPTH
// RUN: not zero-opt %s --zero-prefetch="depth=1 bytes=-5" 2>&1 | FileCheck %s --check-prefix=BYTES

// Tests that zero-prefetch rejects a negative depth and a negative byte
// budget with an error that names the pass and the options, and that
// zero-opt exits non-zero.
// DEPTH: error: zero-prefetch: depth and bytes must be >= 0
// BYTES: error: zero-prefetch: depth and bytes must be >= 0
module {
  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %w = ml_program.global_load @w : tensor<4xf32>
    %y = onnx.Add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
