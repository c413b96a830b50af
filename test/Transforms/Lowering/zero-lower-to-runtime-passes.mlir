// RUN: zero-opt %s --zero-lower-to-runtime --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s

// Tests that zero-lower-to-runtime first runs zero-inline-pipeline-stages on
// the module (the stage functions gone, their ops in @forward marked with
// their stage), then zero-simplify-kernels on @forward alone (the MatMul of
// the transposed weight a Gemm of stage 1) and zero-fuse-elementwise (stage
// 0's Relu + Neg one group), each shown by name, then lowers the result
// (instruction selection), whose program goes through zero-plan-memory (@w's
// block read by stage 1 only: stages bit 1), zero-insert-events,
// zero-plan-in-order and zero-finalize-program, each shown by name: the
// group is one FusedElementwise on stage 0's rank, and the Gemm reads @w's
// block as stored and runs on stage 1's rank.
// CHECK-LABEL: IR Dump After ZeroInlinePipelineStagesPass (zero-inline-pipeline-stages)
// CHECK:         func.func @forward
// CHECK-NEXT:      onnx.Relu %{{.+}} {zero.pipeline_stage = 0 : i64}
// CHECK:           onnx.Transpose %{{.+}} {perm = array<i64: 1, 0>, zero.pipeline_stage = 1 : i64}
// CHECK-NEXT:      onnx.MatMul %{{.+}} {zero.pipeline_stage = 1 : i64}
// CHECK-NOT:     func.func
// CHECK-LABEL: IR Dump After ZeroSimplifyKernelsPass (zero-simplify-kernels)
// CHECK-NEXT:  func.func @forward
// CHECK:         %[[W:.+]] = ml_program.global_load @w
// CHECK-NEXT:    onnx.Gemm %{{.+}}, %[[W]] {beta = 0.000000e+00 : f32, transB = 1 : i64, zero.pipeline_stage = 1 : i64}
// CHECK-NOT:     onnx.Transpose
// CHECK-LABEL: IR Dump After ZeroFuseElementwisePass (zero-fuse-elementwise)
// CHECK-NEXT:  func.func @forward
// CHECK-NEXT:    onnx.Relu %{{.+}} {zero.fusion_group = 0 : i64, zero.pipeline_stage = 0 : i64}
// CHECK-NEXT:    onnx.Neg %{{.+}} {zero.fusion_group = 0 : i64, zero.pipeline_stage = 0 : i64}
// CHECK-NOT:     zero.fusion_group
// CHECK-LABEL: IR Dump After ZeroPlanMemoryPass (zero-plan-memory)
// CHECK:         zrt.block @{{.+}} in @params bytes = 32 {def = -1 : i64, last_use = {{.+}}, offset = 0 : i64, stages = 2 : i64}
// CHECK-NOT:     zrt.release
// CHECK-LABEL: IR Dump After ZeroInsertEventsPass (zero-insert-events)
// CHECK:         zrt.wait
// CHECK-LABEL: IR Dump After ZeroPlanInOrderPass (zero-plan-in-order)
// CHECK-LABEL: IR Dump After ZeroFinalizeProgramPass (zero-finalize-program)
// CHECK-NOT:     zrt.block
// CHECK-LABEL: IR Dump After ZeroLowerToRuntimePass (zero-lower-to-runtime)
// CHECK:         zrt.buffer @[[B:.+]] : tensor<2x4xf32> at @params[0]
// CHECK:         zrt.kernel "FusedElementwise" on @compute [@{{.+}}] -> [@{{.+}}] {ops = array<i64: 7, 0, 0, 5, 1, 0>} {ranks = array<i64: 0>}
// CHECK:         zrt.kernel "Gemm" on @compute [@{{.+}}, @[[B]]] -> [@{{.+}}] {{.+}}transB = 1 : i64} {flops = {{[0-9]+}} : i64, ranks = array<i64: 1>}
module attributes {zero.pipeline_plan = #zero.pipeline_plan<stages = 2, partition = "uniform", layers = ["relu", "matmul"], layer_params = [0, 8], parts = [0, 1, 2], micro_batches = 1, dp = 1, schedule = "fill-drain">, zero.world_size = 2 : i64} {
  ml_program.global private @w(#ml_program.extern : tensor<2x4xf32>) : tensor<2x4xf32>
  func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
    %y = call @forward_stage0(%x) : (tensor<3x4xf32>) -> tensor<3x2xf32>
    call @forward_stage1() : () -> ()
    return %y : tensor<3x2xf32>
  }
  func.func private @forward_stage0(%x: tensor<3x4xf32>) -> tensor<3x2xf32> attributes {zero.pipeline_stage = 0 : i64} {
    %r = onnx.Relu %x : (tensor<3x4xf32>) -> tensor<3x4xf32>
    %n = onnx.Neg %r : (tensor<3x4xf32>) -> tensor<3x4xf32>
    zero.send %n {peer = 1 : i64, tag = 0 : i64} : tensor<3x4xf32>
    %y = zero.recv {peer = 1 : i64, tag = 1 : i64} : tensor<3x2xf32>
    return %y : tensor<3x2xf32>
  }
  func.func private @forward_stage1() attributes {zero.pipeline_stage = 1 : i64} {
    %h = zero.recv {peer = 0 : i64, tag = 0 : i64} : tensor<3x4xf32>
    %w = ml_program.global_load @w : tensor<2x4xf32>
    %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %y = onnx.MatMul %h, %t : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    zero.send %y {peer = 0 : i64, tag = 1 : i64} : tensor<3x2xf32>
    return
  }
}
