// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=0" | FileCheck %s --check-prefix=S0
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=1 type=sgd lr=0.1" | FileCheck %s --check-prefix=S1
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=2 type=sgd lr=0.1" | FileCheck %s --check-prefix=S1
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=0 bucket=20" | FileCheck %s --check-prefix=B0
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=1 bucket=1000 type=sgd lr=0.1" | FileCheck %s --check-prefix=B1
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=3 type=sgd lr=0.1" --zero-partition="stage=3 dp=2 persistence-threshold=10 max-reuse-distance=0" --zero-prefetch="depth=4 bytes=100000" --zero-bucket="bytes=100000" --zero-release | FileCheck %s --check-prefix=S3P
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=3 type=sgd lr=0.1" --zero-partition="stage=3 dp=2 max-reuse-distance=0" --zero-release | FileCheck %s --check-prefix=S3
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=0" | FileCheck %s --check-prefix=HELD01
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=1" | FileCheck %s --check-prefix=HELD01
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=2" | FileCheck %s --check-prefix=HELD2
// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=1 stage=2" | FileCheck %s --check-prefix=HELD01

// Tests that a two-layer training step over 2 ranks averages each gradient
// right after its last contribution in backward, before the next backward
// MatMul (b2's, then w2's, then w1's), so the collective overlaps the rest of
// backward.
//
// Stage 0: zero.all_reduce of the full gradient times 1/2; optimizer state and
// updates are full-size.
// S0: module attributes {zero.accumulation_steps = 1 : i64, zero.stage = 0 : i64, zero.training = {{.+}}, zero.world_size = 2 : i64}
// S0: ml_program.global private mutable @w1.exp_avg(dense<0.000000e+00> : tensor<3x5xf32>) : tensor<3x5xf32> {zero.role = "optimizer_state", zero.tensor = "w1.exp_avg"}
// S0-LABEL: func.func @train_step
// S0: %[[DB:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 3>} : (tensor<1x3xf32>) -> tensor<3xf32>
// S0-NEXT: %[[SB:.+]] = zero.all_reduce %[[DB]] {world = 2 : i64} : tensor<3xf32> -> tensor<3xf32>
// S0-NEXT: onnx.Transpose %w2
// S0: %[[DW2:.+]] = onnx.MatMul %{{.+}}, %{{.+}} : (tensor<5x2xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
// S0-NEXT: %[[SW2:.+]] = zero.all_reduce %[[DW2]] {world = 2 : i64} : tensor<5x3xf32> -> tensor<5x3xf32>
// S0: %[[DW1:.+]] = onnx.MatMul %{{.+}}, %{{.+}} : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
// S0-NEXT: %[[SW1:.+]] = zero.all_reduce %[[DW1]] {world = 2 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
// The 1/2 scaling reads each collective's result at the optimizer step, not
// right behind the collective (where it would hold the rest of backward).
// S0-NEXT: onnx.Constant dense<5.000000e-01>
// S0-NEXT: %[[GB:.+]] = onnx.Mul %[[SB]]
// S0-NEXT: onnx.Constant dense<5.000000e-01>
// S0-NEXT: onnx.Mul %[[SW2]]
// S0-NEXT: onnx.Constant dense<5.000000e-01>
// S0-NEXT: %[[GW1:.+]] = onnx.Mul %[[SW1]]
// S0: onnx.ReduceSumSquare %[[GW1]]
// S0-NOT: zero.all_reduce
// S0: onnx.Sqrt
// S0: zero.adamw %w1_0, %[[GW1]], {{.+}} : tensor<3x5xf32>, tensor<3x5xf32>, tensor<i64>, tensor<f32>, tensor<f32>, tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>
// S0: zero.adamw %b2_{{[0-9]+}}, %[[GB]],

