// RUN: zero-opt %s --split-input-file --zero-activation-checkpoint | FileCheck %s
// RUN: zero-opt %s --split-input-file --zero-activation-checkpoint="interval=2" | FileCheck %s --check-prefix=TWO

// The inputs are training steps as zero-autodiff builds them with
// tag-micro-batches=true (zero-opt --train): every op carries its micro-batch
// (zero.micro_batch) and phase (zero.phase), and the ops of the model's layers
// carry the exporter's module path on their location (as the importer writes
// it; the parameter loads carry none, as imported loads do not). The layers
// are the blocks of the indexed container `layers`.

// Tests that with one layer per segment each layer's forward is recomputed
// right before the first backward op that reads one of its values, from the
// segment's kept input and the parameters, and that the backward then reads
// the clones only.
// Two layers, tanh(x W0) and tanh(a0 W1), one micro-batch. Layer 1's values
// are first read by its Tanh' (a1 * a1): its MatMul and Tanh are cloned there,
// reading a0 (its input, kept). Layer 0's values are first read by dW1's
// transpose of a0: its MatMul and Tanh are cloned there from x. The clones are
// backward work of the same micro-batch, marked zero.recompute; the loss still
// reads the forward's a1, which no backward op reads any more.
// CHECK: module attributes {zero.activation_checkpoint_interval = 1 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[W0:.+]] = ml_program.global_load @w0
// CHECK-NEXT: %[[H0:.+]] = onnx.MatMul %arg0, %[[W0]] {zero.micro_batch = 0 : i64, zero.phase = "forward"}
// CHECK-NEXT: %[[A0:.+]] = onnx.Tanh %[[H0]] {zero.micro_batch = 0 : i64, zero.phase = "forward"}
// CHECK-NEXT: %[[W1:.+]] = ml_program.global_load @w1
// CHECK-NEXT: %[[H1:.+]] = onnx.MatMul %[[A0]], %[[W1]] {zero.micro_batch = 0 : i64, zero.phase = "forward"}
// CHECK-NEXT: %[[A1:.+]] = onnx.Tanh %[[H1]] {zero.micro_batch = 0 : i64, zero.phase = "forward"}
// CHECK-NEXT: %[[L:.+]] = onnx.ReduceSum %[[A1]]
// CHECK-NEXT: %[[G:.+]] = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.000000e+00> : tensor<2x4xf32>
// CHECK-NEXT: %[[ONE:.+]] = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[RH1:.+]] = onnx.MatMul %[[A0]], %[[W1]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// CHECK-NEXT: %[[RA1:.+]] = onnx.Tanh %[[RH1]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// CHECK-NEXT: %[[SQ1:.+]] = onnx.Mul %[[RA1]], %[[RA1]] {zero.micro_batch = 0 : i64, zero.phase = "backward"}
// CHECK-NEXT: %[[T1:.+]] = onnx.Sub %[[ONE]], %[[SQ1]]
// CHECK-NEXT: %[[DH1:.+]] = onnx.Mul %[[G]], %[[T1]]
// CHECK-NEXT: %[[RH0:.+]] = onnx.MatMul %arg0, %[[W0]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// CHECK-NEXT: %[[RA0:.+]] = onnx.Tanh %[[RH0]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// CHECK-NEXT: %[[A0T:.+]] = onnx.Transpose %[[RA0]]
// CHECK-NEXT: %[[DW1:.+]] = onnx.MatMul %[[A0T]], %[[DH1]]
// CHECK-NEXT: %[[W1T:.+]] = onnx.Transpose %[[W1]]
// CHECK-NEXT: %[[DA0:.+]] = onnx.MatMul %[[DH1]], %[[W1T]]
// CHECK-NEXT: %[[SQ0:.+]] = onnx.Mul %[[RA0]], %[[RA0]]
// CHECK-NEXT: %[[T0:.+]] = onnx.Sub %[[ONE]], %[[SQ0]]
// CHECK-NEXT: %[[DH0:.+]] = onnx.Mul %[[DA0]], %[[T0]]
// CHECK-NEXT: %[[XT:.+]] = onnx.Transpose %arg0
// CHECK-NEXT: %[[DW0:.+]] = onnx.MatMul %[[XT]], %[[DH0]]
// CHECK-NEXT: return %[[L]], %[[DW0]], %[[DW1]]

