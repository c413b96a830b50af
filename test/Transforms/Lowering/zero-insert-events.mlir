// RUN: zero-opt %s --pass-pipeline='builtin.module(zrt.program(zero-insert-events))' | FileCheck %s

// Tests the events on their own, on the ZeRO-3 MLP of zero-plan-memory.mlir
// after its memory plan (instructions 0-6: AllGather w1 on comm, MatMul,
// AllGather b1, Add, Relu, AllGather w2, MatMul). By hand:
//  - MatMul (1) reads the gathered w1 (blk2) that AllGather 0 wrote on the
//    other stream: event 0 after 0, a wait before 1;
//  - AllGather 2 comes after compute's MatMul 1 in program order: event 1;
//  - Add (3) reads b1 (blk5) from AllGather 2, and writes blk6 at 128, where
//    blk2, last touched on comm by AllGather 0, was: it waits for the later,
//    event 2 after AllGather 2 (compute already waited for 0);
//  - Relu (4) needs nothing: its bytes at 0 were only ever compute's;
//  - AllGather 5 follows compute's Relu (4) in program order, and writes
//    blk9 at 128, last touched by compute at Add (3) and Relu (4): event 3
//    after Relu;
//  - MatMul 6 reads w2 (blk9) from AllGather 5: event 4.
// Each wait is on the consumer's stream, each record on the producer's; the
// waits go before the instruction's buffers, as the lowering emits them.
// CHECK-LABEL: zrt.program @forward
// CHECK:         zrt.collective "AllGather" on @comm group @world [@b0] -> [@b4] {}
// CHECK-NEXT:    zrt.record 0 on @comm
// CHECK-NEXT:    zrt.wait 0 on @compute
// CHECK-NEXT:    zrt.buffer @b5
// CHECK-NEXT:    zrt.buffer @b6
// CHECK-NEXT:    zrt.kernel "MatMul" on @compute [@b3, @b5] -> [@b6]
// CHECK-NEXT:    zrt.record 1 on @compute
// CHECK-NEXT:    zrt.wait 1 on @comm
// CHECK-NEXT:    zrt.buffer @b7
// CHECK-NEXT:    zrt.collective "AllGather" on @comm group @world [@b1] -> [@b7] {}
// CHECK-NEXT:    zrt.record 2 on @comm
// CHECK-NEXT:    zrt.wait 2 on @compute
// CHECK-NEXT:    zrt.buffer @b8
// CHECK-NEXT:    zrt.buffer @b9
// CHECK-NEXT:    zrt.kernel "Add" on @compute [@b6, @b8] -> [@b9] {}
// CHECK-NEXT:    zrt.buffer @b10
// CHECK-NEXT:    zrt.kernel "Relu" on @compute [@b9] -> [@b10] {}
// CHECK-NEXT:    zrt.record 3 on @compute
// CHECK-NEXT:    zrt.wait 3 on @comm
// CHECK-NEXT:    zrt.buffer @b11
// CHECK-NEXT:    zrt.collective "AllGather" on @comm group @world [@b2] -> [@b11] {}
// CHECK-NEXT:    zrt.record 4 on @comm
// CHECK-NEXT:    zrt.wait 4 on @compute
// CHECK-NEXT:    zrt.buffer @b12
// CHECK-NEXT:    zrt.buffer @b13
// CHECK-NEXT:    zrt.kernel "MatMul" on @compute [@b10, @b12] -> [@b13]
// CHECK-NEXT:    zrt.output "output0" from @b13
zrt.program @forward world_size = 2 {
  zrt.stream @compute "compute"
  zrt.stream @comm "comm"
  zrt.group @world [0, 1]
  zrt.arena @params size = 192 no_reuse = 192 lower_bound = 192
  zrt.arena @constants size = 0 no_reuse = 0 lower_bound = 0
  zrt.arena @activations size = 320 no_reuse = 704 lower_bound = 320
  zrt.block @blk0 in @activations bytes = 48 {def = -1 : i64, last_use = 1 : i64, offset = 192 : i64, stages = -1 : i64}
  zrt.block @blk1 in @params bytes = 32 {def = -1 : i64, last_use = 2 : i64, offset = 0 : i64, stages = -1 : i64}
  zrt.block @blk2 in @activations bytes = 64 gathered {def = 0 : i64, last_use = 1 : i64, offset = 128 : i64, stages = -1 : i64}
  zrt.block @blk3 in @activations bytes = 80 {def = 1 : i64, last_use = 3 : i64, offset = 0 : i64, stages = -1 : i64}
  zrt.block @blk4 in @params bytes = 12 {def = -1 : i64, last_use = 5 : i64, offset = 64 : i64, stages = -1 : i64}
  zrt.block @blk5 in @activations bytes = 24 gathered {def = 2 : i64, last_use = 3 : i64, offset = 256 : i64, stages = -1 : i64}
  zrt.block @blk6 in @activations bytes = 80 {def = 3 : i64, last_use = 4 : i64, offset = 128 : i64, stages = -1 : i64}
  zrt.block @blk7 in @activations bytes = 80 {def = 4 : i64, last_use = 6 : i64, offset = 0 : i64, stages = -1 : i64}
  zrt.block @blk8 in @params bytes = 20 {def = -1 : i64, last_use = 7 : i64, offset = 128 : i64, stages = -1 : i64}
  zrt.block @blk9 in @activations bytes = 40 gathered {def = 5 : i64, last_use = 6 : i64, offset = 128 : i64, stages = -1 : i64}
  zrt.block @blk10 in @activations bytes = 32 {def = 6 : i64, last_use = 7 : i64, offset = 192 : i64, stages = -1 : i64}
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
  zrt.buffer @b7 : tensor<6xf32> at @blk5[0]
  zrt.collective "AllGather" on @comm group @world [@b1] -> [@b7] {}
  zrt.buffer @b8 : tensor<5xf32> at @blk5[0]
  zrt.buffer @b9 : tensor<4x5xf32> at @blk6[0]
  zrt.kernel "Add" on @compute [@b6, @b8] -> [@b9] {}
  zrt.buffer @b10 : tensor<4x5xf32> at @blk7[0]
  zrt.kernel "Relu" on @compute [@b9] -> [@b10] {}
  zrt.buffer @b11 : tensor<10xf32> at @blk9[0]
  zrt.collective "AllGather" on @comm group @world [@b2] -> [@b11] {}
  zrt.buffer @b12 : tensor<5x2xf32> at @blk9[0]
  zrt.buffer @b13 : tensor<4x2xf32> at @blk10[0]
  zrt.kernel "MatMul" on @compute [@b10, @b12] -> [@b13] {} {flops = 80 : i64}
  zrt.output "output0" from @b13
}
