// RUN: zero-opt %s --zero-mixed-precision="f32-loss=true" | FileCheck %s
// RUN: zero-opt %s --zero-mixed-precision="precision=fp16" | FileCheck %s --check-prefix=FP16
// RUN: zero-opt %s --zero-mixed-precision --zero-autodiff --zero-optimizer="dp=1" | FileCheck %s --check-prefix=STEP
// RUN: zero-opt %s --zero-mixed-precision --zero-autodiff --zero-optimizer="dp=2 stage=1" | FileCheck %s --check-prefix=SHARD
// RUN: zero-opt %s --zero-mixed-precision="check-grad-overflow=true" --zero-autodiff --zero-optimizer="dp=1" | FileCheck %s --check-prefix=SKIP
// RUN: zero-opt %s --zero-mixed-precision --zero-autodiff --zero-optimizer="dp=1" | FileCheck %s --check-prefix=NOSKIP

// Tests that zero-mixed-precision runs the forward in 16 bits as DeepSpeed's
// bf16 mode runs a converted model: the f32 global and every f32 value become
// bf16 (constants converted, the f32 input cast on entry), while an f32 loss
// (here f32-loss; zero-mixed-precision-loss.mlir: the model's own) and what is
// computed from it stay f32 (its 16-bit operand cast up, the constant only it
// reads kept f32).
// CHECK: ml_program.global private @w(dense<1.000000e+00> : tensor<4x3xbf16>) : tensor<4x3xbf16>
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32> {onnx.name = "x"}, %[[L:.+]]: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"})
// CHECK-NEXT: %[[XH:.+]] = onnx.Cast %[[X]] {to = bf16} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[W:.+]] = ml_program.global_load @w : tensor<4x3xbf16>
// CHECK-NEXT: %[[Y:.+]] = onnx.MatMul %[[XH]], %[[W]] : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[C:.+]] = onnx.Constant dense<1.000980e-01> : tensor<bf16>
// CHECK-NEXT: %[[Z:.+]] = onnx.Mul %[[Y]], %[[C]] : (tensor<2x3xbf16>, tensor<bf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[UP:.+]] = onnx.Cast %[[Z]] {to = f32} : (tensor<2x3xbf16>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[LOSS:.+]] = onnx.SoftmaxCrossEntropyLoss %[[UP]], %[[L]] : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
// CHECK-NEXT: %[[K:.+]] = onnx.Constant dense<1.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[OUT:.+]] = onnx.Mul %[[LOSS]], %[[K]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: return %[[OUT]] : tensor<f32>

// FP16: ml_program.global private @w(dense<1.000000e+00> : tensor<4x3xf16>) : tensor<4x3xf16>
// FP16: onnx.Cast %{{.+}} {to = f16} : (tensor<2x4xf32>) -> tensor<2x4xf16>
// FP16: onnx.Constant dense<9.997550e-02> : tensor<f16>

// The optimizer steps an fp32 master copy (optimizer state NAME.master, which
// the runtime starts as the bf16 parameter widened: zero.widen_from), from the
// bf16 gradient widened, and stores the master and the parameter rounded to
// bf16; the step never reads the bf16 parameter itself.
// STEP: ml_program.global private mutable @w.master(dense<0.000000e+00> : tensor<4x3xf32>) : tensor<4x3xf32> {zero.role = "optimizer_state", zero.tensor = "w.master", zero.widen_from = @w}
// STEP: ml_program.global private mutable @w.exp_avg(dense<0.000000e+00> : tensor<4x3xf32>)
// STEP-LABEL: func.func @train_step
// STEP: %[[G:.+]] = onnx.Cast %{{.+}} {to = f32} : (tensor<4x3xbf16>) -> tensor<4x3xf32>
// STEP: %[[M:.+]] = ml_program.global_load @w.master : tensor<4x3xf32>
// STEP-NOT: global_load @w :
// STEP: %[[NEW:[^,]+]], %{{.+}}, %{{.+}} = zero.adamw %[[M]], %[[G]],
// STEP-NEXT: ml_program.global_store @w.master = %[[NEW]] : tensor<4x3xf32>
// STEP-NEXT: %[[R:.+]] = onnx.Cast %[[NEW]] {to = bf16} : (tensor<4x3xf32>) -> tensor<4x3xbf16>
// STEP-NEXT: ml_program.global_store @w = %[[R]] : tensor<4x3xbf16>

