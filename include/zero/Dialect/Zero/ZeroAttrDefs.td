//===- ZeroAttrDefs.td - The structured zero.* values ------*- tablegen -*-===//
//
// The zero.* attributes that hold more than one value (ZeroAttributes.h names
// where each sits): a global's shard, a training step's settings, the pipeline
// split's plan, fp16's loss scaler and the NVMe offload settings. Each is a
// typed attribute with named fields and a verifier, so a pass that writes one
// wrongly, or a test that spells one wrongly, is caught where it does:
//
//   zero.shard = #zero.shard<world = 2, numel = 5, padded_numel = 6>
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ZERO_ZEROATTRDEFS_TD
#define ZERO_DIALECT_ZERO_ZEROATTRDEFS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "zero/Dialect/Zero/ZeroBase.td"

class Zero_Attr<string name, string attrMnemonic>
    : AttrDef<Zero_Dialect, name> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zero_ShardAttr : Zero_Attr<"Shard", "shard"> {
  let summary = "How a global is sharded over ranks (zero.shard)";
  let description = [{
    DeepSpeed's flatten-pad-split: the `numel` elements of the parameter,
    flattened and zero-padded to `padded_numel` (numel rounded up to a
    multiple of `world`), split into `world` equal shards, one per rank.
  }];
  let parameters = (ins "int64_t":$world, "int64_t":$numel,
                        "int64_t":$padded_numel);
}

def Zero_TrainingAttr : Zero_Attr<"Training", "training"> {
  let summary = "A training step's settings for the runtime (zero.training)";
  let description = [{
    On the module after zero-optimizer (and on the zrt.program the lowering
    emits, as `training`): the names of the step's results the runtime logs
    (`loss`, `grad_norm`, `lr`; with fp16's dynamic scaler `loss_scale` and
    `skipped`), the micro-batches per step, the optimizer described in one
    line, and DeepSpeed's `steps_per_print` and `csv_monitor` where given.
  }];
  let parameters = (ins
      StringRefParameter<"the loss result">:$loss,
      StringRefParameter<"the gradient norm result">:$grad_norm,
      StringRefParameter<"the learning rate result">:$lr,
      "int64_t":$accumulation_steps,
      StringRefParameter<"the optimizer and schedule, in one line">:$optimizer,
      StringRefParameter<"fp16's loss scale result", "\"\"">:$loss_scale,
      StringRefParameter<"the skipped-step result (fp16; bf16 that checks its gradients)", "\"\"">:$skipped,
      DefaultValuedParameter<"int64_t", "0">:$steps_per_print,
      StringRefParameter<"the CSV monitor's folder", "\"\"">:$csv_monitor);
}

def Zero_PipelinePlanAttr : Zero_Attr<"PipelinePlan", "pipeline_plan"> {
  let summary = "The pipeline split's plan (zero.pipeline_plan)";
  let description = [{
    On the module after zero-pipeline-split, for zero-report and the
    runtime: `stages` stages, each with `dp` replicas, cut by `partition`
    (DeepSpeed's partition_method) between the `layers` (their names and
    parameters, with their classes and multiply-accumulates where known):
    stage s holds layers [parts[s], parts[s+1]). `micro_batches` run per step
    in `schedule`.
  }];
  let parameters = (ins
      "int64_t":$stages,
      StringRefParameter<"DeepSpeed's partition_method">:$partition,
      "::mlir::ArrayAttr":$layers,
      "::mlir::DenseI64ArrayAttr":$layer_params,
      "::mlir::DenseI64ArrayAttr":$parts,
      "int64_t":$micro_batches,
      "int64_t":$dp,
      StringRefParameter<"the schedule">:$schedule,
      OptionalParameter<"::mlir::ArrayAttr">:$layer_classes,
      OptionalParameter<"::mlir::DenseI64ArrayAttr">:$layer_macs);
}

def Zero_LossScalerAttr : Zero_Attr<"LossScaler", "loss_scaler"> {
  let summary = "fp16 training's loss scaler settings (zero.loss_scaler)";
  let description = [{
    DeepSpeed's fp16 section: a static `loss_scale` (0: dynamic), and the
    dynamic scaler's `initial_scale_power`, `loss_scale_window`,
    `hysteresis`, `min_loss_scale` and `consecutive_hysteresis`. The dynamic
    scaler's state lives in the loss_scaler.* globals.
  }];
  let parameters = (ins
      "::mlir::FloatAttr":$loss_scale,
      "int64_t":$initial_scale_power,
      "int64_t":$loss_scale_window,
      "int64_t":$hysteresis,
      "::mlir::FloatAttr":$min_loss_scale,
      "::mlir::BoolAttr":$consecutive_hysteresis);
}

def Zero_OffloadConfigAttr : Zero_Attr<"OffloadConfig", "offload_config"> {
  let summary = "The NVMe offload settings (zero.offload_config)";
  let description = [{
    On the module when something is offloaded to NVMe: the folder of the swap
    file (`nvme_path`) and how many updates' state is swapped in ahead
    (`buffer_count`, DeepSpeed's offload_optimizer.buffer_count).
  }];
  let parameters = (ins StringRefParameter<"the swap file's folder">:$nvme_path,
                        "int64_t":$buffer_count);
}

#endif // ZERO_DIALECT_ZERO_ZEROATTRDEFS_TD
