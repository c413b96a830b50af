// RUN: not zero-opt %s --zero-pipeline="dp=2 prefetch=-1" 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: not zero-opt %s --config %S/Inputs/ds_batch.json --zero-pipeline="dp=2" 2>&1 | FileCheck %s --check-prefix=CONFLICT
// RUN: not zero-opt %s --config %S/Inputs/ds_batch.json --config %S/Inputs/ds_batch.json 2>&1 | FileCheck %s --check-prefix=CONFIGTWICE
// RUN: not zero-opt %s --config %S/Inputs/ds_negative.json 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not zero-opt %s --zero-pipeline="dp=2" --zero-pipeline "dp=2 prefetch=1" 2>&1 | FileCheck %s --check-prefix=PIPETWICE
// RUN: not zero-opt %s --zero-pipeline="stage=3 dp=2147483648" 2>&1 | FileCheck %s --check-prefix=PIPEBIG
// RUN: not zero-opt %s --zero-pipeline="stage=3 dp=2 dp=4" 2>&1 | FileCheck %s --check-prefix=TWICE

// Tests that the option errors of --zero-pipeline and --config name the flag,
// the option and the value, and that zero-opt exits non-zero: a negative
// prefetch, a config whose batch sizes give another world size than dp, a
// flag or an option given twice, a negative micro-batch size in the config,
// and a dp above the largest world (a huge dp used to abort or allocate until
// the kernel killed it).
// The option errors of the passes themselves are tested next to each pass
// (test/Transforms/ZeRO/zero-{partition,prefetch,bucket,report}-invalid.mlir).
// PIPELINE: zero-opt: error: --zero-pipeline: prefetch must be >= 0, got -1
// CONFLICT: zero-opt: error: {{.*}}ds_batch.json: the batch sizes give a world of 4 ranks but --zero-pipeline says dp=2
// CONFIGTWICE: zero-opt: error: --config is given twice; give one DeepSpeed config
// PIPETWICE: zero-opt: error: --zero-pipeline is given 2 times; give one with all the options
// NEGATIVE: zero-opt: error: {{.*}}ds_negative.json: train_micro_batch_size_per_gpu must be a positive integer
// PIPEBIG: zero-opt: error: --zero-pipeline: dp must be at most 65536, got 2147483648
// TWICE: zero-opt: error: --zero-pipeline: 'dp' is given twice; give each option once
module {
  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %w = ml_program.global_load @w : tensor<4xf32>
    %y = onnx.Add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
