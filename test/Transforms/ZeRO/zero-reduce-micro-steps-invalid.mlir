// RUN: zero-opt %s --split-input-file --verify-diagnostics --zero-reduce-micro-steps="dp=2 stage=2"
// RUN: not zero-opt %s --split-input-file --zero-reduce-micro-steps="dp=0 stage=2" 2>&1 | FileCheck %s --check-prefix=WORLD0
// RUN: not zero-opt %s --split-input-file --zero-reduce-micro-steps="dp=65537 stage=2" 2>&1 | FileCheck %s --check-prefix=WORLDBIG
// RUN: not zero-opt %s --split-input-file --zero-reduce-micro-steps="dp=2 stage=4" 2>&1 | FileCheck %s --check-prefix=STAGE4

// Tests that the options are checked before anything else: the world must be
// 1 to 65536 ranks and the stage 0 to 3; each error names the pass, the option
// and the value.
// WORLD0: error: zero-reduce-micro-steps: dp must be between 1 and 65536, got 0
// WORLDBIG: error: zero-reduce-micro-steps: dp must be between 1 and 65536, got 65537
// STAGE4: error: zero-reduce-micro-steps: stage must be 0, 1, 2 or 3, got 4

// Tests that a module without zero-autodiff's @train_step is refused.
// expected-error @below {{zero-reduce-micro-steps: no @train_step; the pass runs on zero-autodiff's training step}}
module {
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// -----

// Tests that a step without its micro-batch count (the module attribute
// zero-autodiff records) is refused.
module {
  ml_program.global private mutable @w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {zero.tensor = "w", zero.trainable}
  // expected-error @below {{'func.func' op has no micro-batch count (the module's zero.accumulation_steps, which zero-autodiff records)}}
  func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {onnx.name = "loss"}, tensor<2xf32> {onnx.name = "grad.w", zero.grad_of = @w}) {
    %l = onnx.ReduceSum %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
    return %l, %x : tensor<f32>, tensor<2xf32>
  }
}

// -----

// Tests that a step whose gradients zero-optimizer has already consumed (it
// returns no zero.grad_of result) is refused: the pass runs before it.
module attributes {zero.accumulation_steps = 2 : i64} {
  // expected-error @below {{'func.func' op returns no gradient (zero.grad_of); zero-reduce-micro-steps runs between zero-autodiff and zero-optimizer}}
  func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {onnx.name = "loss"}) {
    %l = onnx.ReduceSum %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a gradient that is already a shard (the pass ran before) is
// refused rather than reduce-scattered twice.
module attributes {zero.accumulation_steps = 2 : i64} {
  ml_program.global private mutable @w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {zero.tensor = "w", zero.trainable}
  // expected-error @below {{'func.func' op result 1 (grad.w) is already a gradient shard (zero.grad_shard)}}
  func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {onnx.name = "loss"}, tensor<1xf32> {onnx.name = "grad.w", zero.grad_of = @w, zero.grad_shard = 2 : i64}) {
    %l = onnx.ReduceSum %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
    %s = zero.reduce_scatter %x {world = 2 : i64} : tensor<2xf32> -> tensor<1xf32>
    return %l, %s : tensor<f32>, tensor<1xf32>
  }
}

// -----

// Tests that a gradient that is not summed over the micro-batches (a block
// argument where the running sum should be) is refused, naming the result.
module attributes {zero.accumulation_steps = 2 : i64} {
  ml_program.global private mutable @w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {zero.tensor = "w", zero.trainable}
  // expected-error @below {{'func.func' op result 1 (grad.w) is not a sum over the micro-batches: micro-batch 1's gradient would be added to a block argument}}
  func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {onnx.name = "loss"}, tensor<2xf32> {onnx.name = "grad.w", zero.grad_of = @w}) {
    %l = onnx.ReduceSum %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
    return %l, %x : tensor<f32>, tensor<2xf32>
  }
}

// -----

// Tests that a link of the running sum that is not an elementwise Add or a
// ScatterND add (here a Mul; a broadcasting Add is refused the same way) is
// refused at that op.
module attributes {zero.accumulation_steps = 2 : i64} {
  ml_program.global private mutable @w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {zero.tensor = "w", zero.trainable}
  func.func @train_step(%x: tensor<2xf32>, %y: tensor<2xf32>) -> (tensor<f32> {onnx.name = "loss"}, tensor<2xf32> {onnx.name = "grad.w", zero.grad_of = @w}) {
    %l = onnx.ReduceSum %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
    // expected-error @below {{'onnx.Mul' op should add micro-batch 1's gradient to the running sum of result 1 (grad.w), but it is not an elementwise onnx.Add or an onnx.ScatterND add (zero-reduce-micro-steps runs on zero-autodiff's @train_step)}}
    %s = onnx.Mul %x, %y : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %l, %s : tensor<f32>, tensor<2xf32>
  }
}

// -----

// Tests that a running sum another op also reads is refused: replacing it by
// shards would change what that op reads.
module attributes {zero.accumulation_steps = 3 : i64} {
  ml_program.global private mutable @w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {zero.tensor = "w", zero.trainable}
  func.func @train_step(%x: tensor<2xf32>, %y: tensor<2xf32>, %z: tensor<2xf32>) -> (tensor<f32> {onnx.name = "loss"}, tensor<2xf32> {onnx.name = "grad.w", zero.grad_of = @w}, tensor<2xf32> {onnx.name = "sum"}) {
    %l = onnx.ReduceSum %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
    // expected-error @below {{'onnx.Add' op should add micro-batch 1's gradient to the running sum of result 1 (grad.w), but its sum has other readers}}
    %s1 = onnx.Add %x, %y : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %s2 = onnx.Add %s1, %z : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %l, %s2, %s1 : tensor<f32>, tensor<2xf32>, tensor<2xf32>
  }
}

// -----

// Tests that on a tagged step a link of another micro-batch than expected
// (the sum has fewer links than zero.accumulation_steps says) is refused.
module attributes {zero.accumulation_steps = 3 : i64} {
  ml_program.global private mutable @w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {zero.tensor = "w", zero.trainable}
  func.func @train_step(%x: tensor<2xf32>, %y: tensor<2xf32>, %z: tensor<2xf32>) -> (tensor<f32> {onnx.name = "loss"}, tensor<2xf32> {onnx.name = "grad.w", zero.grad_of = @w}) {
    %l = onnx.ReduceSum %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
    %u = onnx.Add %x, %y {zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    // expected-error @below {{'onnx.Add' op should add micro-batch 2's gradient to the running sum of result 1 (grad.w), but it is tagged micro-batch 1}}
    %s = onnx.Add %u, %z {zero.micro_batch = 1 : i64, zero.phase = "backward"} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %l, %s : tensor<f32>, tensor<2xf32>
  }
}
