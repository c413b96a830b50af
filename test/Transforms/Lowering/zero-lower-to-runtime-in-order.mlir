// RUN: zero-opt %s --split-input-file --zero-lower-to-runtime=fuse-elementwise=false | FileCheck %s
// The in-order plan (lib/Transforms/Lowering/MemoryPlan.cpp, planInOrder):
// the offsets a program's
// activations take when the runtime's streams take turns, where a
// communication step runs only once compute waits for it or a later step.

// Tests that gathers moved to the start get a second, in-order plan in which
// each gathered block lives only from the compute that waits for it.
// Three gathers moved to the start (as zero-prefetch does). The main plan
// keeps all three gathered blocks live from the start: x, g1, g2, g3 and a
// live at the first Add, 5 x 64 = 320 bytes. Taking turns, gather k runs
// when compute waits for it, before Add k (instructions 3, 4, 5), so the
// intervals are x [-1,3], g1 [3,3], g2 [4,4], g3 [5,5], a [3,4], b [4,5],
// c [5,6], placed first-fit in that order: x 0, g1 64, g2 0 (x is dead), g3
// 0, a 128, b 64 (g1 is dead), c 128 (a is dead): 192 bytes.
// CHECK-LABEL: zrt.program @prefetched world_size = 2
// CHECK: zrt.arena @activations size = 320 no_reuse = 448 lower_bound = 320 in_order = 192
// CHECK: zrt.buffer @[[X:.*]] : tensor<16xf32> at @activations[0] in_order[0]
// CHECK-NEXT: zrt.input "input0" -> @[[X]]
// CHECK: zrt.buffer @[[G1:.*]] : tensor<16xf32> at @activations[64] in_order[64]
// CHECK-NEXT: zrt.collective "AllGather" on @comm group @world [@{{.*}}] -> [@[[G1]]]
// CHECK: zrt.buffer @[[G2:.*]] : tensor<16xf32> at @activations[128] in_order[0]
// CHECK-NEXT: zrt.collective "AllGather" on @comm group @world [@{{.*}}] -> [@[[G2]]]
// CHECK: zrt.buffer @[[G3:.*]] : tensor<16xf32> at @activations[192] in_order[0]
// CHECK-NEXT: zrt.collective "AllGather" on @comm group @world [@{{.*}}] -> [@[[G3]]]
// CHECK: zrt.wait 0 on @compute
// CHECK-NEXT: zrt.buffer @[[A:.*]] : tensor<16xf32> at @activations[256] in_order[128]
// CHECK-NEXT: zrt.kernel "Add" on @compute [@[[X]], @[[G1]]] -> [@[[A]]]
// CHECK-NEXT: zrt.wait 1 on @compute
// CHECK-NEXT: zrt.buffer @[[B:.*]] : tensor<16xf32> at @activations[0] in_order[64]
// CHECK-NEXT: zrt.kernel "Add" on @compute [@[[A]], @[[G2]]] -> [@[[B]]]
// CHECK-NEXT: zrt.wait 2 on @compute
// CHECK-NEXT: zrt.buffer @[[C:.*]] : tensor<16xf32> at @activations[64] in_order[128]
// CHECK-NEXT: zrt.kernel "Add" on @compute [@[[B]], @[[G3]]] -> [@[[C]]]
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w1(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w1"}
  ml_program.global private @w2(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w2"}
  ml_program.global private @w3(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w3"}
  func.func @prefetched(%x: tensor<16xf32>) -> tensor<16xf32> {
    %s1 = ml_program.global_load @w1 : tensor<8xf32>
    %g1 = zero.all_gather %s1 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %s2 = ml_program.global_load @w2 : tensor<8xf32>
    %g2 = zero.all_gather %s2 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %s3 = ml_program.global_load @w3 : tensor<8xf32>
    %g3 = zero.all_gather %s3 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %a = onnx.Add %x, %g1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    zero.release %g1 : tensor<16xf32>
    %b = onnx.Add %a, %g2 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    zero.release %g2 : tensor<16xf32>
    %c = onnx.Add %b, %g3 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    zero.release %g3 : tensor<16xf32>
    return %c : tensor<16xf32>
  }
}

// -----

// Tests that a program whose gathers sit where compute first needs them keeps
// one plan (no in_order): taking turns changes no interval that matters.
// CHECK-LABEL: zrt.program @inorder world_size = 2
// CHECK: zrt.arena @activations size = 192 no_reuse = 448 lower_bound = 192{{$}}
// CHECK-NOT: in_order
// CHECK: zrt.output
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w1(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w1"}
  ml_program.global private @w2(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w2"}
  ml_program.global private @w3(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w3"}
  func.func @inorder(%x: tensor<16xf32>) -> tensor<16xf32> {
    %s1 = ml_program.global_load @w1 : tensor<8xf32>
    %g1 = zero.all_gather %s1 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %a = onnx.Add %x, %g1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    zero.release %g1 : tensor<16xf32>
    %s2 = ml_program.global_load @w2 : tensor<8xf32>
    %g2 = zero.all_gather %s2 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %b = onnx.Add %a, %g2 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    zero.release %g2 : tensor<16xf32>
    %s3 = ml_program.global_load @w3 : tensor<8xf32>
    %g3 = zero.all_gather %s3 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %c = onnx.Add %b, %g3 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    zero.release %g3 : tensor<16xf32>
    return %c : tensor<16xf32>
  }
}
