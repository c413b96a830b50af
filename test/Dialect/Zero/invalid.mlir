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

// -----

func.func @quantize_sizes(%x: tensor<10xf32>) {
  // 10 elements in 2 chunks of 5, int4: 3 bytes and 2 scales (block 4) per chunk.
  // expected-error @+1 {{'zero.quantize' op expects 6 bytes of data and 4 scales for 10 elements (4 bits, block 4, 2 chunks), got 5 and 4}}
  %q, %s = zero.quantize %x {bits = 4 : i64, block = 4 : i64, chunks = 2 : i64} : tensor<10xf32> -> tensor<5xi8>, tensor<4xf32>
  return
}

// -----

func.func @quantize_bits(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zero.quantize' op bits must be 8 or 4, got 2}}
  %q, %s = zero.quantize %x {bits = 2 : i64, block = 4 : i64, chunks = 1 : i64} : tensor<4xf32> -> tensor<1xi8>, tensor<1xf32>
  return
}

// -----

func.func @dequantize_chunks(%q: tensor<9xi8>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'zero.dequantize' op 9 elements do not split into 2 chunks}}
  %x = zero.dequantize %q, %s {bits = 8 : i64, block = 8 : i64, chunks = 2 : i64} : tensor<9xi8>, tensor<2xf32> -> tensor<9xf32>
  return
}

// -----

func.func @dequantize_types(%q: tensor<4xf32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'zero.dequantize' op works on f32 values, i8 data and f32 scales}}
  %x = zero.dequantize %q, %s {bits = 8 : i64, block = 8 : i64, chunks = 1 : i64} : tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{'zero.process_group' op group_size 3 must be >= 1 and divide the 4 ranks listed}}
zero.process_group @bad {ranks = array<i64: 0, 1, 2, 3>, group_size = 3 : i64}

// -----

// expected-error @+1 {{'zero.process_group' op lists rank 1 twice}}
zero.process_group @twice {ranks = array<i64: 0, 1, 1, 3>, group_size = 2 : i64}

// -----

zero.process_group @pairs {ranks = array<i64: 0, 1, 2, 3>, group_size = 2 : i64}
func.func @group_world(%s: tensor<2xf32>) {
  // expected-error @+1 {{'zero.all_gather' op has world 4 but @pairs has groups of 2}}
  %g = zero.all_gather %s {world = 4 : i64, group = @pairs} : tensor<2xf32> -> tensor<8xf32>
  return
}

// -----

func.func @group_missing(%s: tensor<8xf32>) {
  // expected-error @+1 {{'zero.all_to_all' op names @nowhere, which is not a zero.process_group}}
  %g = zero.all_to_all %s {world = 2 : i64, group = @nowhere} : tensor<8xf32> -> tensor<8xf32>
  return
}
