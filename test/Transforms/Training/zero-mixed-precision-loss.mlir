// RUN: split-file %s %t
// RUN: zero-opt %t/own.mlir --zero-mixed-precision | FileCheck %s --check-prefix=OWN
// RUN: zero-opt %t/own.mlir --zero-mixed-precision="precision=fp16" --zero-autodiff | FileCheck %s --check-prefix=SEED
// RUN: zero-opt %t/upcast.mlir --zero-mixed-precision | FileCheck %s --check-prefix=UPCAST
// RUN: zero-opt %t/nll.mlir --zero-mixed-precision | FileCheck %s --check-prefix=NLL

// A loss computes as the model computes it. The model's own loss on its
// logits, under model.bfloat16(): in bf16 on the bf16 logits, and what follows
// it in bf16 too (its constant converted).
// OWN-LABEL: func.func @forward
// OWN:      %[[Z:.+]] = onnx.Mul %{{.+}}, %{{.+}} : (tensor<2x3xbf16>, tensor<bf16>) -> tensor<2x3xbf16>
// OWN-NEXT: %[[LOSS:.+]] = onnx.SoftmaxCrossEntropyLoss %[[Z]], %{{.+}} : (tensor<2x3xbf16>, tensor<2xi64>) -> tensor<bf16>
// OWN-NEXT: %[[K:.+]] = onnx.Constant dense<1.000980e-01> : tensor<bf16>
// OWN-NEXT: %[[OUT:.+]] = onnx.Mul %[[LOSS]], %[[K]] : (tensor<bf16>, tensor<bf16>) -> tensor<bf16>
// OWN-NEXT: return %[[OUT]] : tensor<bf16>

// fp16: the backward's seed is the scale cast to fp16 times 1 (2^16 rounds to
// inf there, as PyTorch's fp16 loss * scale); the step returns the fp16 loss
// widened to f32.
// SEED-LABEL: func.func @train_step
// SEED:      %[[LOSS:.+]] = onnx.SoftmaxCrossEntropyLoss {{.+}} -> tensor<f16>
// SEED:      %[[ONE:.+]] = onnx.Constant dense<1.000000e+00> : tensor<f16>
// SEED:      %[[SCALE:.+]] = onnx.Cast %{{.+}} {to = f16} : (tensor<f32>) -> tensor<f16>
// SEED-NEXT: onnx.Mul %[[ONE]], %[[SCALE]] : (tensor<f16>, tensor<f16>) -> tensor<f16>
// SEED:      %[[WIDE:.+]] = onnx.Cast %{{.+}} {to = f32} : (tensor<f16>) -> tensor<f32>
// SEED:      return %[[WIDE]]

//--- own.mlir
module {
  ml_program.global private @w(dense<1.0> : tensor<4x3xf32>) : tensor<4x3xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"}, %labels: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<4x3xf32>
    %y = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %c = onnx.Constant dense<0.1> : tensor<f32>
    %z = onnx.Mul %y, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %loss = onnx.SoftmaxCrossEntropyLoss %z, %labels : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %k = onnx.Constant dense<0.1> : tensor<f32>
    %out = onnx.Mul %loss, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %out : tensor<f32>
  }
}

// A loss the model computes in f32 (zero.compute_f32: the importer's mark of
// transformers' logits.float()): its operand cast up, f32 after it.
// UPCAST-LABEL: func.func @forward
// UPCAST:      %[[UP:.+]] = onnx.Cast %{{.+}} {to = f32} : (tensor<2x3xbf16>) -> tensor<2x3xf32>
// UPCAST-NEXT: %[[LOSS:.+]] = onnx.SoftmaxCrossEntropyLoss %[[UP]], %{{.+}} {zero.compute_f32} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
// UPCAST-NEXT: %[[K:.+]] = onnx.Constant dense<1.000000e-01> : tensor<f32>
// UPCAST-NEXT: onnx.Mul %[[LOSS]], %[[K]] : (tensor<f32>, tensor<f32>) -> tensor<f32>

//--- upcast.mlir
module {
  ml_program.global private @w(dense<1.0> : tensor<4x3xf32>) : tensor<4x3xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"}, %labels: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<4x3xf32>
    %y = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %loss = onnx.SoftmaxCrossEntropyLoss %y, %labels {zero.compute_f32} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %k = onnx.Constant dense<0.1> : tensor<f32>
    %out = onnx.Mul %loss, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %out : tensor<f32>
  }
}

// LogSoftmax then the model's own NegativeLogLikelihoodLoss: the
// log-probabilities compute in f32 and are rounded to bf16 for the bf16 loss,
// as a half log_softmax's output is.
// NLL-LABEL: func.func @forward
// NLL:      %[[LP:.+]] = onnx.LogSoftmax %{{.+}} {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// NLL-NEXT: %[[DOWN:.+]] = onnx.Cast %[[LP]] {to = bf16} : (tensor<2x3xf32>) -> tensor<2x3xbf16>
// NLL-NEXT: onnx.NegativeLogLikelihoodLoss %[[DOWN]], %{{.+}} : (tensor<2x3xbf16>, tensor<2xi64>) -> tensor<bf16>

//--- nll.mlir
module {
  ml_program.global private @w(dense<1.0> : tensor<4x3xf32>) : tensor<4x3xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"}, %labels: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<4x3xf32>
    %y = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %lp = onnx.LogSoftmax %y {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %loss = onnx.NegativeLogLikelihoodLoss %lp, %labels : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
