// RUN: not zero-opt %s --zero-partition="stage=2 dp=2" 2>&1 | FileCheck %s --check-prefix=STAGE2
// RUN: not zero-opt %s --zero-partition="stage=3 dp=0" 2>&1 | FileCheck %s --check-prefix=DP0
// RUN: not zero-opt %s --zero-partition="stage=7 dp=2" 2>&1 | FileCheck %s --check-prefix=STAGE7
// RUN: not zero-opt %s --zero-partition="stage=3 dp=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=DPBIG
// RUN: not zero-opt %s --zero-partition="dp=2 persistence-threshold=-1" 2>&1 | FileCheck %s --check-prefix=THRESHOLD

// Tests that zero-partition rejects a configuration it cannot build: stages 1
// and 2 need a training program (the error names what is missing), dp must be
// positive and bounded (a huge dp used to abort or allocate until the kernel
// killed it), the stage must exist and the persistence threshold must not be
// negative; each error names the pass, the option and the value.
// (The same bounds of --zero-pipeline:
// test/Pipelines/zero-pipeline-invalid.mlir.)
// STAGE2: error: zero-partition: stage 2 partitions optimizer state and gradients, which this program does not have: it is a forward (inference) program (compile with zero-opt --train for a training step); use stage=3 to partition parameters, or stage=0 to replicate them
// DP0: error: zero-partition: dp must be between 1 and 65536 (the ranks of one data-parallel group), got 0
// DPBIG: error: zero-partition: dp must be between 1 and 65536 (the ranks of one data-parallel group), got 9223372036854775807
// STAGE7: error: zero-partition: stage must be 0, 1, 2 or 3, got 7
// THRESHOLD: error: zero-partition: persistence-threshold must be >= 0
module {
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
