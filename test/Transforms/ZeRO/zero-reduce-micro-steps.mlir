// RUN: zero-opt %s --split-input-file --zero-reduce-micro-steps="dp=2 stage=2" | FileCheck %s
// RUN: zero-opt %s --split-input-file > %t.in.mlir
// RUN: zero-opt %s --split-input-file --zero-reduce-micro-steps="dp=2 stage=1" > %t.stage1.mlir
// RUN: diff %t.in.mlir %t.stage1.mlir
// RUN: zero-opt %s --split-input-file --zero-reduce-micro-steps="dp=1 stage=2" > %t.world1.mlir
// RUN: diff %t.in.mlir %t.world1.mlir
// RUN: zero-opt %s --split-input-file --zero-reduce-micro-steps="dp=2 stage=2 gradient-sum=true" | FileCheck %s --check-prefix=GSUM

// The inputs are @train_step as zero-autodiff builds it: per micro-batch the
// forward and the backward, each parameter's micro-batch gradients summed in
// a running sum. Stage 1 (it reduces the summed gradient once, in
// zero-optimizer) and one rank leave every case as it is (the diffs above).

// Tests that with 3 micro-batches over 2 ranks each micro-batch's gradient is
// flattened, padded (15 -> 16; 3 -> 4, already flat), divided by the 2 ranks
// (as DeepSpeed's ZeRO-2 divides each micro-step's bucket; not with
// gradient-sum: GSUM) and reduce-scattered right after it is final; that a micro-batch gradient which is itself a sum
// (micro-batch 0's of @b, a parameter used twice) is reduce-scattered whole,
// the walk back from the result taking exactly 2 links; that the shards are
// summed in micro-batch order at the end, @b's first (micro-batch 0's
// backward finalized it first) though it is the second result; and that the
// results become the shards (zero.grad_shard = 2) with the running sums gone.

