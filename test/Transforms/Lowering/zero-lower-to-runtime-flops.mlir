// RUN: zero-opt %s --zero-lower-to-runtime | FileCheck %s

// Tests the compiler's FLOP count of each product kernel (2 per multiply-add),
// which zero-run's MFU adds up: a batched MatMul 2 * 120 outputs (2x4x3x5) * K=6,
// a Gemm with transA (K from A's first dim) 2 * 3x5 * 7, a Conv 2 * outputs
// (1x4x3x3) * (Cin/group 2 x 2x2 kernel), and none on other kernels.
// CHECK: zrt.kernel "MatMul" {{.*}} {flops = 1440 : i64}
// CHECK: zrt.kernel "Gemm" {{.*}} {flops = 210 : i64}
// CHECK: zrt.kernel "Conv" {{.*}} {flops = 576 : i64}
// CHECK-NOT: flops
// CHECK: zrt.output
module {
  func.func @forward(%a: tensor<2x4x3x6xf32> {onnx.name = "a"}, %b: tensor<2x4x6x5xf32> {onnx.name = "b"},
                     %c: tensor<7x3xf32> {onnx.name = "c"}, %d: tensor<7x5xf32> {onnx.name = "d"},
                     %x: tensor<1x2x4x4xf32> {onnx.name = "x"}, %w: tensor<4x2x2x2xf32> {onnx.name = "w"})
      -> (tensor<2x4x3x5xf32>, tensor<3x5xf32>, tensor<1x4x3x3xf32>) {
    %m = onnx.MatMul %a, %b : (tensor<2x4x3x6xf32>, tensor<2x4x6x5xf32>) -> tensor<2x4x3x5xf32>
    %g = onnx.Gemm %c, %d {transA = 1 : i64} : (tensor<7x3xf32>, tensor<7x5xf32>) -> tensor<3x5xf32>
    %v = onnx.Conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<4x2x2x2xf32>) -> tensor<1x4x3x3xf32>
    %r = onnx.Relu %v : (tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
    return %m, %g, %r : tensor<2x4x3x5xf32>, tensor<3x5xf32>, tensor<1x4x3x3xf32>
  }
}
