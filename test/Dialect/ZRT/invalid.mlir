// RUN: zero-opt %s --split-input-file --verify-diagnostics

zrt.program @p world_size = 1 {
  zrt.stream @compute "compute"
  zrt.arena @activations size = 64 no_reuse = 64 lower_bound = 64
  // expected-error @+1 {{'zrt.kernel' op refers to @missing, which is not a buffer of this program}}
  zrt.kernel "Relu" on @compute [@missing] -> [@missing] {}
}

// -----

zrt.program @p world_size = 1 {
  zrt.arena @activations size = 64 no_reuse = 64 lower_bound = 64
  zrt.buffer @b : tensor<4xf32> at @activations[0]
  // expected-error @+1 {{'zrt.kernel' op refers to @activations, which is not a stream of this program}}
  zrt.kernel "Relu" on @activations [@b] -> [@b] {}
}

// -----

zrt.program @p world_size = 1 {
  // expected-error @+1 {{'zrt.buffer' op refers to @nowhere, which is not an arena or a block of this program}}
  zrt.buffer @b : tensor<4xf32> at @nowhere[0]
}
