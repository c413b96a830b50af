// RUN: zero-opt %s --split-input-file --verify-diagnostics --zero-verify=phase=imported
// RUN: not zero-opt %S/../Transforms/Inputs/mlp.mlir --zero-verify=phase=bogus 2>&1 | FileCheck %s --check-prefix=PHASE

// PHASE: for the --phase option: Cannot find option named 'bogus'!

// Tests that an imported module holds only onnx, func and ml_program ops.
func.func @forward(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{'zero.release' op is not an onnx, func or ml_program op; the import produces no other (zero-verify phase=imported)}}
  zero.release %a : tensor<2xf32>
  return %a : tensor<2xf32>
}

// -----

// Tests that every imported global names its ONNX initializer.
module {
  // expected-error@+1 {{'ml_program.global' op does not name its ONNX initializer (zero.tensor); the importer sets it on every global (zero-verify phase=imported)}}
  ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
}
