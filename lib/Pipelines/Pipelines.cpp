//===- Pipelines.cpp - The registered pass pipelines ----------------------===//
//
// The `zero-pipeline` pass pipeline. Its options are parsed by MLIR's pass
// option parser (ZeroPipelineOptions); a DeepSpeed ds_config.json named by its
// `config` option supplies the settings the options leave out. Both resolve
// to ZeroSettings and expand to the same pass list: partition, prefetch,
// bucket, release. zero-opt --train's pipeline: the optimizer from --optimizer
// or the config, expanded to zero-add-loss, zero-autodiff, zero-reduce-micro-steps
// (ZeRO-2 with accumulation) and zero-optimizer.
//
//===----------------------------------------------------------------------===//

#include "zero/Pipelines/DeepSpeedConfig.h"
#include "zero/Pipelines/Pipelines.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "mlir/Pass/PassRegistry.h"

#include <algorithm>
#include <cmath>
#include <sstream>

using namespace mlir;

namespace zero {
/// The ZeRO and pipeline-parallel passes of `opts`, in their order.
static void addZeroPasses(OpPassManager &pm, const ZeroSettings &opts) {
  // Pipeline stages: the ZeRO passes of the data-parallel step first (over
  // dp ranks; none with one replica), then the cut, which runs each stage's
  // collectives over its own replicas.
  auto addSplit = [&] {
    ZeroPipelineSplitPassOptions split;
    split.stages = opts.pp;
    split.partition = opts.partitionMethod;
    // A training step's micro-batches are its accumulation steps (zero-
    // autodiff unrolled them); a forward program's are made by the split.
    split.microBatches = opts.training ? 1 : opts.microBatches;
    split.schedule = opts.schedule;
    split.tiedGrads = opts.tiedGrads;
    split.dp = std::max<int64_t>(opts.dp, 1);
    pm.addPass(createZeroPipelineSplitPass(split));
  };
  if (opts.pp > 1 && opts.dp <= 1) {
    addSplit();
    return;
  }

  ZeroPartitionPassOptions partition;
  partition.stage = opts.stage;
  partition.dp = opts.dp < 0 ? 1 : opts.dp;
  partition.persistenceThreshold = opts.persistenceThreshold;
  partition.maxReuseDistance = opts.maxReuseDistance;
  partition.offloadHost = opts.offloadParam == "cpu";
  if (opts.offloadParam == "nvme") {
    partition.nvmePath = opts.nvmePath;
    partition.offloadBuffers = opts.offloadBufferCount;
    partition.maxInCpu = opts.offloadMaxInCpu;
    partition.bufferSize = opts.offloadParamBufferSize;
  }
  pm.addPass(createZeroPartitionPass(partition));

  // Stage 3's gather passes, in one order: prefetch decides where each gather
  // runs (under its byte budget); hpZ then turns the later gathers of a
  // parameter into re-gathers inside its group (they stay where prefetch put
  // them); bucket only coalesces gathers that already sit together (never
  // world ones with in-group ones); release frees each at its last use; qwZ
  // last wraps each world gather, bucketed or not, where the passes above
  // left it. In a program cut into pipeline stages they run after the cut,
  // on each stage's function in its schedule's order (a bucket of one stage's
  // parameters, a prefetch ahead of that stage's compute, a parameter two
  // stages read gathered and released on each, hpZ's secondary shard kept
  // per stage); a training step's releases are placed before the cut, which
  // moves each with the backward op it follows.
  const bool inStages = opts.pp > 1;
  auto addGatherPasses = [&](bool release) {
    if (opts.prefetch > 0) {
      ZeroPrefetchPassOptions prefetch;
      prefetch.depth = opts.prefetch;
      prefetch.bytes = opts.prefetchBytes;
      pm.addPass(createZeroPrefetchPass(prefetch));
    }
    if (opts.hpz > 1) {
      ZeroHierarchicalPassOptions hpz;
      hpz.group = opts.hpz;
      pm.addPass(createZeroHierarchicalPass(hpz));
    }
    if (opts.bucketBytes > 0) {
      ZeroBucketPassOptions bucket;
      bucket.bytes = opts.bucketBytes;
      bucket.maxLiveBytes = opts.prefetchBytes;
      pm.addPass(createZeroBucketPass(bucket));
    }
    if (release)
      pm.addPass(createZeroReleasePass());
    if (opts.quantizeWeights > 0) {
      ZeroQuantizeGatherPassOptions qwz;
      qwz.bits = opts.quantizeWeights;
      qwz.block = opts.quantizeBlock;
      pm.addPass(createZeroQuantizeGatherPass(qwz));
    }
  };
  if (opts.stage == 3) {
    if (!inStages)
      addGatherPasses(/*release=*/true);
    else if (opts.training)
      pm.addPass(createZeroReleasePass());
  }
  if (opts.quantizeGradients > 0 && opts.training) {
    ZeroQuantizeReducePassOptions qgz;
    qgz.bits = opts.quantizeGradients;
    qgz.block = opts.quantizeBlock;
    // The hierarchy's groups are hpZ's (the ranks of a node).
    qgz.group = opts.hpz;
    pm.addPass(createZeroQuantizeReducePass(qgz));
  }
  if (inStages) {
    // The split lays each collective on its stage's replicas (@dp) and
    // qgZ's groups over every stage.
    addSplit();
    if (opts.stage == 3)
      addGatherPasses(/*release=*/!opts.training);
  }
}

} // namespace zero

