// RUN: zero-opt %s --zero-test-gather-liveness -o /dev/null | FileCheck %s

// Tests GatherLiveness (include/zero/Transforms/Analysis/GatherPlan.h) on
// its own: a gathered parameter is live from its gather to its death,
// inclusive; the death is its zero.release when it has one (w1: the release
// at #7, after its first and only use at #6), else its last use through the
// unpad Slice and Reshape views (w2, prefetched to #5: its MatMul at #11); a
// gather never used (w3) never counts. So 64 B live at #1-#4, 64 + 48 = 112 B
// at #5-#7, 48 B at #8-#11, a peak of 112 B.
// CHECK-LABEL: gather liveness of @forward
// CHECK-NEXT:    gather #1 zero.all_gather: 64 B, first use #6 onnx.MatMul, dies at #7 zero.release, released
// CHECK-NEXT:      result 0: 64 B, dies at #7 zero.release
// CHECK-NEXT:    gather #5 zero.all_gather: 48 B, first use #11 onnx.MatMul, dies at #11 onnx.MatMul
// CHECK-NEXT:      result 0: 48 B, dies at #11 onnx.MatMul
// CHECK-NEXT:    gather #13 zero.all_gather: 16 B, first use none, dies at none
// CHECK-NEXT:      result 0: 16 B, dies at none
// CHECK-NEXT:    live at #1 zero.all_gather: 64 B
// CHECK-NEXT:    live at #2 onnx.Slice: 64 B
// CHECK-NEXT:    live at #3 onnx.Reshape: 64 B
// CHECK-NEXT:    live at #4 ml_program.global_load: 64 B
// CHECK-NEXT:    live at #5 zero.all_gather: 112 B
// CHECK-NEXT:    live at #6 onnx.MatMul: 112 B
// CHECK-NEXT:    live at #7 zero.release: 112 B
// CHECK-NEXT:    live at #8 onnx.Slice: 48 B
// CHECK-NEXT:    live at #9 onnx.Reshape: 48 B
// CHECK-NEXT:    live at #10 onnx.Relu: 48 B
// CHECK-NEXT:    live at #11 onnx.MatMul: 48 B
// CHECK-NEXT:    peak: 112 B
module attributes {zero.stage = 3 : i64, zero.world_size = 4 : i64} {
  ml_program.global private @w1(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>
  ml_program.global private @w2(#ml_program.extern : tensor<3xf32>) : tensor<3xf32>
  ml_program.global private @w3(#ml_program.extern : tensor<1xf32>) : tensor<1xf32>
  func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
    %w1 = ml_program.global_load @w1 : tensor<4xf32>
    %g1 = zero.all_gather %w1 {world = 4 : i64} : tensor<4xf32> -> tensor<16xf32>
    %s1 = onnx.Slice %g1 {ends = array<i64: 15>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<16xf32>) -> tensor<15xf32>
    %r1 = onnx.Reshape %s1 {shape = array<i64: 3, 5>} : (tensor<15xf32>) -> tensor<3x5xf32>
    %w2 = ml_program.global_load @w2 : tensor<3xf32>
    %g2 = zero.all_gather %w2 {world = 4 : i64} : tensor<3xf32> -> tensor<12xf32>
    %m1 = onnx.MatMul %x, %r1 : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    zero.release %r1 : tensor<3x5xf32>
    %s2 = onnx.Slice %g2 {ends = array<i64: 10>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<12xf32>) -> tensor<10xf32>
    %r2 = onnx.Reshape %s2 {shape = array<i64: 5, 2>} : (tensor<10xf32>) -> tensor<5x2xf32>
    %h = onnx.Relu %m1 : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %y = onnx.MatMul %h, %r2 : (tensor<4x5xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
    %w3 = ml_program.global_load @w3 : tensor<1xf32>
    %g3 = zero.all_gather %w3 {world = 4 : i64} : tensor<1xf32> -> tensor<4xf32>
    return %y : tensor<4x2xf32>
  }
}
