// RUN: zero-opt %s --verify-diagnostics --zero-verify=phase=lowered

// Tests that an op the lowering left behind inside a zrt.program is refused.
zrt.program @p world_size = 1 {
  // expected-error@+1 {{'onnx.Constant' op is left inside a zrt.program; the lowering leaves zrt ops only (zero-verify phase=lowered)}}
  %0 = "onnx.Constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
}
