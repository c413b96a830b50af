// RUN: zero-opt %s --canonicalize --cse | FileCheck %s

// Tests that collectives are ordered and side-effecting: CSE does not merge a
// re-gather with an earlier gather of the same shard, and a gather whose
// result is only released is not deleted as dead code.
// CHECK-LABEL: func.func @regather
// CHECK: %[[G1:.+]] = zero.all_gather %[[S:.+]] {world = 2 : i64}
// CHECK: zero.release %[[G1]]
// CHECK: %[[G2:.+]] = zero.all_gather %[[S]] {world = 2 : i64}
// CHECK: onnx.Relu %[[G2]]
// CHECK: %[[G3:.+]] = zero.all_gather %[[S]] {world = 2 : i64}
// CHECK-NEXT: zero.release %[[G3]]
func.func @regather(%s: tensor<2xf32>) -> tensor<4xf32> {
  %g1 = zero.all_gather %s {world = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
  %a = onnx.Neg %g1 : (tensor<4xf32>) -> tensor<4xf32>
  zero.release %g1 : tensor<4xf32>
  %g2 = zero.all_gather %s {world = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
  %b = onnx.Relu %g2 : (tensor<4xf32>) -> tensor<4xf32>
  %c = onnx.Add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g3 = zero.all_gather %s {world = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
  zero.release %g3 : tensor<4xf32>
  return %c : tensor<4xf32>
}
