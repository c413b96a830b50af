// RUN: zero-opt %S/Inputs/mlp.mlir --zero-partition="dp=4" --zero-bucket="bytes=96" | FileCheck %s
// RUN: zero-opt %S/Inputs/mlp.mlir --zero-partition="dp=4" --zero-bucket="bytes=1000" | FileCheck %s --check-prefix=ALL

// Tests that neighbouring gathers are coalesced while the bucket stays within
// the byte budget: w1 (64 gathered bytes) and b1 (32) fit in 96, w2 (48)
// starts a new bucket and, alone, stays a plain all_gather.
// CHECK-LABEL: func.func @forward
// CHECK: %[[B:.+]]:2 = zero.bucket_all_gather %{{.+}}, %{{.+}} {world = 4 : i64} : tensor<4xf32>, tensor<2xf32> -> tensor<16xf32>, tensor<8xf32>
// CHECK: onnx.Slice %[[B]]#0
// CHECK: onnx.Slice %[[B]]#1
// CHECK: zero.all_gather %{{.+}} {world = 4 : i64} : tensor<3xf32> -> tensor<12xf32>
// CHECK-NOT: zero.bucket_all_gather

// ALL: zero.bucket_all_gather %{{.+}}, %{{.+}}, %{{.+}} {world = 4 : i64} : tensor<4xf32>, tensor<2xf32>, tensor<3xf32> -> tensor<16xf32>, tensor<8xf32>, tensor<12xf32>
// ALL-NOT: zero.all_gather
