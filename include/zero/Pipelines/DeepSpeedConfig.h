//===- DeepSpeedConfig.h - The DeepSpeed JSON config reader -----*- C++ -*-===//
//
// The one reader of a DeepSpeed ds_config.json: its ZeRO keys for the
// `zero-pipeline` pass pipeline and its training keys for zero-opt --train.
// Every consumer (the pipelines, zero-opt) reads the config through here.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_PIPELINES_DEEPSPEEDCONFIG_H
#define ZERO_PIPELINES_DEEPSPEEDCONFIG_H

#include "zero/Pipelines/Pipelines.h"

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace zero {

/// Reads DeepSpeed's keys from a JSON config into `settings`:
/// zero_optimization.{stage, stage3_prefetch_bucket_size,
/// stage3_param_persistence_threshold, stage3_max_live_parameters,
/// stage3_max_reuse_distance, reduce_bucket_size, allgather_bucket_size} and
/// the batch sizes that fix the world size. "auto" on a key of DeepSpeed's
/// config models that the Hugging Face Trainer does not fill is DeepSpeed's
/// default, as DeepSpeed drops it (a "note: " line in `warnings`). Keys it does
/// not use are reported in `warnings`. Returns an error message (naming the
/// file and key), empty on success.
std::string readDeepSpeedConfig(llvm::StringRef path, ZeroSettings &settings,
                                std::vector<std::string> &warnings);

/// Reads the training keys of a DeepSpeed config: optimizer.{type,params},
/// scheduler.{type,params}, gradient_clipping, gradient_accumulation_steps,
/// the precision blocks, as DeepSpeed 0.19 reads them: what the config leaves
/// out takes 0.19's default (gradient_clipping 1.0, WarmupLR's peak the
/// optimizer's lr, ...), each noted in `warnings` ("note: " lines); what 0.19
/// refuses, or zero-opt cannot honour, is an error naming the key.
std::string readTrainingConfig(llvm::StringRef path, TrainSettings &settings,
                               std::vector<std::string> &warnings);

} // namespace zero

#endif // ZERO_PIPELINES_DEEPSPEEDCONFIG_H
