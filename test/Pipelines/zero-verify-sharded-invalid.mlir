// RUN: zero-opt %s --split-input-file --verify-diagnostics --zero-verify=phase=sharded

// Tests that a shard too small for its parameter is refused: 6 elements over
// 2 ranks are shards of 3.
module attributes {zero.world_size = 2 : i64} {
  // expected-error@+1 {{'ml_program.global' op is sharded (zero.shard) but its type is not a flat shard of 3 elements (zero-verify phase=sharded)}}
  ml_program.global private mutable @w(dense<0.0> : tensor<2xf32>) : tensor<2xf32> {zero.full_type = tensor<3x2xf32>, zero.shard = {numel = 6 : i64, padded_numel = 6 : i64, world = 2 : i64}, zero.tensor = "w"}
}

// -----

// Tests that the padding follows DeepSpeed's rule: 5 elements over 2 ranks pad
// to 6, not 8.
module attributes {zero.world_size = 2 : i64} {
  // expected-error@+1 {{padded_numel 8 is not numel 5 rounded up to a multiple of the world 2}}
  ml_program.global private mutable @w(dense<0.0> : tensor<4xf32>) : tensor<4xf32> {zero.full_type = tensor<5xf32>, zero.shard = {numel = 5 : i64, padded_numel = 8 : i64, world = 2 : i64}, zero.tensor = "w"}
}

// -----

// Tests that the full type holds the shard's numel elements.
module attributes {zero.world_size = 2 : i64} {
  // expected-error@+1 {{its zero.full_type does not hold numel 6 elements}}
  ml_program.global private mutable @w(dense<0.0> : tensor<3xf32>) : tensor<3xf32> {zero.full_type = tensor<7xf32>, zero.shard = {numel = 6 : i64, padded_numel = 6 : i64, world = 2 : i64}, zero.tensor = "w"}
}

// -----

// Tests that a shard without its world is refused.
module {
  // expected-error@+1 {{its shard does not give world >= 1, numel and padded_numel}}
  ml_program.global private mutable @w(dense<0.0> : tensor<3xf32>) : tensor<3xf32> {zero.full_type = tensor<6xf32>, zero.shard = {numel = 6 : i64}, zero.tensor = "w"}
}
