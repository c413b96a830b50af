// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-prefetch="depth=1" --zero-release | FileCheck %s --check-prefix=DEPTH1
// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-prefetch="depth=2" --zero-release | FileCheck %s --check-prefix=DEPTH2
// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-prefetch="depth=2 bytes=96" --zero-release | FileCheck %s --check-prefix=BUDGET
// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-prefetch="depth=0" | FileCheck %s --check-prefix=OFF

// Tests that the prefetch depth and byte budget decide how far each gather
// moves: with depth 1 each gather is issued just before
// the compute that uses the previous parameter; with depth 2, two ahead; with
// a live-bytes budget of 96 (w1 gathers 64 bytes, b1 32, w2 48) a gather moves
// only as far as the budget allows; with depth 0 nothing moves.

// DEPTH1-LABEL: func.func @forward
// DEPTH1: %[[G1:.+]] = zero.all_gather %{{.+}} : tensor<4xf32> -> tensor<16xf32>
// DEPTH1: %[[G2:.+]] = zero.all_gather %{{.+}} : tensor<2xf32> -> tensor<8xf32>
// DEPTH1: onnx.MatMul
// DEPTH1: %[[G3:.+]] = zero.all_gather %{{.+}} : tensor<3xf32> -> tensor<12xf32>
// DEPTH1: onnx.Add
// DEPTH1: onnx.Relu
// DEPTH1: onnx.MatMul

// DEPTH2-LABEL: func.func @forward
// DEPTH2: zero.all_gather %{{.+}} : tensor<4xf32> -> tensor<16xf32>
// DEPTH2: zero.all_gather %{{.+}} : tensor<2xf32> -> tensor<8xf32>
// DEPTH2: zero.all_gather %{{.+}} : tensor<3xf32> -> tensor<12xf32>
// DEPTH2: onnx.MatMul

// BUDGET-LABEL: func.func @forward
// BUDGET: zero.all_gather %{{.+}} : tensor<4xf32> -> tensor<16xf32>
// BUDGET: zero.all_gather %{{.+}} : tensor<2xf32> -> tensor<8xf32>
// BUDGET: onnx.MatMul
// BUDGET: zero.all_gather %{{.+}} : tensor<3xf32> -> tensor<12xf32>
// BUDGET: onnx.Add

// OFF-LABEL: func.func @forward
// OFF: zero.all_gather %{{.+}} : tensor<4xf32> -> tensor<16xf32>
// OFF: onnx.MatMul
// OFF: zero.all_gather %{{.+}} : tensor<2xf32> -> tensor<8xf32>
// OFF: onnx.Add
// OFF: onnx.Relu
// OFF: zero.all_gather %{{.+}} : tensor<3xf32> -> tensor<12xf32>
// OFF: onnx.MatMul
