// RUN: zero-opt %s --split-input-file --verify-diagnostics --zero-verify=phase=sharded

// Tests that a shard too small for its parameter is refused: 6 elements over
// 2 ranks are shards of 3.
module attributes {zero.world_size = 2 : i64} {
  // expected-error@+1 {{'ml_program.global' op is sharded (zero.shard) but its type is not a flat shard of 3 elements (zero-verify phase=sharded)}}
  ml_program.global private mutable @w(dense<0.0> : tensor<2xf32>) : tensor<2xf32> {zero.full_type = tensor<3x2xf32>, zero.shard = #zero.shard<world = 2, numel = 6, padded_numel = 6>, zero.tensor = "w"}
}

// -----

// Tests that the full type holds the shard's numel elements.
module attributes {zero.world_size = 2 : i64} {
  // expected-error@+1 {{its zero.full_type does not hold numel 6 elements}}
  ml_program.global private mutable @w(dense<0.0> : tensor<3xf32>) : tensor<3xf32> {zero.full_type = tensor<7xf32>, zero.shard = #zero.shard<world = 2, numel = 6, padded_numel = 6>, zero.tensor = "w"}
}