void zero::buildZeroPipeline(OpPassManager &pm, const ZeroSettings &opts) {
  addZeroPasses(pm, opts);
  ZeroVerifyPassOptions verify;
  verify.phase = VerifyPhase::Sharded;
  pm.addPass(createZeroVerifyPass(verify));
}

/// The --zero-pipeline options of pipeline stages (schedule, tied-grads, and
/// micro-batches without stages), checked against the training flag and pp.
static LogicalResult
applyStageOptions(const zero::ZeroPipelineOptions &options, const llvm::StringSet<> &given,
                  zero::ZeroSettings &settings,
                  function_ref<LogicalResult(const Twine &)> errorHandler) {
  using namespace zero;
  if (given.contains("schedule")) {
    std::optional<PipelineSchedule> schedule =
        symbolizePipelineSchedule(options.schedule);
    if (!schedule)
      return errorHandler("--zero-pipeline: schedule must be 1f1b or gpipe, got '" +
                          options.schedule + "'");
    if (!settings.training)
      return errorHandler("--zero-pipeline: schedule=" + options.schedule +
                          " orders a training step's forwards and backwards; a "
                          "forward program runs fill/drain (compile with --train)");
    if (settings.pp <= 1)
      return errorHandler("--zero-pipeline: schedule=" + options.schedule +
                          " needs pipeline stages (pp > 1)");
    settings.schedule = *schedule;
  }
  if (given.contains("tied-grads")) {
    std::optional<TiedGrads> tiedGrads = symbolizeTiedGrads(options.tiedGrads);
    if (!tiedGrads)
      return errorHandler("--zero-pipeline: tied-grads must be micro-batch or step, got '" +
                          options.tiedGrads + "'");
    if (!settings.training || settings.pp <= 1)
      return errorHandler("--zero-pipeline: tied-grads=" + options.tiedGrads +
                          " sums a tied parameter's gradient over pipeline stages; it "
                          "needs a training step (--train) cut into stages (pp > 1)");
    settings.tiedGrads = *tiedGrads;
  }
  if (settings.pp > 1) {
    // The world is the stages times their replicas (stage s on ranks
    // [s*dp, (s+1)*dp), DeepSpeed's pipe-major topology).
    if (settings.dp < 1)
      settings.dp = 1;
  } else if (settings.microBatches > 1) {
    return errorHandler("--zero-pipeline: micro-batches=" + Twine(settings.microBatches) +
                        " needs pipeline stages (pp > 1); a training step's "
                        "micro-batches are gradient_accumulation_steps");
  }
  return success();
}

