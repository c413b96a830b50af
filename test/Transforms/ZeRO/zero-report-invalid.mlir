// RUN: not zero-opt %s --zero-partition="dp=2" --zero-report="output=%t.missing/report.txt" 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that zero-report fails, naming the pass and the file, when it cannot
// write its output file (here in a directory that does not exist).
// REPORT: error: zero-report: {{.*}}report.txt
module {
  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %w = ml_program.global_load @w : tensor<4xf32>
    %y = onnx.Add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
