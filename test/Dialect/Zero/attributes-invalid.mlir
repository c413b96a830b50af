// RUN: zero-opt %s --split-input-file --verify-diagnostics

// Tests that a zero.* attribute's value must have the type ZeroAttributes.h
// gives it.
// expected-error@+1 {{'builtin.module' op attribute 'zero.world_size' must be an integer, got "two"}}
module attributes {zero.world_size = "two"} {
}

// -----

// Tests that a zero.* name that no pass writes is refused (here a misspelling
// of zero.pipeline_stage).
// expected-error@+1 {{attribute 'zero.pipeline_stages' is not a zero attribute}}
module attributes {zero.pipeline_stages = 1 : i64} {
}

// -----

// Tests that an op's zero.* attributes are checked.
func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{attribute 'zero.micro_batch' must be an integer, got "0"}}
  %b = "onnx.Relu"(%a) {zero.micro_batch = "0"} : (tensor<2xf32>) -> tensor<2xf32>
  return %b : tensor<2xf32>
}

// -----

// Tests that a function result's zero.* attributes are checked.
// expected-error@+1 {{result 0 attribute 'zero.grad_of' must be a symbol reference, got 3 : i64}}
func.func @g(%a: tensor<2xf32>) -> (tensor<2xf32> {zero.grad_of = 3 : i64}) {
  return %a : tensor<2xf32>
}

// -----

// Tests that a string-valued zero.* attribute takes one of its spellings
// (ZeroEnums.td) only: a stream, an offload device, a global's role.
func.func @h(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{attribute 'zero.stream' must be "compute" or "comm", got "gpu"}}
  %b = "onnx.Relu"(%a) {zero.stream = "gpu"} : (tensor<2xf32>) -> tensor<2xf32>
  return %b : tensor<2xf32>
}

// -----

module {
  // expected-error@+1 {{attribute 'zero.offload' must be "cpu" or "nvme", got "disk"}}
  ml_program.global private mutable @m(dense<0.0> : tensor<2xf32>) : tensor<2xf32> {zero.offload = "disk"}
}

// -----

module {
  // expected-error@+1 {{attribute 'zero.role' must be "optimizer_state" or "counter", got "weights"}}
  ml_program.global private mutable @n(dense<0.0> : tensor<2xf32>) : tensor<2xf32> {zero.role = "weights"}
}