/// ZeRO++'s settings: the bits of qwZ and qgZ, and the stages they need.
static LogicalResult
checkZeroPlusPlus(const zero::ZeroSettings &settings,
                  function_ref<LogicalResult(const Twine &)> errorHandler) {
  for (auto [key, bits] : {std::pair<const char *, int64_t>{"qwz", settings.quantizeWeights},
                           {"qgz", settings.quantizeGradients}})
    if (bits != 0 && bits != 8 && bits != 4)
      return errorHandler("--zero-pipeline: " + Twine(key) +
                          " is the bits per value: 8, 4, or 0 (off); got " + Twine(bits));
  // qwZ and hpZ act on parameter gathers, which only stage 3 has (a training
  // step defaults to stage 0, as DeepSpeed).
  const int64_t stage =
      settings.training && !settings.stageGiven ? 0 : settings.stage;
  if ((settings.quantizeWeights > 0 || settings.hpz > 1) && stage != 3)
    return errorHandler("--zero-pipeline: qwZ (qwz / zero_quantized_weights) and hpZ "
                        "(hpz / zero_hpz_partition_size) partition parameters, which "
                        "needs ZeRO stage 3; got stage " + Twine(stage));
  if (settings.quantizeGradients > 0 && settings.training && stage == 0)
    return errorHandler("--zero-pipeline: qgZ (qgz / zero_quantized_gradients) "
                        "quantizes the gradient reduce-scatter of ZeRO stages 1-3; "
                        "stage 0 all-reduces");
  if (settings.quantizeGradients > 0 && !settings.training)
    llvm::errs() << "warning: --zero-pipeline: qgZ (qgz / zero_quantized_gradients) "
                    "quantizes gradients and has no effect on a forward program\n";
  return success();
}

/// The world the config's batch sizes give (`configDp`; 0 or less: none)
/// against --zero-pipeline dp=: for a training step DeepSpeed derives the
/// accumulation when the config leaves it out (settings.derivedAccumulation);
/// otherwise they must agree (a forward program has no accumulation).
static LogicalResult
checkConfigWorld(StringRef config, bool dpGiven, int64_t configDp,
                 zero::ZeroSettings &settings,
                 function_ref<LogicalResult(const Twine &)> errorHandler) {
  // DeepSpeed derives the accumulation from the batch, the micro-batch and
  // the world size when the config leaves it out.
  if (settings.training && configDp > 0 && dpGiven &&
      settings.configAccumulation == 0 && settings.dp != configDp) {
    if (configDp % settings.dp != 0)
      return errorHandler(
          config + ": train_batch_size " + Twine(settings.configBatch) +
          " is not a multiple of train_micro_batch_size_per_gpu " +
          Twine(settings.configMicroBatch) + " x dp=" + Twine(settings.dp) +
          "; DeepSpeed derives gradient_accumulation_steps from their "
          "quotient");
    settings.derivedAccumulation = configDp / settings.dp;
    llvm::errs() << "note: " << config
                 << ": gradient_accumulation_steps absent -> "
                 << settings.derivedAccumulation << " (train_batch_size "
                 << settings.configBatch
                 << " / (train_micro_batch_size_per_gpu "
                 << settings.configMicroBatch << " x dp=" << settings.dp
                 << "), as DeepSpeed derives it)\n";
    return success();
  }
  if (configDp > 0 && settings.dp != configDp)
    return errorHandler(
        config + ": the batch sizes give a world of " + Twine(configDp) +
        " ranks but --zero-pipeline says dp=" + Twine(settings.dp) +
        "; make train_batch_size = micro batch x accumulation "
        "x dp, or drop one of them");
  return success();
}

