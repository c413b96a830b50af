// A parameter (@w) used at both ends of the function, one persistent
// parameter (@b, 4 elements) and one used once (@v).
module {
  ml_program.global private @w(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {zero.tensor = "w"}
  ml_program.global private @b(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "b"}
  ml_program.global private @v(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {zero.tensor = "v"}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %w = ml_program.global_load @w : tensor<4x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %b = ml_program.global_load @b : tensor<4xf32>
    %hb = onnx.Add %h, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %v = ml_program.global_load @v : tensor<4x4xf32>
    %g = onnx.MatMul %hb, %v : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %y = onnx.MatMul %g, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
