// RUN: zero-opt %s --split-input-file --zero-test-layers -o /dev/null | FileCheck %s

// Tests recoverLayers (include/zero/Transforms/Analysis/Layers.h) on module
// paths: the repeated container is transformer.h (the parent of the first
// indexed path), so its blocks h.0 and h.1 are layers, and so are the modules
// outside it that do not enclose it (transformer.wte, lm_head); transformer
// itself encloses the container and is never a layer. Loads belong to no
// layer. A layer's parameter elements are those of the trainable globals its
// ops read (wte 8x4, w0 4x4, w1 4x4, head 4x8), never a zero.buffer (pos).
// CHECK-LABEL: layers of @forward: 4 by module path
// CHECK-NEXT:    layer 0 'transformer.wte' class 'Embedding': 1 ops, 32 parameter elements
// CHECK-NEXT:    layer 1 'transformer.h.0' class 'GPT2Block': 3 ops, 16 parameter elements
// CHECK-NEXT:    layer 2 'transformer.h.1' class 'GPT2Block': 1 ops, 16 parameter elements
// CHECK-NEXT:    layer 3 'lm_head' class 'Linear': 1 ops, 32 parameter elements
// CHECK-NEXT:    #0 ml_program.global_load: none
// CHECK-NEXT:    #1 onnx.MatMul: layer 0
// CHECK-NEXT:    #2 ml_program.global_load: none
// CHECK-NEXT:    #3 ml_program.global_load: none
// CHECK-NEXT:    #4 onnx.MatMul: layer 1
// CHECK-NEXT:    #5 onnx.Add: layer 1
// CHECK-NEXT:    #6 onnx.Relu: layer 1
// CHECK-NEXT:    #7 ml_program.global_load: none
// CHECK-NEXT:    #8 onnx.MatMul: layer 2
// CHECK-NEXT:    #9 ml_program.global_load: none
// CHECK-NEXT:    #10 onnx.MatMul: layer 3
// CHECK-NEXT:    #11 func.return: none
#wte = loc(fused<{module_classes = ["GPT2Model", "Embedding"], module_scopes = ["transformer", "transformer.wte"]}>["m.onnx":0:0])
#h0 = loc(fused<{module_classes = ["GPT2Model", "GPT2Block", "GPT2MLP"], module_scopes = ["transformer", "transformer.h.0", "transformer.h.0.mlp"]}>["m.onnx":0:0])
#h1 = loc(fused<{module_classes = ["GPT2Model", "GPT2Block"], module_scopes = ["transformer", "transformer.h.1"]}>["m.onnx":0:0])
#head = loc(fused<{module_classes = ["Linear"], module_scopes = ["lm_head"]}>["m.onnx":0:0])
module {
  ml_program.global private @wte(#ml_program.extern : tensor<8x4xf32>) : tensor<8x4xf32>
  ml_program.global private @w0(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @pos(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.buffer}
  ml_program.global private @w1(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @head(#ml_program.extern : tensor<4x8xf32>) : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %wte = ml_program.global_load @wte : tensor<8x4xf32>
    %e = onnx.MatMul %x, %wte : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32> loc(#wte)
    %w0 = ml_program.global_load @w0 : tensor<4x4xf32>
    %pos = ml_program.global_load @pos : tensor<4xf32>
    %a = onnx.MatMul %e, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#h0)
    %b = onnx.Add %a, %pos : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#h0)
    %r = onnx.Relu %b : (tensor<2x4xf32>) -> tensor<2x4xf32> loc(#h0)
    %w1 = ml_program.global_load @w1 : tensor<4x4xf32>
    %c = onnx.MatMul %r, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#h1)
    %head = ml_program.global_load @head : tensor<4x8xf32>
    %y = onnx.MatMul %c, %head : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32> loc(#head)
    return %y : tensor<2x8xf32>
  }
}

// -----

// Tests the fallback without module paths: cut points where exactly one
// computed value is still used later: after #1 (%a), #2 (%r) and #3 (%c);
// after #5 both %m and %c are (%c by the Add and the return), so no cut. The
// segments of #2 and of #3 read no parameter and join the next, so two
// segments: #1 with w0 (16 elements) and #2-#6 with w1 (16); each load goes
// with its first non-free user.
// CHECK-LABEL: layers of @plain: 2 segments
// CHECK-NEXT:    layer 0 'segment.0' class '': 2 ops, 16 parameter elements
// CHECK-NEXT:    layer 1 'segment.1' class '': 5 ops, 16 parameter elements
// CHECK-NEXT:    #0 ml_program.global_load: layer 0
// CHECK-NEXT:    #1 onnx.MatMul: layer 0
// CHECK-NEXT:    #2 onnx.Relu: layer 1
// CHECK-NEXT:    #3 onnx.Neg: layer 1
// CHECK-NEXT:    #4 ml_program.global_load: layer 1
// CHECK-NEXT:    #5 onnx.MatMul: layer 1
// CHECK-NEXT:    #6 onnx.Add: layer 1
// CHECK-NEXT:    #7 func.return: none
module {
  ml_program.global private @w0(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  ml_program.global private @w1(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  func.func @plain(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %w0 = ml_program.global_load @w0 : tensor<4x4xf32>
    %a = onnx.MatMul %x, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %r = onnx.Relu %a : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %c = onnx.Neg %r : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %w1 = ml_program.global_load @w1 : tensor<4x4xf32>
    %m = onnx.MatMul %c, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %y = onnx.Add %m, %c : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %y, %c : tensor<2x4xf32>, tensor<2x4xf32>
  }
}
