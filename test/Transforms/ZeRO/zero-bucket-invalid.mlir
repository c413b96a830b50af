// RUN: not zero-opt %s --zero-bucket="bytes=-1" 2>&1 | FileCheck %s --check-prefix=BUCKET

// Tests that zero-bucket rejects a negative byte budget with an error that
// names the pass, the option and the bound, and that zero-opt exits non-zero.
// BUCKET: error: zero-bucket: bytes must be >= 0
module {
  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %w = ml_program.global_load @w : tensor<4xf32>
    %y = onnx.Add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
