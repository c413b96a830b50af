// RUN: zero-opt %s --split-input-file --pass-pipeline='builtin.module(zrt.program(zero-plan-in-order))' | FileCheck %s

// Tests the in-order plan on its own: a gather (0, on comm) prefetched ahead
// of a Relu (1) and read by a MatMul (2), which waits for it. When the
// streams take turns, the gather runs only once compute waits for it, at 2,
// so its block blk2 lives [2,2] instead of [0,2], and may share the bytes of
// the input blk0 (dead after 1). Placed again by size (all 64 bytes, in
// order): blk0 at 0, blk2 at 0 (no overlap with blk0 now), blk3 [1,2] above
// both at 64, blk4 [2,3] above blk2 and blk3 at 128: 192 bytes, differing
// from the main plan (blk2 at 64, blk3 at 128, blk4 at 0), so each block
// gets its in_order_offset and the arena its in_order size.
// CHECK-LABEL: zrt.program @prefetched
// CHECK:         zrt.arena @activations size = 192 no_reuse = 256 lower_bound = 192 in_order = 192
// CHECK:         zrt.block @blk0 in @activations bytes = 64 {def = -1 : i64, in_order_offset = 0 : i64, last_use = 1 : i64, offset = 0 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk1 in @params bytes = 32 {def = -1 : i64, last_use = 3 : i64, offset = 0 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk2 in @activations bytes = 64 gathered {def = 0 : i64, in_order_offset = 0 : i64, last_use = 2 : i64, offset = 64 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk3 in @activations bytes = 64 {def = 1 : i64, in_order_offset = 64 : i64, last_use = 2 : i64, offset = 128 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk4 in @activations bytes = 64 {def = 2 : i64, in_order_offset = 128 : i64, last_use = 3 : i64, offset = 0 : i64, stages = -1 : i64}
zrt.program @prefetched world_size = 2 {
  zrt.stream @compute "compute"
  zrt.stream @comm "comm"
  zrt.group @world [0, 1]
  zrt.arena @params size = 64 no_reuse = 64 lower_bound = 64
  zrt.arena @constants size = 0 no_reuse = 0 lower_bound = 0
  zrt.arena @activations size = 192 no_reuse = 256 lower_bound = 192
  zrt.block @blk0 in @activations bytes = 64 {def = -1 : i64, last_use = 1 : i64, offset = 0 : i64, stages = -1 : i64}
  zrt.block @blk1 in @params bytes = 32 {def = -1 : i64, last_use = 3 : i64, offset = 0 : i64, stages = -1 : i64}
  zrt.block @blk2 in @activations bytes = 64 gathered {def = 0 : i64, last_use = 2 : i64, offset = 64 : i64, stages = -1 : i64}
  zrt.block @blk3 in @activations bytes = 64 {def = 1 : i64, last_use = 2 : i64, offset = 128 : i64, stages = -1 : i64}
  zrt.block @blk4 in @activations bytes = 64 {def = 2 : i64, last_use = 3 : i64, offset = 0 : i64, stages = -1 : i64}
  zrt.buffer @b0 : tensor<8xf32> at @blk1[0]
  zrt.global "w" tensor "w" : tensor<4x4xf32> into @b0 {padded_numel = 16 : i64, shard_world = 2 : i64}
  zrt.buffer @b1 : tensor<4x4xf32> at @blk0[0]
  zrt.input "x" -> @b1
  zrt.buffer @b2 : tensor<16xf32> at @blk2[0]
  zrt.collective "AllGather" on @comm group @world [@b0] -> [@b2] {}
  zrt.record 0 on @comm
  zrt.buffer @b3 : tensor<4x4xf32> at @blk3[0]
  zrt.kernel "Relu" on @compute [@b1] -> [@b3] {}
  zrt.wait 0 on @compute
  zrt.buffer @b4 : tensor<4x4xf32> at @blk2[0]
  zrt.buffer @b5 : tensor<4x4xf32> at @blk4[0]
  zrt.kernel "MatMul" on @compute [@b3, @b4] -> [@b5] {}
  zrt.output "y" from @b5
}

// -----

// Tests that a program cut into pipeline stages (an instruction with ranks)
// keeps one plan: nothing changes.
// CHECK-LABEL: zrt.program @staged
// CHECK:         zrt.arena @activations size = 64 no_reuse = 64 lower_bound = 64
// CHECK-NOT:     in_order
zrt.program @staged world_size = 2 {
  zrt.stream @compute "compute"
  zrt.stream @comm "comm"
  zrt.group @world [0, 1]
  zrt.arena @params size = 0 no_reuse = 0 lower_bound = 0
  zrt.arena @constants size = 0 no_reuse = 0 lower_bound = 0
  zrt.arena @activations size = 64 no_reuse = 64 lower_bound = 64
  zrt.block @blk0 in @activations bytes = 16 {def = -1 : i64, last_use = 1 : i64, offset = 0 : i64, stages = -1 : i64}
  zrt.buffer @b0 : tensor<4xf32> at @blk0[0]
  zrt.input "x" -> @b0
  zrt.collective "Send" on @comm group @world [@b0] -> [] {peer = 1 : i64, tag = 0 : i64} {ranks = array<i64: 0>}
}
