// The single-activation rule of the layer fallback
// (include/zero/Transforms/Analysis/Layers.h, recoverLayers) on hand-written
// functions without module paths: a cut point lies between
// two non-free ops where exactly one non-free value crosses; loads, constants
// and what is computed from them alone are free (repeated by each stage).

// RUN: zero-opt %s --split-input-file --report 2>&1 >/dev/null | FileCheck %s

// Tests that a residual block is never cut (two values cross inside it) and
// that the cut sends the one value that crosses between segments.
// An input projection x0 = x W0, a residual block h = x0 + W2 relu(x0 W1 + b),
// then a head y = h W3. The non-free ops (loads and the transpose of @w3 are
// free; the input x itself never counts: every rank binds every input) and
// what crosses after each:
//   %x0 = MatMul(x, W0)   %x0: cut
//   %a = MatMul(x0, W1)   x0 (used by the residual Add) and %a: 2, no cut
//   %b = Add(%a, b)       x0 and %b: 2, no cut
//   %r = Relu(%b)         x0 and %r: 2, no cut
//   %m = MatMul(%r, W2)   x0 and %m: 2, no cut
//   %h = Add(%m, x0)      %h only: cut
//   %y = MatMul(%h, W3t)  (the last op)
// Three segments: the projection (W0 4x4: 16 parameters; its load and
// MatMul), the residual block (W1 4x4, b 4, W2 4x4: 36 parameters; 5
// non-free ops and 3 loads) and the head (W3 4x2: 8 parameters; its load, the
// free Transpose and the MatMul).
// CHECK-LABEL: layers (no module paths: segments between single-activation cut points): 3
// CHECK-NEXT:      0  segment.0 - 16 parameters, 2 ops
// CHECK-NEXT:      1  segment.1 - 36 parameters, 8 ops
// CHECK-NEXT:      2  segment.2 - 8 parameters, 3 ops
// Split in two (the first function alone): DeepSpeed's balanced partition of
// [16, 36, 8] puts the projection alone on stage 0 (spread 44 - 16 = 28,
// against 52 - 8 = 44 the other way), so %x0 is the one value sent; nothing
// inside the residual block crosses.
// RUN: awk '/^\/\/ -----/ { exit } { print }' %s | zero-opt --zero-pipeline-split="pp=2" | FileCheck %s --check-prefix=CUT
// CUT:      zero.pipeline_plan = #zero.pipeline_plan<{{.+}}layers = ["segment.0", "segment.1", "segment.2"], layer_params = [16, 36, 8], parts = [0, 1, 3]
// CUT-LABEL: func.func private @forward_stage0
// CUT:      %[[X0:.+]] = onnx.MatMul %arg0, %{{.+}} :
// CUT-NEXT: zero.send %[[X0]] {peer = 1 : i64, tag = 0 : i64}
// CUT-NOT:  zero.send
// CUT-LABEL: func.func private @forward_stage1
// CUT:      %[[R:.+]] = zero.recv {peer = 0 : i64, tag = 0 : i64}
// CUT:      onnx.MatMul %[[R]], %{{.+}} :
// CUT:      onnx.Add %{{.+}}, %[[R]] :
module {
  ml_program.global private @w0(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @w1(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @b(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>
  ml_program.global private @w2(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @w3(#ml_program.extern : tensor<2x4xf32>) : tensor<2x4xf32>
  func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
    %w0 = ml_program.global_load @w0 : tensor<4x4xf32>
    %x0 = onnx.MatMul %x, %w0 : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %w1 = ml_program.global_load @w1 : tensor<4x4xf32>
    %a = onnx.MatMul %x0, %w1 : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %bias = ml_program.global_load @b : tensor<4xf32>
    %b = onnx.Add %a, %bias : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    %r = onnx.Relu %b : (tensor<3x4xf32>) -> tensor<3x4xf32>
    %w2 = ml_program.global_load @w2 : tensor<4x4xf32>
    %m = onnx.MatMul %r, %w2 : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %h = onnx.Add %m, %x0 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %w3 = ml_program.global_load @w3 : tensor<2x4xf32>
    %w3t = onnx.Transpose %w3 {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %y = onnx.MatMul %h, %w3t : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    return %y : tensor<3x2xf32>
  }
}

// -----

// Tests that a chain without a residual is cut between every two non-free
// ops and that a segment holding no parameter joins the next one.
// The same chain without the residual: every point between two non-free
// ops has one value crossing, so each op is a segment. The segments of the
// Add (bias 4) and of the second MatMul (W2) hold parameters; the Relu's
// does not and joins the second MatMul's. So do the head's own loads: the
// head reads @w3 and holds its 8 parameters. Four layers:
//   [MatMul W1: 16] [Add b: 4] [Relu, MatMul W2: 16] [MatMul W3t: 8]
// CHECK-LABEL: layers (no module paths: segments between single-activation cut points): 4
// CHECK-NEXT:      0  segment.0 - 16 parameters, 2 ops
// CHECK-NEXT:      1  segment.1 - 4 parameters, 2 ops
// CHECK-NEXT:      2  segment.2 - 16 parameters, 3 ops
// CHECK-NEXT:      3  segment.3 - 8 parameters, 3 ops
module {
  ml_program.global private @w1(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @b(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>
  ml_program.global private @w2(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @w3(#ml_program.extern : tensor<2x4xf32>) : tensor<2x4xf32>
  func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
    %w1 = ml_program.global_load @w1 : tensor<4x4xf32>
    %a = onnx.MatMul %x, %w1 : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %bias = ml_program.global_load @b : tensor<4xf32>
    %b = onnx.Add %a, %bias : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    %r = onnx.Relu %b : (tensor<3x4xf32>) -> tensor<3x4xf32>
    %w2 = ml_program.global_load @w2 : tensor<4x4xf32>
    %m = onnx.MatMul %r, %w2 : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %w3 = ml_program.global_load @w3 : tensor<2x4xf32>
    %w3t = onnx.Transpose %w3 {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %y = onnx.MatMul %m, %w3t : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    return %y : tensor<3x2xf32>
  }
}

// -----

// Tests that a side value derived from an integer input (a mask, as attention
// masks are) crosses like any activation: %mf, the mask cast to f32, is read by
// the first op and again by the last, so at every point between two non-free
// ops it crosses beside the activation (two values) and the whole function is
// one layer: W1 16 + W2 8 = 24 parameters, 9 ops.
// CHECK-LABEL: layers (no module paths: segments between single-activation cut points): 1
// CHECK-NEXT:      0  segment.0 - 24 parameters, 9 ops
module {
  ml_program.global private @w1(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @w2(#ml_program.extern : tensor<2x4xf32>) : tensor<2x4xf32>
  func.func @forward(%x: tensor<3x4xf32>, %mask: tensor<3x1xi64>) -> tensor<3x2xf32> {
    %mf = onnx.Cast %mask {to = f32} : (tensor<3x1xi64>) -> tensor<3x1xf32>
    %w1 = ml_program.global_load @w1 : tensor<4x4xf32>
    %a = onnx.MatMul %x, %w1 : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %b = onnx.Mul %a, %mf : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
    %r = onnx.Relu %b : (tensor<3x4xf32>) -> tensor<3x4xf32>
    %w2 = ml_program.global_load @w2 : tensor<2x4xf32>
    %w2t = onnx.Transpose %w2 {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %y = onnx.MatMul %r, %w2t : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    %z = onnx.Mul %y, %mf : (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
    return %z : tensor<3x2xf32>
  }
}

// -----

// Tests that a buffer (zero.buffer, as the exporter's non-trainable tensors)
// is not a parameter: the chain MatMul(W1) | Mul(@scale) | MatMul(W2) has three
// single-value segments, the Mul's holds no parameter and joins the last:
//   [MatMul W1: 16] [Mul scale, MatMul W2: 8]
// CHECK-LABEL: layers (no module paths: segments between single-activation cut points): 2
// CHECK-NEXT:      0  segment.0 - 16 parameters, 2 ops
// CHECK-NEXT:      1  segment.1 - 8 parameters, 4 ops
module {
  ml_program.global private @w1(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @scale(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.buffer}
  ml_program.global private @w2(#ml_program.extern : tensor<4x2xf32>) : tensor<4x2xf32>
  func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
    %w1 = ml_program.global_load @w1 : tensor<4x4xf32>
    %a = onnx.MatMul %x, %w1 : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %s = ml_program.global_load @scale : tensor<4xf32>
    %b = onnx.Mul %a, %s : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    %w2 = ml_program.global_load @w2 : tensor<4x2xf32>
    %y = onnx.MatMul %b, %w2 : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    return %y : tensor<3x2xf32>
  }
}
