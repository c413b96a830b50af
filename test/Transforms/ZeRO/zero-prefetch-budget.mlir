// RUN: zero-opt %s --zero-prefetch="depth=2 bytes=150" | FileCheck %s --check-prefix=TIGHT
// RUN: zero-opt %s --zero-prefetch="depth=2 bytes=260" | FileCheck %s --check-prefix=ROOMY
// RUN: zero-opt %s --zero-prefetch="depth=2 bytes=150" --zero-release --zero-report 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT

// Tests that the prefetch budget holds over the whole range a gather would
// cross, not only where it lands. Gathered bytes: a 8, b 144, c 104. With 150
// bytes, b cannot join a at the start (152) nor land on a's use (a is still
// live there), so it stays; c could land on a's use (8 + 104 = 112 there) but
// would then be live across b's gather and use (144 + 104 = 248): it stays
// too, and the program keeps its unprefetched peak of 144. With 260 bytes
// both move: b to the start (152), c to a's use (at most 8 + 144 + 104 = 256).
// TIGHT-LABEL: func.func @forward
// TIGHT-NEXT: ml_program.global_load @a
// TIGHT-NEXT: zero.all_gather
// TIGHT-NEXT: onnx.Add
// TIGHT-NEXT: ml_program.global_load @b
// TIGHT-NEXT: zero.all_gather
// TIGHT-NEXT: onnx.Add
// TIGHT-NEXT: ml_program.global_load @c
// TIGHT-NEXT: zero.all_gather
// TIGHT-NEXT: onnx.Add

// ROOMY-LABEL: func.func @forward
// ROOMY-NEXT: ml_program.global_load @a
// ROOMY-NEXT: zero.all_gather
// ROOMY-NEXT: ml_program.global_load @b
// ROOMY-NEXT: zero.all_gather
// ROOMY-NEXT: ml_program.global_load @c
// ROOMY-NEXT: zero.all_gather
// ROOMY-NEXT: onnx.Add
// ROOMY-NEXT: onnx.Add
// ROOMY-NEXT: onnx.Add

// REPORT: peak gathered parameters (bytes) 144{{$}}
module attributes {zero.world_size = 2 : i64, zero.stage = 3 : i64} {
  ml_program.global private @a(#ml_program.extern : tensor<1xf32>) : tensor<1xf32> {zero.full_type = tensor<2xf32>, zero.shard = #zero.shard<world = 2, numel = 2, padded_numel = 2>, zero.tensor = "a"}
  ml_program.global private @b(#ml_program.extern : tensor<18xf32>) : tensor<18xf32> {zero.full_type = tensor<36xf32>, zero.shard = #zero.shard<world = 2, numel = 36, padded_numel = 36>, zero.tensor = "b"}
  ml_program.global private @c(#ml_program.extern : tensor<13xf32>) : tensor<13xf32> {zero.full_type = tensor<26xf32>, zero.shard = #zero.shard<world = 2, numel = 26, padded_numel = 26>, zero.tensor = "c"}
  func.func @forward(%x: tensor<2xf32>, %y: tensor<36xf32>, %z: tensor<26xf32>) -> (tensor<2xf32>, tensor<36xf32>, tensor<26xf32>) {
    %sa = ml_program.global_load @a : tensor<1xf32>
    %ga = zero.all_gather %sa {world = 2 : i64} : tensor<1xf32> -> tensor<2xf32>
    %ua = onnx.Add %x, %ga : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %sb = ml_program.global_load @b : tensor<18xf32>
    %gb = zero.all_gather %sb {world = 2 : i64} : tensor<18xf32> -> tensor<36xf32>
    %ub = onnx.Add %y, %gb : (tensor<36xf32>, tensor<36xf32>) -> tensor<36xf32>
    %sc = ml_program.global_load @c : tensor<13xf32>
    %gc = zero.all_gather %sc {world = 2 : i64} : tensor<13xf32> -> tensor<26xf32>
    %uc = onnx.Add %z, %gc : (tensor<26xf32>, tensor<26xf32>) -> tensor<26xf32>
    return %ua, %ub, %uc : tensor<2xf32>, tensor<36xf32>, tensor<26xf32>
  }
}
