// RUN: not zero-opt %s --zero-partition="stage=2 dp=2" 2>&1 | FileCheck %s --check-prefix=STAGE2
// RUN: not zero-opt %s --zero-partition="stage=3 dp=0" 2>&1 | FileCheck %s --check-prefix=DP0
// RUN: not zero-opt %s --zero-partition="stage=7 dp=2" 2>&1 | FileCheck %s --check-prefix=STAGE7

// Tests the configuration errors of zero-partition: stages 1 and 2 need a
// training program (they name what is missing), dp must be positive.
// STAGE2: error: zero-partition: stage 2 partitions optimizer state and gradients, which this program does not have: it is a forward (inference) program and training programs are not supported yet; use stage=3 to partition parameters, or stage=0 to replicate them
// DP0: error: zero-partition: dp must be >= 1, got 0
// STAGE7: error: zero-partition: stage must be 0, 1, 2 or 3, got 7
module {
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
