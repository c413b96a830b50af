// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-prefetch="depth=3" --zero-bucket="bytes=96" | FileCheck %s
// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-prefetch="depth=3" --zero-bucket="bytes=1000" | FileCheck %s --check-prefix=ALL
// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-bucket="bytes=1000" | FileCheck %s --check-prefix=APART

// Tests that gathers sitting together (here all three, issued at the start by
// prefetch) are coalesced while the bucket stays within the byte budget: w1
// (64 gathered bytes) and b1 (32) fit in 96, w2 (48) starts a new bucket and,
// alone, stays a plain all_gather. The bucket takes the first member's place
// and the views follow it.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: %[[W1:.+]] = ml_program.global_load @w1
// CHECK-NEXT: %[[B1:.+]] = ml_program.global_load @b1
// CHECK-NEXT: %[[B:.+]]:2 = zero.bucket_all_gather %[[W1]], %[[B1]] {world = 4 : i64} : tensor<4xf32>, tensor<2xf32> -> tensor<16xf32>, tensor<8xf32>
// CHECK-NEXT: ml_program.global_load @w2
// CHECK-NEXT: zero.all_gather %{{.+}} {world = 4 : i64} : tensor<3xf32> -> tensor<12xf32>
// CHECK-NEXT: onnx.Slice %[[B]]#0
// CHECK: onnx.MatMul
// CHECK-NEXT: onnx.Slice %[[B]]#1
// CHECK-NOT: zero.bucket_all_gather

// ALL: zero.bucket_all_gather %{{.+}}, %{{.+}}, %{{.+}} {world = 4 : i64} : tensor<4xf32>, tensor<2xf32>, tensor<3xf32> -> tensor<16xf32>, tensor<8xf32>, tensor<12xf32>
// ALL-NOT: zero.all_gather

// Tests that gathers separated by compute are never coalesced, whatever the
// budget: a bucket would hoist b1's and w2's gathers across the MatMul and
// hold them gathered with no prefetch budget bounding it.
// APART-LABEL: func.func @forward
// APART-NOT: zero.bucket_all_gather
// APART: zero.all_gather %w1
// APART: onnx.MatMul
// APART: zero.all_gather %b1
// APART: onnx.Add
// APART: onnx.Relu
// APART: zero.all_gather %w2
// APART: onnx.MatMul
