//===- Pipelines.h - The registered pass pipelines --------------*- C++ -*-===//
//
// The `zero-pipeline` pass pipeline (ZeRO options and a DeepSpeed config to
// the ZeRO and pipeline-parallel passes) and zero-opt --train's training
// pipeline (loss, autodiff, optimizer), with the settings both resolve to.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_PIPELINES_PIPELINES_H
#define ZERO_PIPELINES_PIPELINES_H

#include "zero/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

#include "mlir/Pass/PassOptions.h"

#include <string>
#include <vector>

namespace zero {

/// The ZeRO settings the pass list is built from, resolved from the
/// `zero-pipeline` options and a DeepSpeed JSON config. Sizes are in bytes
/// here (DeepSpeed counts elements; the config reader converts with 4 bytes
/// per fp32 element).
struct ZeroSettings {
  int64_t stage = 3;
  int64_t dp = -1; ///< -1: not given
  int64_t prefetch = 0;
  int64_t prefetchBytes = 0;
  int64_t bucketBytes = 0;
  int64_t persistenceThreshold = 0; ///< elements
  int64_t maxReuseDistance = -1;    ///< elements; -1: never re-gather
  bool stageGiven = false;          ///< stage set by an option or the config
  /// Training: gradients reduced in buckets of this many elements
  /// (zero_optimization.reduce_bucket_size, 5e8 when a config leaves it
  /// out, as DeepSpeed); 0: each gradient alone.
  int64_t reduceBucketElems = 0;
  /// zero_optimization.offload_optimizer: "" (none), "cpu" or "nvme"; with
  /// nvme, the directory of the swap files and the buffers in flight
  /// (nvme_path, buffer_count).
  std::string offloadOptimizer;
  std::string nvmePath;
  int64_t offloadBufferCount = 4;
  /// zero_optimization.offload_param (stage 3): "" (none); "cpu": the
  /// parameter shards in host memory; "nvme": in the swap files too, but for
  /// the first max_in_cpu elements of them (in the module's order: DeepSpeed
  /// keeps those in host memory), none of more than buffer_size elements
  /// (DeepSpeed's swap buffers hold one).
  std::string offloadParam;
  int64_t offloadMaxInCpu = 1'000'000'000;
  int64_t offloadParamBufferSize = 100'000'000;
  /// Set before parsing when the settings are for a training step: training
  /// keys are then not warned about.
  bool training = false;
  /// The config's batch sizes (0: not given), for what DeepSpeed derives
  /// from the world size: the micro-batch without
  /// train_micro_batch_size_per_gpu, the accumulation without
  /// gradient_accumulation_steps (derivedAccumulation; 0: none derived).
  int64_t configBatch = 0, configMicroBatch = 0, configAccumulation = 0;
  int64_t derivedAccumulation = 0;
  /// ZeRO++: hpZ group size (zero_hpz_partition_size; 1: off), qwZ and qgZ
  /// bits (zero_quantized_weights: 8, zero_quantized_gradients: 4; 0: off)
  /// and elements per quantization scale.
  int64_t hpz = 1;
  int64_t quantizeWeights = 0;
  int64_t quantizeGradients = 0;
  int64_t quantizeBlock = 2048;
  /// Pipeline stages (zero-pipeline-split pp; 1: off), micro-batches per
  /// forward, and DeepSpeed's partition_method.
  int64_t pp = 1;
  int64_t microBatches = 1;
  std::string partitionMethod = "parameters";
  /// A training step's pipeline schedule: 1f1b (DeepSpeed's TrainSchedule)
  /// or gpipe (every forward, then every backward).
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// How a tied parameter's gradient is summed over its stages: micro-batch
  /// or step (zero-pipeline-split's tied-grads).
  TiedGrads tiedGrads = TiedGrads::MicroBatch;
  /// Layers per activation-checkpointed segment of a training step
  /// (activation_checkpoint_interval; 0: off).
  int64_t activationCheckpointInterval = 0;
  bool microBatchesGiven = false;
};

/// The options of the `zero-pipeline` pass pipeline, parsed by MLIR's pass
/// option parser: `--zero-pipeline="stage=3 dp=4 prefetch=2"` on zero-opt, or
/// `zero-pipeline{stage=3 dp=4}` inside a --pass-pipeline. Each maps onto an
/// option of one pass (see Passes.td); `config` names a DeepSpeed JSON whose
/// settings apply where no option is given here.
struct ZeroPipelineOptions
    : public mlir::PassPipelineOptions<ZeroPipelineOptions> {
  Option<int64_t> stage{*this, "stage",
                        llvm::cl::desc("ZeRO stage: 0 replicates, 3 partitions "
                                       "parameters (zero-partition stage)"),
                        llvm::cl::init(3)};
  Option<int64_t> dp{*this, "dp",
                     llvm::cl::desc("Data-parallel ranks: the mpirun -np the "
                                    "program runs with (zero-partition dp)"),
                     llvm::cl::init(-1)};
  Option<int64_t> prefetch{*this, "prefetch",
                           llvm::cl::desc("Gathers in flight ahead of use "
                                          "(zero-prefetch depth)"),
                           llvm::cl::init(0)};
  Option<int64_t> prefetchBytes{
      *this, "prefetch-bytes",
      llvm::cl::desc("Bound on gathered bytes live at once (zero-prefetch "
                     "bytes; 0: none)"),
      llvm::cl::init(0)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Largest coalesced gather in bytes (zero-bucket bytes)"),
      llvm::cl::init(0)};
  Option<int64_t> persistenceThreshold{
      *this, "persistence-threshold",
      llvm::cl::desc("Parameters of at most this many elements stay whole "
                     "(zero-partition persistence-threshold)"),
      llvm::cl::init(0)};
  Option<int64_t> maxReuseDistance{
      *this, "max-reuse-distance",
      llvm::cl::desc("Re-gather a parameter whose next use is further than "
                     "this many elements of other gathers (-1: never)"),
      llvm::cl::init(-1)};
  Option<int64_t> hpz{*this, "hpz",
                      llvm::cl::desc("ZeRO++ hpZ: re-gather inside groups of this "
                                     "many ranks (zero-hierarchical group; 1: off)"),
                      llvm::cl::init(1)};
  Option<int64_t> qwz{*this, "qwz",
                      llvm::cl::desc("ZeRO++ qwZ: all-gather parameters as 8- or "
                                     "4-bit blocks (zero-quantize-gather bits; 0: off)"),
                      llvm::cl::init(0)};
  Option<int64_t> qgz{*this, "qgz",
                      llvm::cl::desc("ZeRO++ qgZ: reduce-scatter gradients as 4- or "
                                     "8-bit blocks (zero-quantize-reduce bits; 0: off)"),
                      llvm::cl::init(0)};
  Option<int64_t> quantBlock{*this, "quant-block",
                             llvm::cl::desc("Elements per quantization scale (qwZ, qgZ)"),
                             llvm::cl::init(2048)};
  Option<int64_t> pp{*this, "pp",
                     llvm::cl::desc("Pipeline stages, one rank each "
                                    "(zero-pipeline-split pp; 1: off)"),
                     llvm::cl::init(1)};
  Option<int64_t> microBatches{*this, "micro-batches",
                               llvm::cl::desc("Micro-batches per forward through "
                                              "the pipeline stages (zero-pipeline-"
                                              "split micro-batches)"),
                               llvm::cl::init(1)};
  Option<int64_t> activationCheckpointInterval{
      *this, "activation-checkpoint-interval",
      llvm::cl::desc("A training step recomputes each segment of this many layers "
                     "in backward (DeepSpeed's activation_checkpoint_interval; 0: off)"),
      llvm::cl::init(0)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("A training step's pipeline schedule: 1f1b (DeepSpeed's "
                     "TrainSchedule) or gpipe"),
      llvm::cl::init("1f1b")};
  Option<std::string> tiedGrads{
      *this, "tied-grads",
      llvm::cl::desc("A tied parameter's gradient over its pipeline stages: "
                     "micro-batch (summed each micro-batch, the 1-rank step's bits) or "
                     "step (DeepSpeed's: each stage's part accumulated, summed once "
                     "per step)"),
      llvm::cl::init("micro-batch")};
  Option<std::string> partitionMethod{
      *this, "partition-method",
      llvm::cl::desc("How layers are balanced over pipeline stages: parameters, "
                     "uniform or type:REGEX (DeepSpeed's partition_method), or compute "
                     "(their multiply-accumulates)"),
      llvm::cl::init("parameters")};
  Option<std::string> config{
      *this, "config",
      llvm::cl::desc("DeepSpeed JSON config (zero_optimization.*, batch "
                     "sizes); options given here take precedence")};
};

/// Registers the `zero-pipeline` pass pipeline (zero-partition,
/// zero-prefetch, zero-bucket, zero-release) with MLIR's pass registry.
void registerZeroPipeline();

/// Parses a `zero-pipeline` option string (with its config=FILE) into
/// `settings`: the config first, then the options given explicitly, then the
/// checks that need both. The data-parallel size may stay unset (-1).
mlir::LogicalResult
parseZeroPipelineOptions(llvm::StringRef optionString, ZeroSettings &settings,
                         llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> errorHandler);

/// Adds zero-partition, then for stage 3 zero-prefetch, zero-bucket and
/// zero-release.
void buildZeroPipeline(mlir::OpPassManager &pm, const ZeroSettings &settings);

/// Training settings: the loss, what is trained, and the optimizer step,
/// from zero-opt's --loss/--freeze/--optimizer and a DeepSpeed config's
/// optimizer, scheduler, gradient_clipping and gradient_accumulation_steps.
struct TrainSettings {
  std::optional<LossKind> lossKind; ///< none: the graph's own loss
  std::string labels = "labels";
  std::string lossOutput; ///< the logits output ("" : the only one)
  std::string trainOutput; ///< the output that is the loss ("" : found)
  std::string freeze;
  int64_t accumulation = 1;
  /// The config's train_micro_batch_size_per_gpu, or the one DeepSpeed
  /// derives from train_batch_size (0: neither given), and where it comes
  /// from when derived (zero-autodiff's micro-batch-origin).
  int64_t microBatchSize = 0;
  std::string microBatchOrigin;
  bool optimizer = true;  ///< false: --optimizer none (gradients are outputs)
  /// The config's "bf16" / "fp16" (zero-mixed-precision before zero-autodiff).
  Precision precision = Precision::FP32;
  /// fp16's loss scaler (DeepSpeed's "fp16" keys, its defaults).
  double lossScale = 0; ///< 0: dynamic
  int64_t initialScalePower = 16, lossScaleWindow = 1000, hysteresis = 2;
  double minLossScale = 1;
  bool consecutiveHysteresis = false;
  /// bf16: skip a step whose gradients are not finite (DeepSpeed 0.19's
  /// bf16.check_grad_overflow, true by default).
  bool checkGradOverflow = true;
  /// bf16/fp16: every loss in f32 (zero-opt --fp32-loss), not as the model
  /// computes it.
  bool f32Loss = false;
  /// data_types.grad_accum_dtype when it is not the training's own type:
  /// "fp32" (16-bit gradients summed in f32), or the other 16-bit type
  /// (zero-autodiff accum-dtype); empty: the training's own.
  std::string accumDtype;
  /// The config's scheduler.params.warmup_max_lr is "auto": the optimizer's
  /// lr, --optimizer's when given.
  bool warmupMaxLrAuto = false;
  /// The optimizer values the config gives explicitly (not "auto"), by
  /// --optimizer's key (type, lr, betas, eps, weight-decay, momentum,
  /// dampening, clip): --optimizer may not contradict them.
  struct ConfigValue {
    std::string key;       ///< --optimizer's name for it
    std::string configKey; ///< where the config says it
    std::vector<double> values;
    std::string text; ///< a non-numeric value (type)
  };
  std::vector<ConfigValue> configValues;
  std::string configPath;
  ZeroOptimizerPassOptions step;
  /// The ZeRO settings of a data-parallel step (step.world, step.stage), and
  /// whether any was given (then zero-partition records them on the module).
  ZeroSettings zero;
  bool zeroGiven = false;
};

/// Parses --optimizer "KIND key=value ..." (KIND adamw, adam, sgd or none;
/// keys lr, betas=B1,B2, eps, weight-decay, momentum, dampening, nesterov).
std::string parseOptimizerSpec(llvm::StringRef spec, TrainSettings &settings);

/// zero-add-loss (with a loss kind), zero-autodiff, and zero-optimizer.
void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainSettings &settings);

} // namespace zero

#endif // ZERO_PIPELINES_PIPELINES_H
