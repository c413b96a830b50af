// RUN: zero-opt %s --split-input-file --zero-add-loss | FileCheck %s
// RUN: zero-opt %s --split-input-file --zero-add-loss="labels=target ignore-index=0" | FileCheck %s --check-prefix=NAMED
// RUN: zero-opt %s --split-input-file --zero-add-loss="kind=causal-lm" | FileCheck %s --check-prefix=CAUSAL

// Tests that the only output, logits [2, 4, 5], is replaced by PyTorch's
// F.cross_entropy against a new integer input of the logits' leading shape.
// The labels input is appended as `labels` (tensor<2x4xi64>); logits and
// labels are flattened to [8, 5] and [8] (one row per token) and the loss is
// onnx.SoftmaxCrossEntropyLoss with the default reduction (mean) and
// ignore_index -100; the function then returns that scalar alone, named loss.
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x4xi64> {onnx.name = "ids"}, %arg1: tensor<2x4xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"})
// CHECK: %[[LOGITS:.+]] = onnx.Gather %{{.+}}, %arg0 : (tensor<10x5xf32>, tensor<2x4xi64>) -> tensor<2x4x5xf32>
// CHECK-NEXT: %[[S:.+]] = onnx.Reshape %[[LOGITS]] {shape = array<i64: 8, 5>} : (tensor<2x4x5xf32>) -> tensor<8x5xf32>
// CHECK-NEXT: %[[T:.+]] = onnx.Reshape %arg1 {shape = array<i64: 8>} : (tensor<2x4xi64>) -> tensor<8xi64>
// CHECK-NEXT: %[[LOSS:.+]] = onnx.SoftmaxCrossEntropyLoss %[[S]], %[[T]] {ignore_index = -100 : i64} : (tensor<8x5xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>

// `labels` names the new input and `ignore-index` is the loss's ignore_index.
// NAMED-LABEL: func.func @forward(%arg0: tensor<2x4xi64> {onnx.name = "ids"}, %arg1: tensor<2x4xi64> {onnx.name = "target"}) -> (tensor<f32> {onnx.name = "loss"})
// NAMED: %[[T:.+]] = onnx.Reshape %arg1 {shape = array<i64: 8>}
// NAMED-NEXT: onnx.SoftmaxCrossEntropyLoss %{{.+}}, %[[T]] {ignore_index = 0 : i64}

// causal-lm shifts by one token as Hugging Face causal LMs do: the logits of
// positions 0..2 (logits[:, :-1]) against the labels of positions 1..3
// (labels[:, 1:]), then the same flattening: 2 x 3 = 6 rows.
// CAUSAL-LABEL: func.func @forward(%arg0: tensor<2x4xi64> {onnx.name = "ids"}, %arg1: tensor<2x4xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"})
// CAUSAL: %[[LOGITS:.+]] = onnx.Gather
// CAUSAL-NEXT: %[[SL:.+]] = onnx.Slice %[[LOGITS]] {ends = array<i64: 2, 3, 5>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
// CAUSAL-NEXT: %[[TL:.+]] = onnx.Slice %arg1 {ends = array<i64: 2, 4>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x4xi64>) -> tensor<2x3xi64>
// CAUSAL-NEXT: %[[S:.+]] = onnx.Reshape %[[SL]] {shape = array<i64: 6, 5>} : (tensor<2x3x5xf32>) -> tensor<6x5xf32>
// CAUSAL-NEXT: %[[T:.+]] = onnx.Reshape %[[TL]] {shape = array<i64: 6>} : (tensor<2x3xi64>) -> tensor<6xi64>
// CAUSAL-NEXT: %[[LOSS:.+]] = onnx.SoftmaxCrossEntropyLoss %[[S]], %[[T]] {ignore_index = -100 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
// CAUSAL-NEXT: return %[[LOSS]] : tensor<f32>
module {
  ml_program.global private @e(#ml_program.extern : tensor<10x5xf32>) : tensor<10x5xf32> {zero.tensor = "e"}
  func.func @forward(%ids: tensor<2x4xi64> {onnx.name = "ids"}) -> (tensor<2x4x5xf32> {onnx.name = "logits"}) {
    %e = ml_program.global_load @e : tensor<10x5xf32>
    %logits = onnx.Gather %e, %ids : (tensor<10x5xf32>, tensor<2x4xi64>) -> tensor<2x4x5xf32>
    return %logits : tensor<2x4x5xf32>
  }
}

// -----

// Tests that an input already named `labels` is the labels: no input is
// added and the loss reads it (flattened like the logits).
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x4xi64> {onnx.name = "labels"}, %arg1: tensor<2x4xi64> {onnx.name = "ids"}) -> (tensor<f32> {onnx.name = "loss"})
// CHECK: %[[S:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 8, 5>}
// CHECK-NEXT: %[[T:.+]] = onnx.Reshape %arg0 {shape = array<i64: 8>} : (tensor<2x4xi64>) -> tensor<8xi64>
// CHECK-NEXT: %[[LOSS:.+]] = onnx.SoftmaxCrossEntropyLoss %[[S]], %[[T]] {ignore_index = -100 : i64}
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>

// With labels=target the input named `labels` is not the labels: a new
// `target` input is appended and `labels` stays an ordinary input.
// NAMED-LABEL: func.func @forward(%arg0: tensor<2x4xi64> {onnx.name = "labels"}, %arg1: tensor<2x4xi64> {onnx.name = "ids"}, %arg2: tensor<2x4xi64> {onnx.name = "target"}) -> (tensor<f32> {onnx.name = "loss"})
// NAMED: %[[T:.+]] = onnx.Reshape %arg2 {shape = array<i64: 8>}
// NAMED-NEXT: onnx.SoftmaxCrossEntropyLoss %{{.+}}, %[[T]] {ignore_index = 0 : i64}

// causal-lm shifts the existing labels input.
// CAUSAL-LABEL: func.func @forward(%arg0: tensor<2x4xi64> {onnx.name = "labels"}, %arg1: tensor<2x4xi64> {onnx.name = "ids"}) -> (tensor<f32> {onnx.name = "loss"})
// CAUSAL: onnx.Slice %arg0 {ends = array<i64: 2, 4>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x4xi64>) -> tensor<2x3xi64>
module {
  ml_program.global private @e(#ml_program.extern : tensor<10x5xf32>) : tensor<10x5xf32> {zero.tensor = "e"}
  func.func @forward(%labels: tensor<2x4xi64> {onnx.name = "labels"}, %ids: tensor<2x4xi64> {onnx.name = "ids"}) -> (tensor<2x4x5xf32> {onnx.name = "logits"}) {
    %e = ml_program.global_load @e : tensor<10x5xf32>
    %logits = onnx.Gather %e, %ids : (tensor<10x5xf32>, tensor<2x4xi64>) -> tensor<2x4x5xf32>
    return %logits : tensor<2x4x5xf32>
  }
}
