// RUN: zero-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(zrt.program(zero-finalize-program))'

// Tests that a block the memory plan has not placed is an error.
zrt.program @unplanned world_size = 1 {
  zrt.arena @activations size = 0 no_reuse = 0 lower_bound = 0
  // expected-error @+1 {{'zrt.block' op zero-finalize-program: a block without an offset (run zero-plan-memory first)}}
  zrt.block @blk0 in @activations bytes = 16
  zrt.buffer @b0 : tensor<4xf32> at @blk0[0]
}

// -----

// Tests that a release mark left over is an error.
zrt.program @marked world_size = 1 {
  zrt.arena @activations size = 64 no_reuse = 64 lower_bound = 64
  zrt.block @blk0 in @activations bytes = 16 gathered {offset = 0 : i64}
  // expected-error @+1 {{'zrt.release' op zero-finalize-program: a release left (run zero-plan-memory first)}}
  zrt.release @blk0
}
