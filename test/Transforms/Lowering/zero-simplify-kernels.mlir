// RUN: zero-opt %s --split-input-file --zero-simplify-kernels | FileCheck %s

// Tests that MatMul(X, Transpose(W)) with a 2-D W transposed [1, 0] becomes
// a Gemm with transB = 1 that reads W as stored (alpha 1, beta 0, no C), and
// that the transpose, now unread, is gone.
// CHECK-LABEL: func.func @gemm
// CHECK-SAME:    (%[[X:.+]]: tensor<3x4xf32>, %[[W:.+]]: tensor<2x4xf32>)
// CHECK-NEXT:    %[[Y:.+]] = onnx.Gemm %[[X]], %[[W]] {beta = 0.000000e+00 : f32, transB = 1 : i64} : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @gemm(%x: tensor<3x4xf32>, %w: tensor<2x4xf32>) -> tensor<3x2xf32> {
  %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %y = onnx.MatMul %x, %t : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// Tests that a 3-D X is reshaped to its 2 * 3 = 6 rows for the Gemm and the
// result back to 2x3x5, and that all three new ops keep the MatMul's zero.*
// marks (its stage and stream).
// CHECK-LABEL: func.func @batched
// CHECK-SAME:    (%[[X:.+]]: tensor<2x3x4xf32>, %[[W:.+]]: tensor<5x4xf32>)
// CHECK-NEXT:    %[[R:.+]] = onnx.Reshape %[[X]] {shape = array<i64: 6, 4>, zero.pipeline_stage = 1 : i64, zero.stream = "compute"} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    %[[G:.+]] = onnx.Gemm %[[R]], %[[W]] {beta = 0.000000e+00 : f32, transB = 1 : i64, zero.pipeline_stage = 1 : i64, zero.stream = "compute"} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
// CHECK-NEXT:    %[[Y:.+]] = onnx.Reshape %[[G]] {shape = array<i64: 2, 3, 5>, zero.pipeline_stage = 1 : i64, zero.stream = "compute"} : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @batched(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x5xf32> {
  %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %y = onnx.MatMul %x, %t {zero.pipeline_stage = 1 : i64, zero.stream = "compute"} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// Tests that a MatMul whose X is 1-D or whose transpose is not [1, 0] stays,