LogicalResult
zero::parseZeroPipelineOptions(StringRef optionString, ZeroSettings &settings,
                               function_ref<LogicalResult(const Twine &)> errorHandler) {
  // Which keys are given, each once (MLIR's parser would keep the last).
  llvm::StringSet<> given;
  SmallVector<StringRef> tokens;
  optionString.split(tokens, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef token : tokens) {
    StringRef key = token.split('=').first;
    if (!given.insert(key).second)
      return errorHandler("--zero-pipeline: '" + key +
                          "' is given twice; give each option once");
  }
  zero::ZeroPipelineOptions options;
  std::string parseError;
  llvm::raw_string_ostream errs(parseError);
  if (failed(options.parseFromString(optionString, errs)))
    return errorHandler(
        "--zero-pipeline: cannot parse '" + optionString + "'" +
        (parseError.empty() ? "" : ": " + StringRef(parseError).trim()) +
        "; the options are KEY=INTEGER for stage, dp, prefetch, "
        "prefetch-bytes, bucket-bytes, persistence-threshold, "
        "max-reuse-distance, hpz, qwz, qgz, quant-block, pp, micro-batches, "
        "activation-checkpoint-interval, schedule=1f1b|gpipe, "
        "tied-grads=micro-batch|step, "
        "and config=FILE, partition-method=parameters|uniform|type:REGEX|compute");

  bool training = settings.training;
  settings = zero::ZeroSettings();
  settings.training = training;
  if (!options.config.empty()) {
    std::vector<std::string> warnings;
    std::string err = zero::readDeepSpeedConfig(options.config, settings, warnings);
    for (const std::string &w : warnings)
      if (StringRef(w).starts_with("note: "))
        llvm::errs() << "note: " << options.config << ": " << StringRef(w).drop_front(6)
                     << "\n";
      else
        llvm::errs() << "warning: " << options.config << ": " << w << "\n";
    if (!err.empty())
      return errorHandler(err);
  }
  const int64_t configDp = settings.dp;
  // A stage the config gives may be repeated on the command line, not
  // contradicted.
  const bool configStage = settings.stageGiven;
  const int64_t configStageValue = settings.stage;
  struct Key {
    const char *name;
    const zero::ZeroPipelineOptions::Option<int64_t> &option;
    int64_t &setting;
    int64_t lowest;
  } keys[] = {
      {"stage", options.stage, settings.stage, 0},
      {"dp", options.dp, settings.dp, 1},
      {"prefetch", options.prefetch, settings.prefetch, 0},
      {"prefetch-bytes", options.prefetchBytes, settings.prefetchBytes, 0},
      {"bucket-bytes", options.bucketBytes, settings.bucketBytes, 0},
      {"persistence-threshold", options.persistenceThreshold,
       settings.persistenceThreshold, 0},
      {"max-reuse-distance", options.maxReuseDistance, settings.maxReuseDistance,
       -1},
      {"hpz", options.hpz, settings.hpz, 1},
      {"qwz", options.qwz, settings.quantizeWeights, 0},
      {"qgz", options.qgz, settings.quantizeGradients, 0},
      {"quant-block", options.quantBlock, settings.quantizeBlock, 1},
      {"pp", options.pp, settings.pp, 1},
      {"micro-batches", options.microBatches, settings.microBatches, 1},
      {"activation-checkpoint-interval", options.activationCheckpointInterval,
       settings.activationCheckpointInterval, 0},
  };
  for (Key &k : keys) {
    if (!given.contains(k.name))
      continue;
    const int64_t v = k.option;
    if (v < k.lowest)
      return errorHandler("--zero-pipeline: " + Twine(k.name) + " must be >= " +
                          Twine(k.lowest) + ", got " + Twine(v));
    k.setting = v;
  }
  if (given.contains("stage")) {
    if (configStage && settings.stage != configStageValue)
      return errorHandler("--zero-pipeline: stage=" + Twine(settings.stage) + " contradicts " +
                          options.config + "'s zero_optimization.stage " +
                          Twine(configStageValue) + "; give the stage in one place");
    settings.stageGiven = true;
  }
  if (given.contains("partition-method"))
    settings.partitionMethod = options.partitionMethod;
  settings.microBatchesGiven = given.contains("micro-batches");
  if (settings.activationCheckpointInterval > 0 && !settings.training)
    return errorHandler("--zero-pipeline: activation-checkpoint-interval recomputes "
                        "forward segments in a training step's backward; a forward "
                        "program keeps no activations for backward (compile with --train)");
  if (failed(applyStageOptions(options, given, settings, errorHandler)) ||
      failed(checkZeroPlusPlus(settings, errorHandler)))
    return failure();
  if (settings.dp > 0 && !zero::isSupportedWorldSize(settings.dp))
    return errorHandler("--zero-pipeline: dp must be at most " +
                        Twine(zero::kMaxWorldSize) + ", got " + Twine(settings.dp));
  return checkConfigWorld(options.config, given.contains("dp"), configDp,
                          settings, errorHandler);
}

