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
// (ZeroEnums.td) only: a stream, an offload device, a global's role, a phase.
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

// -----

// Tests that a structured zero.* attribute takes its typed value only: the
// dictionary it once was is refused, naming the type.
module {
  // expected-error@+1 {{attribute 'zero.shard' must be a #zero.shard, got {numel = 6 : i64, padded_numel = 6 : i64, world = 2 : i64}}}
  ml_program.global private mutable @w(dense<0.0> : tensor<3xf32>) : tensor<3xf32> {zero.shard = {numel = 6 : i64, padded_numel = 6 : i64, world = 2 : i64}}
}

// -----

// Tests that a shard follows DeepSpeed's flatten-pad-split: 5 elements over 2
// ranks pad to 6.
module {
  // expected-error@+1 {{#zero.shard: padded_numel 8 is not numel 5 rounded up to a multiple of the world 2 (6)}}
  ml_program.global private mutable @w(dense<0.0> : tensor<4xf32>) : tensor<4xf32> {zero.shard = #zero.shard<world = 2, numel = 5, padded_numel = 8>}
}

// -----

module {
  // expected-error@+1 {{#zero.shard: world must be >= 1, got 0}}
  ml_program.global private mutable @w(dense<0.0> : tensor<4xf32>) : tensor<4xf32> {zero.shard = #zero.shard<world = 0, numel = 0, padded_numel = 0>}
}

// -----

// Tests the plan's lengths: stage s holds layers [parts[s], parts[s+1]).
// expected-error@+1 {{#zero.pipeline_plan: parts must be 3 bounds rising from 0 to 3}}
module attributes {zero.pipeline_plan = #zero.pipeline_plan<stages = 2, partition = "uniform", layers = ["a", "b", "c"], layer_params = [1, 2, 3], parts = [0, 2, 4], micro_batches = 1, dp = 1, schedule = "fill-drain">} {
}

// -----

// expected-error@+1 {{#zero.pipeline_plan: layer_params has 2 entries for 3 layers}}
module attributes {zero.pipeline_plan = #zero.pipeline_plan<stages = 1, partition = "uniform", layers = ["a", "b", "c"], layer_params = [1, 2], parts = [0, 3], micro_batches = 1, dp = 1, schedule = "fill-drain">} {
}

// -----

// expected-error@+1 {{#zero.training: a loss_scale needs skipped}}
module attributes {zero.training = #zero.training<loss = "loss", grad_norm = "grad_norm", lr = "lr", accumulation_steps = 1, optimizer = "sgd", loss_scale = "loss_scale">} {
}

// -----

// expected-error@+1 {{#zero.training: accumulation_steps must be >= 1, got 0}}
module attributes {zero.training = #zero.training<loss = "loss", grad_norm = "grad_norm", lr = "lr", accumulation_steps = 0, optimizer = "sgd">} {
}

// -----

// expected-error@+1 {{#zero.loss_scaler: initial_scale_power must be >= 0, loss_scale_window and hysteresis >= 1}}
module attributes {zero.loss_scaler = #zero.loss_scaler<loss_scale = 0.0, initial_scale_power = 16, loss_scale_window = 1000, hysteresis = 0, min_loss_scale = 1.0, consecutive_hysteresis = false>} {
}

// -----

// expected-error@+1 {{#zero.offload_config: nvme_path must name a folder}}
module attributes {zero.offload_config = #zero.offload_config<nvme_path = "", buffer_count = 4>} {
}

// -----

func.func @p(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{attribute 'zero.phase' must be "forward" or "backward", got "optimizer"}}
  %b = "onnx.Relu"(%a) {zero.phase = "optimizer"} : (tensor<2xf32>) -> tensor<2xf32>
  return %b : tensor<2xf32>
}
