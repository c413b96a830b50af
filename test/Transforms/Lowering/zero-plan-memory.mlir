// RUN: zero-opt %s --pass-pipeline='builtin.module(zrt.program(zero-plan-memory))' | FileCheck %s

// Tests the memory plan on its own, on a ZeRO-3 MLP over 2 ranks as
// instruction selection leaves it (instructions 0-6: AllGather w1, MatMul,
// AllGather b1, Add, Relu, AllGather w2, MatMul). The intervals, by hand:
// a gathered block lives from its gather to the instruction before its
// release (blk2 [0,1], blk5 [2,3], blk9 [5,6]); a collective's input until
// the next collective of its stream is issued (w1's shard blk1 to 2, b1's
// blk4 to 5, w2's blk8, with no collective after it, to the end, 7); the
// input from before the run (-1) and the output to the end. Params are
// packed in the globals' order, 64-byte aligned. Activations by size, the
// largest first, each at the lowest offset free over its interval: blk3 at
// 0, blk6 at 128 (it overlaps blk3 at 3), blk7 at 0 again (blk3 is dead),
// blk2 at 128, blk0 above both at 192, blk9 at 128, blk10 at 192, blk5
// above blk3 and blk6 at 256: 320 bytes, of 704 without reuse; 320 are live
// at once at instruction 3 (blk3, blk5, blk6). The release marks are gone.
// CHECK-LABEL: zrt.program @forward
// CHECK:         zrt.arena @params size = 192 no_reuse = 192 lower_bound = 192
// CHECK-NEXT:    zrt.arena @constants size = 0 no_reuse = 0 lower_bound = 0
// CHECK-NEXT:    zrt.arena @activations size = 320 no_reuse = 704 lower_bound = 320
// CHECK-NEXT:    zrt.block @blk0 in @activations bytes = 48 {def = -1 : i64, last_use = 1 : i64, offset = 192 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk1 in @params bytes = 32 {def = -1 : i64, last_use = 2 : i64, offset = 0 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk2 in @activations bytes = 64 gathered {def = 0 : i64, last_use = 1 : i64, offset = 128 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk3 in @activations bytes = 80 {def = 1 : i64, last_use = 3 : i64, offset = 0 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk4 in @params bytes = 12 {def = -1 : i64, last_use = 5 : i64, offset = 64 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk5 in @activations bytes = 24 gathered {def = 2 : i64, last_use = 3 : i64, offset = 256 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk6 in @activations bytes = 80 {def = 3 : i64, last_use = 4 : i64, offset = 128 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk7 in @activations bytes = 80 {def = 4 : i64, last_use = 6 : i64, offset = 0 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk8 in @params bytes = 20 {def = -1 : i64, last_use = 7 : i64, offset = 128 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk9 in @activations bytes = 40 gathered {def = 5 : i64, last_use = 6 : i64, offset = 128 : i64, stages = -1 : i64}
// CHECK-NEXT:    zrt.block @blk10 in @activations bytes = 32 {def = 6 : i64, last_use = 7 : i64, offset = 192 : i64, stages = -1 : i64}
// CHECK-NOT:     zrt.release
// CHECK-NOT:     zrt.record
zrt.program @forward world_size = 2 {
  zrt.stream @compute "compute"
  zrt.stream @comm "comm"
  zrt.group @world [0, 1]
  zrt.arena @params size = 0 no_reuse = 0 lower_bound = 0
  zrt.arena @constants size = 0 no_reuse = 0 lower_bound = 0
  zrt.arena @activations size = 0 no_reuse = 0 lower_bound = 0
  zrt.block @blk0 in @activations bytes = 48 {def = -1 : i64}
  zrt.block @blk1 in @params bytes = 32 {def = -1 : i64}
  zrt.block @blk2 in @activations bytes = 64 gathered
  zrt.block @blk3 in @activations bytes = 80
  zrt.block @blk4 in @params bytes = 12 {def = -1 : i64}
  zrt.block @blk5 in @activations bytes = 24 gathered
  zrt.block @blk6 in @activations bytes = 80
  zrt.block @blk7 in @activations bytes = 80
  zrt.block @blk8 in @params bytes = 20 {def = -1 : i64}
  zrt.block @blk9 in @activations bytes = 40 gathered
  zrt.block @blk10 in @activations bytes = 32
  zrt.buffer @b0 : tensor<8xf32> at @blk1[0]
  zrt.global "w1" tensor "w1" : tensor<3x5xf32> into @b0 {padded_numel = 16 : i64, shard_world = 2 : i64}
  zrt.buffer @b1 : tensor<3xf32> at @blk4[0]
  zrt.global "b1" tensor "b1" : tensor<5xf32> into @b1 {padded_numel = 6 : i64, shard_world = 2 : i64}
  zrt.buffer @b2 : tensor<5xf32> at @blk8[0]
  zrt.global "w2" tensor "w2" : tensor<5x2xf32> into @b2 {padded_numel = 10 : i64, shard_world = 2 : i64}
  zrt.buffer @b3 : tensor<4x3xf32> at @blk0[0]
  zrt.input "input0" -> @b3
  zrt.buffer @b4 : tensor<16xf32> at @blk2[0]
  zrt.collective "AllGather" on @comm group @world [@b0] -> [@b4] {}
  zrt.buffer @b5 : tensor<3x5xf32> at @blk2[0]
  zrt.buffer @b6 : tensor<4x5xf32> at @blk3[0]
  zrt.kernel "MatMul" on @compute [@b3, @b5] -> [@b6] {} {flops = 120 : i64}
  zrt.release @blk2
  zrt.buffer @b7 : tensor<6xf32> at @blk5[0]
  zrt.collective "AllGather" on @comm group @world [@b1] -> [@b7] {}
  zrt.buffer @b8 : tensor<5xf32> at @blk5[0]
  zrt.buffer @b9 : tensor<4x5xf32> at @blk6[0]
  zrt.kernel "Add" on @compute [@b6, @b8] -> [@b9] {}
  zrt.release @blk5
  zrt.buffer @b10 : tensor<4x5xf32> at @blk7[0]
  zrt.kernel "Relu" on @compute [@b9] -> [@b10] {}
  zrt.buffer @b11 : tensor<10xf32> at @blk9[0]
  zrt.collective "AllGather" on @comm group @world [@b2] -> [@b11] {}
  zrt.buffer @b12 : tensor<5x2xf32> at @blk9[0]
  zrt.buffer @b13 : tensor<4x2xf32> at @blk10[0]
  zrt.kernel "MatMul" on @compute [@b10, @b12] -> [@b13] {} {flops = 80 : i64}
  zrt.release @blk9
  zrt.output "output0" from @b13
}