// GSUM-LABEL: func.func @train_step
// GSUM-NOT: dense<5.000000e-01>
// GSUM: zero.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<4xf32> -> tensor<2xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<8xf32> {onnx.name = "grad.w", zero.grad_of = @w, zero.grad_shard = 2 : i64}, tensor<2xf32> {onnx.name = "grad.b", zero.grad_of = @b, zero.grad_shard = 2 : i64})
// CHECK: %[[N0:.+]] = onnx.Neg
// CHECK-NEXT: %[[B0:.+]] = onnx.Add %[[N0]], %arg1
// CHECK-NEXT: %[[BP0:.+]] = onnx.Pad %[[B0]] {pads = array<i64: 0, 1>} : (tensor<3xf32>) -> tensor<4xf32>
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV1:.+]] = onnx.Mul %[[BP0]], %{{.+}}
// CHECK-NEXT: %[[BS0:.+]] = zero.reduce_scatter %[[DIV1]] {world = 2 : i64} : tensor<4xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[W0:.+]] = onnx.Mul
// CHECK-NEXT: %[[WF0:.+]] = onnx.Reshape %[[W0]] {shape = array<i64: 15>} : (tensor<3x5xf32>) -> tensor<15xf32>
// CHECK-NEXT: %[[WP0:.+]] = onnx.Pad %[[WF0]] {pads = array<i64: 0, 1>} : (tensor<15xf32>) -> tensor<16xf32>
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV2:.+]] = onnx.Mul %[[WP0]], %{{.+}}
// CHECK-NEXT: %[[WS0:.+]] = zero.reduce_scatter %[[DIV2]] {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: onnx.Slice %arg0 {ends = array<i64: 6, 5>
// CHECK-NEXT: %[[B1:.+]] = onnx.Neg
// CHECK-NEXT: %[[BP1:.+]] = onnx.Pad %[[B1]]
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV3:.+]] = onnx.Mul %[[BP1]], %{{.+}}
// CHECK-NEXT: %[[BS1:.+]] = zero.reduce_scatter %[[DIV3]]
// CHECK-NEXT: %[[W1:.+]] = onnx.Mul
// CHECK-NEXT: %[[WF1:.+]] = onnx.Reshape %[[W1]]
// CHECK-NEXT: %[[WP1:.+]] = onnx.Pad %[[WF1]]
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV4:.+]] = onnx.Mul %[[WP1]], %{{.+}}
// CHECK-NEXT: %[[WS1:.+]] = zero.reduce_scatter %[[DIV4]]
// CHECK-NEXT: onnx.Slice %arg0 {ends = array<i64: 9, 5>
// CHECK-NEXT: %[[B2:.+]] = onnx.Neg
// CHECK-NEXT: %[[BP2:.+]] = onnx.Pad %[[B2]]
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV5:.+]] = onnx.Mul %[[BP2]], %{{.+}}
// CHECK-NEXT: %[[BS2:.+]] = zero.reduce_scatter %[[DIV5]]
// CHECK-NEXT: %[[W2:.+]] = onnx.Mul
// CHECK-NEXT: %[[WF2:.+]] = onnx.Reshape %[[W2]]
// CHECK-NEXT: %[[WP2:.+]] = onnx.Pad %[[WF2]]
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV6:.+]] = onnx.Mul %[[WP2]], %{{.+}}
// CHECK-NEXT: %[[WS2:.+]] = zero.reduce_scatter %[[DIV6]]
// CHECK-NEXT: %[[LOSS:.+]] = onnx.ReduceSum
// CHECK-NEXT: %[[SB1:.+]] = onnx.Add %[[BS0]], %[[BS1]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[SB:.+]] = onnx.Add %[[SB1]], %[[BS2]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[SW1:.+]] = onnx.Add %[[WS0]], %[[WS1]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[SW:.+]] = onnx.Add %[[SW1]], %[[WS2]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[SW]], %[[SB]] : tensor<f32>, tensor<8xf32>, tensor<2xf32>
module attributes {zero.accumulation_steps = 3 : i64} {
  ml_program.global private mutable @w(#ml_program.extern : tensor<3x5xf32>) : tensor<3x5xf32> {zero.tensor = "w", zero.trainable}
  ml_program.global private mutable @b(#ml_program.extern : tensor<3xf32>) : tensor<3xf32> {zero.tensor = "b", zero.trainable}
  func.func @train_step(%x: tensor<9x5xf32> {onnx.name = "x"}, %c: tensor<3xf32> {onnx.name = "c"}) -> (tensor<f32> {onnx.name = "loss"}, tensor<3x5xf32> {onnx.name = "grad.w", zero.grad_of = @w}, tensor<3xf32> {onnx.name = "grad.b", zero.grad_of = @b}) {
    %x0 = onnx.Slice %x {ends = array<i64: 3, 5>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<9x5xf32>) -> tensor<3x5xf32>
    %n0 = onnx.Neg %c : (tensor<3xf32>) -> tensor<3xf32>
    %b0 = onnx.Add %n0, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %w0 = onnx.Mul %x0, %x0 : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    %x1 = onnx.Slice %x {ends = array<i64: 6, 5>, starts = array<i64: 3, 0>, steps = array<i64: 1, 1>} : (tensor<9x5xf32>) -> tensor<3x5xf32>
    %b1 = onnx.Neg %c : (tensor<3xf32>) -> tensor<3xf32>
    %w1 = onnx.Mul %x1, %x1 : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    %sw1 = onnx.Add %w0, %w1 : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    %sb1 = onnx.Add %b0, %b1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %x2 = onnx.Slice %x {ends = array<i64: 9, 5>, starts = array<i64: 6, 0>, steps = array<i64: 1, 1>} : (tensor<9x5xf32>) -> tensor<3x5xf32>
    %b2 = onnx.Neg %c : (tensor<3xf32>) -> tensor<3xf32>
    %w2 = onnx.Mul %x2, %x2 : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    %sw2 = onnx.Add %sw1, %w2 : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    %sb2 = onnx.Add %sb1, %b2 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %loss = onnx.ReduceSum %x {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<9x5xf32>) -> tensor<f32>
    return %loss, %sw2, %sb2 : tensor<f32>, tensor<3x5xf32>, tensor<3xf32>
  }
}

// -----

// Tests that an embedding's gradient (a Gather's rows scatter-added) is
// reduce-scattered per micro-batch: micro-batch 0's is the reverse rule's
// scatter-add into zeros, reduce-scattered as it is (21 -> 22 elements); the
// later ones, which zero-autodiff scatter-added straight into the running
// sum, are materialized again as the rule made them (a table of zeros and the
// micro-batch's rows scatter-added into it, right after those rows and their
// indices) and reduce-scattered there; no ScatterND into the running sum is
// left.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<11xf32> {onnx.name = "grad.e", zero.grad_of = @e, zero.grad_shard = 2 : i64}
// CHECK: %[[G0:.+]] = onnx.ScatterND %{{.+}}, %{{.+}}, %{{.+}} {reduction = "add"} : (tensor<7x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<7x3xf32>
// CHECK-NEXT: %[[F0:.+]] = onnx.Reshape %[[G0]] {shape = array<i64: 21>} : (tensor<7x3xf32>) -> tensor<21xf32>
// CHECK-NEXT: %[[P0:.+]] = onnx.Pad %[[F0]] {pads = array<i64: 0, 1>} : (tensor<21xf32>) -> tensor<22xf32>
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV7:.+]] = onnx.Mul %[[P0]], %{{.+}}
// CHECK-NEXT: %[[S0:.+]] = zero.reduce_scatter %[[DIV7]] {world = 2 : i64} : tensor<22xf32> -> tensor<11xf32>
// CHECK: %[[DY1:.+]] = onnx.Constant dense<2.000000e+00> : tensor<2x3xf32>
// CHECK-NEXT: %[[I1:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 2, 1>} : (tensor<2xi64>) -> tensor<2x1xi64>
// CHECK-NEXT: %[[Z1:.+]] = onnx.Constant dense<0.000000e+00> : tensor<7x3xf32>
// CHECK-NEXT: %[[G1:.+]] = onnx.ScatterND %[[Z1]], %[[I1]], %[[DY1]] {reduction = "add"} : (tensor<7x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<7x3xf32>
// CHECK-NEXT: %[[F1:.+]] = onnx.Reshape %[[G1]] {shape = array<i64: 21>}
// CHECK-NEXT: %[[P1:.+]] = onnx.Pad %[[F1]] {pads = array<i64: 0, 1>}
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV8:.+]] = onnx.Mul %[[P1]], %{{.+}}
// CHECK-NEXT: %[[S1:.+]] = zero.reduce_scatter %[[DIV8]] {world = 2 : i64} : tensor<22xf32> -> tensor<11xf32>
// CHECK-NEXT: onnx.Add %{{.+}}, %{{.+}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[DY2:.+]] = onnx.Constant dense<3.000000e+00> : tensor<2x3xf32>
// CHECK-NEXT: %[[I2:.+]] = onnx.Reshape
// CHECK-NEXT: %[[Z2:.+]] = onnx.Constant dense<0.000000e+00> : tensor<7x3xf32>
// CHECK-NEXT: %[[G2:.+]] = onnx.ScatterND %[[Z2]], %[[I2]], %[[DY2]] {reduction = "add"}
// CHECK-NEXT: %[[F2:.+]] = onnx.Reshape %[[G2]]
// CHECK-NEXT: %[[P2:.+]] = onnx.Pad %[[F2]]
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV9:.+]] = onnx.Mul %[[P2]], %{{.+}}
// CHECK-NEXT: %[[S2:.+]] = zero.reduce_scatter %[[DIV9]]
// CHECK-NOT: onnx.ScatterND
// CHECK: %[[SUM1:.+]] = onnx.Add %[[S0]], %[[S1]] : (tensor<11xf32>, tensor<11xf32>) -> tensor<11xf32>
// CHECK-NEXT: %[[SUM:.+]] = onnx.Add %[[SUM1]], %[[S2]]
// CHECK-NEXT: return %{{.+}}, %[[SUM]] : tensor<f32>, tensor<11xf32>
module attributes {zero.accumulation_steps = 3 : i64} {
  ml_program.global private mutable @e(#ml_program.extern : tensor<7x3xf32>) : tensor<7x3xf32> {zero.tensor = "e", zero.trainable}
  func.func @train_step(%ids: tensor<6xi64> {onnx.name = "ids"}) -> (tensor<f32> {onnx.name = "loss"}, tensor<7x3xf32> {onnx.name = "grad.e", zero.grad_of = @e}) {
    %ids0 = onnx.Slice %ids {ends = array<i64: 2>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<6xi64>) -> tensor<2xi64>
    %e0 = ml_program.global_load @e : tensor<7x3xf32>
    %h0 = onnx.Gather %e0, %ids0 : (tensor<7x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
    %l0 = onnx.ReduceSum %h0 {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    %dy0 = onnx.Constant dense<1.000000e+00> : tensor<2x3xf32>
    %i0 = onnx.Reshape %ids0 {shape = array<i64: 2, 1>} : (tensor<2xi64>) -> tensor<2x1xi64>
    %z0 = onnx.Constant dense<0.000000e+00> : tensor<7x3xf32>
    %g0 = onnx.ScatterND %z0, %i0, %dy0 {reduction = "add"} : (tensor<7x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<7x3xf32>
    %ids1 = onnx.Slice %ids {ends = array<i64: 4>, starts = array<i64: 2>, steps = array<i64: 1>} : (tensor<6xi64>) -> tensor<2xi64>
    %e1 = ml_program.global_load @e : tensor<7x3xf32>
    %h1 = onnx.Gather %e1, %ids1 : (tensor<7x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
    %l1 = onnx.ReduceSum %h1 {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    %dy1 = onnx.Constant dense<2.000000e+00> : tensor<2x3xf32>
    %i1 = onnx.Reshape %ids1 {shape = array<i64: 2, 1>} : (tensor<2xi64>) -> tensor<2x1xi64>
    %s1 = onnx.ScatterND %g0, %i1, %dy1 {reduction = "add"} : (tensor<7x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<7x3xf32>
    %ls1 = onnx.Add %l0, %l1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %ids2 = onnx.Slice %ids {ends = array<i64: 6>, starts = array<i64: 4>, steps = array<i64: 1>} : (tensor<6xi64>) -> tensor<2xi64>
    %e2 = ml_program.global_load @e : tensor<7x3xf32>
    %h2 = onnx.Gather %e2, %ids2 : (tensor<7x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
    %l2 = onnx.ReduceSum %h2 {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    %dy2 = onnx.Constant dense<3.000000e+00> : tensor<2x3xf32>
    %i2 = onnx.Reshape %ids2 {shape = array<i64: 2, 1>} : (tensor<2xi64>) -> tensor<2x1xi64>
    %s2 = onnx.ScatterND %s1, %i2, %dy2 {reduction = "add"} : (tensor<7x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<7x3xf32>
    %ls2 = onnx.Add %ls1, %l2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %k = onnx.Constant dense<3.000000e+00> : tensor<f32>
    %loss = onnx.Div %ls2, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %loss, %s2 : tensor<f32>, tensor<7x3xf32>
  }
}

// -----

// Tests that on a step tagged with its micro-batches (zero-autodiff's
// tag-micro-batches, for zero-pipeline-split and activation checkpointing)
// the ops added for a micro-batch's gradient carry that micro-batch and the
// backward phase, the materialized scatter of an embedding included, and the
// shard sums, after the last micro-batch, none (the step's epilogue).

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W0:.+]] = onnx.Mul %{{.+}}, %{{.+}} {zero.micro_batch = 0 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Reshape %[[W0]] {shape = array<i64: 9>, zero.micro_batch = 0 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Pad %{{.+}} {pads = array<i64: 0, 1>, zero.micro_batch = 0 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV10:.+]] = onnx.Mul %{{.+}}, %{{.+}}
// CHECK-NEXT: %[[WS0:.+]] = zero.reduce_scatter %[[DIV10]] {world = 2 : i64, zero.micro_batch = 0 : i64, zero.phase = "backward"} : tensor<10xf32> -> tensor<5xf32>
// CHECK: %[[E0:.+]] = onnx.ScatterND %{{.+}} {reduction = "add", zero.micro_batch = 0 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Reshape %[[E0]] {shape = array<i64: 12>, zero.micro_batch = 0 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV11:.+]] = onnx.Mul %{{.+}}, %{{.+}}
// CHECK-NEXT: %[[ES0:.+]] = zero.reduce_scatter %[[DIV11]] {world = 2 : i64, zero.micro_batch = 0 : i64, zero.phase = "backward"} : tensor<12xf32> -> tensor<6xf32>
// CHECK: %[[W1:.+]] = onnx.Mul %{{.+}}, %{{.+}} {zero.micro_batch = 1 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Reshape %[[W1]] {shape = array<i64: 9>, zero.micro_batch = 1 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Pad %{{.+}} {pads = array<i64: 0, 1>, zero.micro_batch = 1 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV12:.+]] = onnx.Mul %{{.+}}, %{{.+}}
// CHECK-NEXT: %[[WS1:.+]] = zero.reduce_scatter %[[DIV12]] {world = 2 : i64, zero.micro_batch = 1 : i64, zero.phase = "backward"}
// CHECK-NEXT: %[[I1:.+]] = onnx.Reshape %{{.+}} {shape = array<i64: 3, 1>, zero.micro_batch = 1 : i64, zero.phase = "backward"}
// CHECK-NEXT: %[[Z1:.+]] = onnx.Constant {zero.micro_batch = 1 : i64, zero.phase = "backward"} dense<0.000000e+00> : tensor<4x3xf32>
// CHECK-NEXT: %[[E1:.+]] = onnx.ScatterND %[[Z1]], %[[I1]], %{{.+}} {reduction = "add", zero.micro_batch = 1 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Reshape %[[E1]] {shape = array<i64: 12>, zero.micro_batch = 1 : i64, zero.phase = "backward"}
// CHECK-NEXT: onnx.Constant {{.*}}dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DIV13:.+]] = onnx.Mul %{{.+}}, %{{.+}}
// CHECK-NEXT: %[[ES1:.+]] = zero.reduce_scatter %[[DIV13]] {world = 2 : i64, zero.micro_batch = 1 : i64, zero.phase = "backward"}
// CHECK: %[[SW:.+]] = onnx.Add %[[WS0]], %[[WS1]] : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
// CHECK-NEXT: %[[SE:.+]] = onnx.Add %[[ES0]], %[[ES1]] : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
// CHECK-NEXT: return %{{.+}}, %[[SW]], %[[SE]]
module attributes {zero.accumulation_steps = 2 : i64} {
  ml_program.global private mutable @w(#ml_program.extern : tensor<3x3xf32>) : tensor<3x3xf32> {zero.tensor = "w", zero.trainable}
  ml_program.global private mutable @e(#ml_program.extern : tensor<4x3xf32>) : tensor<4x3xf32> {zero.tensor = "e", zero.trainable}
  func.func @train_step(%x: tensor<6x3xf32> {onnx.name = "x"}, %ids: tensor<6xi64> {onnx.name = "ids"}) -> (tensor<f32> {onnx.name = "loss"}, tensor<3x3xf32> {onnx.name = "grad.w", zero.grad_of = @w}, tensor<4x3xf32> {onnx.name = "grad.e", zero.grad_of = @e}) {
    %x0 = onnx.Slice %x {ends = array<i64: 3, 3>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>, zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<6x3xf32>) -> tensor<3x3xf32>
    %ids0 = onnx.Slice %ids {ends = array<i64: 3>, starts = array<i64: 0>, steps = array<i64: 1>, zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<6xi64>) -> tensor<3xi64>
    %l0 = onnx.ReduceSum %x0 {axes = array<i64: 0, 1>, keepdims = 0 : i64, zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<3x3xf32>) -> tensor<f32>
    %w0 = onnx.Mul %x0, %x0 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %i0 = onnx.Reshape %ids0 {shape = array<i64: 3, 1>, zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<3xi64>) -> tensor<3x1xi64>
    %z0 = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<0.000000e+00> : tensor<4x3xf32>
    %e0 = onnx.ScatterND %z0, %i0, %x0 {reduction = "add", zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<4x3xf32>, tensor<3x1xi64>, tensor<3x3xf32>) -> tensor<4x3xf32>
    %x1 = onnx.Slice %x {ends = array<i64: 6, 3>, starts = array<i64: 3, 0>, steps = array<i64: 1, 1>, zero.micro_batch = 1 : i64, zero.phase = "forward"} : (tensor<6x3xf32>) -> tensor<3x3xf32>
    %ids1 = onnx.Slice %ids {ends = array<i64: 6>, starts = array<i64: 3>, steps = array<i64: 1>, zero.micro_batch = 1 : i64, zero.phase = "forward"} : (tensor<6xi64>) -> tensor<3xi64>
    %l1 = onnx.ReduceSum %x1 {axes = array<i64: 0, 1>, keepdims = 0 : i64, zero.micro_batch = 1 : i64, zero.phase = "forward"} : (tensor<3x3xf32>) -> tensor<f32>
    %w1 = onnx.Mul %x1, %x1 {zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %i1 = onnx.Reshape %ids1 {shape = array<i64: 3, 1>, zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<3xi64>) -> tensor<3x1xi64>
    %sw = onnx.Add %w0, %w1 {zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %se = onnx.ScatterND %e0, %i1, %x1 {reduction = "add", zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<4x3xf32>, tensor<3x1xi64>, tensor<3x3xf32>) -> tensor<4x3xf32>
    %ls = onnx.Add %l0, %l1 {zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %k = onnx.Constant dense<2.000000e+00> : tensor<f32>
    %loss = onnx.Div %ls, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %loss, %sw, %se : tensor<f32>, tensor<3x3xf32>, tensor<4x3xf32>
  }
}

// -----

// Tests that a step of one micro-batch (zero.accumulation_steps = 1) is left
// as it is: zero-optimizer reduce-scatters its gradient once.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<2x3xf32> {onnx.name = "grad.w", zero.grad_of = @w})
// CHECK-NOT: zero.reduce_scatter
// CHECK: return %{{.+}}, %{{.+}} : tensor<f32>, tensor<2x3xf32>
module attributes {zero.accumulation_steps = 1 : i64} {
  ml_program.global private mutable @w(#ml_program.extern : tensor<2x3xf32>) : tensor<2x3xf32> {zero.tensor = "w", zero.trainable}
  func.func @train_step(%x: tensor<2x3xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}, tensor<2x3xf32> {onnx.name = "grad.w", zero.grad_of = @w}) {
    %loss = onnx.ReduceSum %x {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    %g = onnx.Mul %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    return %loss, %g : tensor<f32>, tensor<2x3xf32>
  }
}