// Stages 1 and 2: the gradient times 1/2 (before the collective, in its own
// type, as DeepSpeed's ZeRO optimizers divide each rank's gradient), flattened,
// zero-padded to a multiple of 2 (15 -> 16, 3 -> 4) and reduce-scattered; the
// global norm is the all-reduced sum of the local squared norms; each rank
// steps its shard of the parameter (zero.local_shard) and all-gathers the
// update back.
// S1: module attributes {zero.accumulation_steps = 1 : i64, zero.stage = {{[12]}} : i64, zero.training = {{.+}}, zero.world_size = 2 : i64}
// S1-LABEL: func.func @train_step
// S1: %[[DB:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 3>} : (tensor<1x3xf32>) -> tensor<3xf32>
// S1-NEXT: %[[HB:.+]] = onnx.Constant dense<5.000000e-01> : tensor<f32>
// S1-NEXT: %[[MB:.+]] = onnx.Mul %[[DB]], %[[HB]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// S1-NEXT: %[[PB:.+]] = onnx.Pad %[[MB]] {pads = array<i64: 0, 1>} : (tensor<3xf32>) -> tensor<4xf32>
// S1-NEXT: %[[GB:.+]] = zero.reduce_scatter %[[PB]] {world = 2 : i64} : tensor<4xf32> -> tensor<2xf32>
// S1-NEXT: onnx.Transpose %w2
// S1: %[[DW2:.+]] = onnx.MatMul %{{.+}}, %{{.+}} : (tensor<5x2xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
// S1-NEXT: onnx.Constant dense<5.000000e-01>
// S1-NEXT: %[[MW2:.+]] = onnx.Mul %[[DW2]]
// S1-NEXT: %[[FW2:.+]] = onnx.Reshape %[[MW2]] {shape = array<i64: 15>} : (tensor<5x3xf32>) -> tensor<15xf32>
// S1-NEXT: %[[PW2:.+]] = onnx.Pad %[[FW2]] {pads = array<i64: 0, 1>} : (tensor<15xf32>) -> tensor<16xf32>
// S1-NEXT: zero.reduce_scatter %[[PW2]] {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// S1: %[[DW1:.+]] = onnx.MatMul %{{.+}}, %{{.+}} : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
// S1-NEXT: onnx.Constant dense<5.000000e-01>
// S1-NEXT: %[[MW1:.+]] = onnx.Mul %[[DW1]]
// S1-NEXT: onnx.Reshape %[[MW1]] {shape = array<i64: 15>}
// S1-NEXT: onnx.Pad
// S1-NEXT: %[[GW1:.+]] = zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// S1-NOT: dense<5.000000e-01>
// S1: onnx.ReduceSumSquare %[[GW1]] {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<8xf32>) -> tensor<f32>
// S1: onnx.ReduceSumSquare %[[GB]] {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
// S1-NEXT: %[[SQ:[^ ]+]] = onnx.Add %{{[^ ]+}}, %{{[^ ]+}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// S1-NEXT: %[[ALL:.+]] = zero.all_reduce %[[SQ]] {world = 2 : i64} : tensor<f32> -> tensor<f32>
// S1-NEXT: onnx.Sqrt %[[ALL]]
// S1: %[[W1:.+]] = ml_program.global_load @w1 : tensor<3x5xf32>
// S1-NEXT: %[[F1:.+]] = onnx.Reshape %[[W1]] {shape = array<i64: 15>}
// S1-NEXT: %[[P1:.+]] = onnx.Pad %[[F1]] {pads = array<i64: 0, 1>}
// S1-NEXT: %[[S1:.+]] = zero.local_shard %[[P1]] {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// S1-NEXT: %[[U1:.+]] = zero.sgd %[[S1]], %[[GW1]], {{.+}} -> tensor<8xf32>
// S1-NEXT: %[[A1:.+]] = zero.all_gather %[[U1]] {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
// S1-NEXT: %[[X1:.+]] = onnx.Slice %[[A1]] {ends = array<i64: 15>, starts = array<i64: 0>, steps = array<i64: 1>}
// S1-NEXT: %[[R1:.+]] = onnx.Reshape %[[X1]] {shape = array<i64: 3, 5>}
// S1-NEXT: ml_program.global_store @w1 = %[[R1]] : tensor<3x5xf32>
// S1: zero.local_shard %{{.+}} {world = 2 : i64} : tensor<4xf32> -> tensor<2xf32>
// S1-NEXT: zero.sgd %{{.+}}, %[[GB]],

