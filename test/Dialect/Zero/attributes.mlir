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
