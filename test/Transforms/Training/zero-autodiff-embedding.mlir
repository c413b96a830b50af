// RUN: zero-opt %s --split-input-file --zero-autodiff="accumulation=2" | FileCheck %s --check-prefix=GRAD
// RUN: zero-opt %s --split-input-file --zero-autodiff="accumulation=2" --zero-lower-to-runtime=fuse-elementwise=false | FileCheck %s --check-prefix=ZRT

// Tests that an embedding's gradient summed over two micro-batches is one
// running scatter-add into a single table. The first micro-batch's gradient is
// its rows scatter-added into zeros; the second's rows are scatter-added into
// that running sum, not into a second table of zeros followed by a table-sized
// Add. Lowered, the zeros are one Fill and both scatters write that buffer in
// place (the sum is the only reader of each partial sum), which is also the
// gradient output.

// GRAD-LABEL: func.func @train_step(%arg0: tensor<12xi64> {onnx.name = "ids"})
// GRAD: %[[Z:.+]] = onnx.Constant dense<0.000000e+00> : tensor<64x16xf32>
// GRAD-NEXT: %[[G0:.+]] = onnx.ScatterND %[[Z]], %[[I0:.+]], %{{.+}} {reduction = "add"} : (tensor<64x16xf32>, tensor<6x1xi64>, tensor<6x16xf32>) -> tensor<64x16xf32>
// GRAD-NOT: onnx.Constant dense<0.000000e+00> : tensor<64x16xf32>
// GRAD-NOT: onnx.Add {{.*}} -> tensor<64x16xf32>
// GRAD: %[[G1:.+]] = onnx.ScatterND %[[G0]], %{{.+}}, %{{.+}} {reduction = "add"} : (tensor<64x16xf32>, tensor<6x1xi64>, tensor<6x16xf32>) -> tensor<64x16xf32>
// GRAD-NOT: onnx.Add {{.*}} -> tensor<64x16xf32>
// GRAD: return %{{.+}}, %[[G1]] : tensor<f32>, tensor<64x16xf32>

// ZRT: zrt.buffer @[[ACC:.+]] : tensor<64x16xf32> at @activations
// ZRT-NEXT: zrt.kernel "Fill" on @compute [] -> [@[[ACC]]] {value = 0.000000e+00 : f64}
// ZRT: zrt.kernel "ScatterND" on @compute [@[[ACC]], @{{.+}}, @{{.+}}] -> [@[[ACC]]] {reduction = "add"}
// ZRT-NOT: zrt.buffer @{{.+}} : tensor<64x16xf32> at @activations
// ZRT: zrt.kernel "ScatterND" on @compute [@[[ACC]], @{{.+}}, @{{.+}}] -> [@[[ACC]]] {reduction = "add"}
// ZRT: zrt.output "grad.e" from @[[ACC]]
module {
  ml_program.global private @e(#ml_program.extern : tensor<64x16xf32>) : tensor<64x16xf32> {zero.tensor = "e"}
  func.func @forward(%ids: tensor<6xi64> {onnx.name = "ids"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %e = ml_program.global_load @e : tensor<64x16xf32>
    %h = onnx.Gather %e, %ids : (tensor<64x16xf32>, tensor<6xi64>) -> tensor<6x16xf32>
    %l = onnx.ReduceSum %h {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<6x16xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a table gradient that is not only a scatter stays a sum of tables:
// the embedding is tied to a head (one load, two uses), so each micro-batch's
// gradient is the head's product plus the rows (an Add inside the micro-batch),
// and the micro-batch sum stays an Add of tables.

// GRAD-LABEL: func.func @train_step
// GRAD: %[[S0:.+]] = onnx.Add %{{.+}}, %{{.+}} : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
// GRAD: %[[S1:.+]] = onnx.Add %{{.+}}, %{{.+}} : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
// GRAD-NEXT: %[[SUM:.+]] = onnx.Add %[[S0]], %[[S1]] : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
// GRAD: return %{{.+}}, %[[SUM]]
module {
  ml_program.global private @e(#ml_program.extern : tensor<64x16xf32>) : tensor<64x16xf32> {zero.tensor = "e"}
  func.func @forward(%ids: tensor<6xi64> {onnx.name = "ids"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %e = ml_program.global_load @e : tensor<64x16xf32>
    %h = onnx.Gather %e, %ids : (tensor<64x16xf32>, tensor<6xi64>) -> tensor<6x16xf32>
    %et = onnx.Transpose %e {perm = array<i64: 1, 0>} : (tensor<64x16xf32>) -> tensor<16x64xf32>
    %z = onnx.MatMul %h, %et : (tensor<6x16xf32>, tensor<16x64xf32>) -> tensor<6x64xf32>
    %l = onnx.ReduceSum %z {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<6x64xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
