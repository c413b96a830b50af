// RUN: zero-opt %s --zero-autodiff --zero-optimizer="dp=2 stage=2 type=sgd lr=0.1" --zero-lower-to-runtime | FileCheck %s

// Tests that the lowered ZeRO-2 training step lets each gradient's
// reduce-scatter (communication stream) overlap the rest of backward (compute
// stream): the compute stream waits for none of them before the optimizer
// step, then once, for the last (the stream runs in order). Each gradient is
// divided by the ranks before its collective (as DeepSpeed's ZeRO-2), so the
// update reads the reduce-scatter's result itself; the reduce-scatter's input
// stays allocated until the next collective of the stream is issued, so no
// backward kernel reuses that memory while the collective reads it.
// CHECK: zrt.collective "ReduceScatter" on @comm group @world [{{.+}}] -> [[[R1:@b[0-9]+]]]
// CHECK-NOT: zrt.wait {{[0-9]+}} on @compute
// CHECK: zrt.kernel "MatMul" on @compute
// CHECK: zrt.collective "ReduceScatter" on @comm group @world [{{.+}}] -> [[[R2:@b[0-9]+]]]
// CHECK-NOT: zrt.wait {{[0-9]+}} on @compute
// CHECK: zrt.kernel "MatMul" on @compute
// CHECK-NOT: zrt.wait {{[0-9]+}} on @compute
// CHECK: zrt.collective "ReduceScatter" on @comm group @world [{{.+}}] -> [[[R3:@b[0-9]+]]]
// CHECK-NEXT: zrt.record [[E3:[0-9]+]] on @comm
// CHECK-NOT: zrt.wait {{[0-9]+}} on @compute
// CHECK: zrt.wait [[E3]] on @compute
// CHECK: zrt.kernel "SGD" on @compute [{{@b[0-9]+}}, [[R3]],
// CHECK: zrt.kernel "SGD" on @compute [{{@b[0-9]+}}, [[R2]],
// CHECK: zrt.kernel "SGD" on @compute [{{@b[0-9]+}}, [[R1]],
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
