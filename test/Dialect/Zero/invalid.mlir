// RUN: zero-opt %s --split-input-file --verify-diagnostics

func.func @gather_size(%s: tensor<2xf32>) {
  // expected-error @+1 {{'zero.all_gather' op expects 8 result elements for 2 input elements and world 4, got 6}}
  %g = "zero.all_gather"(%s) {world = 4 : i64} : (tensor<2xf32>) -> tensor<6xf32>
  return
}

// -----

func.func @gather_world(%s: tensor<2xf32>) {
  // expected-error @+1 {{'zero.all_gather' op world must be >= 1, got 0}}
  %g = "zero.all_gather"(%s) {world = 0 : i64} : (tensor<2xf32>) -> tensor<0xf32>
  return
}

// -----

func.func @gather_flat(%s: tensor<2x2xf32>) {
  // expected-error @+1 {{'zero.all_gather' op operates on flat (1-D) tensors}}
  %g = "zero.all_gather"(%s) {world = 2 : i64} : (tensor<2x2xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @gather_type(%s: tensor<2xf32>) {
  // expected-error @+1 {{'zero.all_gather' op input and result element types differ}}
  %g = "zero.all_gather"(%s) {world = 2 : i64} : (tensor<2xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @reduce_scatter(%s: tensor<8xf32>) {
  // expected-error @+1 {{'zero.reduce_scatter' op expects 4 result elements for 8 input elements and world 2, got 8}}
  %g = "zero.reduce_scatter"(%s) {world = 2 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @broadcast_root(%s: tensor<8xf32>) {
  // expected-error @+1 {{'zero.broadcast' op root 2 is not a rank of a world of 2}}
  %g = "zero.broadcast"(%s) {world = 2 : i64, root = 2 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @all_reduce_shape(%s: tensor<8xf32>) {
  // expected-error @+1 {{'zero.all_reduce' op result shape must equal the input shape}}
  %g = "zero.all_reduce"(%s) {world = 2 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @bucket_arity(%a: tensor<2xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'zero.bucket_all_gather' op needs one result per shard and at least one shard}}
  %g = "zero.bucket_all_gather"(%a, %b) {world = 2 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  return
}