// Buckets (DeepSpeed's reduce_bucket_size, in elements), filled in the order
// the gradients become final: with 20 elements, b2's 3 and w2's 15 share one
// all-reduce right after w2's gradient (concatenated; sliced back at the
// optimizer step), w1's 15 get their own.
// B0-LABEL: func.func @train_step
// B0: %[[DB:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 3>} : (tensor<1x3xf32>) -> tensor<3xf32>
// B0-NOT: zero.all_reduce
// B0: %[[DW2:.+]] = onnx.MatMul %{{.+}}, %{{.+}} : (tensor<5x2xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
// B0-NEXT: %[[FW2:.+]] = onnx.Reshape %[[DW2]] {shape = array<i64: 15>}
// B0-NEXT: %[[CAT:.+]] = onnx.Concat %[[DB]], %[[FW2]] {axis = 0 : i64} : (tensor<3xf32>, tensor<15xf32>) -> tensor<18xf32>
// B0-NEXT: %[[SUM:.+]] = zero.all_reduce %[[CAT]] {world = 2 : i64} : tensor<18xf32> -> tensor<18xf32>
// B0: zero.all_reduce %{{.+}} {world = 2 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
// B0-NEXT: onnx.Constant dense<5.000000e-01>
// B0-NEXT: %[[HALF:.+]] = onnx.Mul %[[SUM]], %{{.+}} : (tensor<18xf32>, tensor<f32>) -> tensor<18xf32>
// B0-NEXT: onnx.Slice %[[HALF]] {ends = array<i64: 3>, starts = array<i64: 0>, steps = array<i64: 1>}
// B0-NEXT: %[[W2S:.+]] = onnx.Slice %[[HALF]] {ends = array<i64: 18>, starts = array<i64: 3>, steps = array<i64: 1>}
// B0-NEXT: onnx.Reshape %[[W2S]] {shape = array<i64: 5, 3>}
// At stages 1-3 a bucket lays each padded gradient out as [N, s] rows and
// concatenates the columns, so rank r's block of the reduce-scatter holds its
// shard of every gradient: b2 (2 per rank), w2 (8), w1 (8), each gradient
// times 1/2 before (as DeepSpeed divides a bucket before reducing it).
// B1-LABEL: func.func @train_step
// B1: onnx.Constant dense<5.000000e-01>
// B1-NEXT: onnx.Mul %{{.+}}, %{{.+}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// B1: onnx.Reshape %{{.+}} {shape = array<i64: 2, 2>} : (tensor<4xf32>) -> tensor<2x2xf32>
// B1: onnx.Reshape %{{.+}} {shape = array<i64: 2, 8>} : (tensor<16xf32>) -> tensor<2x8xf32>
// B1: %[[ROWS:.+]] = onnx.Concat %{{.+}}, %{{.+}}, %{{.+}} {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x18xf32>
// B1-NEXT: %[[FLAT:.+]] = onnx.Reshape %[[ROWS]] {shape = array<i64: 36>}
// B1-NEXT: %[[AVG:.+]] = zero.reduce_scatter %[[FLAT]] {world = 2 : i64} : tensor<36xf32> -> tensor<18xf32>
// B1-NEXT: %[[GB:.+]] = onnx.Slice %[[AVG]] {ends = array<i64: 2>, starts = array<i64: 0>, steps = array<i64: 1>}
// B1-NEXT: %[[GW2:.+]] = onnx.Slice %[[AVG]] {ends = array<i64: 10>, starts = array<i64: 2>, steps = array<i64: 1>}
// B1-NEXT: %[[GW1:.+]] = onnx.Slice %[[AVG]] {ends = array<i64: 18>, starts = array<i64: 10>, steps = array<i64: 1>}
// B1-NOT: zero.reduce_scatter
// B1: zero.sgd %{{.+}}, %[[GW1]],
// B1: zero.sgd %{{.+}}, %[[GW2]],
// B1: zero.sgd %{{.+}}, %[[GB]],

// Stage 3: zero-partition makes each parameter global its flat padded shard;
// forward gathers it, backward gathers w2 again (max-reuse-distance=0: other
// parameters were gathered in between), every gathered copy is released after
// its last use, and the optimizer steps the shard global itself: its shard
// and all-gather of stages 1-2 fold away, the update is stored in place.
// With a persistence threshold of 10 elements, b2 (3) stays whole: its update
// is stepped on the rank's shard and gathered back, and that gather of a
// computed value is not a parameter fetch: prefetch and buckets leave it where
// it is (after its zero.sgd), only the parameter gathers are coalesced.
// S3P: ml_program.global private mutable @b2(#extern{{[0-9]*}}) : tensor<3xf32> {zero.grad_type = tensor<2xf32>, zero.tensor = "b2", zero.trainable}
// S3P-LABEL: func.func @train_step
// S3P: zero.bucket_all_gather %w1, %w2 {world = 2 : i64} : tensor<8xf32>, tensor<8xf32> -> tensor<16xf32>, tensor<16xf32>
// S3P: %[[U:.+]] = zero.sgd %{{.+}} -> tensor<2xf32>
// S3P-NEXT: %[[G:.+]] = zero.all_gather %[[U]] {world = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
// S3P-NEXT: %[[B:.+]] = onnx.Slice %[[G]]
// S3P-NEXT: ml_program.global_store @b2 = %[[B]] : tensor<3xf32>

