// RUN: zero-opt %s --verify-diagnostics --pass-pipeline='builtin.module(zrt.program(zero-plan-memory))'

// Tests that a release before a read of its block is an error naming the
// release and the read.
zrt.program @late world_size = 2 {
  zrt.stream @compute "compute"
  zrt.stream @comm "comm"
  zrt.group @world [0, 1]
  zrt.arena @params size = 0 no_reuse = 0 lower_bound = 0
  zrt.arena @constants size = 0 no_reuse = 0 lower_bound = 0
  zrt.arena @activations size = 0 no_reuse = 0 lower_bound = 0
  zrt.block @blk0 in @params bytes = 16 {def = -1 : i64}
  zrt.block @blk1 in @activations bytes = 32 gathered
  zrt.block @blk2 in @activations bytes = 32
  zrt.buffer @b0 : tensor<4xf32> at @blk0[0]
  zrt.global "w" tensor "w" : tensor<8xf32> into @b0 {padded_numel = 8 : i64, shard_world = 2 : i64}
  zrt.buffer @b1 : tensor<8xf32> at @blk1[0]
  zrt.collective "AllGather" on @comm group @world [@b0] -> [@b1] {}
  // expected-error @+1 {{'zero.release' op releases a gathered parameter that is still used after it; move the release after its last use}}
  zrt.release @blk1
  zrt.buffer @b2 : tensor<8xf32> at @blk2[0]
  // expected-note @+1 {{used here}}
  zrt.kernel "Relu" on @compute [@b1] -> [@b2] {}
  zrt.output "y" from @b2
}
