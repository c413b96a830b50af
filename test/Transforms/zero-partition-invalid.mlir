// RUN: not zero-opt %s --zero-partition="stage=2 dp=2" 2>&1 | FileCheck %s --check-prefix=STAGE2
// RUN: not zero-opt %s --zero-partition="stage=3 dp=0" 2>&1 | FileCheck %s --check-prefix=DP0
// RUN: not zero-opt %s --zero-partition="stage=7 dp=2" 2>&1 | FileCheck %s --check-prefix=STAGE7
// RUN: not zero-opt %s --zero-partition="stage=3 dp=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=DPBIG
// RUN: not zero-opt %s --zero-pipeline="stage=3 dp=2147483648" 2>&1 | FileCheck %s --check-prefix=PIPEBIG
// RUN: not zero-opt %s --zero-pipeline="stage=3 dp=2 dp=4" 2>&1 | FileCheck %s --check-prefix=TWICE

// Tests the configuration errors of zero-partition: stages 1 and 2 need a
// training program (they name what is missing), dp must be positive and
// bounded (a huge dp used to abort or allocate until the kernel killed it).
// STAGE2: error: zero-partition: stage 2 partitions optimizer state and gradients, which this program does not have: it is a forward (inference) program (compile with zero-opt --train for a training step); use stage=3 to partition parameters, or stage=0 to replicate them
// DP0: error: zero-partition: dp must be between 1 and 65536 (the ranks of one data-parallel group), got 0
// DPBIG: error: zero-partition: dp must be between 1 and 65536 (the ranks of one data-parallel group), got 9223372036854775807
// PIPEBIG: zero-opt: error: --zero-pipeline: dp must be at most 65536, got 2147483648
// TWICE: zero-opt: error: --zero-pipeline: 'dp' is given twice; give each option once
// STAGE7: error: zero-partition: stage must be 0, 1, 2 or 3, got 7
module {
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
