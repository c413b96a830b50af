// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-release | FileCheck %s

// Tests that every gathered parameter is released right after its last use,
// through the unpad/reshape views compute sees, and that the gathers stay
// where partitioning put them.
// CHECK-LABEL: func.func @forward
// CHECK: zero.all_gather
// CHECK: %[[W1:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 3, 5>}
// CHECK-NEXT: %[[H:.+]] = onnx.MatMul %{{.+}}, %[[W1]]
// CHECK-NEXT: zero.release %[[W1]] : tensor<3x5xf32>
// CHECK: zero.all_gather
// CHECK: %[[B1:.+]] = onnx.Slice %{{.+}} {ends = array<i64: 5>
// CHECK-NEXT: onnx.Add %[[H]], %[[B1]]
// CHECK-NEXT: zero.release %[[B1]] : tensor<5xf32>
// CHECK: zero.all_gather
// CHECK: %[[W2:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 5, 2>}
// CHECK-NEXT: onnx.MatMul %{{.+}}, %[[W2]]
// CHECK-NEXT: zero.release %[[W2]] : tensor<5x2xf32>
// CHECK-NEXT: return
