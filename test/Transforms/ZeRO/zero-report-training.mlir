// RUN: zero-opt %s --zero-autodiff --zero-optimizer --zero-report -o %t.mlir 2>&1 | FileCheck %s
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="type=sgd momentum=0.9" --zero-report -o %t.mlir 2>&1 | FileCheck %s --check-prefix=SGD
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=0" --zero-report -o %t.mlir 2>&1 | FileCheck %s --check-prefix=DP0
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=2" --zero-report -o %t.mlir 2>&1 | FileCheck %s --check-prefix=DP2
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=3 stage=1" --zero-report -o %t.mlir 2>&1 | FileCheck %s --check-prefix=DP3
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=3" --zero-partition="stage=3 dp=2" --zero-release --zero-report -o %t.mlir 2>&1 | FileCheck %s --check-prefix=S3

// Tests that zero-report accounts a training step's memory and traffic: w (3x4)
// and b (4) are trained, 64 bytes (Psi_t); their gradients are as large; fp32
// Adam keeps two moments per parameter (2 Psi_t) plus the 8-byte step counter;
// parameters + gradients + state are 16 bytes per parameter (the ZeRO paper's
// 16 Psi, fp32 Adam). SGD with momentum keeps one buffer (Psi_t).

// CHECK: training step (adamw
// CHECK: trained parameters (bytes) 64 Psi_t 64
// CHECK: gradients (bytes) 64 Psi_t 64
// CHECK: optimizer state + counter (bytes) 136 2 Psi_t + 8 136
// CHECK: parameters + gradients + state 264 4 Psi_t (16 B/param) + 8 + frozen 264
// SGD: optimizer state + counter (bytes) 72 Psi_t + 8 72

// Over N ranks (Psi_t = 64 bytes: w 12 and b 4 elements). Stage 0 keeps
// everything full-size and all-reduces 64 bytes of gradients: a ring sends
// 2 (N-1)/N of them, 64 bytes at N = 2.
// DP0: == zero-report: stage 0, dp = 2 ==
// DP0: gradients (bytes) 64 Psi_t 64
// DP0: optimizer state + counter (bytes) 136 2 Psi_t + 8 136
// DP0: communication per step (bytes sent) 64 2 Psi_t (N-1)/N 64
// Stage 2 at N = 2: w's shard is 6 elements, b's 2: gradients and each moment
// 32 bytes (Psi_t / N); the step sends half of the 64 gradient bytes in the
// reduce-scatter, half of the 64 parameter bytes in the all-gather, and 4 bytes
// for the norm's scalar all-reduce (2 (N-1)/N x 4).
// DP2: == zero-report: stage 2, dp = 2 ==
// DP2: gradients (bytes) 32 Psi_t / N 32
// DP2: optimizer state + counter (bytes) 72 2 Psi_t / N + 8 72
// DP2: parameters + gradients + state 168 Psi_t + 3 Psi_t / N + 8 + frozen 168
// DP2: communication per step (bytes sent) 68 2 Psi_t (N-1)/N + 8(N-1)/N 68
// At N = 3 b's 4 elements pad to 6 (shard 2), w's 12 split into 4: the plan's
// gradient shards are 24 bytes against the formula's 64/3; the reduce-scatter
// sends 2/3 of the padded 72 bytes, the all-gather as much, the all-reduce
// 2 x 2/3 x 4 = 5 bytes (rounded down).
// DP3: gradients (bytes) 24 Psi_t / N 21
// DP3: optimizer state + counter (bytes) 56 2 Psi_t / N + 8 50
// DP3: communication per step (bytes sent) 101
// Stage 3 at N = 2 holds the parameter shards too: 32 + 32 + 72 = 136 bytes,
// 4 Psi_t / N + 8. The step gathers w and b once (backward needs neither: the
// weight gradient is x^T dz), 32 bytes sent, plus the reduce-scatter's 32 and
// the norm's 4: 68, under the 3 Psi bound of a step that re-gathers
// everything (96 + 4).
// S3: == zero-report: stage 3, dp = 2 ==
// S3: parameters + gradients + state 136 4 Psi_t / N + 8 + persistent 136
// S3: communication per step (bytes sent) 68 3 Psi_t (N-1)/N + 8(N-1)/N 100
module {
  ml_program.global private @w(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32> {zero.tensor = "w"}
  ml_program.global private @b(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "b"}
  func.func @forward(%x: tensor<2x3xf32> {onnx.name = "x"}, %y: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %b = ml_program.global_load @b : tensor<4xf32>
    %z = onnx.Add %h, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %p = onnx.Softmax %z {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = onnx.SoftmaxCrossEntropyLoss %p, %y : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
