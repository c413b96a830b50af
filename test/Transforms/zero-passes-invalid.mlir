// RUN: not zero-opt %s --zero-bucket="bytes=-1" 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not zero-opt %s --zero-prefetch="depth=-1" 2>&1 | FileCheck %s --check-prefix=DEPTH
// RUN: not zero-opt %s --zero-prefetch="depth=1 bytes=-5" 2>&1 | FileCheck %s --check-prefix=BYTES
// RUN: not zero-opt %s --zero-partition="dp=2 persistence-threshold=-1" 2>&1 | FileCheck %s --check-prefix=THRESHOLD
// RUN: not zero-opt %s --zero-partition="dp=2" --zero-report="output=%t.missing/report.txt" 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: not zero-opt %s --zero-pipeline="dp=2 prefetch=-1" 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: not zero-opt %s --config %S/Inputs/ds_batch.json --zero-pipeline="dp=2" 2>&1 | FileCheck %s --check-prefix=CONFLICT
// RUN: not zero-opt %s --config %S/Inputs/ds_batch.json --config %S/Inputs/ds_batch.json 2>&1 | FileCheck %s --check-prefix=CONFIGTWICE
// RUN: not zero-opt %s --config %S/Inputs/ds_negative.json 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not zero-opt %s --zero-pipeline="dp=2" --zero-pipeline "dp=2 prefetch=1" 2>&1 | FileCheck %s --check-prefix=PIPETWICE

// Tests the option errors of the ZeRO passes and the pipeline: each names the
// pass or flag, the option and the value, and exits non-zero.
// BUCKET: error: zero-bucket: bytes must be >= 0
// DEPTH: error: zero-prefetch: depth and bytes must be >= 0
// BYTES: error: zero-prefetch: depth and bytes must be >= 0
// THRESHOLD: error: zero-partition: persistence-threshold must be >= 0
// REPORT: error: zero-report: {{.*}}report.txt
// PIPELINE: zero-opt: error: --zero-pipeline: prefetch must be >= 0, got -1
// CONFLICT: zero-opt: error: {{.*}}ds_batch.json: the batch sizes give a world of 4 ranks but --zero-pipeline says dp=2
// CONFIGTWICE: zero-opt: error: --config is given twice; give one DeepSpeed config
// PIPETWICE: zero-opt: error: --zero-pipeline is given 2 times; give one with all the options
// NEGATIVE: zero-opt: error: {{.*}}ds_negative.json: train_micro_batch_size_per_gpu must be a positive integer
module {
  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {zero.tensor = "w"}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %w = ml_program.global_load @w : tensor<4xf32>
    %y = onnx.Add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
