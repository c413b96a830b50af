// RUN: zero-opt %s --split-input-file --zero-autodiff | FileCheck %s

// Tests that the reverse rules of Conv (groups, stride, asymmetric pads) and
// MaxPool build the gradients worked out by hand below.
// The reverse rules of the convolution and pooling ops, on shapes worked out
// by hand. Conv over 5x5 with 3x3 windows, stride 2, begin pads 1, end pads
// 0, 2 groups: 2x2 outputs, whose windows never read the last input row and
// column (the floor of the output size).
//  - dX is the transposed convolution of dY by the same W; its end pads
//    2*(2-1) + (3-1) + 1 - 1 - 5 = -1 are one row/column of output padding.
//  - dW convolves X's images-as-channels ([N, G*Cg] -> [Cg, G*N]), cropped
//    to the 4x4 the windows read, by dY's ([N, M] -> [M, N]), with stride and
//    dilation swapped (dilation 2 = the forward stride), 2 groups: [Cg, M,
//    3, 3], then transposed to W's [M, Cg, 3, 3].
//  - dB sums dY over the image and the positions.
//  - MaxPool's gradient is onnx.MaxPoolGrad of dY and its input, with the
//    pool's attributes.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[X:.+]] = ml_program.global_load @x
// CHECK: %[[W:.+]] = ml_program.global_load @w
// CHECK: %[[Y:.+]] = onnx.Conv %[[X]], %[[W]], %{{.+}} {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>}
// CHECK: %[[DP:.+]] = onnx.Expand
// CHECK-NEXT: %[[DY:.+]] = onnx.MaxPoolGrad %[[DP]], %[[Y]] {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x1x1xf32>, tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
// CHECK-NEXT: %[[DX:.+]] = onnx.ConvTranspose %[[DY]], %[[W]] {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, -1, -1>, strides = array<i64: 2, 2>} : (tensor<1x4x2x2xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x5x5xf32>
// CHECK-NEXT: %[[XC:.+]] = onnx.Slice %[[X]] {ends = array<i64: 1, 4, 4, 4>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>}
// CHECK-NEXT: %[[X5:.+]] = onnx.Reshape %[[XC]] {shape = array<i64: 1, 2, 2, 4, 4>}
// CHECK-NEXT: %[[XT:.+]] = onnx.Transpose %[[X5]] {perm = array<i64: 2, 1, 0, 3, 4>} : (tensor<1x2x2x4x4xf32>) -> tensor<2x2x1x4x4xf32>
// CHECK-NEXT: %[[XI:.+]] = onnx.Reshape %[[XT]] {shape = array<i64: 2, 2, 4, 4>}
// CHECK-NEXT: %[[DYT:.+]] = onnx.Transpose %[[DY]] {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x4x2x2xf32>) -> tensor<4x1x2x2xf32>
// CHECK-NEXT: %[[R:.+]] = onnx.Conv %[[XI]], %[[DYT]] {dilations = array<i64: 2, 2>, group = 2 : i64, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x2x4x4xf32>, tensor<4x1x2x2xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %[[DW:.+]] = onnx.Transpose %[[R]] {perm = array<i64: 1, 0, 2, 3>} : (tensor<2x4x3x3xf32>) -> tensor<4x2x3x3xf32>
// CHECK-NEXT: %[[DB:.+]] = onnx.ReduceSum %[[DY]] {axes = array<i64: 0, 2, 3>, keepdims = 0 : i64} : (tensor<1x4x2x2xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %{{.+}}, %[[DX]], %[[DW]], %[[DB]]
module {
  ml_program.global private @x(#ml_program.extern : tensor<1x4x5x5xf32>) : tensor<1x4x5x5xf32> {zero.tensor = "x"}
  ml_program.global private @w(#ml_program.extern : tensor<4x2x3x3xf32>) : tensor<4x2x3x3xf32> {zero.tensor = "w"}
  ml_program.global private @b(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "b"}
  func.func @forward() -> (tensor<f32> {onnx.name = "loss"}) {
    %x = ml_program.global_load @x : tensor<1x4x5x5xf32>
    %w = ml_program.global_load @w : tensor<4x2x3x3xf32>
    %b = ml_program.global_load @b : tensor<4xf32>
    %y = onnx.Conv %x, %w, %b {group = 2 : i64, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 0, 0>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>, tensor<4xf32>) -> tensor<1x4x2x2xf32>
    %p = onnx.MaxPool %y {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x4x2x2xf32>) -> tensor<1x4x1x1xf32>
    %l = onnx.ReduceSum %p {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<1x4x1x1xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that AveragePool's reverse rule divides dY by each window's count of
// input elements and spreads it over the window with a transposed convolution.
// AveragePool 2x2, stride 2, pads 1 on 3x3, padding not counted: the
// windows hold 1, 2, 2 and 4 input elements, so dY is divided by those
// before a transposed convolution with a kernel of ones spreads it over
// each window (end pads 2*(2-1) + 1 - 1 - 3 = 0).

// CHECK-LABEL: func.func @train_step
// CHECK: %[[DP:.+]] = onnx.Expand
// CHECK-NEXT: %[[DIV:.+]] = onnx.Constant dense<{{\[\[\[\[}}1.000000e+00, 2.000000e+00], [2.000000e+00, 4.000000e+00]]]]> : tensor<1x1x2x2xf32>
// CHECK-NEXT: %[[G:.+]] = onnx.Div %[[DP]], %[[DIV]]
// CHECK-NEXT: %[[ONES:.+]] = onnx.Constant dense<1.000000e+00> : tensor<1x1x2x2xf32>
// CHECK-NEXT: %[[DX:.+]] = onnx.ConvTranspose %[[G]], %[[ONES]] {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x3x3xf32>
// CHECK-NEXT: return %{{.+}}, %[[DX]]
module {
  ml_program.global private @x(#ml_program.extern : tensor<1x1x3x3xf32>) : tensor<1x1x3x3xf32> {zero.tensor = "x"}
  func.func @forward() -> (tensor<f32> {onnx.name = "loss"}) {
    %x = ml_program.global_load @x : tensor<1x1x3x3xf32>
    %p = onnx.AveragePool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
    %l = onnx.ReduceSum %p {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<1x1x2x2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
