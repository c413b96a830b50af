// RUN: zero-opt %s --canonicalize | FileCheck %s
//
// Constant folding of onnx ops (the values are worked out by hand in the
// comments). Operands that are not all constants, and the cases the folder
// leaves to run time, stay as ops.

// CHECK-LABEL: func.func @add_broadcast
// [1, 2, 3] + [10]
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<[11, 12, 13]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @add_broadcast() -> tensor<3xi64> {
  %a = onnx.Constant dense<[1, 2, 3]> : tensor<3xi64>
  %b = onnx.Constant dense<10> : tensor<1xi64>
  %0 = onnx.Add %a, %b : (tensor<3xi64>, tensor<1xi64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// CHECK-LABEL: func.func @add_float_broadcast_2d
// [0.5, 1.5] + [[1], [2]] = [[1.5, 2.5], [2.5, 3.5]]
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<{{\[\[}}1.500000e+00, 2.500000e+00], [2.500000e+00, 3.500000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: return %[[C]]
func.func @add_float_broadcast_2d() -> tensor<2x2xf32> {
  %a = onnx.Constant dense<[0.5, 1.5]> : tensor<2xf32>
  %b = onnx.Constant dense<[[1.0], [2.0]]> : tensor<2x1xf32>
  %0 = onnx.Add %a, %b : (tensor<2xf32>, tensor<2x1xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @sub_mul
// ([5, 6] - [1, 2]) * [3, -1] = [12, -4]
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<[12, -4]> : tensor<2xi32>
// CHECK-NEXT: return %[[C]]
func.func @sub_mul() -> tensor<2xi32> {
  %a = onnx.Constant dense<[5, 6]> : tensor<2xi32>
  %b = onnx.Constant dense<[1, 2]> : tensor<2xi32>
  %c = onnx.Constant dense<[3, -1]> : tensor<2xi32>
  %0 = onnx.Sub %a, %b : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  %1 = onnx.Mul %0, %c : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  return %1 : tensor<2xi32>
}

// CHECK-LABEL: func.func @div_int_truncates
// [7, -7, 9] / 2 = [3, -3, 4] (towards zero)
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<[3, -3, 4]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @div_int_truncates() -> tensor<3xi64> {
  %a = onnx.Constant dense<[7, -7, 9]> : tensor<3xi64>
  %b = onnx.Constant dense<2> : tensor<i64>
  %0 = onnx.Div %a, %b : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// CHECK-LABEL: func.func @div_int_by_zero_not_folded
// CHECK: onnx.Div
func.func @div_int_by_zero_not_folded() -> tensor<2xi64> {
  %a = onnx.Constant dense<[7, 8]> : tensor<2xi64>
  %b = onnx.Constant dense<[1, 0]> : tensor<2xi64>
  %0 = onnx.Div %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @div_float
// [1, -3] / [4, 2] = [0.25, -1.5]
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<[2.500000e-01, -1.500000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]]
func.func @div_float() -> tensor<2xf32> {
  %a = onnx.Constant dense<[1.0, -3.0]> : tensor<2xf32>
  %b = onnx.Constant dense<[4.0, 2.0]> : tensor<2xf32>
  %0 = onnx.Div %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// CHECK-LABEL: func.func @pow_float
// 2 ^ [0, 1, 3, -1] = [1, 2, 8, 0.5]
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<[1.000000e+00, 2.000000e+00, 8.000000e+00, 5.000000e-01]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]]
func.func @pow_float() -> tensor<4xf32> {
  %a = onnx.Constant dense<2.0> : tensor<f32>
  %b = onnx.Constant dense<[0.0, 1.0, 3.0, -1.0]> : tensor<4xf32>
  %0 = onnx.Pow %a, %b : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @max_min
// max([1, 5, -2], [4, 2, -3]) = [4, 5, -2]; min(that, 3) = [3, 3, -2]
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<[3, 3, -2]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @max_min() -> tensor<3xi64> {
  %a = onnx.Constant dense<[1, 5, -2]> : tensor<3xi64>
  %b = onnx.Constant dense<[4, 2, -3]> : tensor<3xi64>
  %c = onnx.Constant dense<3> : tensor<i64>
  %0 = onnx.Max %a, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %1 = onnx.Min %0, %c : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  return %1 : tensor<3xi64>
}

// CHECK-LABEL: func.func @mod
// [-7, 7] mod 3: the divisor's sign (fmod = 0) gives [2, 1]; [-7, 7] mod -3
// with fmod = 1 keeps the dividend's sign: [-1, 1]
// CHECK-DAG: %[[M:.*]] = onnx.Constant dense<[2, 1]> : tensor<2xi64>
// CHECK-DAG: %[[F:.*]] = onnx.Constant dense<[-1, 1]> : tensor<2xi64>
// CHECK: return %[[M]], %[[F]]
func.func @mod() -> (tensor<2xi64>, tensor<2xi64>) {
  %a = onnx.Constant dense<[-7, 7]> : tensor<2xi64>
  %b = onnx.Constant dense<3> : tensor<i64>
  %c = onnx.Constant dense<-3> : tensor<i64>
  %0 = onnx.Mod %a, %b : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %1 = onnx.Mod %a, %c {fmod = 1 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  return %0, %1 : tensor<2xi64>, tensor<2xi64>
}

// CHECK-LABEL: func.func @compare_floats
// Float operands are compared as floats: 0.5 < 0.6, 0.7 > 0.6, 0.6 == 0.6.
// CHECK-DAG: %[[LT:.*]] = onnx.Constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-DAG: %[[EQ:.*]] = onnx.Constant dense<[false, false, true]> : tensor<3xi1>
// CHECK-DAG: %[[GE:.*]] = onnx.Constant dense<[false, true, true]> : tensor<3xi1>
// CHECK: return %[[LT]], %[[EQ]], %[[GE]]
func.func @compare_floats() -> (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) {
  %a = onnx.Constant dense<[0.5, 0.7, 0.6]> : tensor<3xf32>
  %b = onnx.Constant dense<0.6> : tensor<f32>
  %0 = onnx.Less %a, %b : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
  %1 = onnx.Equal %a, %b : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
  %2 = onnx.GreaterOrEqual %a, %b : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
  return %0, %1, %2 : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
}

// CHECK-LABEL: func.func @logic
// and/or/xor of [0, 0, 1, 1] and [0, 1, 0, 1], then not of the xor
// CHECK-DAG: %[[AND:.*]] = onnx.Constant dense<[false, false, false, true]> : tensor<4xi1>
// CHECK-DAG: %[[OR:.*]] = onnx.Constant dense<[false, true, true, true]> : tensor<4xi1>
// CHECK-DAG: %[[NXOR:.*]] = onnx.Constant dense<[true, false, false, true]> : tensor<4xi1>
// CHECK: return %[[AND]], %[[OR]], %[[NXOR]]
func.func @logic() -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %a = onnx.Constant dense<[false, false, true, true]> : tensor<4xi1>
  %b = onnx.Constant dense<[false, true, false, true]> : tensor<4xi1>
  %0 = onnx.And %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %1 = onnx.Or %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %2 = onnx.Xor %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %3 = onnx.Not %2 : (tensor<4xi1>) -> tensor<4xi1>
  return %0, %1, %3 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// CHECK-LABEL: func.func @where
// where([[T], [F]], [1, 2, 3], -1) = [[1, 2, 3], [-1, -1, -1]]
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<{{\[\[}}1, 2, 3], [-1, -1, -1]]> : tensor<2x3xi64>
// CHECK-NEXT: return %[[C]]
func.func @where() -> tensor<2x3xi64> {
  %c = onnx.Constant dense<[[true], [false]]> : tensor<2x1xi1>
  %x = onnx.Constant dense<[1, 2, 3]> : tensor<3xi64>
  %y = onnx.Constant dense<-1> : tensor<i64>
  %0 = onnx.Where %c, %x, %y : (tensor<2x1xi1>, tensor<3xi64>, tensor<i64>) -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// CHECK-LABEL: func.func @where_float_mask
// The causal-mask pattern: where(mask, 0, -inf) on floats.
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<{{\[\[}}0.000000e+00, 0xFF800000], [0.000000e+00, 0.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: return %[[C]]
func.func @where_float_mask() -> tensor<2x2xf32> {
  %c = onnx.Constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  %x = onnx.Constant dense<0.0> : tensor<f32>
  %y = onnx.Constant dense<0xFF800000> : tensor<f32>
  %0 = onnx.Where %c, %x, %y : (tensor<2x2xi1>, tensor<f32>, tensor<f32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @neg
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<[-1.500000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]]
func.func @neg() -> tensor<2xf32> {
  %a = onnx.Constant dense<[1.5, -2.0]> : tensor<2xf32>
  %0 = onnx.Neg %a : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// CHECK-LABEL: func.func @cast
// float -> i32 truncates towards zero: [1, -1, 0, 0]; float -> i1 is
// "nonzero": [T, T, T, F]; i64 -> f16 is exact for small values.
// CHECK-DAG: %[[I:.*]] = onnx.Constant dense<[1, -1, 0, 0]> : tensor<4xi32>
// CHECK-DAG: %[[B:.*]] = onnx.Constant dense<[true, true, true, false]> : tensor<4xi1>
// CHECK-DAG: %[[H:.*]] = onnx.Constant dense<[-3.000000e+00, 0.000000e+00, 2.048000e+03]> : tensor<3xf16>
// CHECK: return %[[I]], %[[B]], %[[H]]
func.func @cast() -> (tensor<4xi32>, tensor<4xi1>, tensor<3xf16>) {
  %a = onnx.Constant dense<[1.75, -1.75, 0.5, 0.0]> : tensor<4xf32>
  %0 = onnx.Cast %a {to = i32} : (tensor<4xf32>) -> tensor<4xi32>
  %1 = onnx.Cast %a {to = i1} : (tensor<4xf32>) -> tensor<4xi1>
  %n = onnx.Constant dense<[-3, 0, 2048]> : tensor<3xi64>
  %2 = onnx.Cast %n {to = f16} : (tensor<3xi64>) -> tensor<3xf16>
  return %0, %1, %2 : tensor<4xi32>, tensor<4xi1>, tensor<3xf16>
}

// CHECK-LABEL: func.func @cast_bool_to_float
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<[1.000000e+00, 0.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]]
func.func @cast_bool_to_float() -> tensor<2xf32> {
  %a = onnx.Constant dense<[true, false]> : tensor<2xi1>
  %0 = onnx.Cast %a {to = f32} : (tensor<2xi1>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// CHECK-LABEL: func.func @gather_shape
// Gather on a shape constant: shape[-1] = 4, shape[[0, 1]] = [2, 3].
// CHECK-DAG: %[[LAST:.*]] = onnx.Constant dense<4> : tensor<i64>
// CHECK-DAG: %[[FIRST:.*]] = onnx.Constant dense<[2, 3]> : tensor<2xi64>
// CHECK: return %[[LAST]], %[[FIRST]]
func.func @gather_shape() -> (tensor<i64>, tensor<2xi64>) {
  %s = onnx.Constant dense<[2, 3, 4]> : tensor<3xi64>
  %i = onnx.Constant dense<-1> : tensor<i64>
  %j = onnx.Constant dense<[0, 1]> : tensor<2xi32>
  %0 = onnx.Gather %s, %i : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %1 = onnx.Gather %s, %j : (tensor<3xi64>, tensor<2xi32>) -> tensor<2xi64>
  return %0, %1 : tensor<i64>, tensor<2xi64>
}

// CHECK-LABEL: func.func @gather_axis1
// Columns [2, 0] of [[1, 2, 3], [4, 5, 6]]: [[3, 1], [6, 4]]
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<{{\[\[}}3, 1], [6, 4]]> : tensor<2x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @gather_axis1() -> tensor<2x2xi64> {
  %d = onnx.Constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %i = onnx.Constant dense<[2, 0]> : tensor<2xi64>
  %0 = onnx.Gather %d, %i {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// CHECK-LABEL: func.func @gather_out_of_range_not_folded
// CHECK: onnx.Gather
func.func @gather_out_of_range_not_folded() -> tensor<i64> {
  %s = onnx.Constant dense<[2, 3, 4]> : tensor<3xi64>
  %i = onnx.Constant dense<3> : tensor<i64>
  %0 = onnx.Gather %s, %i : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// CHECK-LABEL: func.func @concat
// CHECK-DAG: %[[A:.*]] = onnx.Constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK-DAG: %[[B:.*]] = onnx.Constant dense<{{\[\[}}1.000000e+00, 2.000000e+00, 5.000000e+00], [3.000000e+00, 4.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK: return %[[A]], %[[B]]
func.func @concat() -> (tensor<3xi64>, tensor<2x3xf32>) {
  %a = onnx.Constant dense<[1, 2]> : tensor<2xi64>
  %b = onnx.Constant dense<3> : tensor<1xi64>
  %0 = onnx.Concat %a, %b {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %c = onnx.Constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %d = onnx.Constant dense<[[5.0], [6.0]]> : tensor<2x1xf32>
  %1 = onnx.Concat %c, %d {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  return %0, %1 : tensor<3xi64>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @slice
// [0, 1, 2, 3, 4, 5] from 4 down to (excluding) 0 by -2: [4, 2]; rows 1..2 of
// a 3x2 constant: [[3, 4]]
// CHECK-DAG: %[[A:.*]] = onnx.Constant dense<[4, 2]> : tensor<2xi64>
// CHECK-DAG: %[[B:.*]] = onnx.Constant dense<{{\[\[}}3, 4]]> : tensor<1x2xi64>
// CHECK: return %[[A]], %[[B]]
func.func @slice() -> (tensor<2xi64>, tensor<1x2xi64>) {
  %a = onnx.Constant dense<[0, 1, 2, 3, 4, 5]> : tensor<6xi64>
  %0 = onnx.Slice %a {starts = array<i64: 4>, ends = array<i64: 0>, steps = array<i64: -2>} : (tensor<6xi64>) -> tensor<2xi64>
  %b = onnx.Constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
  %1 = onnx.Slice %b {starts = array<i64: 1, 0>, ends = array<i64: 2, 2>, steps = array<i64: 1, 1>} : (tensor<3x2xi64>) -> tensor<1x2xi64>
  return %0, %1 : tensor<2xi64>, tensor<1x2xi64>
}

// CHECK-LABEL: func.func @reshape_splat
// Splats fold whatever their size (here 2 * 100000 elements).
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<1.000000e+00> : tensor<2x100000xf32>
// CHECK-NEXT: return %[[C]]
func.func @reshape_splat() -> tensor<2x100000xf32> {
  %a = onnx.Constant dense<1.0> : tensor<200000xf32>
  %0 = onnx.Reshape %a {shape = array<i64: 2, 100000>} : (tensor<200000xf32>) -> tensor<2x100000xf32>
  return %0 : tensor<2x100000xf32>
}

// CHECK-LABEL: func.func @reshape_same_type
// A reshape to the same type is its operand.
// CHECK-NEXT: return %arg0
func.func @reshape_same_type(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.Reshape %arg0 {shape = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @reshape_unsqueeze_squeeze
// CHECK-DAG: %[[R:.*]] = onnx.Constant dense<{{\[\[}}1, 2], [3, 4]]> : tensor<2x2xi64>
// CHECK-DAG: %[[U:.*]] = onnx.Constant dense<{{\[\[}}1, 2, 3, 4]]> : tensor<1x4xi64>
// CHECK-DAG: %[[S:.*]] = onnx.Constant dense<7> : tensor<i64>
// CHECK: return %[[R]], %[[U]], %[[S]]
func.func @reshape_unsqueeze_squeeze() -> (tensor<2x2xi64>, tensor<1x4xi64>, tensor<i64>) {
  %a = onnx.Constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = onnx.Reshape %a {shape = array<i64: 2, 2>} : (tensor<4xi64>) -> tensor<2x2xi64>
  %1 = onnx.Unsqueeze %a {axes = array<i64: 0>} : (tensor<4xi64>) -> tensor<1x4xi64>
  %b = onnx.Constant dense<7> : tensor<1x1xi64>
  %2 = onnx.Squeeze %b {axes = array<i64: 0, 1>} : (tensor<1x1xi64>) -> tensor<i64>
  return %0, %1, %2 : tensor<2x2xi64>, tensor<1x4xi64>, tensor<i64>
}

// CHECK-LABEL: func.func @transpose
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<{{\[\[}}1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @transpose() -> tensor<3x2xi64> {
  %a = onnx.Constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = onnx.Transpose %a {perm = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  return %0 : tensor<3x2xi64>
}

// CHECK-LABEL: func.func @expand
// CHECK-DAG: %[[E:.*]] = onnx.Constant dense<{{\[\[}}7, 7], [8, 8]]> : tensor<2x2xi64>
// CHECK-DAG: %[[S:.*]] = onnx.Constant dense<5.000000e-01> : tensor<4x3xf32>
// CHECK: return %[[E]], %[[S]]
func.func @expand() -> (tensor<2x2xi64>, tensor<4x3xf32>) {
  %a = onnx.Constant dense<[[7], [8]]> : tensor<2x1xi64>
  %0 = onnx.Expand %a {shape = array<i64: 2, 2>} : (tensor<2x1xi64>) -> tensor<2x2xi64>
  %b = onnx.Constant dense<0.5> : tensor<3xf32>
  %1 = onnx.Expand %b {shape = array<i64: 4, 1>} : (tensor<3xf32>) -> tensor<4x3xf32>
  return %0, %1 : tensor<2x2xi64>, tensor<4x3xf32>
}

// CHECK-LABEL: func.func @trilu
// Upper triangle of 1s with k = 1 (a causal mask) and lower with k = 0.
// CHECK-DAG: %[[U:.*]] = onnx.Constant dense<{{\[\[}}0.000000e+00, 1.000000e+00, 1.000000e+00], [0.000000e+00, 0.000000e+00, 1.000000e+00], [0.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<3x3xf32>
// CHECK-DAG: %[[L:.*]] = onnx.Constant dense<{{\[\[}}1, 0, 0], [4, 5, 0]]> : tensor<2x3xi64>
// CHECK: return %[[U]], %[[L]]
func.func @trilu() -> (tensor<3x3xf32>, tensor<2x3xi64>) {
  %a = onnx.Constant dense<1.0> : tensor<3x3xf32>
  %0 = onnx.Trilu %a {k = 1 : i64} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %b = onnx.Constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %1 = onnx.Trilu %b {upper = 0 : i64} : (tensor<2x3xi64>) -> tensor<2x3xi64>
  return %0, %1 : tensor<3x3xf32>, tensor<2x3xi64>
}

// CHECK-LABEL: func.func @range
// 1, 4, 7 (below 10 by 3) and 0.5, 0.25, 0 (below -0.25 by -0.25)
// CHECK-DAG: %[[I:.*]] = onnx.Constant dense<[1, 4, 7]> : tensor<3xi64>
// CHECK-DAG: %[[F:.*]] = onnx.Constant dense<[5.000000e-01, 2.500000e-01, 0.000000e+00]> : tensor<3xf32>
// CHECK: return %[[I]], %[[F]]
func.func @range() -> (tensor<3xi64>, tensor<3xf32>) {
  %s = onnx.Constant dense<1> : tensor<i64>
  %l = onnx.Constant dense<10> : tensor<i64>
  %d = onnx.Constant dense<3> : tensor<i64>
  %0 = onnx.Range %s, %l, %d {size = 3 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<3xi64>
  %fs = onnx.Constant dense<0.5> : tensor<f32>
  %fl = onnx.Constant dense<-0.25> : tensor<f32>
  %fd = onnx.Constant dense<-0.25> : tensor<f32>
  %1 = onnx.Range %fs, %fl, %fd {size = 3 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<3xf32>
  return %0, %1 : tensor<3xi64>, tensor<3xf32>
}

// CHECK-LABEL: func.func @reduce
// Sum over axis 0 of [[1, 2, 3], [4, 5, 6]]: [5, 7, 9]; product over axis 1,
// kept: [[6], [120]]
// CHECK-DAG: %[[S:.*]] = onnx.Constant dense<[5, 7, 9]> : tensor<3xi64>
// CHECK-DAG: %[[P:.*]] = onnx.Constant dense<{{\[\[}}6], [120]]> : tensor<2x1xi64>
// CHECK: return %[[S]], %[[P]]
func.func @reduce() -> (tensor<3xi64>, tensor<2x1xi64>) {
  %a = onnx.Constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = onnx.ReduceSum %a {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x3xi64>) -> tensor<3xi64>
  %1 = onnx.ReduceProd %a {axes = array<i64: 1>} : (tensor<2x3xi64>) -> tensor<2x1xi64>
  return %0, %1 : tensor<3xi64>, tensor<2x1xi64>
}

// CHECK-LABEL: func.func @cumsum
// [1, 2, 3, 4]: inclusive [1, 3, 6, 10]; exclusive and reversed [9, 7, 4, 0]
// CHECK-DAG: %[[I:.*]] = onnx.Constant dense<[1, 3, 6, 10]> : tensor<4xi64>
// CHECK-DAG: %[[R:.*]] = onnx.Constant dense<[9, 7, 4, 0]> : tensor<4xi64>
// CHECK: return %[[I]], %[[R]]
func.func @cumsum() -> (tensor<4xi64>, tensor<4xi64>) {
  %a = onnx.Constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = onnx.CumSum %a {axis = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  %1 = onnx.CumSum %a {axis = 0 : i64, exclusive = 1 : i64, reverse = 1 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  return %0, %1 : tensor<4xi64>, tensor<4xi64>
}

// CHECK-LABEL: func.func @gather_nd
// [[1, 2], [3, 4]] at (1, 0) and (0, 1): [3, 2]; with batch_dims = 1, row b
// at index [[1], [0]][b]: [2, 3]
// CHECK-DAG: %[[G:.*]] = onnx.Constant dense<[3, 2]> : tensor<2xi64>
// CHECK-DAG: %[[B:.*]] = onnx.Constant dense<[2, 3]> : tensor<2xi64>
// CHECK: return %[[G]], %[[B]]
func.func @gather_nd() -> (tensor<2xi64>, tensor<2xi64>) {
  %d = onnx.Constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %i = onnx.Constant dense<[[1, 0], [0, 1]]> : tensor<2x2xi64>
  %0 = onnx.GatherND %d, %i : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2xi64>
  %j = onnx.Constant dense<[[1], [0]]> : tensor<2x1xi64>
  %1 = onnx.GatherND %d, %j {batch_dims = 1 : i64} : (tensor<2x2xi64>, tensor<2x1xi64>) -> tensor<2xi64>
  return %0, %1 : tensor<2xi64>, tensor<2xi64>
}

// CHECK-LABEL: func.func @identity_dropout
// CHECK-NEXT: return %arg0, %arg0
func.func @identity_dropout(%arg0: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = onnx.Identity %arg0 : (tensor<2xf32>) -> tensor<2xf32>
  %1 = onnx.Dropout %arg0 : (tensor<2xf32>) -> tensor<2xf32>
  return %0, %1 : tensor<2xf32>, tensor<2xf32>
}

// CHECK-LABEL: func.func @not_constant
// CHECK-NEXT: onnx.Constant
// CHECK-NEXT: onnx.Add %arg0
func.func @not_constant(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %a = onnx.Constant dense<1.0> : tensor<2xf32>
  %0 = onnx.Add %arg0, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// CHECK-LABEL: func.func @too_large_not_folded
// Non-splat results above 65536 elements are left to run time.
// CHECK: onnx.Range
func.func @too_large_not_folded() -> tensor<70000xi64> {
  %s = onnx.Constant dense<0> : tensor<i64>
  %l = onnx.Constant dense<70000> : tensor<i64>
  %d = onnx.Constant dense<1> : tensor<i64>
  %0 = onnx.Range %s, %l, %d {size = 70000 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<70000xi64>
  return %0 : tensor<70000xi64>
}

// CHECK-LABEL: func.func @empty
// Empty results fold too; a sum over an empty dim is 0.
// CHECK-DAG: %[[S:.*]] = onnx.Constant dense<1.000000e+00> : tensor<0x3xf32>
// CHECK-DAG: %[[R:.*]] = onnx.Constant dense<0.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[G:.*]] = onnx.Constant dense<> : tensor<0xi64>
// CHECK: return %[[S]], %[[R]], %[[G]]
func.func @empty() -> (tensor<0x3xf32>, tensor<3xf32>, tensor<0xi64>) {
  %a = onnx.Constant dense<1.0> : tensor<4x3xf32>
  %0 = onnx.Slice %a {starts = array<i64: 2, 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 1>} : (tensor<4x3xf32>) -> tensor<0x3xf32>
  %b = onnx.Constant dense<> : tensor<0x3xf32>
  %1 = onnx.ReduceSum %b {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<0x3xf32>) -> tensor<3xf32>
  %c = onnx.Constant dense<[1, 2, 3]> : tensor<3xi64>
  %i = onnx.Constant dense<> : tensor<0xi64>
  %2 = onnx.Gather %c, %i : (tensor<3xi64>, tensor<0xi64>) -> tensor<0xi64>
  return %0, %1, %2 : tensor<0x3xf32>, tensor<3xf32>, tensor<0xi64>
}

// CHECK-LABEL: func.func @trilu_of_splat
// Lower triangle of a splat 3 with k = -1 keeps only (1, 0).
// CHECK-NEXT: %[[C:.*]] = onnx.Constant dense<{{\[\[}}0, 0], [3, 0]]> : tensor<2x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @trilu_of_splat() -> tensor<2x2xi64> {
  %a = onnx.Constant dense<3> : tensor<2x2xi64>
  %0 = onnx.Trilu %a {k = -1 : i64, upper = 0 : i64} : (tensor<2x2xi64>) -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}
