// RUN: zero-opt %s --zero-add-loss="output=logits" | FileCheck %s

// Tests that `output` picks the logits among several outputs and that the
// function then returns the loss alone: the other outputs are dropped from
// the signature (what computes the logits stays).
// The model returns (hidden [2, 3, 8], logits [2, 3, 5]); the loss is taken
// over the logits flattened to [6, 5] against a new `labels` input [2, 3].
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x3xi64> {onnx.name = "ids"}, %arg1: tensor<2x3xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"})
// CHECK: %[[H:.+]] = onnx.Gather %{{.+}}, %arg0
// CHECK: %[[LOGITS:.+]] = onnx.MatMul %[[H]], %{{.+}} : (tensor<2x3x8xf32>, tensor<8x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: %[[S:.+]] = onnx.Reshape %[[LOGITS]] {shape = array<i64: 6, 5>} : (tensor<2x3x5xf32>) -> tensor<6x5xf32>
// CHECK-NEXT: %[[T:.+]] = onnx.Reshape %arg1 {shape = array<i64: 6>} : (tensor<2x3xi64>) -> tensor<6xi64>
// CHECK-NEXT: %[[LOSS:.+]] = onnx.SoftmaxCrossEntropyLoss %[[S]], %[[T]] {ignore_index = -100 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
module {
  ml_program.global private @e(#ml_program.extern : tensor<10x8xf32>) : tensor<10x8xf32> {zero.tensor = "e"}
  ml_program.global private @head(#ml_program.extern : tensor<8x5xf32>) : tensor<8x5xf32> {zero.tensor = "head"}
  func.func @forward(%ids: tensor<2x3xi64> {onnx.name = "ids"}) -> (tensor<2x3x8xf32> {onnx.name = "hidden"}, tensor<2x3x5xf32> {onnx.name = "logits"}) {
    %e = ml_program.global_load @e : tensor<10x8xf32>
    %h = onnx.Gather %e, %ids : (tensor<10x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
    %w = ml_program.global_load @head : tensor<8x5xf32>
    %logits = onnx.MatMul %h, %w : (tensor<2x3x8xf32>, tensor<8x5xf32>) -> tensor<2x3x5xf32>
    return %h, %logits : tensor<2x3x8xf32>, tensor<2x3x5xf32>
  }
}
