// RUN: zero-opt %s --split-input-file --verify-diagnostics --zero-verify=phase=lowered

// Tests that an op the lowering left behind inside a zrt.program is refused.
zrt.program @p world_size = 1 {
  // expected-error@+1 {{'onnx.Constant' op is left inside a zrt.program; the lowering leaves zrt ops only (zero-verify phase=lowered)}}
  %0 = "onnx.Constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
}

// -----

// Tests that a block the memory plan left (no zero-finalize-program) is
// refused.
zrt.program @q world_size = 1 {
  zrt.arena @activations size = 64 no_reuse = 64 lower_bound = 64
  // expected-error@+1 {{'zrt.block' op is left in a zrt.program; the lowering places every buffer in its arena (zero-finalize-program; zero-verify phase=lowered)}}
  zrt.block @blk0 in @activations bytes = 16 {offset = 0 : i64}
  zrt.buffer @b0 : tensor<4xf32> at @blk0[0]
}