// and that a transpose still read after the rewrite of its other reader
// stays where it was.
// CHECK-LABEL: func.func @kept
// CHECK-SAME:    (%[[X:.+]]: tensor<4xf32>, %[[A:.+]]: tensor<3x4xf32>, %[[W:.+]]: tensor<2x4xf32>, %[[B:.+]]: tensor<2x4x3xf32>)
// CHECK-NEXT:    %[[T:.+]] = onnx.Transpose %[[W]] {perm = array<i64: 1, 0>}
// CHECK-NEXT:    %[[V:.+]] = onnx.MatMul %[[X]], %[[T]] :
// CHECK-NEXT:    %[[TB:.+]] = onnx.Transpose %[[B]] {perm = array<i64: 0, 2, 1>}
// CHECK-NEXT:    %[[M:.+]] = onnx.MatMul %[[B]], %[[TB]] :
// CHECK-NEXT:    %[[Y:.+]] = onnx.Gemm %[[A]], %[[W]] {beta = 0.000000e+00 : f32, transB = 1 : i64}
// CHECK-NEXT:    return %[[V]], %[[T]], %[[M]], %[[Y]]
func.func @kept(%x: tensor<4xf32>, %a: tensor<3x4xf32>, %w: tensor<2x4xf32>, %b: tensor<2x4x3xf32>) -> (tensor<2xf32>, tensor<4x2xf32>, tensor<2x4x4xf32>, tensor<3x2xf32>) {
  %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %v = onnx.MatMul %x, %t : (tensor<4xf32>, tensor<4x2xf32>) -> tensor<2xf32>
  %tb = onnx.Transpose %b {perm = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  %m = onnx.MatMul %b, %tb : (tensor<2x4x3xf32>, tensor<2x3x4xf32>) -> tensor<2x4x4xf32>
  %y = onnx.MatMul %a, %t : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return %v, %t, %m, %y : tensor<2xf32>, tensor<4x2xf32>, tensor<2x4x4xf32>, tensor<3x2xf32>
}

// -----

// Tests that program order is kept: nothing is folded (the Cast of a
// constant to its own type), no constant is hoisted to the top or merged
// with its equal (--canonicalize would do all three).
// CHECK-LABEL: func.func @in_order
// CHECK-NEXT:    %[[R:.+]] = onnx.Relu
// CHECK-NEXT:    %[[C1:.+]] = onnx.Constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %[[A:.+]] = onnx.Add %[[R]], %[[C1]]
// CHECK-NEXT:    %[[C2:.+]] = onnx.Constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %[[C:.+]] = onnx.Cast %[[C2]] {to = f32}
// CHECK-NEXT:    %[[M:.+]] = onnx.Mul %[[A]], %[[C]]
// CHECK-NEXT:    return %[[M]]
func.func @in_order(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %c1 = onnx.Constant dense<2.0> : tensor<4xf32>
  %a = onnx.Add %r, %c1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c2 = onnx.Constant dense<2.0> : tensor<4xf32>
  %c = onnx.Cast %c2 {to = f32} : (tensor<4xf32>) -> tensor<4xf32>
  %b = onnx.Mul %a, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Tests that a release of the weight the Gemm now reads moves right after
// the Gemm (the tied LM head: zero-release put it after the transpose, the
// weight's last reader before the rewrite), while the release of a parameter
// the rewrite does not read (@v, read by the Add after it) stays.
// CHECK-LABEL: func.func @tied
// CHECK:         %[[W:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 2, 4>}
// CHECK:         %[[V:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 3, 4>}
// CHECK-NEXT:    %[[A:.+]] = onnx.Add %{{.+}}, %[[V]]
// CHECK-NEXT:    zero.release %[[V]]
// CHECK-NEXT:    %[[Y:.+]] = onnx.Gemm %[[A]], %[[W]] {beta = 0.000000e+00 : f32, transB = 1 : i64}
// CHECK-NEXT:    zero.release %[[W]]
// CHECK-NEXT:    %[[R:.+]] = onnx.Relu %[[Y]]
// CHECK-NEXT:    return %[[R]]
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.full_type = tensor<2x4xf32>, zero.shard = #zero.shard<world = 2, numel = 8, padded_numel = 8>, zero.tensor = "w"}
  ml_program.global private @v(#ml_program.extern : tensor<6xf32>) : tensor<6xf32> {zero.full_type = tensor<12xf32>, zero.shard = #zero.shard<world = 2, numel = 12, padded_numel = 12>, zero.tensor = "v"}
  func.func @tied(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
    %s = ml_program.global_load @w : tensor<4xf32>
    %g = zero.all_gather %s {world = 2 : i64} : tensor<4xf32> -> tensor<8xf32>
    %w = onnx.Reshape %g {shape = array<i64: 2, 4>} : (tensor<8xf32>) -> tensor<2x4xf32>
    %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    zero.release %w : tensor<2x4xf32>
    %sv = ml_program.global_load @v : tensor<6xf32>
    %gv = zero.all_gather %sv {world = 2 : i64} : tensor<6xf32> -> tensor<12xf32>
    %v = onnx.Reshape %gv {shape = array<i64: 3, 4>} : (tensor<12xf32>) -> tensor<3x4xf32>
    %a = onnx.Add %x, %v : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    zero.release %v : tensor<3x4xf32>
    %y = onnx.MatMul %a, %t : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    %r = onnx.Relu %y : (tensor<3x2xf32>) -> tensor<3x2xf32>
    return %r : tensor<3x2xf32>
  }
}

// -----

// Tests that the release follows the last new op that reads the weight (the
// Gemm), not the reshape back that the rewrite created after it.
// CHECK-LABEL: func.func @batched_tied
// CHECK:         %[[W:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 5, 4>}
// CHECK-NEXT:    %[[R:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 6, 4>}
// CHECK-NEXT:    %[[G:.+]] = onnx.Gemm %[[R]], %[[W]]
// CHECK-NEXT:    zero.release %[[W]]
// CHECK-NEXT:    %[[Y:.+]] = onnx.Reshape %[[G]] {shape = array<i64: 2, 3, 5>}
// CHECK-NEXT:    return %[[Y]]
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w(#ml_program.extern : tensor<10xf32>) : tensor<10xf32> {zero.full_type = tensor<5x4xf32>, zero.shard = #zero.shard<world = 2, numel = 20, padded_numel = 20>, zero.tensor = "w"}
  func.func @batched_tied(%x: tensor<2x3x4xf32>) -> tensor<2x3x5xf32> {
    %s = ml_program.global_load @w : tensor<10xf32>
    %g = zero.all_gather %s {world = 2 : i64} : tensor<10xf32> -> tensor<20xf32>
    %w = onnx.Reshape %g {shape = array<i64: 5, 4>} : (tensor<20xf32>) -> tensor<5x4xf32>
    %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
    zero.release %w : tensor<5x4xf32>
    %y = onnx.MatMul %x, %t : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    return %y : tensor<2x3x5xf32>
  }
}