// With two layers per segment, both layers are one segment: the first
// backward reader of any of its values (a1's Tanh') gets the whole chain
// recomputed from x, and layer 1's clone reads layer 0's clone, so no forward
// activation is read by backward.
// TWO: module attributes {zero.activation_checkpoint_interval = 2 : i64}
// TWO-LABEL: func.func @train_step
// TWO: %[[W0:.+]] = ml_program.global_load @w0
// TWO: %[[W1:.+]] = ml_program.global_load @w1
// TWO: %[[ONE:.+]] = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.000000e+00> : tensor<f32>
// TWO-NEXT: %[[RH0:.+]] = onnx.MatMul %arg0, %[[W0]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// TWO-NEXT: %[[RA0:.+]] = onnx.Tanh %[[RH0]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// TWO-NEXT: %[[RH1:.+]] = onnx.MatMul %[[RA0]], %[[W1]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// TWO-NEXT: %[[RA1:.+]] = onnx.Tanh %[[RH1]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// TWO-NEXT: onnx.Mul %[[RA1]], %[[RA1]]
// TWO-NOT: zero.recompute
// TWO: onnx.Transpose %[[RA0]]
// TWO-NOT: zero.recompute
// TWO: onnx.Mul %[[RA0]], %[[RA0]]
// TWO-NOT: zero.recompute
// TWO: return
#file = loc("model.onnx":0:0)
#layer0 = loc(fused<{module_classes = ["Block"], module_scopes = ["layers.0"]}>[#file])
#layer1 = loc(fused<{module_classes = ["Block"], module_scopes = ["layers.1"]}>[#file])
module {
  ml_program.global private mutable @w0(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {zero.tensor = "w0", zero.trainable}
  ml_program.global private mutable @w1(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {zero.tensor = "w1", zero.trainable}
  func.func @train_step(%x: tensor<2x4xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}, tensor<4x4xf32> {onnx.name = "grad.w0", zero.grad_of = @w0}, tensor<4x4xf32> {onnx.name = "grad.w1", zero.grad_of = @w1}) {
    %w0 = ml_program.global_load @w0 : tensor<4x4xf32> {zero.micro_batch = 0 : i64, zero.phase = "forward"}
    %h0 = onnx.MatMul %x, %w0 {zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %a0 = onnx.Tanh %h0 {zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %w1 = ml_program.global_load @w1 : tensor<4x4xf32> {zero.micro_batch = 0 : i64, zero.phase = "forward"}
    %h1 = onnx.MatMul %a0, %w1 {zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#layer1)
    %a1 = onnx.Tanh %h1 {zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer1)
    %l = onnx.ReduceSum %a1 {axes = array<i64: 0, 1>, keepdims = 0 : i64, zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>) -> tensor<f32>
    %g = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.0> : tensor<2x4xf32>
    %one = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.0> : tensor<f32>
    %sq1 = onnx.Mul %a1, %a1 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer1)
    %t1 = onnx.Sub %one, %sq1 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer1)
    %dh1 = onnx.Mul %g, %t1 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer1)
    %a0t = onnx.Transpose %a0 {perm = array<i64: 1, 0>, zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>) -> tensor<4x2xf32> loc(#layer1)
    %dw1 = onnx.MatMul %a0t, %dh1 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc(#layer1)
    %w1t = onnx.Transpose %w1 {perm = array<i64: 1, 0>, zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<4x4xf32>) -> tensor<4x4xf32> loc(#layer1)
    %da0 = onnx.MatMul %dh1, %w1t {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#layer1)
    %sq0 = onnx.Mul %a0, %a0 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %t0 = onnx.Sub %one, %sq0 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %dh0 = onnx.Mul %da0, %t0 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %xt = onnx.Transpose %x {perm = array<i64: 1, 0>, zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>) -> tensor<4x2xf32> loc(#layer0)
    %dw0 = onnx.MatMul %xt, %dh0 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc(#layer0)
    return %l, %dw0, %dw1 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// Tests that each micro-batch's backward recomputes its own micro-batch's
// forward (the clones keep its zero.micro_batch and read its rows of x), and
// that only the ops a backward reader needs are cloned: a layer whose values
// no backward op reads is not recomputed.
// Two micro-batches (forward and backward of 0, then of 1, each with its
// own loads, as zero-autodiff orders them) of tanh(x_k W) (layer 0) + b
// (layer 1). The gradient of the bias Add reads no forward value, so layer 1
// is never recomputed; layer 0's MatMul and Tanh are cloned before each
// micro-batch's Tanh', the only backward reader of its values.
// CHECK: module attributes {zero.activation_checkpoint_interval = 1 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[X0:.+]] = onnx.Slice %arg0 {ends = array<i64: 2, 4>, starts = array<i64: 0, 0>
// CHECK-NEXT: %[[W:.+]] = ml_program.global_load @w
// CHECK: %[[G0:.+]] = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.000000e+00> : tensor<2x4xf32>
// CHECK-NEXT: onnx.ReduceSum %[[G0]]
// CHECK-NEXT: onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[RH0:.+]] = onnx.MatMul %[[X0]], %[[W]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// CHECK-NEXT: %[[RA0:.+]] = onnx.Tanh %[[RH0]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// CHECK-NEXT: onnx.Mul %[[RA0]], %[[RA0]] {zero.micro_batch = 0 : i64, zero.phase = "backward"}
// CHECK-NOT: zero.recompute
// CHECK: %[[X1:.+]] = onnx.Slice %arg0 {ends = array<i64: 4, 4>, starts = array<i64: 2, 0>
// CHECK-NEXT: %[[W1:.+]] = ml_program.global_load @w
// CHECK-NOT: zero.recompute
// CHECK: %[[G1:.+]] = onnx.Constant {zero.micro_batch = 1 : i64, zero.phase = "backward"} dense<1.000000e+00> : tensor<2x4xf32>
// CHECK-NEXT: onnx.ReduceSum %[[G1]]
// CHECK-NEXT: onnx.Constant {zero.micro_batch = 1 : i64, zero.phase = "backward"} dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[RH1:.+]] = onnx.MatMul %[[X1]], %[[W1]] {zero.micro_batch = 1 : i64, zero.phase = "backward", zero.recompute}
// CHECK-NEXT: %[[RA1:.+]] = onnx.Tanh %[[RH1]] {zero.micro_batch = 1 : i64, zero.phase = "backward", zero.recompute}
// CHECK-NEXT: onnx.Mul %[[RA1]], %[[RA1]] {zero.micro_batch = 1 : i64, zero.phase = "backward"}
// CHECK-NOT: zero.recompute
// CHECK: return

// With both layers in one segment the same two ops are cloned per
// micro-batch: the bias Add is in the segment but no backward reader needs it.
// TWO: module attributes {zero.activation_checkpoint_interval = 2 : i64}
// TWO-LABEL: func.func @train_step
// TWO: %[[X0:.+]] = onnx.Slice %arg0 {ends = array<i64: 2, 4>, starts = array<i64: 0, 0>
// TWO-NEXT: %[[W:.+]] = ml_program.global_load @w
// TWO-NOT: zero.recompute
// TWO: onnx.MatMul %[[X0]], %[[W]] {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// TWO-NEXT: onnx.Tanh %{{.+}} {zero.micro_batch = 0 : i64, zero.phase = "backward", zero.recompute}
// TWO-NOT: zero.recompute
// TWO: %[[X1:.+]] = onnx.Slice %arg0 {ends = array<i64: 4, 4>, starts = array<i64: 2, 0>
// TWO-NEXT: %[[W1:.+]] = ml_program.global_load @w
// TWO-NOT: zero.recompute
// TWO: onnx.MatMul %[[X1]], %[[W1]] {zero.micro_batch = 1 : i64, zero.phase = "backward", zero.recompute}
// TWO-NEXT: onnx.Tanh %{{.+}} {zero.micro_batch = 1 : i64, zero.phase = "backward", zero.recompute}
// TWO-NOT: zero.recompute
// TWO: return
#file = loc("model.onnx":0:0)
#layer0 = loc(fused<{module_classes = ["Block"], module_scopes = ["layers.0"]}>[#file])
#layer1 = loc(fused<{module_classes = ["Bias"], module_scopes = ["layers.1"]}>[#file])
module {
  ml_program.global private mutable @w(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {zero.tensor = "w", zero.trainable}
  ml_program.global private mutable @b(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "b", zero.trainable}
  func.func @train_step(%x: tensor<4x4xf32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "loss"}, tensor<4x4xf32> {onnx.name = "grad.w", zero.grad_of = @w}, tensor<4xf32> {onnx.name = "grad.b", zero.grad_of = @b}) {
    %x0 = onnx.Slice %x {ends = array<i64: 2, 4>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>, zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<4x4xf32>) -> tensor<2x4xf32>
    %w0 = ml_program.global_load @w : tensor<4x4xf32> {zero.micro_batch = 0 : i64, zero.phase = "forward"}
    %h0 = onnx.MatMul %x0, %w0 {zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %a0 = onnx.Tanh %h0 {zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %b0 = ml_program.global_load @b : tensor<4xf32> {zero.micro_batch = 0 : i64, zero.phase = "forward"}
    %y0 = onnx.Add %a0, %b0 {zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#layer1)
    %l0 = onnx.ReduceSum %y0 {axes = array<i64: 0, 1>, keepdims = 0 : i64, zero.micro_batch = 0 : i64, zero.phase = "forward"} : (tensor<2x4xf32>) -> tensor<f32>
    %g0 = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.0> : tensor<2x4xf32>
    %db0 = onnx.ReduceSum %g0 {axes = array<i64: 0>, keepdims = 0 : i64, zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>) -> tensor<4xf32> loc(#layer1)
    %one0 = onnx.Constant {zero.micro_batch = 0 : i64, zero.phase = "backward"} dense<1.0> : tensor<f32>
    %sq0 = onnx.Mul %a0, %a0 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %t0 = onnx.Sub %one0, %sq0 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %dh0 = onnx.Mul %g0, %t0 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %xt0 = onnx.Transpose %x0 {perm = array<i64: 1, 0>, zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<2x4xf32>) -> tensor<4x2xf32> loc(#layer0)
    %dw0 = onnx.MatMul %xt0, %dh0 {zero.micro_batch = 0 : i64, zero.phase = "backward"} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc(#layer0)
    %x1 = onnx.Slice %x {ends = array<i64: 4, 4>, starts = array<i64: 2, 0>, steps = array<i64: 1, 1>, zero.micro_batch = 1 : i64, zero.phase = "forward"} : (tensor<4x4xf32>) -> tensor<2x4xf32>
    %w1 = ml_program.global_load @w : tensor<4x4xf32> {zero.micro_batch = 1 : i64, zero.phase = "forward"}
    %h1 = onnx.MatMul %x1, %w1 {zero.micro_batch = 1 : i64, zero.phase = "forward"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %a1 = onnx.Tanh %h1 {zero.micro_batch = 1 : i64, zero.phase = "forward"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %b1 = ml_program.global_load @b : tensor<4xf32> {zero.micro_batch = 1 : i64, zero.phase = "forward"}
    %y1 = onnx.Add %a1, %b1 {zero.micro_batch = 1 : i64, zero.phase = "forward"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#layer1)
    %l1 = onnx.ReduceSum %y1 {axes = array<i64: 0, 1>, keepdims = 0 : i64, zero.micro_batch = 1 : i64, zero.phase = "forward"} : (tensor<2x4xf32>) -> tensor<f32>
    %g1 = onnx.Constant {zero.micro_batch = 1 : i64, zero.phase = "backward"} dense<1.0> : tensor<2x4xf32>
    %db1 = onnx.ReduceSum %g1 {axes = array<i64: 0>, keepdims = 0 : i64, zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<2x4xf32>) -> tensor<4xf32> loc(#layer1)
    %one1 = onnx.Constant {zero.micro_batch = 1 : i64, zero.phase = "backward"} dense<1.0> : tensor<f32>
    %sq1 = onnx.Mul %a1, %a1 {zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %t1 = onnx.Sub %one1, %sq1 {zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %dh1 = onnx.Mul %g1, %t1 {zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#layer0)
    %xt1 = onnx.Transpose %x1 {perm = array<i64: 1, 0>, zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<2x4xf32>) -> tensor<4x2xf32> loc(#layer0)
    %dw1 = onnx.MatMul %xt1, %dh1 {zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc(#layer0)
    %l = onnx.Add %l0, %l1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %dw = onnx.Add %dw0, %dw1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %db = onnx.Add %db0, %db1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %l, %dw, %db : tensor<f32>, tensor<4x4xf32>, tensor<4xf32>
  }
}
