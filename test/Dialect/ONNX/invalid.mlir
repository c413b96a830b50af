// RUN: zero-opt %s --split-input-file --verify-diagnostics
//
// One case per verifier / type-inference error of the onnx dialect. Inference
// errors come with a second "failed to infer returned types" error at the op.

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

func.func @add_not_broadcastable(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{operand shapes are not broadcastable: dimension 0 is 2 and 4}}
  // expected-error @+1 {{'onnx.Add' op failed to infer returned types}}
  %0 = onnx.Add %a, %b : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @sub_broadcast_trailing_dims(%a: tensor<2x3xf32>, %b: tensor<2xf32>) -> tensor<2x3xf32> {
  // Broadcasting aligns trailing dims: 3 and 2 differ.
  // expected-error @+2 {{operand shapes are not broadcastable: dimension 1 is 3 and 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Sub %a, %b : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @mul_element_types_differ(%a: tensor<2xf32>, %b: tensor<2xi32>) -> tensor<2xf32> {
  // expected-error @+2 {{operands have different element types: 'f32' and 'i32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Mul %a, %b : (tensor<2xf32>, tensor<2xi32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @add_wrong_result_shape(%a: tensor<2x1xf32>, %b: tensor<3xf32>) -> tensor<2x1xf32> {
  // expected-error @+2 {{'onnx.Add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Add %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

func.func @add_wrong_result_element_type(%a: tensor<2xf32>) -> tensor<2xi32> {
  // expected-error @+2 {{inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<2xi32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "onnx.Add"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

func.func @less_result_not_i1(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<2xi1>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Less %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @and_not_i1(%a: tensor<2xi32>) -> tensor<2xi1> {
  // expected-error @+2 {{operands must be i1 tensors, got 'i32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.And %a, %a : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
}

// -----

func.func @where_condition_not_i1(%c: tensor<2xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{condition must be an i1 tensor}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Where %c, %x, %x : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @where_branch_types_differ(%c: tensor<2xi1>, %x: tensor<2xf32>, %y: tensor<2xf16>) -> tensor<2xf32> {
  // expected-error @+2 {{operands have different element types: 'f32' and 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Where %c, %x, %y : (tensor<2xi1>, tensor<2xf32>, tensor<2xf16>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @where_not_broadcastable(%c: tensor<3xi1>, %x: tensor<2x1xf32>, %y: tensor<2xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{operand shapes are not broadcastable: dimension 1 is 3 and 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Where %c, %x, %y : (tensor<3xi1>, tensor<2x1xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @relu_wrong_result_type(%a: tensor<2x3xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'onnx.Relu' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Relu %a : (tensor<2x3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @isnan_result_not_i1(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<2xi1>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.IsNaN %a : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @gelu_bad_approximate(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.Gelu' op approximate must be "none" or "tanh", got "fast"}}
  %0 = onnx.Gelu %a {approximate = "fast"} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @cast_wrong_result_type(%a: tensor<2xf32>) -> tensor<2xi32> {
  // expected-error @+2 {{inferred type(s) 'tensor<2xi64>' are incompatible with return type(s) of operation 'tensor<2xi32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Cast %a {to = i64} : (tensor<2xf32>) -> tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

func.func @constant_type_mismatch() -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.Constant' op failed to verify that all of {value, output} have same type}}
  %0 = "onnx.Constant"() <{value = dense<1.0> : tensor<3xf32>}> : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @unranked_operand(%a: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{'onnx.Relu' op operand #0 must be statically shaped tensor of any type values, but got 'tensor<*xf32>'}}
  %0 = "onnx.Relu"(%a) : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @dynamic_dim(%a: tensor<?x3xf32>) -> tensor<?x3xf32> {
  // Every shape is static once imported.
  // expected-error @+1 {{'onnx.Relu' op operand #0 must be statically shaped tensor of any type values, but got 'tensor<?x3xf32>'}}
  %0 = onnx.Relu %a : (tensor<?x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalisation
//===----------------------------------------------------------------------===//

// -----

func.func @matmul_inner_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{MatMul inner dimensions differ: A has 3 columns, B has 4 rows}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.MatMul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @matmul_vector_mismatch(%a: tensor<3xf32>, %b: tensor<4x5xf32>) -> tensor<5xf32> {
  // expected-error @+2 {{MatMul inner dimensions differ: A has 3 columns, B has 4 rows}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.MatMul %a, %b : (tensor<3xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @matmul_batch_mismatch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) -> tensor<2x3x5xf32> {
  // expected-error @+2 {{operand shapes are not broadcastable: dimension 0 is 2 and 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.MatMul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{MatMul operands must have rank >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.MatMul %a, %b : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @matmul_element_types_differ(%a: tensor<2x3xf32>, %b: tensor<3x2xf16>) -> tensor<2x2xf32> {
  // expected-error @+2 {{operands have different element types: 'f32' and 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.MatMul %a, %b : (tensor<2x3xf32>, tensor<3x2xf16>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @gemm_not_2d(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{Gemm operands A and B must be 2-D}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Gemm %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gemm_inner_mismatch(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) -> tensor<3x5xf32> {
  // With transA, A is 3x2: the inner dims are 2 and 3.
  // expected-error @+2 {{Gemm inner dimensions differ: 2 vs 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Gemm %a, %b {transA = 1 : i64} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

func.func @gemm_c_not_broadcastable(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<2x1x5xf32>) -> tensor<2x5xf32> {
  // C must broadcast to [M, N] without growing it.
  // expected-error @+2 {{Gemm C must broadcast to 2x5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Gemm %a, %b, %c : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<2x1x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @softmax_negative_axis(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // Axes are normalised at import: -1 is not accepted.
  // expected-error @+2 {{axis -1 is out of range for a tensor of rank 2 (expected 0 <= axis < rank)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Softmax %a {axis = -1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @logsoftmax_axis_too_large(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{axis 2 is out of range for a tensor of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.LogSoftmax %a {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @softmax_missing_axis(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'onnx.Softmax' op requires attribute 'axis'}}
  %0 = "onnx.Softmax"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @layernorm_scale_mismatch(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+2 {{scale/bias shape 'tensor<3xf32>' does not broadcast to the normalised dims}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.LayerNormalization %x, %s {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<3xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @layernorm_bias_too_big(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>, %b: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // B may not be larger than the normalised dims [3, 4].
  // expected-error @+2 {{scale/bias shape 'tensor<2x3x4xf32>' does not broadcast to the normalised dims}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.LayerNormalization %x, %s, %b {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @rmsnorm_axis_out_of_range(%x: tensor<2x3xf32>, %s: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{axis 2 is out of range for a tensor of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.RMSNormalization %x, %s {axis = 2 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @sce_scores_rank(%x: tensor<5xf32>, %l: tensor<i64>) -> tensor<f32> {
  // expected-error @+2 {{scores must be [N, C, ...]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.SoftmaxCrossEntropyLoss %x, %l : (tensor<5xf32>, tensor<i64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @sce_labels_shape(%x: tensor<2x5xf32>, %l: tensor<5xi64>) -> tensor<f32> {
  // expected-error @+2 {{labels must be an integer tensor of shape [N, d...] matching scores}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.SoftmaxCrossEntropyLoss %x, %l : (tensor<2x5xf32>, tensor<5xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @sce_bad_reduction(%x: tensor<2x5xf32>, %l: tensor<2xi64>) -> tensor<f32> {
  // expected-error @+2 {{reduction must be none, mean or sum}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.SoftmaxCrossEntropyLoss %x, %l {reduction = "max"} : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_unsorted_axes(%a: tensor<2x3x4xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{axes must be sorted and without duplicates}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ReduceMean %a {axes = array<i64: 2, 0>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce_duplicate_axes(%a: tensor<2x3xf32>) -> tensor<1x3xf32> {
  // expected-error @+2 {{axes must be sorted and without duplicates}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ReduceSum %a {axes = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----

func.func @reduce_negative_axis(%a: tensor<2x3xf32>) -> tensor<2x1xf32> {
  // expected-error @+2 {{axes -1 is out of range for a tensor of rank 2 (expected 0 <= axes < rank)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ReduceMax %a {axes = array<i64: -1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

func.func @reduce_empty_axes(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{axes must not be empty (list every axis to reduce all)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ReduceMin %a {axes = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @reduce_keepdims_result(%a: tensor<2x3xf32>) -> tensor<2xf32> {
  // keepdims defaults to 1: the result is 2x1.
  // expected-error @+2 {{inferred type(s) 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ReduceL2 %a {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @argmax_axis_out_of_range(%a: tensor<2x3xf32>) -> tensor<2x3xi64> {
  // expected-error @+2 {{axis 3 is out of range for a tensor of rank 2 (expected 0 <= axis < rank)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ArgMax %a {axis = 3 : i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

func.func @argmin_result_not_i64(%a: tensor<2x3xf32>) -> tensor<1x3xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<1x3xi64>' are incompatible with return type(s) of operation 'tensor<1x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ArgMin %a {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----

func.func @cumsum_axis_out_of_range(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{axis -1 is out of range for a tensor of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.CumSum %a {axis = -1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// -----

func.func @reshape_element_count(%a: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error @+2 {{cannot reshape 'tensor<2x3xf32>' (6 elements) to 7 elements}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Reshape %a {shape = array<i64: 7>} : (tensor<2x3xf32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @reshape_unresolved(%a: tensor<2x3xf32>) -> tensor<6xf32> {
  // expected-error @+2 {{shape must be fully resolved (no -1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Reshape %a {shape = array<i64: -1>} : (tensor<2x3xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

func.func @flatten_axis_out_of_range(%a: tensor<2x3xf32>) -> tensor<6x1xf32> {
  // expected-error @+2 {{axis 3 is out of range [0, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Flatten %a {axis = 3 : i64} : (tensor<2x3xf32>) -> tensor<6x1xf32>
  return %0 : tensor<6x1xf32>
}

// -----

func.func @unsqueeze_unsorted(%a: tensor<2x3xf32>) -> tensor<1x2x3x1xf32> {
  // expected-error @+2 {{axes must be sorted and without duplicates}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Unsqueeze %a {axes = array<i64: 3, 0>} : (tensor<2x3xf32>) -> tensor<1x2x3x1xf32>
  return %0 : tensor<1x2x3x1xf32>
}

// -----

func.func @unsqueeze_axis_out_of_range(%a: tensor<2x3xf32>) -> tensor<2x3x1xf32> {
  // Axes index the output (rank 3).
  // expected-error @+2 {{axes 3 is out of range for a tensor of rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Unsqueeze %a {axes = array<i64: 3>} : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
  return %0 : tensor<2x3x1xf32>
}

// -----

func.func @squeeze_not_one(%a: tensor<1x3xf32>) -> tensor<1xf32> {
  // expected-error @+2 {{cannot squeeze dimension 1 of size 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Squeeze %a {axes = array<i64: 1>} : (tensor<1x3xf32>) -> tensor<1xf32>
  return %0 : tensor<1xf32>
}

// -----

func.func @transpose_perm_size(%a: tensor<2x3x4xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{perm has 2 entries for a tensor of rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Transpose %a {perm = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @transpose_bad_perm(%a: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+2 {{perm is not a permutation of [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Transpose %a {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @transpose_perm_out_of_range(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{perm is not a permutation of [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Transpose %a {perm = array<i64: 2, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @concat_rank_mismatch(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x6xf32> {
  // expected-error @+2 {{Concat inputs have different ranks}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @concat_dim_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+2 {{Concat inputs differ in dimension 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @concat_axis_out_of_range(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{axis 2 is out of range for a tensor of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Concat %a {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @concat_element_types_differ(%a: tensor<2xf32>, %b: tensor<2xi64>) -> tensor<4xf32> {
  // expected-error @+2 {{operands have different element types: 'f32' and 'i64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Concat %a, %b {axis = 0 : i64} : (tensor<2xf32>, tensor<2xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @concat_no_inputs() -> tensor<0xf32> {
  // expected-error @+2 {{Concat needs at least one input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "onnx.Concat"() <{axis = 0 : i64}> : () -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

func.func @split_sizes_do_not_sum(%a: tensor<6x3xf32>) -> (tensor<2x3xf32>, tensor<3x3xf32>) {
  // expected-error @+2 {{split sizes sum to 5 but dimension 0 has 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = onnx.Split %a {axis = 0 : i64, split = array<i64: 2, 3>} : (tensor<6x3xf32>) -> (tensor<2x3xf32>, tensor<3x3xf32>)
  return %0#0, %0#1 : tensor<2x3xf32>, tensor<3x3xf32>
}

// -----

func.func @split_negative_size(%a: tensor<6x3xf32>) -> (tensor<7x3xf32>, tensor<0x3xf32>) {
  // expected-error @+2 {{split sizes must be non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = onnx.Split %a {axis = 0 : i64, split = array<i64: 7, -1>} : (tensor<6x3xf32>) -> (tensor<7x3xf32>, tensor<0x3xf32>)
  return %0#0, %0#1 : tensor<7x3xf32>, tensor<0x3xf32>
}

// -----

func.func @split_result_count(%a: tensor<6x3xf32>) -> tensor<3x3xf32> {
  // Two sizes but one result.
  // expected-error @+2 {{inferred type(s) 'tensor<3x3xf32>', 'tensor<3x3xf32>' are incompatible with return type(s) of operation 'tensor<3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "onnx.Split"(%a) <{axis = 0 : i64, split = array<i64: 3, 3>}> : (tensor<6x3xf32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @slice_not_full_rank(%a: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{starts, ends and steps must have one entry per dimension (2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Slice %a {starts = array<i64: 1>, ends = array<i64: 3>, steps = array<i64: 1>} : (tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @slice_negative_start(%a: tensor<4x5xf32>) -> tensor<1x5xf32> {
  // Negative starts are resolved at import; the op only takes normalised bounds.
  // expected-error @+2 {{slice bounds [-1, 4) of dimension 0 are not normalised for size 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Slice %a {starts = array<i64: -1, 0>, ends = array<i64: 4, 5>, steps = array<i64: 1, 1>} : (tensor<4x5xf32>) -> tensor<1x5xf32>
  return %0 : tensor<1x5xf32>
}

// -----

func.func @slice_end_past_dim(%a: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+2 {{slice bounds [0, 100) of dimension 1 are not normalised for size 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Slice %a {starts = array<i64: 0, 0>, ends = array<i64: 4, 100>, steps = array<i64: 1, 1>} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @slice_zero_step(%a: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+2 {{steps must be non-zero}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Slice %a {starts = array<i64: 0, 0>, ends = array<i64: 4, 5>, steps = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @slice_wrong_result(%a: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // [3, -1) by -2 takes indices 3 and 1 (2 elements); [0, 5) by 2 takes 0, 2
  // and 4 (3 elements).
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Slice %a {starts = array<i64: 3, 0>, ends = array<i64: -1, 5>, steps = array<i64: -2, 2>} : (tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gather_axis_out_of_range(%a: tensor<4x5xf32>, %i: tensor<2xi64>) -> tensor<4x2xf32> {
  // expected-error @+2 {{axis -1 is out of range for a tensor of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Gather %a, %i {axis = -1 : i64} : (tensor<4x5xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @gather_float_indices(%a: tensor<4x5xf32>, %i: tensor<2xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{indices must be integers}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Gather %a, %i : (tensor<4x5xf32>, tensor<2xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gather_elements_rank(%a: tensor<4x5xf32>, %i: tensor<2xi64>) -> tensor<2xf32> {
  // expected-error @+2 {{indices must have the rank of data}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.GatherElements %a, %i : (tensor<4x5xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @scatter_elements_shapes(%a: tensor<4x5xf32>, %i: tensor<2x5xi64>, %u: tensor<2x4xf32>) -> tensor<4x5xf32> {
  // expected-error @+2 {{indices and updates must have the same shape}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ScatterElements %a, %i, %u : (tensor<4x5xf32>, tensor<2x5xi64>, tensor<2x4xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_elements_bad_reduction(%a: tensor<4x5xf32>, %i: tensor<2x5xi64>, %u: tensor<2x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+2 {{reduction must be none, add, mul, max or min, got "sum"}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ScatterElements %a, %i, %u {reduction = "sum"} : (tensor<4x5xf32>, tensor<2x5xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_nd_updates_shape(%a: tensor<4x5x6xf32>, %i: tensor<2x1xi64>, %u: tensor<2x6xf32>) -> tensor<4x5x6xf32> {
  // updates must be [2] + [5, 6].
  // expected-error @+2 {{updates must have shape indices.shape[:-1] + data.shape[indices.shape[-1]:] ('tensor<2x5x6xf32>')}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ScatterND %a, %i, %u : (tensor<4x5x6xf32>, tensor<2x1xi64>, tensor<2x6xf32>) -> tensor<4x5x6xf32>
  return %0 : tensor<4x5x6xf32>
}

// -----

func.func @scatter_nd_index_depth(%a: tensor<4x5xf32>, %i: tensor<2x3xi64>, %u: tensor<2xf32>) -> tensor<4x5xf32> {
  // expected-error @+2 {{indices must have rank >= 1 and a last dim <= rank of data}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ScatterND %a, %i, %u : (tensor<4x5xf32>, tensor<2x3xi64>, tensor<2xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_nd_bad_reduction(%a: tensor<4x5xf32>, %i: tensor<2x1xi64>, %u: tensor<2x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+2 {{reduction must be none, add, mul, max or min, got "avg"}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ScatterND %a, %i, %u {reduction = "avg"} : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @expand_not_broadcastable(%a: tensor<3x2xf32>) -> tensor<3x4xf32> {
  // expected-error @+2 {{operand shapes are not broadcastable: dimension 1 is 2 and 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Expand %a {shape = array<i64: 3, 4>} : (tensor<3x2xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @tile_repeats_count(%a: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{repeats must have one entry per dimension}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Tile %a {repeats = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @expand_negative_shape(%a: tensor<1x3xf32>) -> tensor<1x3xf32> {
  // expected-error @+2 {{shape entries must be non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Expand %a {shape = array<i64: -1, 3>} : (tensor<1x3xf32>) -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----

func.func @tile_negative_repeats(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{repeats must be non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Tile %a {repeats = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @pad_count(%a: tensor<2x3xf32>) -> tensor<3x4xf32> {
  // expected-error @+2 {{pads must have 2 * rank entries}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Pad %a {pads = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @pad_bad_mode(%a: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{mode "circular" is not supported (constant, edge, reflect and wrap are)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Pad %a {mode = "circular", pads = array<i64: 1, 0, 1, 0>} : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @pad_negative_result(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{padding makes dimension 0 negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "onnx.Pad"(%a) <{pads = array<i64: -2, 0, -1, 0>}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @trilu_rank(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{Trilu input must have rank >= 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Trilu %a : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @range_not_scalar(%s: tensor<2xi64>, %l: tensor<i64>) -> tensor<4xi64> {
  // expected-error @+2 {{Range start, limit and delta must be scalars}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Range %s, %l, %l {size = 4 : i64} : (tensor<2xi64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @range_types_differ(%s: tensor<i64>, %l: tensor<i32>) -> tensor<4xi64> {
  // expected-error @+2 {{operands have different element types: 'i64' and 'i32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Range %s, %l, %s {size = 4 : i64} : (tensor<i64>, tensor<i32>, tensor<i64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @range_wrong_size(%s: tensor<i64>) -> tensor<5xi64> {
  // expected-error @+2 {{inferred type(s) 'tensor<4xi64>' are incompatible with return type(s) of operation 'tensor<5xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Range %s, %s, %s {size = 4 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<5xi64>
  return %0 : tensor<5xi64>
}

// -----

func.func @range_negative_size(%s: tensor<i64>) -> tensor<0xi64> {
  // expected-error @+2 {{size must be non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Range %s, %s, %s {size = -1 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<0xi64>
  return %0 : tensor<0xi64>
}

//===----------------------------------------------------------------------===//
// Convolution, pooling, resampling, selection
//===----------------------------------------------------------------------===//

// -----

func.func @conv_group_does_not_match_w(%x: tensor<1x4x5x5xf32>, %w: tensor<6x3x3x3xf32>) -> tensor<1x6x3x3xf32> {
  // expected-error @+2 {{W must be [M, C/group, ...] with M divisible by group 2; got 'tensor<6x3x3x3xf32>' for 4 input channels}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Conv %x, %w {group = 2 : i64, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x4x5x5xf32>, tensor<6x3x3x3xf32>) -> tensor<1x6x3x3xf32>
  return %0 : tensor<1x6x3x3xf32>
}

// -----

func.func @conv_pads_per_spatial_dim(%x: tensor<1x2x5xf32>, %w: tensor<3x2x3xf32>) -> tensor<1x3x3xf32> {
  // expected-error @+2 {{strides and dilations need 1 entries and pads 2 (one per spatial dim), got 1, 1 and 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Conv %x, %w {strides = array<i64: 1>, dilations = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x2x5xf32>, tensor<3x2x3xf32>) -> tensor<1x3x3xf32>
  return %0 : tensor<1x3x3xf32>
}

// -----

func.func @maxpool_pad_as_large_as_window(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error @+2 {{pads must be smaller than the (dilated) kernel}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.MaxPool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 2, 0, 0, 0>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}

// -----

func.func @batchnorm_channel_mismatch(%x: tensor<2x3x4xf32>, %p: tensor<3xf32>, %q: tensor<4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+2 {{scale, B, mean and var must be vectors of the 3 channels, got 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.BatchNormalization %x, %p, %p, %q, %p : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @resize_unknown_mode(%x: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error @+2 {{mode "area" is not nearest, linear or cubic}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Resize %x {mode = "area", scales = array<f64: 1.0, 1.0, 2.0, 2.0>, sizes = array<i64: 1, 1, 4, 4>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}

// -----

func.func @topk_k_larger_than_axis(%x: tensor<3x5xf32>) -> (tensor<3x6xf32>, tensor<3x6xi64>) {
  // expected-error @+2 {{k 6 must be in [0, 5] (the size of axis 1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %v, %i = onnx.TopK %x {k = 6 : i64, axis = 1 : i64} : (tensor<3x5xf32>) -> (tensor<3x6xf32>, tensor<3x6xi64>)
  return %v, %i : tensor<3x6xf32>, tensor<3x6xi64>
}

// -----

func.func @onehot_values_not_a_pair(%i: tensor<4xi64>, %v: tensor<3xf32>) -> tensor<4x5xf32> {
  // expected-error @+2 {{values must hold two elements (off, on), got 'tensor<3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.OneHot %i, %v {depth = 5 : i64, axis = 1 : i64} : (tensor<4xi64>, tensor<3xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @max_pool_grad_wrong_dy(%dy: tensor<1x1x3x3xf32>, %x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error @+1 {{dY is 'tensor<1x1x3x3xf32>' but MaxPool of X gives 'tensor<1x1x2x2xf32>'}}
  %0 = onnx.MaxPoolGrad %dy, %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x3x3xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}
