// RUN: zero-opt %s --split-input-file --zero-lower-to-runtime | FileCheck %s
// RUN: zero-opt %s --split-input-file --zero-lower-to-runtime=fuse-elementwise=false | FileCheck %s --check-prefix=NOFUSE

// Tests that an elementwise DAG becomes one fused kernel: the bias add
// broadcasts, scalar constants are folded into the program (the Pow exponent
// among them), and the intermediates get no buffers: only x (192 B), b (64 B
// aligned) and the output (192 B) are activations.
// CHECK-LABEL: zrt.program @dag
// CHECK: zrt.arena @activations size = 448 no_reuse = 448 lower_bound = 448
// CHECK: zrt.kernel "FusedElementwise" on @compute [@[[X:.+]], @[[B:.+]]] -> [@[[Y:.+]]] {constants = array<f64: 5.000000e-01, 3.000000e+00>, ops = array<i64: 0, 0, 1, 2, 2, -1, 4, 2, -2, 12, 4, 0, 0, 3, 5>}
// CHECK-NOT: zrt.kernel
// CHECK: zrt.output "y" from @[[Y]]
// NOFUSE-LABEL: zrt.program @dag
// NOFUSE: zrt.kernel "Add"
// NOFUSE: zrt.kernel "Mul"
// NOFUSE: zrt.kernel "Pow"
// NOFUSE: zrt.kernel "Tanh"
// NOFUSE: zrt.kernel "Add"
// NOFUSE-NOT: FusedElementwise
func.func @dag(%x: tensor<2x3x8xf32> {onnx.name = "x"}, %b: tensor<8xf32> {onnx.name = "b"}) -> (tensor<2x3x8xf32> {onnx.name = "y"}) {
  %h = onnx.Add %x, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %half = onnx.Constant dense<0.5> : tensor<f32>
  %m = onnx.Mul %h, %half : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %three = onnx.Constant dense<3.0> : tensor<f32>
  %p = onnx.Pow %h, %three : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %t = onnx.Tanh %p : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %y = onnx.Add %m, %t : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// Tests that a value read outside a group ends the group: %a is also a
// function output and %c is read by a Reshape (a view) and by a Pow with a
// computed exponent (not fusible), so neither is an intermediate: Relu stays
// alone, Neg + Exp fuse with %c as the output, Pow stays alone, and Add +
// Sigmoid fuse.
// CHECK-LABEL: zrt.program @limits
// CHECK: zrt.kernel "Relu"
// CHECK: zrt.kernel "FusedElementwise" on @compute [@{{.+}}] -> [@{{.+}}] {ops = array<i64: 5, 0, 0, 10, 1, 0>}
// CHECK: zrt.kernel "Pow"
// CHECK: zrt.kernel "FusedElementwise" on @compute [@{{.+}}, @{{.+}}] -> [@{{.+}}] {ops = array<i64: 0, 0, 1, 14, 2, 0>}
// CHECK-NOT: zrt.kernel
func.func @limits(%x: tensor<4xf32>, %e: tensor<4xf32>) -> (tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>) {
  %a = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %n = onnx.Neg %a : (tensor<4xf32>) -> tensor<4xf32>
  %c = onnx.Exp %n : (tensor<4xf32>) -> tensor<4xf32>
  %v = onnx.Reshape %c {shape = array<i64: 2, 2>} : (tensor<4xf32>) -> tensor<2x2xf32>
  %p = onnx.Pow %c, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = onnx.Add %p, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g = onnx.Sigmoid %s : (tensor<4xf32>) -> tensor<4xf32>
  return %a, %v, %g : tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>
}

// -----

// Tests that a pipeline's step marks (zero.pipeline_step) do not stop fusion:
// each step's chain fuses, no group spans two steps (the schedule runs them
// apart), and the fused instruction keeps its step.
// CHECK-LABEL: zrt.program @steps
// CHECK: zrt.kernel "FusedElementwise" on @compute [@{{.+}}] -> [@[[F0:.+]]] {ops = array<i64: 5, 0, 0, 10, 1, 0>, pipeline_step = "F0"}
// CHECK: zrt.kernel "FusedElementwise" on @compute [@[[F0]]] -> [@{{.+}}] {ops = array<i64: {{.+}}>, pipeline_step = "B0"}
// CHECK-NOT: zrt.kernel
func.func @steps(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = onnx.Neg %x {zero.pipeline_step = "F0"} : (tensor<4xf32>) -> tensor<4xf32>
  %b = onnx.Exp %a {zero.pipeline_step = "F0"} : (tensor<4xf32>) -> tensor<4xf32>
  %c = onnx.Relu %b {zero.pipeline_step = "B0"} : (tensor<4xf32>) -> tensor<4xf32>
  %d = onnx.Sigmoid %c {zero.pipeline_step = "B0"} : (tensor<4xf32>) -> tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

// Tests that a bf16 chain fuses as an f32 one does, its scalar bf16 constants
// folded into the program, with round_to = "bf16": each op's result is rounded
// to bf16 before the next reads it (the bits of the 16-bit kernels one by one).
// The Tanh is also returned, so it roots its group; the Cast that widens it
// and the f32 Exp form a second group (opcode 15: the Cast), whose bf16 input
// the kernel widens as it reads it; all its ops are f32, so no rounding attr.
// CHECK-LABEL: zrt.program @bf16
// CHECK: zrt.kernel "FusedElementwise" on @compute [@[[X:.+]], @[[B:.+]]] -> [@[[H:.+]]] {constants = array<f64: 5.000000e-01>, ops = array<i64: 0, 0, 1, 2, 2, -1, 12, 3, 0>, round_to = "bf16"}
// CHECK: zrt.kernel "FusedElementwise" on @compute [@[[H]]] -> [@{{.+}}] {ops = array<i64: 15, 0, 0, 10, 1, 0>}
// CHECK-NOT: zrt.kernel
func.func @bf16(%x: tensor<2x8xbf16> {onnx.name = "x"}, %b: tensor<8xbf16> {onnx.name = "b"}) -> (tensor<2x8xbf16> {onnx.name = "y"}, tensor<2x8xf32> {onnx.name = "z"}) {
  %h = onnx.Add %x, %b : (tensor<2x8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
  %half = onnx.Constant dense<0.5> : tensor<bf16>
  %m = onnx.Mul %h, %half : (tensor<2x8xbf16>, tensor<bf16>) -> tensor<2x8xbf16>
  %t = onnx.Tanh %m : (tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %w = onnx.Cast %t {to = f32} : (tensor<2x8xbf16>) -> tensor<2x8xf32>
  %e = onnx.Exp %w : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %t, %e : tensor<2x8xbf16>, tensor<2x8xf32>
}

// -----

// Tests a mixed-precision region as zero-mixed-precision writes GPT-2's GELU
// (its Pow kept in f32, as autocast keeps it): the Casts join the bf16 and
// the f32 ops into one group, and `op_types` gives each op's type (2 bf16,
// 0 f32): the bf16 Mul, the widening Cast, the f32 Pow and Mul, the Cast back
// (rounded to bf16), the bf16 Add and Tanh. The last op is the output's.
// CHECK-LABEL: zrt.program @mixed
// CHECK: zrt.kernel "FusedElementwise" on @compute [@[[X:.+]]] -> [@{{.+}}] {constants = array<f64: 5.000000e-01, 3.000000e+00, 0.044714998453855515>, op_types = array<i64: 2, 0, 0, 0, 2, 2, 2, 2>, ops = array<i64: 2, 0, -1, 15, 0, 0, 4, 2, -2, 2, 3, -3, 15, 4, 0, 0, 0, 5, 12, 6, 0, 2, 1, 7>}
// CHECK-NOT: zrt.kernel "Cast"
// CHECK-NOT: zrt.kernel "Pow"
// NOFUSE-LABEL: zrt.program @mixed
// NOFUSE-COUNT-2: zrt.kernel "Cast"
func.func @mixed(%x: tensor<4x8xbf16> {onnx.name = "x"}) -> (tensor<4x8xbf16> {onnx.name = "y"}) {
  %half = onnx.Constant dense<0.5> : tensor<bf16>
  %m = onnx.Mul %x, %half : (tensor<4x8xbf16>, tensor<bf16>) -> tensor<4x8xbf16>
  %three = onnx.Constant dense<3.0> : tensor<f32>
  %w = onnx.Cast %x {to = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %p = onnx.Pow %w, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %c = onnx.Constant dense<0.044715> : tensor<f32>
  %pc = onnx.Mul %p, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %n = onnx.Cast %pc {to = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %a = onnx.Add %x, %n : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %t = onnx.Tanh %a : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %y = onnx.Mul %m, %t : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}