/// Builds the pipeline from its option string.
static LogicalResult
buildFromOptions(OpPassManager &pm, StringRef optionString,
                 function_ref<LogicalResult(const Twine &)> errorHandler) {
  zero::ZeroSettings settings;
  if (failed(zero::parseZeroPipelineOptions(optionString, settings, errorHandler)))
    return failure();
  if (settings.dp < 0)
    return errorHandler(
        "the data-parallel size is not set; DeepSpeed takes it from the "
        "launcher, zero-opt from --zero-pipeline=\"dp=N\" (N = the mpirun -np "
        "you will use) or from the config's train_batch_size / "
        "(train_micro_batch_size_per_gpu x gradient_accumulation_steps)");
  zero::buildZeroPipeline(pm, settings);
  return success();
}

void zero::registerZeroPipeline() {
  registerPassPipeline(
      "zero-pipeline",
      "The ZeRO and pipeline passes from ZeRO options and/or a DeepSpeed "
      "config (partition; prefetch, hpZ, bucket, release, qwZ at stage 3; "
      "qgZ; the pipeline split)",
      buildFromOptions,
      [](function_ref<void(const detail::PassOptions &)> print) {
        print(ZeroPipelineOptions());
      });
}

static bool parseDouble(llvm::StringRef s, double &out) {
  return !s.trim().getAsDouble(out);
}

std::string zero::parseOptimizerSpec(llvm::StringRef spec, TrainSettings &settings) {
  llvm::SmallVector<llvm::StringRef> tokens;
  spec.split(tokens, ' ', -1, /*KeepEmpty=*/false);
  if (tokens.empty())
    return "--optimizer is empty; give e.g. \"adamw lr=3e-4 betas=0.9,0.95\" or none";
  std::string kind = tokens[0].lower();
  if (kind == "none") {
    if (tokens.size() > 1)
      return "--optimizer none takes no settings";
    settings.optimizer = false;
    return "";
  }
  if (kind != "adamw" && kind != "adam" && kind != "sgd")
    return "--optimizer: unknown optimizer '" + tokens[0].str() +
           "'; the optimizers are adamw, adam, sgd (and none: output the gradients)";
  auto &o = settings.step;
  // What the config says explicitly may be repeated here, not contradicted.
  auto contradicts = [&](llvm::StringRef key, llvm::ArrayRef<double> values,
                         llvm::StringRef text, llvm::StringRef given) -> std::string {
    for (const TrainSettings::ConfigValue &c : settings.configValues) {
      if (c.key != key)
        continue;
      bool same = c.text == text.str() && c.values.size() == values.size();
      for (size_t i = 0; same && i < values.size(); ++i)
        same = std::fabs(c.values[i] - values[i]) <=
               1e-12 * std::max(std::fabs(c.values[i]), std::fabs(values[i]));
      if (same)
        return "";
      std::string was = c.text;
      for (size_t i = 0; i < c.values.size(); ++i) {
        std::ostringstream os;
        os << c.values[i];
        was += (i ? "," : "") + os.str();
      }
      return "--optimizer " + given.str() + " contradicts " + settings.configPath + "'s " +
             c.configKey + " " + was + "; give the value in one place (or \"auto\" in the "
             "config, which takes the command line's)";
    }
    return "";
  };
  if (std::string e = contradicts("type", {}, kind, tokens[0]); !e.empty())
    return e;
  o.type = kind;
  for (llvm::StringRef t : llvm::ArrayRef(tokens).drop_front()) {
    auto [key, value] = t.split('=');
    double v = 0;
    auto bad = [&]() {
      return "--optimizer: bad value in '" + t.str() + "'";
    };
    if (key == "betas") {
      auto [a, b] = value.split(',');
      double b1, b2;
      if (!parseDouble(a, b1) || !parseDouble(b, b2))
        return bad() + " (betas=B1,B2)";
      if (std::string e = contradicts("betas", {b1, b2}, "", t); !e.empty())
        return e;
      o.beta1 = b1;
      o.beta2 = b2;
      continue;
    }
    if (key == "nesterov") {
      o.nesterov = value == "1" || value == "true";
      continue;
    }
    if (!parseDouble(value, v))
      return bad();
    if (std::string e = contradicts(key == "weight_decay" ? "weight-decay" : key, {v}, "", t);
        !e.empty())
      return e;
    if (key == "lr")
      o.lr = v;
    else if (key == "eps")
      o.eps = v;
    else if (key == "weight-decay" || key == "weight_decay")
      o.weightDecay = v;
    else if (key == "momentum")
      o.momentum = v;
    else if (key == "dampening")
      o.dampening = v;
    else if (key == "clip")
      o.clip = v;
    else
      return "--optimizer: unknown setting '" + key.str() +
             "' (lr, betas, eps, weight-decay, momentum, dampening, nesterov, clip)";
  }
  if (kind == "sgd" && o.weightDecay == 0.01 && !spec.contains("weight"))
    o.weightDecay = 0; // torch.optim.SGD's default
  if (kind == "adam" && !spec.contains("weight"))
    o.weightDecay = 0; // torch.optim.Adam's default
  return "";
}