// ZeRO-1 over 2 ranks: the bf16 gradient is reduce-scattered in bf16 (half the
// bytes), the mean taken in f32; the rank steps its f32 master shard (a tensor
// of the parameter's shape in f32) and the bf16 update is all-gathered.
// SHARD: ml_program.global private mutable @w.master(dense<0.000000e+00> : tensor<6xf32>) : tensor<6xf32> {zero.full_type = tensor<4x3xf32>, zero.role = "optimizer_state", zero.shard = #zero.shard<world = 2, numel = 12, padded_numel = 12>, zero.tensor = "w.master", zero.widen_from = @w}
// SHARD: zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<12xbf16> -> tensor<6xbf16>
// SHARD-NOT: zero.local_shard
// SHARD: %[[U:[^,]+]], %{{.+}}, %{{.+}} = zero.adamw
// SHARD-NEXT: ml_program.global_store @w.master = %[[U]] : tensor<6xf32>
// SHARD-NEXT: %[[R:.+]] = onnx.Cast %[[U]] {to = bf16} : (tensor<6xf32>) -> tensor<6xbf16>
// SHARD-NEXT: zero.all_gather %[[R]] {world = 2 : i64} : tensor<6xbf16> -> tensor<12xbf16>

module {
  ml_program.global private @w(dense<1.0> : tensor<4x3xf32>) : tensor<4x3xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"}, %labels: tensor<2xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) {
    %w = ml_program.global_load @w : tensor<4x3xf32>
    %y = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %c = onnx.Constant dense<0.1> : tensor<f32>
    %z = onnx.Mul %y, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %loss = onnx.SoftmaxCrossEntropyLoss %z, %labels : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %k = onnx.Constant dense<0.1> : tensor<f32>
    %out = onnx.Mul %loss, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %out : tensor<f32>
  }
}

// bf16 with check-grad-overflow (DeepSpeed 0.19's bf16.check_grad_overflow):
// the module is marked zero.skip_nonfinite, and the optimizer skips a step
// whose squared gradient norm is inf or NaN: the master, the bf16 parameter,
// both moments and the step counter keep what they held (a Where on the flag
// before each store), and the step returns the flag as "skipped" (no loss
// scale: bf16 has none).
// SKIP: module attributes {{{.*}}zero.skip_nonfinite, zero.training = #zero.training<{{.*}}skipped = "skipped">}
// SKIP-NOT: loss_scale
// SKIP-LABEL: func.func @train_step
// SKIP-SAME: {onnx.name = "lr"}, tensor<f32> {onnx.name = "skipped"})
// SKIP: %[[COUNT:.+]] = onnx.Add %optimizer_step
// SKIP: %[[SQ:.+]] = onnx.ReduceSumSquare
// SKIP-NEXT: %[[NORM:.+]] = onnx.Sqrt %[[SQ]]
// SKIP-NEXT: %[[INF:.+]] = onnx.IsInf %[[SQ]]
// SKIP-NEXT: %[[NAN:.+]] = onnx.IsNaN %[[SQ]]
// SKIP-NEXT: %[[BAD:.+]] = onnx.Or %[[NAN]], %[[INF]]
// SKIP: %[[M:.+]] = onnx.Where %[[BAD]], %w.master_{{[0-9]+}}, %param_out
// SKIP-NEXT: ml_program.global_store @w.master = %[[M]]
// SKIP: %[[W:.+]] = onnx.Where %[[BAD]], %w_{{[0-9]+}}, %{{.+}} : (tensor<i1>, tensor<4x3xbf16>, tensor<4x3xbf16>)
// SKIP-NEXT: ml_program.global_store @w = %[[W]]
// SKIP: %[[A:.+]] = onnx.Where %[[BAD]], %w.exp_avg_{{[0-9]+}}, %exp_avg_out
// SKIP-NEXT: ml_program.global_store @w.exp_avg = %[[A]]
// SKIP: %[[B:.+]] = onnx.Where %[[BAD]], %w.exp_avg_sq_{{[0-9]+}}, %exp_avg_sq_out
// SKIP-NEXT: ml_program.global_store @w.exp_avg_sq = %[[B]]
// SKIP: %[[C:.+]] = onnx.Where %[[BAD]], %optimizer_step_{{[0-9]+}}, %[[COUNT]]
// SKIP-NEXT: ml_program.global_store @optimizer_step = %[[C]]
// SKIP-NEXT: %[[FLAG:.+]] = onnx.Cast %[[BAD]] {to = f32}
// SKIP-NEXT: return %{{.+}}, %[[NORM]], %{{.+}}, %[[FLAG]]

// Without it (the pass's default), nothing of this: no flag, no Where.
// NOSKIP-NOT: zero.skip_nonfinite
// NOSKIP-NOT: skipped
// NOSKIP-NOT: onnx.IsNaN
// NOSKIP-NOT: onnx.Where
