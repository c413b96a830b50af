module {
  ml_program.global private @w1(#ml_program.extern : tensor<3x5xf32>) : tensor<3x5xf32> {zero.tensor = "w1"}
  ml_program.global private @b1(#ml_program.extern : tensor<5xf32>) : tensor<5xf32> {zero.tensor = "b1"}
  ml_program.global private @w2(#ml_program.extern : tensor<5x2xf32>) : tensor<5x2xf32> {zero.tensor = "w2"}
  func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
    %w1 = ml_program.global_load @w1 : tensor<3x5xf32>
    %h = onnx.MatMul %x, %w1 : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %b1 = ml_program.global_load @b1 : tensor<5xf32>
    %hb = onnx.Add %h, %b1 : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
    %r = onnx.Relu %hb : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %w2 = ml_program.global_load @w2 : tensor<5x2xf32>
    %y = onnx.MatMul %r, %w2 : (tensor<4x5xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}