void zero::buildTrainingPipeline(OpPassManager &pm, const TrainSettings &settings) {
  if (settings.lossKind) {
    ZeroAddLossPassOptions loss;
    loss.kind = *settings.lossKind;
    loss.labels = settings.labels;
    loss.output = settings.lossOutput;
    pm.addPass(createZeroAddLossPass(loss));
  }
  if (settings.precision != Precision::FP32) {
    ZeroMixedPrecisionPassOptions mp;
    mp.precision = settings.precision;
    mp.lossScale = settings.lossScale;
    mp.initialScalePower = settings.initialScalePower;
    mp.lossScaleWindow = settings.lossScaleWindow;
    mp.hysteresis = settings.hysteresis;
    mp.minLossScale = settings.minLossScale;
    mp.consecutiveHysteresis = settings.consecutiveHysteresis;
    mp.checkGradOverflow = settings.checkGradOverflow;
    mp.f32Loss = settings.f32Loss;
    pm.addPass(createZeroMixedPrecisionPass(mp));
  }
  ZeroAutodiffPassOptions ad;
  ad.freeze = settings.freeze;
  ad.lossOutput = settings.trainOutput;
  ad.accumulation = settings.accumulation;
  ad.accumDtype = settings.accumDtype;
  ad.microBatchSize = settings.microBatchSize;
  ad.microBatchOrigin = settings.microBatchOrigin;
  const int64_t checkpoint = settings.zeroGiven ? settings.zero.activationCheckpointInterval : 0;
  ad.tagMicroBatches = settings.zeroGiven && (settings.zero.pp > 1 || checkpoint > 0);
  pm.addPass(createZeroAutodiffPass(ad));
  // ZeRO-2 reduce-scatters the gradients at every micro-step (DeepSpeed);
  // stages 0, 1 and 3 reduce the summed gradient once, in zero-optimizer.
  if (settings.step.world > 1 && settings.step.stage == 2 && settings.accumulation > 1) {
    // Its reduce-scatters carry the gradients' own type (communication_data_type
    // "fp32" is refused there by zero-opt).
    ZeroReduceMicroStepsPassOptions reduce;
    reduce.world = settings.step.world;
    reduce.stage = settings.step.stage;
    reduce.gradientSum = settings.step.gradientSum;
    pm.addPass(createZeroReduceMicroStepsPass(reduce));
  }
  if (checkpoint > 0) {
    ZeroActivationCheckpointPassOptions ck;
    ck.interval = checkpoint;
    pm.addPass(createZeroActivationCheckpointPass(ck));
  }
  if (settings.optimizer)
    pm.addPass(createZeroOptimizerPass(settings.step));
  if (settings.zeroGiven)
    buildZeroPipeline(pm, settings.zero);
}
