// RUN: zero-opt %s | zero-opt | FileCheck %s
// RUN: zero-opt %s --mlir-print-op-generic | zero-opt | FileCheck %s
//
// Every onnx op's custom assembly parses, prints and parses again unchanged
// (also through the generic form); attributes equal to their default are not
// printed.

// CHECK-LABEL: func.func @constant() -> tensor<2xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[R]] : tensor<2xf32>
func.func @constant() -> tensor<2xf32> {
  %0 = onnx.Constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// CHECK-LABEL: func.func @constant_splat_i1() -> tensor<2x3xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.Constant dense<true> : tensor<2x3xi1>
// CHECK-NEXT: return %[[R]] : tensor<2x3xi1>
func.func @constant_splat_i1() -> tensor<2x3xi1> {
  %0 = onnx.Constant dense<true> : tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// CHECK-LABEL: func.func @add(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Add %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @add(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.Add %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @sub(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Sub %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @sub(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.Sub %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @mul(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Mul %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @mul(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.Mul %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @div(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Div %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @div(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.Div %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @max(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Max %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @max(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.Max %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @min(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Min %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @min(%arg0: tensor<2x1x4xf32>, %arg1: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.Min %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @pow(%arg0: tensor<2x3xf32>, %arg1: tensor<3xi64>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Pow %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf32>
func.func @pow(%arg0: tensor<2x3xf32>, %arg1: tensor<3xi64>) -> tensor<2x3xf32> {
  %0 = onnx.Pow %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @mod(%arg0: tensor<4xi32>, %arg1: tensor<4xi32>) -> tensor<4xi32>
// CHECK-NEXT: %[[R:.*]] = onnx.Mod %arg0, %arg1 : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
// CHECK-NEXT: return %[[R]] : tensor<4xi32>
func.func @mod(%arg0: tensor<4xi32>, %arg1: tensor<4xi32>) -> tensor<4xi32> {
  %0 = onnx.Mod %arg0, %arg1 : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// CHECK-LABEL: func.func @mod_fmod(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Mod %arg0, %arg1 {fmod = 1 : i64} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func @mod_fmod(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> tensor<4xf32> {
  %0 = onnx.Mod %arg0, %arg1 {fmod = 1 : i64} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @equal(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.Equal %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: return %[[R]] : tensor<2x3xi1>
func.func @equal(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1> {
  %0 = onnx.Equal %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// CHECK-LABEL: func.func @less(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.Less %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: return %[[R]] : tensor<2x3xi1>
func.func @less(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1> {
  %0 = onnx.Less %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// CHECK-LABEL: func.func @lessorequal(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.LessOrEqual %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: return %[[R]] : tensor<2x3xi1>
func.func @lessorequal(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1> {
  %0 = onnx.LessOrEqual %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// CHECK-LABEL: func.func @greater(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.Greater %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: return %[[R]] : tensor<2x3xi1>
func.func @greater(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1> {
  %0 = onnx.Greater %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// CHECK-LABEL: func.func @greaterorequal(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.GreaterOrEqual %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: return %[[R]] : tensor<2x3xi1>
func.func @greaterorequal(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xi1> {
  %0 = onnx.GreaterOrEqual %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// CHECK-LABEL: func.func @and(%arg0: tensor<2x3xi1>, %arg1: tensor<1xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.And %arg0, %arg1 : (tensor<2x3xi1>, tensor<1xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: return %[[R]] : tensor<2x3xi1>
func.func @and(%arg0: tensor<2x3xi1>, %arg1: tensor<1xi1>) -> tensor<2x3xi1> {
  %0 = onnx.And %arg0, %arg1 : (tensor<2x3xi1>, tensor<1xi1>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// CHECK-LABEL: func.func @or(%arg0: tensor<2x3xi1>, %arg1: tensor<1xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.Or %arg0, %arg1 : (tensor<2x3xi1>, tensor<1xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: return %[[R]] : tensor<2x3xi1>
func.func @or(%arg0: tensor<2x3xi1>, %arg1: tensor<1xi1>) -> tensor<2x3xi1> {
  %0 = onnx.Or %arg0, %arg1 : (tensor<2x3xi1>, tensor<1xi1>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// CHECK-LABEL: func.func @xor(%arg0: tensor<2x3xi1>, %arg1: tensor<1xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.Xor %arg0, %arg1 : (tensor<2x3xi1>, tensor<1xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: return %[[R]] : tensor<2x3xi1>
func.func @xor(%arg0: tensor<2x3xi1>, %arg1: tensor<1xi1>) -> tensor<2x3xi1> {
  %0 = onnx.Xor %arg0, %arg1 : (tensor<2x3xi1>, tensor<1xi1>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// CHECK-LABEL: func.func @where(%arg0: tensor<2x1xi1>, %arg1: tensor<3xf32>, %arg2: tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Where %arg0, %arg1, %arg2 : (tensor<2x1xi1>, tensor<3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf32>
func.func @where(%arg0: tensor<2x1xi1>, %arg1: tensor<3xf32>, %arg2: tensor<f32>) -> tensor<2x3xf32> {
  %0 = onnx.Where %arg0, %arg1, %arg2 : (tensor<2x1xi1>, tensor<3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @neg(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Neg %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @neg(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Neg %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @abs(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Abs %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @abs(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Abs %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @sqrt(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Sqrt %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @sqrt(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Sqrt %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @reciprocal(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Reciprocal %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @reciprocal(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Reciprocal %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @exp(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Exp %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @exp(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Exp %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @log(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Log %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @log(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Log %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @tanh(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Tanh %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @tanh(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Tanh %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @erf(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Erf %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @erf(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Erf %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @sigmoid(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Sigmoid %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @sigmoid(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Sigmoid %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @relu(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Relu %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @relu(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Relu %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @sin(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Sin %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @sin(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Sin %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @cos(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Cos %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @cos(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Cos %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @floor(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Floor %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @floor(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Floor %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @ceil(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Ceil %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @ceil(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Ceil %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @round(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Round %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @round(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Round %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @sign(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Sign %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @sign(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Sign %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @softplus(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Softplus %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @softplus(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Softplus %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @identity(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Identity %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @identity(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Identity %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @dropout(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Dropout %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @dropout(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Dropout %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @hardswish(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.HardSwish %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @hardswish(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.HardSwish %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @gelu(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Gelu %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @gelu(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Gelu %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @leakyrelu(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.LeakyRelu %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @leakyrelu(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.LeakyRelu %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @elu(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Elu %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @elu(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Elu %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @hardsigmoid(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.HardSigmoid %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @hardsigmoid(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.HardSigmoid %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @clip(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Clip %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x3xbf16>
func.func @clip(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = onnx.Clip %arg0 : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @not(%arg0: tensor<4xi1>) -> tensor<4xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.Not %arg0 : (tensor<4xi1>) -> tensor<4xi1>
// CHECK-NEXT: return %[[R]] : tensor<4xi1>
func.func @not(%arg0: tensor<4xi1>) -> tensor<4xi1> {
  %0 = onnx.Not %arg0 : (tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// CHECK-LABEL: func.func @gelu_tanh(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Gelu %arg0 {approximate = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func @gelu_tanh(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Gelu %arg0 {approximate = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @leaky_relu_alpha(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.LeakyRelu %arg0 {alpha = 2.000000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func @leaky_relu_alpha(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.LeakyRelu %arg0 {alpha = 2.000000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @elu_alpha(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Elu %arg0 {alpha = 5.000000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func @elu_alpha(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Elu %arg0 {alpha = 5.000000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @tan(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Tan %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @tan(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Tan %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @asin(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Asin %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @asin(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Asin %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @acos(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Acos %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @acos(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Acos %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @atan(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Atan %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @atan(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Atan %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @sinh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Sinh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @sinh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Sinh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @cosh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Cosh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @cosh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Cosh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @asinh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Asinh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @asinh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Asinh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @acosh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Acosh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @acosh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Acosh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @atanh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Atanh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @atanh(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Atanh %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @softsign(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Softsign %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @softsign(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Softsign %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @celu(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Celu %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @celu(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Celu %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @selu(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.Selu %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @selu(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.Selu %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @thresholdedrelu(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: %[[R:.*]] = onnx.ThresholdedRelu %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf64>
func.func @thresholdedrelu(%arg0: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0 = onnx.ThresholdedRelu %arg0 : (tensor<2x3xf64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// CHECK-LABEL: func.func @selu_attrs(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Selu %arg0 {alpha = 1.500000e+00 : f32, gamma = 2.000000e+00 : f32} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func @selu_attrs(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Selu %arg0 {alpha = 1.500000e+00 : f32, gamma = 2.000000e+00 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @celu_thresholded_relu_alpha(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[C:.*]] = onnx.Celu %arg0 {alpha = 5.000000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ThresholdedRelu %[[C]] {alpha = 2.500000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func @celu_thresholded_relu_alpha(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Celu %arg0 {alpha = 5.000000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = onnx.ThresholdedRelu %0 {alpha = 2.500000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// CHECK-LABEL: func.func @hard_sigmoid_attrs(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.HardSigmoid %arg0 {alpha = 2.500000e-01 : f32, beta = 1.250000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func @hard_sigmoid_attrs(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.HardSigmoid %arg0 {alpha = 2.500000e-01 : f32, beta = 1.250000e-01 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @clip_bounds(%arg0: tensor<4xf16>) -> tensor<4xf16>
// CHECK-NEXT: %[[R:.*]] = onnx.Clip %arg0 {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : (tensor<4xf16>) -> tensor<4xf16>
// CHECK-NEXT: return %[[R]] : tensor<4xf16>
func.func @clip_bounds(%arg0: tensor<4xf16>) -> tensor<4xf16> {
  %0 = onnx.Clip %arg0 {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : (tensor<4xf16>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// CHECK-LABEL: func.func @isnan(%arg0: tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.IsNaN %arg0 : (tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT: return %[[R]] : tensor<4xi1>
func.func @isnan(%arg0: tensor<4xf32>) -> tensor<4xi1> {
  %0 = onnx.IsNaN %arg0 : (tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// CHECK-LABEL: func.func @isinf(%arg0: tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.IsInf %arg0 {detect_negative = 0 : i64} : (tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT: return %[[R]] : tensor<4xi1>
func.func @isinf(%arg0: tensor<4xf32>) -> tensor<4xi1> {
  %0 = onnx.IsInf %arg0 {detect_negative = 0 : i64} : (tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// CHECK-LABEL: func.func @cast(%arg0: tensor<4xf32>) -> tensor<4xi64>
// CHECK-NEXT: %[[R:.*]] = onnx.Cast %arg0 {to = i64} : (tensor<4xf32>) -> tensor<4xi64>
// CHECK-NEXT: return %[[R]] : tensor<4xi64>
func.func @cast(%arg0: tensor<4xf32>) -> tensor<4xi64> {
  %0 = onnx.Cast %arg0 {to = i64} : (tensor<4xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// CHECK-LABEL: func.func @cast_unsigned(%arg0: tensor<4xi32>) -> tensor<4xui8>
// CHECK-NEXT: %[[R:.*]] = onnx.Cast %arg0 {to = ui8} : (tensor<4xi32>) -> tensor<4xui8>
// CHECK-NEXT: return %[[R]] : tensor<4xui8>
func.func @cast_unsigned(%arg0: tensor<4xi32>) -> tensor<4xui8> {
  %0 = onnx.Cast %arg0 {to = ui8} : (tensor<4xi32>) -> tensor<4xui8>
  return %0 : tensor<4xui8>
}

// CHECK-LABEL: func.func @matmul(%arg0: tensor<2x1x3x4xf32>, %arg1: tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.MatMul %arg0, %arg1 : (tensor<2x1x3x4xf32>, tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x5x3x6xf32>
func.func @matmul(%arg0: tensor<2x1x3x4xf32>, %arg1: tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32> {
  %0 = onnx.MatMul %arg0, %arg1 : (tensor<2x1x3x4xf32>, tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32>
  return %0 : tensor<2x5x3x6xf32>
}

// CHECK-LABEL: func.func @matmul_vectors(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<f32>
// CHECK-NEXT: %[[R:.*]] = onnx.MatMul %arg0, %arg1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[R]] : tensor<f32>
func.func @matmul_vectors(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<f32> {
  %0 = onnx.MatMul %arg0, %arg1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @gemm(%arg0: tensor<4x2xf32>, %arg1: tensor<3x4xf32>, %arg2: tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Gemm %arg0, %arg1, %arg2 {alpha = 5.000000e-01 : f32, beta = 2.000000e+00 : f32, transA = 1 : i64, transB = 1 : i64} : (tensor<4x2xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf32>
func.func @gemm(%arg0: tensor<4x2xf32>, %arg1: tensor<3x4xf32>, %arg2: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.Gemm %arg0, %arg1, %arg2 {alpha = 5.000000e-01 : f32, beta = 2.000000e+00 : f32, transA = 1 : i64, transB = 1 : i64} : (tensor<4x2xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @gemm_no_c(%arg0: tensor<2x4xf32>, %arg1: tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Gemm %arg0, %arg1 : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf32>
func.func @gemm_no_c(%arg0: tensor<2x4xf32>, %arg1: tensor<4x3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.Gemm %arg0, %arg1 : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @softmax(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Softmax %arg0 {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf32>
func.func @softmax(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.Softmax %arg0 {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @log_softmax(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.LogSoftmax %arg0 {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf32>
func.func @log_softmax(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.LogSoftmax %arg0 {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @layer_norm(%arg0: tensor<2x3x4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> tensor<2x3x4xf32>
// Attributes spelled out with their default value are not printed.
// CHECK-NEXT: %[[R:.*]] = onnx.LayerNormalization %arg0, %arg1, %arg2 {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @layer_norm(%arg0: tensor<2x3x4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.LayerNormalization %arg0, %arg1, %arg2 {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @layer_norm_no_bias(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.LayerNormalization %arg0, %arg1 {axis = 1 : i64, epsilon = 1.000000e-03 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @layer_norm_no_bias(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.LayerNormalization %arg0, %arg1 {axis = 1 : i64, epsilon = 1.000000e-03 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @rms_norm(%arg0: tensor<2x3x4xf32>, %arg1: tensor<4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.RMSNormalization %arg0, %arg1 {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @rms_norm(%arg0: tensor<2x3x4xf32>, %arg1: tensor<4xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.RMSNormalization %arg0, %arg1 {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @sce_loss(%arg0: tensor<2x5x3xf32>, %arg1: tensor<2x3xi64>, %arg2: tensor<5xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.SoftmaxCrossEntropyLoss %arg0, %arg1, %arg2 {ignore_index = -100 : i64, reduction = "none"} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf32>
func.func @sce_loss(%arg0: tensor<2x5x3xf32>, %arg1: tensor<2x3xi64>, %arg2: tensor<5xf32>) -> tensor<2x3xf32> {
  %0 = onnx.SoftmaxCrossEntropyLoss %arg0, %arg1, %arg2 {ignore_index = -100 : i64, reduction = "none"} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @sce_loss_mean(%arg0: tensor<2x5xf32>, %arg1: tensor<2xi32>) -> tensor<f32>
// CHECK-NEXT: %[[R:.*]] = onnx.SoftmaxCrossEntropyLoss %arg0, %arg1 : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[R]] : tensor<f32>
func.func @sce_loss_mean(%arg0: tensor<2x5xf32>, %arg1: tensor<2xi32>) -> tensor<f32> {
  %0 = onnx.SoftmaxCrossEntropyLoss %arg0, %arg1 : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @reducemean(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceMean %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x1xf32>
func.func @reducemean(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> {
  %0 = onnx.ReduceMean %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return %0 : tensor<1x3x1xf32>
}

// CHECK-LABEL: func.func @reducesum(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceSum %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x1xf32>
func.func @reducesum(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> {
  %0 = onnx.ReduceSum %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return %0 : tensor<1x3x1xf32>
}

// CHECK-LABEL: func.func @reducemax(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceMax %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x1xf32>
func.func @reducemax(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> {
  %0 = onnx.ReduceMax %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return %0 : tensor<1x3x1xf32>
}

// CHECK-LABEL: func.func @reducemin(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceMin %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x1xf32>
func.func @reducemin(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> {
  %0 = onnx.ReduceMin %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return %0 : tensor<1x3x1xf32>
}

// CHECK-LABEL: func.func @reduceprod(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceProd %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x1xf32>
func.func @reduceprod(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> {
  %0 = onnx.ReduceProd %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return %0 : tensor<1x3x1xf32>
}

// CHECK-LABEL: func.func @reducel2(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceL2 %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x1xf32>
func.func @reducel2(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> {
  %0 = onnx.ReduceL2 %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return %0 : tensor<1x3x1xf32>
}

// CHECK-LABEL: func.func @reducesumsquare(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceSumSquare %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x1xf32>
func.func @reducesumsquare(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> {
  %0 = onnx.ReduceSumSquare %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return %0 : tensor<1x3x1xf32>
}

// CHECK-LABEL: func.func @reducelogsumexp(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceLogSumExp %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x1xf32>
func.func @reducelogsumexp(%arg0: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> {
  %0 = onnx.ReduceLogSumExp %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return %0 : tensor<1x3x1xf32>
}

// CHECK-LABEL: func.func @reduce_mean_nokeep(%arg0: tensor<2x3x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceMean %arg0 {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x4xf32>
func.func @reduce_mean_nokeep(%arg0: tensor<2x3x4xf32>) -> tensor<2x4xf32> {
  %0 = onnx.ReduceMean %arg0 {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @reduce_sum_scalar(%arg0: tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[R:.*]] = onnx.ReduceSum %arg0 {axes = array<i64>} : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT: return %[[R]] : tensor<f32>
func.func @reduce_sum_scalar(%arg0: tensor<f32>) -> tensor<f32> {
  %0 = onnx.ReduceSum %arg0 {axes = array<i64>} : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @argmax(%arg0: tensor<2x3xf32>) -> tensor<2xi64>
// CHECK-NEXT: %[[R:.*]] = onnx.ArgMax %arg0 {axis = 1 : i64, keepdims = 0 : i64, select_last_index = 1 : i64} : (tensor<2x3xf32>) -> tensor<2xi64>
// CHECK-NEXT: return %[[R]] : tensor<2xi64>
func.func @argmax(%arg0: tensor<2x3xf32>) -> tensor<2xi64> {
  %0 = onnx.ArgMax %arg0 {axis = 1 : i64, keepdims = 0 : i64, select_last_index = 1 : i64} : (tensor<2x3xf32>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @argmin(%arg0: tensor<2x3xf32>) -> tensor<1x3xi64>
// CHECK-NEXT: %[[R:.*]] = onnx.ArgMin %arg0 {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<1x3xi64>
// CHECK-NEXT: return %[[R]] : tensor<1x3xi64>
func.func @argmin(%arg0: tensor<2x3xf32>) -> tensor<1x3xi64> {
  %0 = onnx.ArgMin %arg0 {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<1x3xi64>
  return %0 : tensor<1x3xi64>
}

// CHECK-LABEL: func.func @cumsum(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.CumSum %arg0 {axis = 1 : i64, exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf32>
func.func @cumsum(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.CumSum %arg0 {axis = 1 : i64, exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @reshape(%arg0: tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Reshape %arg0 {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<6x4xf32>
func.func @reshape(%arg0: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %0 = onnx.Reshape %arg0 {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// CHECK-LABEL: func.func @reshape_scalar(%arg0: tensor<1x1xi64>) -> tensor<i64>
// CHECK-NEXT: %[[R:.*]] = onnx.Reshape %arg0 {shape = array<i64>} : (tensor<1x1xi64>) -> tensor<i64>
// CHECK-NEXT: return %[[R]] : tensor<i64>
func.func @reshape_scalar(%arg0: tensor<1x1xi64>) -> tensor<i64> {
  %0 = onnx.Reshape %arg0 {shape = array<i64>} : (tensor<1x1xi64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// CHECK-LABEL: func.func @flatten(%arg0: tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Flatten %arg0 {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<6x4xf32>
func.func @flatten(%arg0: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %0 = onnx.Flatten %arg0 {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// CHECK-LABEL: func.func @flatten_default(%arg0: tensor<2x3x4xf32>) -> tensor<2x12xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Flatten %arg0 : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x12xf32>
func.func @flatten_default(%arg0: tensor<2x3x4xf32>) -> tensor<2x12xf32> {
  %0 = onnx.Flatten %arg0 : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
  return %0 : tensor<2x12xf32>
}

// CHECK-LABEL: func.func @unsqueeze(%arg0: tensor<3x4xf32>) -> tensor<1x3x4x1xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Unsqueeze %arg0 {axes = array<i64: 0, 3>} : (tensor<3x4xf32>) -> tensor<1x3x4x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x4x1xf32>
func.func @unsqueeze(%arg0: tensor<3x4xf32>) -> tensor<1x3x4x1xf32> {
  %0 = onnx.Unsqueeze %arg0 {axes = array<i64: 0, 3>} : (tensor<3x4xf32>) -> tensor<1x3x4x1xf32>
  return %0 : tensor<1x3x4x1xf32>
}

// CHECK-LABEL: func.func @squeeze(%arg0: tensor<1x3x1x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Squeeze %arg0 {axes = array<i64: 0, 2>} : (tensor<1x3x1x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<3x4xf32>
func.func @squeeze(%arg0: tensor<1x3x1x4xf32>) -> tensor<3x4xf32> {
  %0 = onnx.Squeeze %arg0 {axes = array<i64: 0, 2>} : (tensor<1x3x1x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @transpose(%arg0: tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Transpose %arg0 {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK-NEXT: return %[[R]] : tensor<3x4x2xf32>
func.func @transpose(%arg0: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %0 = onnx.Transpose %arg0 {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  return %0 : tensor<3x4x2xf32>
}

// CHECK-LABEL: func.func @concat(%arg0: tensor<2x3xf32>, %arg1: tensor<2x5xf32>, %arg2: tensor<2x1xf32>) -> tensor<2x9xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Concat %arg0, %arg1, %arg2 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x9xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x9xf32>
func.func @concat(%arg0: tensor<2x3xf32>, %arg1: tensor<2x5xf32>, %arg2: tensor<2x1xf32>) -> tensor<2x9xf32> {
  %0 = onnx.Concat %arg0, %arg1, %arg2 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x9xf32>
  return %0 : tensor<2x9xf32>
}

// CHECK-LABEL: func.func @slice(%arg0: tensor<5x6x7xf32>) -> tensor<3x6x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Slice %arg0 {ends = array<i64: 1, 6, -1>, starts = array<i64: 4, 0, 6>, steps = array<i64: -1, 1, -2>} : (tensor<5x6x7xf32>) -> tensor<3x6x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<3x6x4xf32>
func.func @slice(%arg0: tensor<5x6x7xf32>) -> tensor<3x6x4xf32> {
  %0 = onnx.Slice %arg0 {ends = array<i64: 1, 6, -1>, starts = array<i64: 4, 0, 6>, steps = array<i64: -1, 1, -2>} : (tensor<5x6x7xf32>) -> tensor<3x6x4xf32>
  return %0 : tensor<3x6x4xf32>
}

// CHECK-LABEL: func.func @gather(%arg0: tensor<5x4x3xf32>, %arg1: tensor<2x6xi64>) -> tensor<5x4x2x6xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Gather %arg0, %arg1 {axis = 2 : i64} : (tensor<5x4x3xf32>, tensor<2x6xi64>) -> tensor<5x4x2x6xf32>
// CHECK-NEXT: return %[[R]] : tensor<5x4x2x6xf32>
func.func @gather(%arg0: tensor<5x4x3xf32>, %arg1: tensor<2x6xi64>) -> tensor<5x4x2x6xf32> {
  %0 = onnx.Gather %arg0, %arg1 {axis = 2 : i64} : (tensor<5x4x3xf32>, tensor<2x6xi64>) -> tensor<5x4x2x6xf32>
  return %0 : tensor<5x4x2x6xf32>
}

// CHECK-LABEL: func.func @gather_elements(%arg0: tensor<3x4xf32>, %arg1: tensor<3x2xi64>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.GatherElements %arg0, %arg1 {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
// CHECK-NEXT: return %[[R]] : tensor<3x2xf32>
func.func @gather_elements(%arg0: tensor<3x4xf32>, %arg1: tensor<3x2xi64>) -> tensor<3x2xf32> {
  %0 = onnx.GatherElements %arg0, %arg1 {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// CHECK-LABEL: func.func @gather_nd(%arg0: tensor<2x3x4xf32>, %arg1: tensor<2x5x2xi64>) -> tensor<2x5xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.GatherND %arg0, %arg1 {batch_dims = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x2xi64>) -> tensor<2x5xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x5xf32>
func.func @gather_nd(%arg0: tensor<2x3x4xf32>, %arg1: tensor<2x5x2xi64>) -> tensor<2x5xf32> {
  %0 = onnx.GatherND %arg0, %arg1 {batch_dims = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x2xi64>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// CHECK-LABEL: func.func @scatter_elements(%arg0: tensor<3x4xf32>, %arg1: tensor<2x4xi64>, %arg2: tensor<2x4xf32>) -> tensor<3x4xf32>
// Attributes spelled out with their default value are not printed.
// CHECK-NEXT: %[[R:.*]] = onnx.ScatterElements %arg0, %arg1, %arg2 {reduction = "add"} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<3x4xf32>
func.func @scatter_elements(%arg0: tensor<3x4xf32>, %arg1: tensor<2x4xi64>, %arg2: tensor<2x4xf32>) -> tensor<3x4xf32> {
  %0 = onnx.ScatterElements %arg0, %arg1, %arg2 {axis = 0 : i64, reduction = "add"} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @scatter_nd(%arg0: tensor<4x5x6xf32>, %arg1: tensor<2x1xi64>, %arg2: tensor<2x5x6xf32>) -> tensor<4x5x6xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.ScatterND %arg0, %arg1, %arg2 {reduction = "mul"} : (tensor<4x5x6xf32>, tensor<2x1xi64>, tensor<2x5x6xf32>) -> tensor<4x5x6xf32>
// CHECK-NEXT: return %[[R]] : tensor<4x5x6xf32>
func.func @scatter_nd(%arg0: tensor<4x5x6xf32>, %arg1: tensor<2x1xi64>, %arg2: tensor<2x5x6xf32>) -> tensor<4x5x6xf32> {
  %0 = onnx.ScatterND %arg0, %arg1, %arg2 {reduction = "mul"} : (tensor<4x5x6xf32>, tensor<2x1xi64>, tensor<2x5x6xf32>) -> tensor<4x5x6xf32>
  return %0 : tensor<4x5x6xf32>
}

// CHECK-LABEL: func.func @expand(%arg0: tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Expand %arg0 {shape = array<i64: 2, 1, 4>} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @expand(%arg0: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.Expand %arg0 {shape = array<i64: 2, 1, 4>} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @tile(%arg0: tensor<2x3xf32>) -> tensor<4x9xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Tile %arg0 {repeats = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<4x9xf32>
// CHECK-NEXT: return %[[R]] : tensor<4x9xf32>
func.func @tile(%arg0: tensor<2x3xf32>) -> tensor<4x9xf32> {
  %0 = onnx.Tile %arg0 {repeats = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<4x9xf32>
  return %0 : tensor<4x9xf32>
}

// CHECK-LABEL: func.func @pad(%arg0: tensor<2x3xf32>) -> tensor<1x5xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Pad %arg0 {mode = "edge", pads = array<i64: -1, 1, 0, 1>, value = 1.500000e+00 : f64} : (tensor<2x3xf32>) -> tensor<1x5xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x5xf32>
func.func @pad(%arg0: tensor<2x3xf32>) -> tensor<1x5xf32> {
  %0 = onnx.Pad %arg0 {mode = "edge", pads = array<i64: -1, 1, 0, 1>, value = 1.500000e+00 : f64} : (tensor<2x3xf32>) -> tensor<1x5xf32>
  return %0 : tensor<1x5xf32>
}

// CHECK-LABEL: func.func @trilu(%arg0: tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Trilu %arg0 {k = -1 : i64, upper = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3x4xf32>
func.func @trilu(%arg0: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.Trilu %arg0 {k = -1 : i64, upper = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @range(%arg0: tensor<f32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = onnx.Range %arg0, %arg1, %arg2 {size = 4 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func @range(%arg0: tensor<f32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<4xf32> {
  %0 = onnx.Range %arg0, %arg1, %arg2 {size = 4 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @split(%arg0: tensor<6x4xf32>) -> (tensor<6x1xf32>, tensor<6x0xf32>, tensor<6x3xf32>)
// CHECK-NEXT: %[[R:.*]]:3 = onnx.Split %arg0 {axis = 1 : i64, split = array<i64: 1, 0, 3>} : (tensor<6x4xf32>) -> (tensor<6x1xf32>, tensor<6x0xf32>, tensor<6x3xf32>)
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1, %[[R]]#2 : tensor<6x1xf32>, tensor<6x0xf32>, tensor<6x3xf32>
func.func @split(%arg0: tensor<6x4xf32>) -> (tensor<6x1xf32>, tensor<6x0xf32>, tensor<6x3xf32>) {
  %0:3 = onnx.Split %arg0 {axis = 1 : i64, split = array<i64: 1, 0, 3>} : (tensor<6x4xf32>) -> (tensor<6x1xf32>, tensor<6x0xf32>, tensor<6x3xf32>)
  return %0#0, %0#1, %0#2 : tensor<6x1xf32>, tensor<6x0xf32>, tensor<6x3xf32>
}
