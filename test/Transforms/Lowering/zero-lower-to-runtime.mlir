// RUN: zero-opt %s --split-input-file --zero-lower-to-runtime=fuse-elementwise=false | FileCheck %s
// (One kernel per op: these cases test the memory plan, events and views;
// test/Transforms/Lowering/zero-lower-to-runtime-fuse.mlir tests fusion.)

// Tests that the memory plan reuses a dead value's space on a chain: each value
// is live from its producer to its last reader, so the third value reuses the
// first one's space; the arena records the planned size (128 B), the no-reuse
// total (4 x 64 B) and the live-bytes lower bound (two 64 B blocks at once).
// CHECK-LABEL: zrt.program @chain world_size = 1
// CHECK: zrt.arena @activations size = 128 no_reuse = 256 lower_bound = 128
// CHECK: zrt.buffer @[[X:.+]] : tensor<4xf32> at @activations[[[XO:[0-9]+]]]
// CHECK: zrt.input "x" -> @[[X]]
// CHECK: zrt.buffer @[[A:.+]] : tensor<4xf32> at @activations[[[AO:[0-9]+]]]
// CHECK: zrt.kernel "Relu" on @compute [@[[X]]] -> [@[[A]]] {}
// CHECK: zrt.buffer @[[B:.+]] : tensor<4xf32> at @activations[[[XO]]]
// CHECK: zrt.kernel "Neg" on @compute [@[[A]]] -> [@[[B]]] {}
// CHECK: zrt.buffer @[[C:.+]] : tensor<4xf32> at @activations[[[AO]]]
// CHECK: zrt.kernel "Exp" on @compute [@[[B]]] -> [@[[C]]] {}
// CHECK: zrt.output "y" from @[[C]]
// CHECK-NOT: zrt.record
func.func @chain(%x: tensor<4xf32> {onnx.name = "x"}) -> (tensor<4xf32> {onnx.name = "y"}) {
  %a = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %b = onnx.Neg %a : (tensor<4xf32>) -> tensor<4xf32>
  %c = onnx.Exp %b : (tensor<4xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// Tests that reshapes are free views of their operand's bytes, that small
// constants go to the constants arena and large splats become Fill kernels.
// Activations: x (64 B, dead after Add), s (64 B) and the 400-byte splat
// (448 B aligned) live together at the end: 512 B, which is also the bound.
// CHECK-LABEL: zrt.program @views
// CHECK: zrt.arena @constants size = 64 no_reuse = 64 lower_bound = 64
// CHECK: zrt.arena @activations size = 512 no_reuse = 576 lower_bound = 512
// CHECK: zrt.buffer @[[K:.+]] : tensor<6xf32> at @constants[0]
// CHECK: zrt.constant @[[K]] = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00]> : tensor<6xf32>
// CHECK: zrt.buffer @[[X:.+]] : tensor<2x3xf32> at @activations[[[XO:[0-9]+]]]
// CHECK: zrt.buffer @[[XV:.+]] : tensor<6xf32> at @activations[[[XO]]]
// CHECK: zrt.kernel "Add" on @compute [@[[XV]], @[[K]]]
// CHECK: zrt.kernel "Fill" on @compute [] -> [@{{.+}}] {value = 5.000000e-01 : f64}
func.func @views(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<100xf32>) {
  %k = onnx.Constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : tensor<6xf32>
  %f = onnx.Reshape %x {shape = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf32>
  %s = onnx.Add %f, %k : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %h = onnx.Constant dense<0.5> : tensor<100xf32>
  return %s, %h : tensor<6xf32>, tensor<100xf32>
}

// -----

// Tests that a gather runs on the communication stream and is ordered by an
// event: compute waits for the event before the first use, and the gathered
// block dies at its release, so four 64-byte values need only 192 bytes.
// CHECK-LABEL: zrt.program @gathered world_size = 2
// CHECK: zrt.group @world [0, 1]
// CHECK: zrt.arena @activations size = 192 no_reuse = 256 lower_bound = 192
// CHECK: zrt.global "w" tensor "w" : tensor<4x2xf32> into @[[S:.+]] {padded_numel = 8 : i64, shard_world = 2 : i64}
// CHECK: zrt.buffer @[[G:.+]] : tensor<8xf32> at @activations[[[GO:[0-9]+]]]
// CHECK: zrt.collective "AllGather" on @comm group @world [@[[S]]] -> [@[[G]]] {}
// CHECK-NEXT: zrt.record 0 on @comm
// CHECK-NEXT: zrt.wait 0 on @compute
// CHECK: zrt.buffer @[[W:.+]] : tensor<4x2xf32> at @activations[[[GO]]]
// CHECK: zrt.kernel "MatMul" on @compute [@{{.+}}, @[[W]]] -> [@[[Y:.+]]] {}
// CHECK: zrt.kernel "Relu" on @compute [@[[Y]]]
// CHECK-NOT: zrt.wait
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.full_type = tensor<4x2xf32>, zero.shard = #zero.shard<world = 2, numel = 8, padded_numel = 8>, zero.tensor = "w"}
  func.func @gathered(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
    %s = ml_program.global_load @w : tensor<4xf32>
    %g = zero.all_gather %s {world = 2 : i64} : tensor<4xf32> -> tensor<8xf32>
    %w = onnx.Reshape %g {shape = array<i64: 4, 2>} : (tensor<8xf32>) -> tensor<4x2xf32>
    %y = onnx.MatMul %x, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    zero.release %w : tensor<4x2xf32>
    %r = onnx.Relu %y : (tensor<3x2xf32>) -> tensor<3x2xf32>
    return %r : tensor<3x2xf32>
  }
}

// -----

// Tests that zero.release is when a gathered buffer dies: released after its
// use, w1's gathered block is free for w2's gather (x, a and b, 64 bytes
// each, and one gathered block are live at most: 192 bytes).
// CHECK-LABEL: zrt.program @released world_size = 2
// CHECK: zrt.arena @activations size = 192
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w1(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w1"}
  ml_program.global private @w2(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w2"}
  func.func @released(%x: tensor<16xf32>) -> tensor<16xf32> {
    %s1 = ml_program.global_load @w1 : tensor<8xf32>
    %g1 = zero.all_gather %s1 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %a = onnx.Add %x, %g1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    zero.release %g1 : tensor<16xf32>
    %s2 = ml_program.global_load @w2 : tensor<8xf32>
    %g2 = zero.all_gather %s2 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %b = onnx.Add %a, %g2 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    zero.release %g2 : tensor<16xf32>
    return %b : tensor<16xf32>
  }
}

// -----

// Tests that a gathered parameter never released stays gathered to the end of
// the program (as DeepSpeed keeps a parameter it was not told to release):
// the same function without releases holds both gathered blocks at the last
// Add, 256 bytes.
// CHECK-LABEL: zrt.program @kept world_size = 2
// CHECK: zrt.arena @activations size = 256
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w1(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w1"}
  ml_program.global private @w2(#ml_program.extern : tensor<8xf32>) : tensor<8xf32> {zero.full_type = tensor<16xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "w2"}
  func.func @kept(%x: tensor<16xf32>) -> tensor<16xf32> {
    %s1 = ml_program.global_load @w1 : tensor<8xf32>
    %g1 = zero.all_gather %s1 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %a = onnx.Add %x, %g1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    %s2 = ml_program.global_load @w2 : tensor<8xf32>
    %g2 = zero.all_gather %s2 {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %b = onnx.Add %a, %g2 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    return %b : tensor<16xf32>
  }
}

// -----

// Tests that a rewrite which moves a gathered parameter's last use (MatMul of
// its transpose becomes a Gemm reading it as stored, the tied LM head) moves
// its release along: the Gemm reads the gathered block before it is reused.
// CHECK-LABEL: zrt.program @tied world_size = 2
// CHECK: zrt.buffer @[[G:.+]] : tensor<8xf32> at @activations[[[GO:[0-9]+]]]
// CHECK: zrt.collective "AllGather" on @comm group @world [@{{.+}}] -> [@[[G]]]
// CHECK: zrt.buffer @[[W:.+]] : tensor<2x4xf32> at @activations[[[GO]]]
// CHECK: zrt.kernel "Gemm" on @compute [@{{.+}}, @[[W]]] -> [@{{.+}}] {alpha = 1.000000e+00 : f32, beta = 0.000000e+00 : f32, transA = 0 : i64, transB = 1 : i64}
// CHECK-NOT: "Transpose"
module attributes {zero.world_size = 2 : i64} {
  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.full_type = tensor<2x4xf32>, zero.shard = #zero.shard<world = 2, numel = 8, padded_numel = 8>, zero.tensor = "w"}
  func.func @tied(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
    %s = ml_program.global_load @w : tensor<4xf32>
    %g = zero.all_gather %s {world = 2 : i64} : tensor<4xf32> -> tensor<8xf32>
    %w = onnx.Reshape %g {shape = array<i64: 2, 4>} : (tensor<8xf32>) -> tensor<2x4xf32>
    %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    zero.release %w : tensor<2x4xf32>
    %y = onnx.MatMul %x, %t : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    %r = onnx.Relu %y : (tensor<3x2xf32>) -> tensor<3x2xf32>
    return %r : tensor<3x2xf32>
  }
}

// -----

// Tests that a scatter writes into its data's block when nothing else reads
// that block (%a, read only by the first scatter; the first scatter's result,
// read only by the second), into a block of its own when the data is read
// after it (%b, returned) or is a view of a value read after it (%v of %c).
// CHECK-LABEL: zrt.program @scatters
// CHECK: zrt.input "input2"
// CHECK-NEXT: zrt.buffer @[[A:.+]] : tensor<4x2xf32> at @activations
// CHECK-NEXT: zrt.kernel "Relu" on @compute [@{{.+}}] -> [@[[A]]]
// CHECK: zrt.buffer @[[B:.+]] : tensor<4x2xf32> at @activations
// CHECK-NEXT: zrt.kernel "Neg" on @compute [@{{.+}}] -> [@[[B]]]
// CHECK: zrt.kernel "Abs" on @compute [@{{.+}}] -> [@{{.+}}]
// CHECK-NEXT: zrt.kernel "ScatterND" on @compute [@[[A]], @[[I:.+]], @[[U:.+]]] -> [@[[A]]] {reduction = "add"}
// CHECK-NEXT: zrt.kernel "ScatterND" on @compute [@[[A]], @[[I]], @[[U]]] -> [@[[A]]] {reduction = "add"}
// CHECK-NEXT: zrt.buffer @[[SB:.+]] : tensor<4x2xf32> at @activations
// CHECK-NEXT: zrt.kernel "ScatterND" on @compute [@[[B]], @[[I]], @[[U]]] -> [@[[SB]]] {reduction = "add"}
// CHECK-NEXT: zrt.buffer @[[V:.+]] : tensor<4x2xf32> at @activations
// CHECK-NEXT: zrt.buffer @[[SC:.+]] : tensor<4x2xf32> at @activations
// CHECK-NEXT: zrt.kernel "ScatterND" on @compute [@[[V]], @[[I]], @[[U]]] -> [@[[SC]]] {reduction = "add"}
// CHECK-NEXT: zrt.output "output0" from @[[A]]
module {
  func.func @scatters(%x: tensor<4x2xf32>, %i: tensor<3x1xi64>, %u: tensor<3x2xf32>)
      -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<8xf32>) {
    %a = onnx.Relu %x : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %b = onnx.Neg %x : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %xf = onnx.Reshape %x {shape = array<i64: 8>} : (tensor<4x2xf32>) -> tensor<8xf32>
    %c = onnx.Abs %xf : (tensor<8xf32>) -> tensor<8xf32>
    %v = onnx.Reshape %c {shape = array<i64: 4, 2>} : (tensor<8xf32>) -> tensor<4x2xf32>
    %s1 = onnx.ScatterND %a, %i, %u {reduction = "add"} : (tensor<4x2xf32>, tensor<3x1xi64>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %s2 = onnx.ScatterND %s1, %i, %u {reduction = "add"} : (tensor<4x2xf32>, tensor<3x1xi64>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %sb = onnx.ScatterND %b, %i, %u {reduction = "add"} : (tensor<4x2xf32>, tensor<3x1xi64>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %sc = onnx.ScatterND %v, %i, %u {reduction = "add"} : (tensor<4x2xf32>, tensor<3x1xi64>, tensor<3x2xf32>) -> tensor<4x2xf32>
    return %s2, %sb, %b, %sc, %c : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<8xf32>
  }
}
