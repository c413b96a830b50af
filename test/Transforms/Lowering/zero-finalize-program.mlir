// RUN: zero-opt %s --pass-pipeline='builtin.module(zrt.program(zero-finalize-program))' | FileCheck %s

// Tests that each view of a planned block becomes the same view of the
// block's arena at the block's offset plus its own (and its in-order offset
// likewise), a buffer already in an arena stays as it is, and the blocks are
// gone: blk0 (params, at 128) and its view at 0; blk1 (activations, at 64,
// in order at 0) and its views at 0 and 16; the buffer @b3 in @activations.
// CHECK-LABEL: zrt.program @views
// CHECK-NOT:     zrt.block
// CHECK:         zrt.buffer @b0 : tensor<8xf32> at @params[128]
// CHECK-NEXT:    zrt.global "w"
// CHECK-NEXT:    zrt.buffer @b1 : tensor<16xf32> at @activations[64] in_order[0]
// CHECK-NEXT:    zrt.buffer @b2 : tensor<4xf32> at @activations[80] in_order[16]
// CHECK-NEXT:    zrt.buffer @b3 : tensor<4xf32> at @activations[0]
// CHECK-NOT:     zrt.block
zrt.program @views world_size = 2 {
  zrt.stream @compute "compute"
  zrt.stream @comm "comm"
  zrt.group @world [0, 1]
  zrt.arena @params size = 192 no_reuse = 192 lower_bound = 192
  zrt.arena @constants size = 0 no_reuse = 0 lower_bound = 0
  zrt.arena @activations size = 128 no_reuse = 128 lower_bound = 128 in_order = 64
  zrt.block @blk0 in @params bytes = 32 {def = -1 : i64, last_use = 1 : i64, offset = 128 : i64, stages = -1 : i64}
  zrt.block @blk1 in @activations bytes = 64 gathered {def = 0 : i64, in_order_offset = 0 : i64, last_use = 1 : i64, offset = 64 : i64, stages = -1 : i64}
  zrt.buffer @b0 : tensor<8xf32> at @blk0[0]
  zrt.global "w" tensor "w" : tensor<16xf32> into @b0 {padded_numel = 16 : i64, shard_world = 2 : i64}
  zrt.buffer @b1 : tensor<16xf32> at @blk1[0]
  zrt.buffer @b2 : tensor<4xf32> at @blk1[16]
  zrt.buffer @b3 : tensor<4xf32> at @activations[0]
  zrt.collective "AllGather" on @comm group @world [@b0] -> [@b1] {}
  zrt.record 0 on @comm
  zrt.wait 0 on @compute
  zrt.kernel "Relu" on @compute [@b2] -> [@b3] {}
  zrt.output "y" from @b3
}
