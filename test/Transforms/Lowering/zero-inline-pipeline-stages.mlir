// RUN: zero-opt %s --split-input-file --zero-inline-pipeline-stages | FileCheck %s
// RUN: awk '/^\/\/ -----/ { n++; next } n == 3' %s | zero-opt --zero-inline-pipeline-stages=function=forward | FileCheck %s --check-prefix=FN

// Tests that each stage's body replaces its call, in call order, every op
// marked with its stage (the other zero.* marks kept), that the call's
// result becomes what the stage returns, and that both stage functions are
// erased once inlined.
// CHECK-LABEL: func.func @forward
// CHECK-SAME:    (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[R:.+]] = onnx.Relu %[[X]] {zero.pipeline_stage = 0 : i64}
// CHECK-NEXT:    zero.send %[[R]] {peer = 1 : i64, tag = 0 : i64, zero.pipeline_stage = 0 : i64}
// CHECK-NEXT:    %[[Y:.+]] = zero.recv {peer = 1 : i64, tag = 1 : i64, zero.pipeline_stage = 0 : i64}
// CHECK-NEXT:    %[[R1:.+]] = zero.recv {peer = 0 : i64, tag = 0 : i64, zero.pipeline_stage = 1 : i64}
// CHECK-NEXT:    %[[N:.+]] = onnx.Neg %[[R1]] {zero.pipeline_stage = 1 : i64, zero.stream = "compute"}
// CHECK-NEXT:    zero.send %[[N]] {peer = 0 : i64, tag = 1 : i64, zero.pipeline_stage = 1 : i64}
// CHECK-NEXT:    return %[[Y]] : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NOT:   func.func
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = call @forward_stage0(%x) : (tensor<4xf32>) -> tensor<4xf32>
    call @forward_stage1(%x) : (tensor<4xf32>) -> ()
    return %y : tensor<4xf32>
  }
  func.func private @forward_stage0(%x: tensor<4xf32>) -> tensor<4xf32> attributes {zero.pipeline_stage = 0 : i64} {
    %r = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
    zero.send %r {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    %y = zero.recv {peer = 1 : i64, tag = 1 : i64} : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func private @forward_stage1(%x: tensor<4xf32>) attributes {zero.pipeline_stage = 1 : i64} {
    %r = zero.recv {peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
    %n = onnx.Neg %r {zero.stream = "compute"} : (tensor<4xf32>) -> tensor<4xf32>
    zero.send %n {peer = 0 : i64, tag = 1 : i64} : tensor<4xf32>
    return
  }
}

// -----

// Tests that a stage's arguments are the call's operands and that a result
// the stage returns unchanged (its argument) becomes that operand: the
// driver returns its own input and the stage's load of @w, which is cloned
// with the stage's mark like any op.
// CHECK-LABEL: func.func @forward
// CHECK-SAME:    (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[W:.+]] = ml_program.global_load @w : tensor<4xf32> {zero.pipeline_stage = 0 : i64}
// CHECK-NEXT:    %[[A:.+]] = onnx.Add %[[X]], %[[W]] {zero.pipeline_stage = 0 : i64}
// CHECK-NEXT:    return %[[X]], %[[A]] : tensor<4xf32>, tensor<4xf32>
module {
  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %p:2 = call @forward_stage0(%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    return %p#0, %p#1 : tensor<4xf32>, tensor<4xf32>
  }
  func.func private @forward_stage0(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {zero.pipeline_stage = 0 : i64} {
    %w = ml_program.global_load @w : tensor<4xf32>
    %a = onnx.Add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %x, %a : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// Tests that a call of a function that is not a stage stays, with its callee,
// and that a stage function nothing calls is left alone.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %[[H:.+]] = call @helper(%{{.+}})
// CHECK-NEXT:    return %[[H]]
// CHECK-LABEL: func.func private @helper
// CHECK-LABEL: func.func private @uncalled_stage
// CHECK-SAME:    attributes {zero.pipeline_stage = 0 : i64}
// CHECK-NEXT:    onnx.Relu %{{.+}} :
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %h = call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %h : tensor<4xf32>
  }
  func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
    %n = onnx.Neg %x : (tensor<4xf32>) -> tensor<4xf32>
    return %n : tensor<4xf32>
  }
  func.func private @uncalled_stage(%x: tensor<4xf32>) -> tensor<4xf32> attributes {zero.pipeline_stage = 0 : i64} {
    %r = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// Tests that without `function` the stage calls of every function that is
// not a stage are inlined (each gets its own copy of the stage's ops) and
// the stage function is erased after the last; with function=forward (this
// case alone: FN) only @forward's call is, and the stage function stays for
// @other's call.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %[[R:.+]] = onnx.Relu %{{.+}} {zero.pipeline_stage = 1 : i64}
// CHECK-NEXT:    return %[[R]]
// CHECK-LABEL: func.func @other
// CHECK-NEXT:    %[[R:.+]] = onnx.Relu %{{.+}} {zero.pipeline_stage = 1 : i64}
// CHECK-NEXT:    return %[[R]]
// CHECK-NOT:   @stage
// FN-LABEL: func.func @forward
// FN-NEXT:    %[[R:.+]] = onnx.Relu %{{.+}} {zero.pipeline_stage = 1 : i64}
// FN-NEXT:    return %[[R]]
// FN-LABEL: func.func @other
// FN-NEXT:    %[[C:.+]] = call @stage(%{{.+}})
// FN-NEXT:    return %[[C]]
// FN-LABEL: func.func private @stage
// FN-SAME:    attributes {zero.pipeline_stage = 1 : i64}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = call @stage(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = call @stage(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func private @stage(%x: tensor<4xf32>) -> tensor<4xf32> attributes {zero.pipeline_stage = 1 : i64} {
    %r = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}