// S3: ml_program.global private mutable @w1(#extern) : tensor<8xf32> {zero.full_type = tensor<3x5xf32>, zero.grad_type = tensor<8xf32>, zero.shard = #zero.shard<world = 2, numel = 15, padded_numel = 16>
// S3: ml_program.global private mutable @b2(#extern1) : tensor<2xf32> {zero.full_type = tensor<3xf32>, zero.grad_type = tensor<2xf32>, zero.shard = #zero.shard<world = 2, numel = 3, padded_numel = 4>
// S3-LABEL: func.func @train_step
// S3: %[[W1:.+]] = ml_program.global_load @w1 : tensor<8xf32>
// S3-NEXT: zero.all_gather %[[W1]] {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
// S3: %[[W2:.+]] = ml_program.global_load @w2 : tensor<8xf32>
// S3-NEXT: zero.all_gather %[[W2]] {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
// S3: onnx.MatMul %{{.+}}, %[[FW2:.+]] : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
// S3-NEXT: zero.release %[[FW2]] : tensor<5x3xf32>
// S3: zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<4xf32> -> tensor<2xf32>
// S3: %[[W2B:.+]] = ml_program.global_load @w2 : tensor<8xf32>
// S3-NEXT: zero.all_gather %[[W2B]] {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
// S3: zero.release
// S3: zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// S3: zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// S3-NOT: zero.local_shard
// S3-NOT: zero.all_gather
// S3: %[[SH1:.+]] = ml_program.global_load @w1 : tensor<8xf32>
// S3-NEXT: %[[U1:.+]] = zero.sgd %[[SH1]], {{.+}} -> tensor<8xf32>
// S3-NEXT: ml_program.global_store @w1 = %[[U1]] : tensor<8xf32>

module {
  ml_program.global private @w1(#ml_program.extern : tensor<3x5xf32>) : tensor<3x5xf32> {zero.tensor = "w1"}
  ml_program.global private @w2(#ml_program.extern : tensor<5x3xf32>) : tensor<5x3xf32> {zero.tensor = "w2"}
  ml_program.global private @b2(#ml_program.extern : tensor<3xf32>) : tensor<3xf32> {zero.tensor = "b2"}
  func.func @forward(%x: tensor<2x3xf32> {onnx.name = "x"}, %y: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w1 = ml_program.global_load @w1 : tensor<3x5xf32>
    %h = onnx.MatMul %x, %w1 : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
    %a = onnx.Tanh %h : (tensor<2x5xf32>) -> tensor<2x5xf32>
    %w2 = ml_program.global_load @w2 : tensor<5x3xf32>
    %z = onnx.MatMul %a, %w2 : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
    %b2 = ml_program.global_load @b2 : tensor<3xf32>
    %o = onnx.Add %z, %b2 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %l = onnx.SoftmaxCrossEntropyLoss %o, %y : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// The gradient a rank holds over the step (zero.grad_type, the report's
// model-state bytes): whole at stages 0 and 1 (and on one rank), the rank's
// shard of the flat gradient padded to a multiple of 2 at stage 2 (3x5 -> 16
// -> 8 elements, 3 -> 4 -> 2).
// HELD01: ml_program.global private mutable @w1({{.*}}) : tensor<3x5xf32> {zero.grad_type = tensor<3x5xf32>,
// HELD01: ml_program.global private mutable @b2({{.*}}) : tensor<3xf32> {zero.grad_type = tensor<3xf32>,
// HELD2: ml_program.global private mutable @w1({{.*}}) : tensor<3x5xf32> {zero.grad_type = tensor<8xf32>,
// HELD2: ml_program.global private mutable @b2({{.*}}) : tensor<3xf32> {zero.grad_type = tensor<2xf32>,
