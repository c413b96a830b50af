// RUN: zero-opt %s | FileCheck %s

// Tests that zero.* attributes of their documented types verify and print
// back unchanged, on a module, a global, an op and a function result.
// CHECK: module attributes {zero.stage = 3 : i64, zero.world_size = 2 : i64}
module attributes {zero.world_size = 2 : i64, zero.stage = 3 : i64} {
  // CHECK: ml_program.global private mutable @w(dense<1.000000e+00> : tensor<2xf32>) : tensor<2xf32> {zero.full_type = tensor<2xf32>, zero.tensor = "w"}
  ml_program.global private mutable @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32> {zero.tensor = "w", zero.full_type = tensor<2xf32>}
  // CHECK-LABEL: func.func @g
  // CHECK-SAME: {zero.grad_of = @w, zero.grad_shard = 2 : i64}
  func.func @g(%a: tensor<2xf32>) -> (tensor<2xf32> {zero.grad_of = @w, zero.grad_shard = 2 : i64}) {
    // CHECK: onnx.Relu %{{.*}} {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.stream = "comm"}
    %b = "onnx.Relu"(%a) {zero.phase = "backward", zero.micro_batch = 0 : i64, zero.stream = "comm"} : (tensor<2xf32>) -> tensor<2xf32>
    return %b : tensor<2xf32>
  }
}

// -----

// Tests that the structured zero.* values parse with their fields in any
// order and print back in their declared order, optional fields omitted when
// unset (ZeroAttrDefs.td).
// CHECK-LABEL: module attributes
// CHECK-SAME: zero.loss_scaler = #zero.loss_scaler<loss_scale = 0.000000e+00 : f64, initial_scale_power = 16, loss_scale_window = 1000, hysteresis = 2, min_loss_scale = 1.000000e+00 : f64, consecutive_hysteresis = false>
// CHECK-SAME: zero.offload_config = #zero.offload_config<nvme_path = "/local_nvme", buffer_count = 4>
// CHECK-SAME: zero.pipeline_plan = #zero.pipeline_plan<stages = 2, partition = "parameters", layers = ["a", "b", "c"], layer_params = [4, 0, 6], parts = [0, 2, 3], micro_batches = 4, dp = 2, schedule = "1f1b", layer_macs = [8, 0, 12]>
// CHECK-SAME: zero.training = #zero.training<loss = "loss", grad_norm = "grad_norm", lr = "lr", accumulation_steps = 2, optimizer = "sgd lr=1.000000e-01", steps_per_print = 10>
module attributes {
    zero.training = #zero.training<optimizer = "sgd lr=1.000000e-01", loss = "loss", grad_norm = "grad_norm", lr = "lr", steps_per_print = 10, accumulation_steps = 2>,
    zero.pipeline_plan = #zero.pipeline_plan<stages = 2, dp = 2, partition = "parameters", layers = ["a", "b", "c"], layer_params = [4, 0, 6], parts = [0, 2, 3], micro_batches = 4, schedule = "1f1b", layer_macs = [8, 0, 12]>,
    zero.loss_scaler = #zero.loss_scaler<loss_scale = 0.0, initial_scale_power = 16, loss_scale_window = 1000, hysteresis = 2, min_loss_scale = 1.0, consecutive_hysteresis = false>,
    zero.offload_config = #zero.offload_config<buffer_count = 4, nvme_path = "/local_nvme">} {
  // CHECK: ml_program.global private mutable @w(dense<0.000000e+00> : tensor<3xf32>) : tensor<3xf32> {zero.full_type = tensor<5xf32>, zero.shard = #zero.shard<world = 2, numel = 5, padded_numel = 6>}
  ml_program.global private mutable @w(dense<0.0> : tensor<3xf32>) : tensor<3xf32> {zero.shard = #zero.shard<numel = 5, world = 2, padded_numel = 6>, zero.full_type = tensor<5xf32>}
}
