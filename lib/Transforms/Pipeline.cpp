//===- Pipeline.cpp - ZeRO options to a pass list -------------------------===//
//
// The `zero-pipeline` pass pipeline. Its options are parsed by MLIR's pass
// option parser (ZeroPipelineOptions); a DeepSpeed ds_config.json named by its
// `config` option supplies the settings the options leave out. Both resolve
// to ZeroSettings and expand to the same pass list: partition, prefetch,
// bucket, release.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Passes.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

std::string zero::readDeepSpeedConfig(llvm::StringRef path, ZeroSettings &opts,
                                      std::vector<std::string> &warnings) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return (path + ": cannot read the config: " + buffer.getError().message()).str();
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return (path + ": not valid JSON: " + llvm::toString(parsed.takeError())).str();
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return (path + ": the config must be a JSON object").str();

  // DeepSpeed's defaults, in elements (runtime/zero/config.py).
  int64_t prefetchElems = 50'000'000, maxLiveElems = 1'000'000'000,
          persistence = 100'000;
  opts.maxReuseDistance = 1'000'000'000;
  const int64_t kBytesPerElement = 4; // fp32 programs
  // DeepSpeed checks train_batch_size = micro batch x accumulation x world
  // size; with all of them given, that fixes the data-parallel size.
  auto intKey = [&](StringRef key) -> std::optional<int64_t> {
    const llvm::json::Value *v = root->get(key);
    if (!v)
      return std::nullopt;
    if (std::optional<int64_t> i = v->getAsInteger())
      return i;
    if (std::optional<double> d = v->getAsNumber(); d && *d == int64_t(*d))
      return int64_t(*d);
    return std::nullopt;
  };
  std::optional<int64_t> batch = intKey("train_batch_size"),
                         micro = intKey("train_micro_batch_size_per_gpu"),
                         accumulation = intKey("gradient_accumulation_steps");
  for (StringRef key : {"train_batch_size", "train_micro_batch_size_per_gpu",
                        "gradient_accumulation_steps"})
    if (root->get(key) && (!intKey(key) || *intKey(key) <= 0))
      return (path + ": " + key + " must be a positive integer").str();
  if (batch && micro) {
    int64_t per = *micro * accumulation.value_or(1);
    if (per <= 0 || *batch % per != 0)
      return (path + ": train_batch_size " + Twine(*batch) +
              " is not a multiple of train_micro_batch_size_per_gpu x "
              "gradient_accumulation_steps (" + Twine(per) + ")")
          .str();
    opts.dp = *batch / per;
    if (opts.dp > kMaxWorldSize)
      return (path + ": train_batch_size / (micro batch x accumulation) gives "
              "a world of " + Twine(opts.dp) + " ranks; at most " +
              Twine(kMaxWorldSize) + " are supported")
          .str();
  }
  for (const auto &kv : *root) {
    StringRef key = kv.first;
    // The training keys are read by zero-opt --train (readTrainingConfig);
    // gradient_accumulation_steps is its micro-batches, and the micro-batch
    // size is checked against the model's batch (zero-autodiff).
    if (key == "optimizer" || key == "scheduler" || key == "gradient_clipping" ||
        key == "gradient_accumulation_steps" ||
        (opts.training && key == "train_micro_batch_size_per_gpu"))
      continue;
    if (key == "zero_optimization" || (batch && micro && (key == "train_batch_size" ||
        key == "train_micro_batch_size_per_gpu")))
      continue;
    warnings.push_back(("'" + key.str() + "' is not used by zero-opt (only "
                        "zero_optimization settings and the batch sizes that fix "
                        "the world size shape the program)"));
  }
  if (const llvm::json::Value *z = root->get("zero_optimization")) {
    const llvm::json::Object *zo = z->getAsObject();
    if (!zo)
      return (path + ": zero_optimization must be an object").str();
    for (const auto &kv : *zo) {
      std::string key = kv.first.str();
      std::optional<int64_t> v = kv.second.getAsInteger();
      if (!v) {
        if (std::optional<double> d = kv.second.getAsNumber(); d && *d == int64_t(*d))
          v = int64_t(*d); // 5e7 is a number literal in JSON
      }
      auto needInt = [&]() -> std::string {
        if (!v || *v < 0)
          return (path + ": zero_optimization." + key +
                  " must be a non-negative integer")
              .str();
        return "";
      };
      if (key == "stage") {
        if (auto e = needInt(); !e.empty())
          return e;
        opts.stage = *v;
        opts.stageGiven = true;
      } else if (key == "stage3_prefetch_bucket_size") {
        if (auto e = needInt(); !e.empty())
          return e;
        prefetchElems = *v;
      } else if (key == "stage3_param_persistence_threshold") {
        if (auto e = needInt(); !e.empty())
          return e;
        persistence = *v;
      } else if (key == "stage3_max_live_parameters") {
        if (auto e = needInt(); !e.empty())
          return e;
        maxLiveElems = *v;
      } else if (key == "stage3_max_reuse_distance") {
        if (auto e = needInt(); !e.empty())
          return e;
        opts.maxReuseDistance = *v;
      } else if (key == "zero_quantized_weights" ||
                 key == "zero_quantized_gradients") {
        std::optional<bool> on = kv.second.getAsBoolean();
        if (!on)
          return (path + ": zero_optimization." + key + " must be true or false").str();
        // ZeRO++'s formats: int8 weights, int4 gradients.
        if (key == "zero_quantized_weights")
          opts.quantizeWeights = *on ? 8 : 0;
        else
          opts.quantizeGradients = *on ? 4 : 0;
      } else if (key == "zero_hpz_partition_size") {
        if (auto e = needInt(); !e.empty())
          return e;
        opts.hpz = std::max<int64_t>(*v, 1);
      } else if (key == "allgather_bucket_size") {
        if (auto e = needInt(); !e.empty())
          return e;
        warnings.push_back("zero_optimization.allgather_bucket_size is a ZeRO-1/2 "
                           "setting and has no effect at stage 3, where "
                           "stage3_prefetch_bucket_size bounds each coalesced fetch");
      } else if (key == "reduce_bucket_size") {
        if (auto e = needInt(); !e.empty())
          return e;
        opts.reduceBucketElems = *v;
        if (!opts.training)
          warnings.push_back("zero_optimization.reduce_bucket_size has no effect on a "
                             "forward program (there are no gradients to reduce; "
                             "zero-opt --train uses it)");
      } else {
        warnings.push_back("zero_optimization." + key + " is not supported and is ignored");
      }
    }
  }
  opts.persistenceThreshold = persistence;
  // Prefetch is bounded by bytes, not layers, as in DeepSpeed.
  opts.prefetchDepth = prefetchElems > 0 ? 1 << 20 : 0;
  opts.prefetchBytes = std::min(prefetchElems, maxLiveElems) * kBytesPerElement;
  // As DeepSpeed's coalesced fetch: one bucket is at most one prefetch
  // bucket (stage3_prefetch_bucket_size elements).
  opts.bucketBytes = prefetchElems * kBytesPerElement;
  return "";
}

