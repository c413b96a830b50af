// RUN: zero-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(zero-fuse-elementwise))' | FileCheck %s

// Tests that the pass marks each group's members with one zero.fusion_group
// and leaves everything else unmarked: %a is also a function output and %c
// is read by a Reshape (a view) and by a Pow with a computed exponent (not
// fusible), so Relu and that Pow stay alone; Neg + Exp are group 0 (%c its
// root) and Add + Sigmoid group 1. A stale mark (on the Reshape) is removed.
// CHECK-LABEL: func.func @limits
// CHECK-NEXT:    %[[A:.+]] = onnx.Relu %{{.+}} : (tensor<4xf32>)
// CHECK-NEXT:    %[[N:.+]] = onnx.Neg %[[A]] {zero.fusion_group = 0 : i64}
// CHECK-NEXT:    %[[C:.+]] = onnx.Exp %[[N]] {zero.fusion_group = 0 : i64}
// CHECK-NEXT:    %[[V:.+]] = onnx.Reshape %[[C]] {shape = array<i64: 2, 2>} :
// CHECK-NEXT:    %[[P:.+]] = onnx.Pow %[[C]], %{{.+}} : (
// CHECK-NEXT:    %[[S:.+]] = onnx.Add %[[P]], %{{.+}} {zero.fusion_group = 1 : i64}
// CHECK-NEXT:    %[[G:.+]] = onnx.Sigmoid %[[S]] {zero.fusion_group = 1 : i64}
// CHECK-NEXT:    return %[[A]], %[[V]], %[[G]]
func.func @limits(%x: tensor<4xf32>, %e: tensor<4xf32>) -> (tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>) {
  %a = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %n = onnx.Neg %a : (tensor<4xf32>) -> tensor<4xf32>
  %c = onnx.Exp %n : (tensor<4xf32>) -> tensor<4xf32>
  %v = onnx.Reshape %c {shape = array<i64: 2, 2>, zero.fusion_group = 7 : i64} : (tensor<4xf32>) -> tensor<2x2xf32>
  %p = onnx.Pow %c, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = onnx.Add %p, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g = onnx.Sigmoid %s : (tensor<4xf32>) -> tensor<4xf32>
  return %a, %v, %g : tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>
}

// -----

// Tests that ops on different streams or pipeline stages are not one group,
// and that a scalar constant an op reads is not marked (the lowering folds it
// into the group's program): Mul by 0.5 + Tanh are group 0 on stage 0; the
// Add on stage 1 stays alone; the comm-stream Neg + Abs are group 1.
// CHECK-LABEL: func.func @placement
// CHECK:         onnx.Constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:    onnx.Mul %{{.+}}, %{{.+}} {zero.fusion_group = 0 : i64, zero.pipeline_stage = 0 : i64}
// CHECK-NEXT:    onnx.Tanh %{{.+}} {zero.fusion_group = 0 : i64, zero.pipeline_stage = 0 : i64}
// CHECK-NEXT:    onnx.Add %{{.+}}, %{{.+}} {zero.pipeline_stage = 1 : i64}
// CHECK-NEXT:    onnx.Neg %{{.+}} {zero.fusion_group = 1 : i64, zero.stream = "comm"}
// CHECK-NEXT:    onnx.Abs %{{.+}} {zero.fusion_group = 1 : i64, zero.stream = "comm"}
func.func @placement(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %half = onnx.Constant dense<0.5> : tensor<f32>
  %m = onnx.Mul %x, %half {zero.pipeline_stage = 0 : i64} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %t = onnx.Tanh %m {zero.pipeline_stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %a = onnx.Add %t, %t {zero.pipeline_stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n = onnx.Neg %x {zero.stream = "comm"} : (tensor<4xf32>) -> tensor<4xf32>
  %b = onnx.Abs %n {zero.stream = "comm"} : (tensor<4xf32>) -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}
