// RUN: zero-opt %s --split-input-file --zero-autodiff | FileCheck %s

// Tests that zero-autodiff builds the training step of MatMul + Add + Softmax
// + SoftmaxCrossEntropyLoss: the forward ops, then the reverse rules in reverse
// order. The loss seed is 1; the mean cross-entropy's gradient is
// (softmax(p) - onehot(labels)) / N with N = 2 rows; Softmax's is
// y * (d - sum(d * y)); the bias gradient is summed over the broadcast row
// axis and reshaped to [4]; the weight gradient is x^T d. The input x and the
// integer labels get no gradient; the parameters become mutable.

// CHECK: module attributes {zero.accumulation_steps = 1 : i64}
// CHECK: ml_program.global private mutable @w({{.*}}) : tensor<3x4xf32> {zero.tensor = "w", zero.trainable}
// CHECK: ml_program.global private mutable @b({{.*}}) : tensor<4xf32> {zero.tensor = "b", zero.trainable}
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x3xf32> {onnx.name = "x"}, %arg1: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}, tensor<3x4xf32> {onnx.name = "grad.w", zero.grad_of = @w}, tensor<4xf32> {onnx.name = "grad.b", zero.grad_of = @b})
// CHECK-NEXT: %[[W:.+]] = ml_program.global_load @w
// CHECK-NEXT: %[[H:.+]] = onnx.MatMul %arg0, %[[W]]
// CHECK-NEXT: %[[B:.+]] = ml_program.global_load @b
// CHECK-NEXT: %[[Z:.+]] = onnx.Add %[[H]], %[[B]]
// CHECK-NEXT: %[[P:.+]] = onnx.Softmax %[[Z]] {axis = 1 : i64}
// CHECK-NEXT: %[[L:.+]] = onnx.SoftmaxCrossEntropyLoss %[[P]], %arg1
// CHECK-NEXT: %[[SEED:.+]] = onnx.Constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[Q:.+]] = onnx.Softmax %[[P]] {axis = 1 : i64}
// CHECK-NEXT: %[[IDS:.+]] = onnx.Constant dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK-NEXT: %[[YU:.+]] = onnx.Unsqueeze %arg1 {axes = array<i64: 1>}
// CHECK-NEXT: %[[EQ:.+]] = onnx.Equal %[[YU]], %[[IDS]]
// CHECK-NEXT: %[[OH:.+]] = onnx.Cast %[[EQ]] {to = f32}
// CHECK-NEXT: %[[N:.+]] = onnx.Constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[COEF:.+]] = onnx.Div %[[SEED]], %[[N]]
// CHECK-NEXT: %[[DIFF:.+]] = onnx.Sub %[[Q]], %[[OH]]
// CHECK-NEXT: %[[DP:.+]] = onnx.Mul %[[DIFF]], %[[COEF]]
// CHECK-NEXT: %[[DY:.+]] = onnx.Mul %[[DP]], %[[P]]
// CHECK-NEXT: %[[S:.+]] = onnx.ReduceSum %[[DY]] {axes = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %[[DS:.+]] = onnx.Sub %[[DP]], %[[S]]
// CHECK-NEXT: %[[DZ:.+]] = onnx.Mul %[[P]], %[[DS]]
// CHECK-NEXT: %[[DB1:.+]] = onnx.ReduceSum %[[DZ]] {axes = array<i64: 0>} : (tensor<2x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT: %[[DB:.+]] = onnx.Reshape %[[DB1]] {shape = array<i64: 4>}
// CHECK-NEXT: %[[XT:.+]] = onnx.Transpose %arg0 {perm = array<i64: 1, 0>}
// CHECK-NEXT: %[[DW:.+]] = onnx.MatMul %[[XT]], %[[DZ]] : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: return %[[L]], %[[DW]], %[[DB]]
// CHECK-NOT: func.func @forward
module {
  ml_program.global private @w(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32> {zero.tensor = "w"}
  ml_program.global private @b(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "b"}
  func.func @forward(%x: tensor<2x3xf32> {onnx.name = "x"}, %y: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %b = ml_program.global_load @b : tensor<4xf32>
    %z = onnx.Add %h, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %p = onnx.Softmax %z {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = onnx.SoftmaxCrossEntropyLoss %p, %y : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a tied parameter's gradient sums both of its uses: @e is read by a
// Gather (the embedding) and, through a Transpose, by a MatMul (the LM head).
// Its gradient is the sum of both contributions: the scatter-add of the rows
// (ScatterND reduction "add") and the transposed MatMul gradient.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[E:.+]] = ml_program.global_load @e : tensor<5x2xf32>
// CHECK: %[[DET:.+]] = onnx.MatMul %{{.+}}, %{{.+}} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
// CHECK-NEXT: %[[HEAD:.+]] = onnx.Transpose %[[DET]] {perm = array<i64: 1, 0>} : (tensor<2x5xf32>) -> tensor<5x2xf32>
// CHECK: %[[EMB:.+]] = onnx.ScatterND %{{.+}}, %{{.+}}, %{{.+}} {reduction = "add"} : (tensor<5x2xf32>, tensor<3x1xi64>, tensor<3x2xf32>) -> tensor<5x2xf32>
// CHECK-NEXT: %[[SUM:.+]] = onnx.Add %[[HEAD]], %[[EMB]] : (tensor<5x2xf32>, tensor<5x2xf32>) -> tensor<5x2xf32>
// CHECK-NEXT: return %{{.+}}, %[[SUM]] : tensor<f32>, tensor<5x2xf32>
module {
  ml_program.global private @e(#ml_program.extern : tensor<5x2xf32>) : tensor<5x2xf32> {zero.tensor = "e"}
  func.func @forward(%ids: tensor<3xi64> {onnx.name = "ids"}, %y: tensor<3xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %e = ml_program.global_load @e : tensor<5x2xf32>
    %h = onnx.Gather %e, %ids : (tensor<5x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
    %et = onnx.Transpose %e {perm = array<i64: 1, 0>} : (tensor<5x2xf32>) -> tensor<2x5xf32>
    %z = onnx.MatMul %h, %et : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
    %l = onnx.SoftmaxCrossEntropyLoss %z, %y : (tensor<3x5xf32>, tensor<3xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