void zero::buildZeroPipeline(OpPassManager &pm, const ZeroSettings &opts) {
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
    if (opts.prefetchDepth > 0) {
      ZeroPrefetchPassOptions prefetch;
      prefetch.depth = opts.prefetchDepth;
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
      llvm::errs() << "warning: " << options.config << ": " << w << "\n";
    if (!err.empty())
      return errorHandler(err);
  }
  const int64_t configDp = settings.dp;
  struct Key {
    const char *name;
    const zero::ZeroPipelineOptions::Option<int64_t> &option;
    int64_t &setting;
    int64_t lowest;
  } keys[] = {
      {"stage", options.stage, settings.stage, 0},
      {"dp", options.dp, settings.dp, 1},
      {"prefetch", options.prefetch, settings.prefetchDepth, 0},
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
  if (given.contains("stage"))
    settings.stageGiven = true;
  if (given.contains("partition-method"))
    settings.partitionMethod = options.partitionMethod;
  settings.microBatchesGiven = given.contains("micro-batches");
  if (settings.activationCheckpointInterval > 0 && !settings.training)
    return errorHandler("--zero-pipeline: activation-checkpoint-interval recomputes "
                        "forward segments in a training step's backward; a forward "
                        "program keeps no activations for backward (compile with --train)");
  if (given.contains("schedule")) {
    if (options.schedule != "1f1b" && options.schedule != "gpipe")
      return errorHandler("--zero-pipeline: schedule must be 1f1b or gpipe, got '" +
                          options.schedule + "'");
    if (!settings.training)
      return errorHandler("--zero-pipeline: schedule=" + options.schedule +
                          " orders a training step's forwards and backwards; a "
                          "forward program runs fill/drain (compile with --train)");
    if (settings.pp <= 1)
      return errorHandler("--zero-pipeline: schedule=" + options.schedule +
                          " needs pipeline stages (pp > 1)");
    settings.schedule = options.schedule;
  }
  if (given.contains("tied-grads")) {
    if (options.tiedGrads != "micro-batch" && options.tiedGrads != "step")
      return errorHandler("--zero-pipeline: tied-grads must be micro-batch or step, got '" +
                          options.tiedGrads + "'");
    if (!settings.training || settings.pp <= 1)
      return errorHandler("--zero-pipeline: tied-grads=" + options.tiedGrads +
                          " sums a tied parameter's gradient over pipeline stages; it "
                          "needs a training step (--train) cut into stages (pp > 1)");
    settings.tiedGrads = options.tiedGrads;
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
  if (settings.dp > zero::kMaxWorldSize)
    return errorHandler("--zero-pipeline: dp must be at most " +
                        Twine(zero::kMaxWorldSize) + ", got " + Twine(settings.dp));
  if (configDp > 0 && settings.dp != configDp)
    return errorHandler(options.config + ": the batch sizes give a world of " +
                        Twine(configDp) + " ranks but --zero-pipeline says dp=" +
                        Twine(settings.dp) +
                        "; make train_batch_size = micro batch x accumulation "
                        "x dp, or drop one of them");
  return success();
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
      "The ZeRO pass list from ZeRO options and/or a DeepSpeed config: "
      "zero-partition, then for stage 3 zero-prefetch, zero-bucket and "
      "zero-release",
      buildFromOptions,
      [](function_ref<void(const detail::PassOptions &)> print) {
        print(ZeroPipelineOptions());
      });
}
