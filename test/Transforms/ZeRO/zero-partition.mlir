// RUN: zero-opt %s --split-input-file --zero-partition="dp=4 persistence-threshold=5" | FileCheck %s

// Tests that parameters above the persistence threshold become flat shards
// padded to a multiple of dp (15 -> 16 elements, 4 per rank; 10 -> 12, 3 per
// rank), that a parameter at the threshold (5 elements) stays whole, and that
// each load becomes shard load + all_gather + unpad slice + reshape.

// CHECK: module attributes {zero.stage = 3 : i64, zero.world_size = 4 : i64}
// CHECK: ml_program.global private @w1({{.*}}) : tensor<4xf32> {zero.full_type = tensor<3x5xf32>, zero.shard = #zero.shard<world = 4, numel = 15, padded_numel = 16>, zero.tensor = "w1"}
// CHECK: ml_program.global private @b1({{.*}}) : tensor<5xf32> {zero.tensor = "b1"}
// CHECK: ml_program.global private @w2({{.*}}) : tensor<3xf32> {zero.full_type = tensor<5x2xf32>, zero.shard = #zero.shard<world = 4, numel = 10, padded_numel = 12>, zero.tensor = "w2"}
// CHECK-LABEL: func.func @forward
// CHECK: %[[S1:.+]] = ml_program.global_load @w1 : tensor<4xf32>
// CHECK-NEXT: %[[G1:.+]] = zero.all_gather %[[S1]] {world = 4 : i64} : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[U1:.+]] = onnx.Slice %[[G1]] {ends = array<i64: 15>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<16xf32>) -> tensor<15xf32>
// CHECK-NEXT: %[[W1:.+]] = onnx.Reshape %[[U1]] {shape = array<i64: 3, 5>} : (tensor<15xf32>) -> tensor<3x5xf32>
// CHECK-NEXT: onnx.MatMul %{{.+}}, %[[W1]]
// CHECK: %[[B1:.+]] = ml_program.global_load @b1 : tensor<5xf32>
// CHECK-NEXT: onnx.Add %{{.+}}, %[[B1]]
// CHECK: zero.all_gather %{{.+}} {world = 4 : i64} : tensor<3xf32> -> tensor<12xf32>
// CHECK-NOT: zero.all_gather
module {
  ml_program.global private @w1(#ml_program.extern : tensor<3x5xf32>) : tensor<3x5xf32> {zero.tensor = "w1"}
  ml_program.global private @b1(#ml_program.extern : tensor<5xf32>) : tensor<5xf32> {zero.tensor = "b1"}
  ml_program.global private @w2(#ml_program.extern : tensor<5x2xf32>) : tensor<5x2xf32> {zero.tensor = "w2"}
  func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
    %w1 = ml_program.global_load @w1 : tensor<3x5xf32>
    %h = onnx.MatMul %x, %w1 : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %b1 = ml_program.global_load @b1 : tensor<5xf32>
    %hb = onnx.Add %h, %b1 : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
    %r = onnx.Relu %hb : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %w2 = ml_program.global_load @w2 : tensor<5x2xf32>
    %y = onnx.MatMul %r, %w2 : (tensor<4x5xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// Tests that a size that divides evenly needs no unpad slice and that a 1-D
// parameter needs no reshape.
// CHECK-LABEL: func.func @even
// CHECK: %[[S:.+]] = ml_program.global_load @v : tensor<2xf32>
// CHECK-NEXT: %[[G:.+]] = zero.all_gather %[[S]] {world = 4 : i64} : tensor<2xf32> -> tensor<8xf32>
// CHECK-NEXT: onnx.Relu %[[G]]
module {
  ml_program.global private @v(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.tensor = "v"}
  func.func @even() -> tensor<8xf32> {
    %v = ml_program.global_load @v : tensor<8xf32>
    %r = onnx.Relu %v : (tensor<8xf32>) -> tensor<8xf32>
    return %r : tensor<8xf32>
  }
}

// -----

// Tests that max-reuse-distance gives a far use its own gather: @e is used at
// the start and at the end with 16 gathered elements of @m in between; with a
// distance of 8 the later use gets its own gather (the first copy can then be
// released in between); with the default (-1) one gather serves both uses.
// RUN: zero-opt %s --split-input-file --zero-partition="dp=2 max-reuse-distance=8" | FileCheck %s --check-prefix=REUSE
// REUSE-LABEL: func.func @tied
// REUSE: %[[S1:.+]] = ml_program.global_load @e : tensor<4xf32>
// REUSE-NEXT: %[[G1:.+]] = zero.all_gather %[[S1]]
// REUSE-NEXT: %[[E1:.+]] = onnx.Reshape %[[G1]]
// REUSE-NEXT: onnx.Relu %[[E1]]
// REUSE: zero.all_gather {{.*}} -> tensor<16xf32>
// REUSE: %[[S2:.+]] = ml_program.global_load @e : tensor<4xf32>
// REUSE-NEXT: %[[G2:.+]] = zero.all_gather %[[S2]]
// REUSE-NEXT: %[[E2:.+]] = onnx.Reshape %[[G2]]
// REUSE-NEXT: onnx.Add %{{.+}}, %[[E2]]
// CHECK-LABEL: func.func @tied
// CHECK-COUNT-2: zero.all_gather
// CHECK-NOT: zero.all_gather
module {
  ml_program.global private @e(#ml_program.extern : tensor<2x4xf32>) : tensor<2x4xf32> {zero.tensor = "e"}
  ml_program.global private @m(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {zero.tensor = "m"}
  func.func @tied(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %e = ml_program.global_load @e : tensor<2x4xf32>
    %a = onnx.Relu %e : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = onnx.Add %x, %a : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %m = ml_program.global_load @m : tensor<4x4xf32>
    %c = onnx.MatMul %b, %m : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %d = onnx.Add %c, %e : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %d : tensor<2x4xf32>
  }
}
