//===- DeepSpeedConfig.cpp - The DeepSpeed JSON config reader -------------===//
//
// The one reader of a ds_config.json: zero_optimization and the batch sizes
// for the `zero-pipeline` pass pipeline (readDeepSpeedConfig), and optimizer,
// scheduler, gradient_clipping and gradient_accumulation_steps for zero-opt
// --train (readTrainingConfig), each with DeepSpeed's defaults. Both load the
// file and read numbers the same way.
//
//===----------------------------------------------------------------------===//

#include "zero/Pipelines/DeepSpeedConfig.h"

#include <cmath>
#include <cstdio>

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;

namespace {

/// Reads `path` as a JSON object. The error names the file and what to fix.
llvm::Expected<llvm::json::Value> loadConfig(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), (path + ": " + why).str());
  };
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("cannot read the config: " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return fail("not valid JSON: " + llvm::toString(parsed.takeError()));
  if (!parsed->getAsObject())
    return fail("the config must be a JSON object");
  return parsed;
}

/// Whether `v` is "auto" (a value the Hugging Face Trainer fills in from its
/// arguments).
bool isAuto(const llvm::json::Value *v) {
  return v && v->getAsString() == std::optional<llvm::StringRef>("auto");
}

/// A resolved "auto", for the notes zero-opt prints (one per value).
std::string autoNote(llvm::StringRef key, llvm::StringRef value) {
  return ("note: " + key + " \"auto\" -> " + value).str();
}

/// `v` as the config spells it: 3, 0.5, 1e-06.
std::string formatNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

/// A key of one of DeepSpeed's config models (DeepSpeedConfigModel
/// subclasses) and its default there: `json` the default as JSON text, or
/// null where the default is absent (None, or computed from other keys) and
/// `absent` says what takes its place. DeepSpeed's non-strict models drop
/// every "auto" before validation (DeepSpeedConfigModel.__init__), so the
/// key takes this default.
struct ModelDefault {
  const char *key;
  const char *json;
  const char *absent = nullptr;
};

/// DeepSpeedZeroConfig's keys (runtime/zero/config.py), by their JSON names.
/// reduce_bucket_size, stage3_prefetch_bucket_size and
/// stage3_param_persistence_threshold are the Hugging Face Trainer's to fill
/// (from the model's hidden size, which zero-opt does not know): DeepSpeed's
/// defaults too. stage is resolveZeroAutos' own.
constexpr ModelDefault kZeroDefaults[] = {
    {"contiguous_gradients", "true"},
    {"reduce_scatter", "true"},
    {"reduce_bucket_size", "500000000"},
    {"use_multi_rank_bucket_allreduce", "true"},
    {"allgather_partitions", "true"},
    {"allgather_bucket_size", "500000000"},
    {"overlap_comm", nullptr, "true at stage 3, false below"},
    {"load_from_fp32_weights", "true"},
    {"elastic_checkpoint", "false"},
    {"offload_param", nullptr, "no offload"},
    {"offload_optimizer", nullptr, "no offload"},
    {"zenflow", nullptr, "no ZenFlow"},
    {"sub_group_size", "1000000000"},
    {"cpu_offload_param", nullptr, "no offload"},
    {"cpu_offload_use_pin_memory", nullptr, "unset"},
    {"cpu_offload", nullptr, "no offload"},
    {"stage3_prefetch_bucket_size", "50000000"},
    {"stage3_param_persistence_threshold", "100000"},
    {"stage3_model_persistence_threshold", "9223372036854775807"}, // sys.maxsize
    {"stage3_max_live_parameters", "1000000000"},
    {"stage3_max_reuse_distance", "1000000000"},
    {"stage3_gather_16bit_weights_on_model_save", "false"},
    {"stage3_module_granularity_threshold", "0"},
    {"stage3_use_all_reduce_for_fetch_params", "false"},
    {"stage3_allgather_sequential", "false"},
    {"stage3_partition_stream_chunk_size", "0"},
    {"stage3_gather_fp16_weights_on_model_save", "false"},
    {"ignore_unused_parameters", "true"},
    {"legacy_stage1", "false"},
    {"round_robin_gradients", "false"},
    {"zero_hpz_partition_size", "1"},
    {"zero_quantized_weights", "false"},
    {"zero_quantized_nontrainable_weights", "false"},
    {"zero_quantized_gradients", "false"},
    {"zeropp_loco_param", nullptr, "no LoCo"},
    {"mics_shard_size", "-1"},
    {"mics_hierarchical_params_gather", "false"},
    {"memory_efficient_linear", "true"},
    {"pipeline_loading_checkpoint", "false"},
    {"override_module_apply", "true"},
    {"log_trace_cache_warnings", "false"},
    {"enable_sanity_checks", "false"},
    {"save_muon_momentum_buffer_in_memory", "false"},
    {"leaf_module", nullptr, "its own defaults"}};

/// DeepSpeedZeroOffloadParamConfig and ...OptimizerConfig
/// (runtime/zero/offload_config.py).
constexpr ModelDefault kOffloadParamDefaults[] = {
    {"device", "\"none\""},     {"nvme_path", nullptr, "none"},
    {"buffer_count", "5"},      {"buffer_size", "100000000"},
    {"max_in_cpu", "1000000000"}, {"pin_memory", "false"}};
constexpr ModelDefault kOffloadOptimizerDefaults[] = {
    {"device", "\"none\""},         {"nvme_path", nullptr, "none"},
    {"buffer_count", "4"},          {"pin_memory", "false"},
    {"pipeline_read", "false"},     {"pipeline_write", "false"},
    {"fast_init", "false"},         {"ratio", "1.0"},
    {"super_offload", "false"},     {"convert_grad_on_cpu", "true"},
    {"cpuadam_cores_perc", "0.8"}};

/// DeepSpeedFP16Config and DeepSpeedBF16Config (runtime/precision_config.py)
/// but "enabled", the Trainer's to fill (readPrecision), and CSVConfig
/// (monitor/config.py).
constexpr ModelDefault kFp16Defaults[] = {
    {"auto_cast", "false"},         {"loss_scale", "0"},
    {"initial_scale_power", "16"},  {"loss_scale_window", "1000"},
    {"hysteresis", "2"},            {"consecutive_hysteresis", "false"},
    {"min_loss_scale", "1"},        {"fp16_master_weights_and_grads", "false"}};
constexpr ModelDefault kBf16Defaults[] = {
    {"immediate_grad_update", "false"},
    {"check_grad_overflow", "true"},
    {"bf16_master_weights_and_grads", "false"},
    {"bf16_optimizer_states", "false"}};
constexpr ModelDefault kCsvMonitorDefaults[] = {
    {"enabled", "false"}, {"output_path", "\"\""}, {"job_name", "\"DeepSpeedJobName\""}};

/// Each "auto" among `defaults` in `block` (the config's `where`) becomes
/// DeepSpeed's default, read as if the config gave it, or is dropped where
/// that default is absent; each noted.
void resolveModelAutos(llvm::json::Object &block, llvm::StringRef where,
                       llvm::ArrayRef<ModelDefault> defaults,
                       std::vector<std::string> &notes) {
  for (const ModelDefault &d : defaults) {
    if (!isAuto(block.get(d.key)))
      continue;
    const std::string key = (where + "." + d.key).str();
    if (!d.json) {
      block.erase(d.key);
      notes.push_back(autoNote(key, std::string(d.absent) + " (DeepSpeed's default, as if absent)"));
      continue;
    }
    block[d.key] = cantFail(llvm::json::parse(d.json));
    notes.push_back(autoNote(key, std::string(d.json) + " (DeepSpeed's default)"));
  }
}

/// The "auto" values of the batch sizes and zero_optimization (the ZeRO
/// settings' reader): the batch sizes as if absent (the model's batch, one
/// micro-batch per step unless the config says more, the ranks of
/// --zero-pipeline dp=); every key of DeepSpeed's ZeRO models its default
/// there (resolveModelAutos), the stage as if absent.
void resolveZeroAutos(llvm::json::Object &root, bool training,
                      std::vector<std::string> &notes) {
  if (isAuto(root.get("train_batch_size"))) {
    root.erase("train_batch_size");
    notes.push_back(autoNote("train_batch_size",
                             "micro-batch x accumulation x the data-parallel ranks "
                             "(--zero-pipeline dp=, default 1)"));
  }
  if (isAuto(root.get("train_micro_batch_size_per_gpu"))) {
    root.erase("train_micro_batch_size_per_gpu");
    notes.push_back(autoNote("train_micro_batch_size_per_gpu",
                             "the model's batch (its inputs' dim 0, --input-shape)"));
  }
  if (isAuto(root.get("gradient_accumulation_steps"))) {
    root["gradient_accumulation_steps"] = 1;
    notes.push_back(autoNote("gradient_accumulation_steps", "1 (the Trainer's default)"));
  }
  llvm::json::Object *zo = root.getObject("zero_optimization");
  if (!zo)
    return;
  if (isAuto(zo->get("stage"))) {
    zo->erase("stage");
    notes.push_back(autoNote("zero_optimization.stage",
                             training ? "0 (DeepSpeed's default, as if absent; "
                                        "--zero-pipeline stage= may give another)"
                                      : "as if absent: --zero-pipeline stage=, else a "
                                        "forward program's 3 (DeepSpeed's 0 is no ZeRO)"));
  }
  resolveModelAutos(*zo, "zero_optimization", kZeroDefaults, notes);
  if (llvm::json::Object *o = zo->getObject("offload_param"))
    resolveModelAutos(*o, "zero_optimization.offload_param", kOffloadParamDefaults, notes);
  if (llvm::json::Object *o = zo->getObject("offload_optimizer"))
    resolveModelAutos(*o, "zero_optimization.offload_optimizer", kOffloadOptimizerDefaults,
                      notes);
}

/// The "auto" values of the training keys (the training settings' reader),
/// as the Hugging Face Trainer fills them from TrainingArguments' defaults:
/// lr 5e-5, betas 0.9/0.999, eps 1e-8, weight decay 0, clipping 1.0, one
/// micro-batch per step, no warmup, the schedule's peak the optimizer's lr;
/// total_num_steps is the run's steps (zero-run --steps: -1 in the program).
/// The batch sizes are the ZeRO reader's to note (resolveZeroAutos). The
/// keys of DeepSpeed's fp16, bf16 and csv_monitor models but fp16.enabled and
/// bf16.enabled (the Trainer's, readPrecision's) take DeepSpeed's defaults
/// (resolveModelAutos).
void resolveTrainingAutos(llvm::json::Object &root, std::vector<std::string> &notes) {
  const std::pair<const char *, llvm::ArrayRef<ModelDefault>> models[] = {
      {"fp16", kFp16Defaults}, {"bf16", kBf16Defaults}, {"csv_monitor", kCsvMonitorDefaults}};
  for (auto [name, defaults] : models)
    if (llvm::json::Object *block = root.getObject(name))
      resolveModelAutos(*block, name, defaults, notes);
  if (isAuto(root.get("gradient_accumulation_steps")))
    root["gradient_accumulation_steps"] = 1;
  if (isAuto(root.get("train_micro_batch_size_per_gpu")))
    root.erase("train_micro_batch_size_per_gpu");
  if (isAuto(root.get("gradient_clipping"))) {
    root["gradient_clipping"] = 1.0;
    notes.push_back(autoNote("gradient_clipping", "1.0 (the Trainer's max_grad_norm)"));
  }
  double lr = 5e-5;
  if (llvm::json::Object *opt = root.getObject("optimizer"))
    if (llvm::json::Object *params = opt->getObject("params")) {
      if (isAuto(params->get("lr"))) {
        (*params)["lr"] = lr;
        notes.push_back(autoNote("optimizer.params.lr", "5e-05 (the Trainer's learning_rate)"));
      } else if (std::optional<double> given = params->getNumber("lr")) {
        lr = *given;
      }
      if (isAuto(params->get("betas"))) {
        (*params)["betas"] = llvm::json::Array{0.9, 0.999};
        notes.push_back(autoNote("optimizer.params.betas", "[0.9, 0.999] (adam_beta1, adam_beta2)"));
      }
      if (isAuto(params->get("eps"))) {
        (*params)["eps"] = 1e-8;
        notes.push_back(autoNote("optimizer.params.eps", "1e-08 (adam_epsilon)"));
      }
      if (isAuto(params->get("weight_decay"))) {
        (*params)["weight_decay"] = 0.0;
        notes.push_back(autoNote("optimizer.params.weight_decay", "0 (weight_decay)"));
      }
    }
  if (llvm::json::Object *sched = root.getObject("scheduler"))
    if (llvm::json::Object *params = sched->getObject("params")) {
      char peak[32];
      std::snprintf(peak, sizeof peak, "%g", lr);
      const std::pair<const char *, std::string> values[] = {
          {"warmup_min_lr", "0"},
          {"warmup_max_lr", std::string(peak) + " (the optimizer's lr)"},
          {"warmup_num_steps", "0 (warmup_steps)"},
          {"total_num_steps", "the run's steps (zero-run --steps, or every step of --data)"}};
      for (const auto &[key, note] : values) {
        if (!isAuto(params->get(key)))
          continue;
        llvm::StringRef k(key);
        (*params)[key] = k == "warmup_max_lr" ? lr : k == "total_num_steps" ? -1.0 : 0.0;
        notes.push_back(autoNote(("scheduler.params." + k).str(), note));
      }
    }
}

/// A JSON number that is a whole number (5e7 is a number literal in JSON).
std::optional<int64_t> integerValue(const llvm::json::Value &v) {
  return v.getAsInteger();
}

/// `obj.key` into `out` when present: an error naming `where.key` when it is
/// not a number, else empty.
std::string readNumber(llvm::StringRef path, const llvm::json::Object &obj,
                       llvm::StringRef key, double &out, llvm::StringRef where) {
  const llvm::json::Value *v = obj.get(key);
  if (!v)
    return "";
  std::optional<double> d = v->getAsNumber();
  if (!d)
    return (path + ": " + where + "." + key + " must be a number").str();
  out = *d;
  return "";
}

/// The Adam params DeepSpeed 0.19 refuses: max_grad_norm (DeepSpeed's
/// ValueError: clipping is gradient_clipping) and amsgrad true (FusedAdam has
/// no AMSGrad variant), an error naming the key; and bias_correction, read
/// into `o` (false: FusedAdam's moments uncorrected).
std::string checkAdamParams(llvm::StringRef path,
                            const llvm::json::Object &params,
                            zero::ZeroOptimizerPassOptions &o) {
  if (const llvm::json::Value *v = params.get("max_grad_norm"))
    return (path +
            ": optimizer.params.max_grad_norm is not an optimizer parameter in "
            "DeepSpeed (its engine raises ValueError); clip with the top-level "
            "\"gradient_clipping\": " +
            (v->getAsNumber() ? formatNumber(*v->getAsNumber())
                              : std::string("<norm>")))
        .str();
  if (const llvm::json::Value *v = params.get("amsgrad")) {
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return (path + ": optimizer.params.amsgrad must be true or false").str();
    if (*b)
      return (path +
              ": optimizer.params.amsgrad true is not supported: DeepSpeed's "
              "FusedAdam refuses the AMSGrad variant and zero-opt's Adam has "
              "none; drop the key or give false")
          .str();
  }
  if (const llvm::json::Value *v = params.get("bias_correction")) {
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return (path + ": optimizer.params.bias_correction must be true or false")
          .str();
    o.biasCorrection = *b;
  }
  return "";
}

/// The config's optimizer block ({"type", "params"}) into `o`, with
/// DeepSpeed's defaults and meaning of Adam.
std::string readOptimizer(llvm::StringRef path, const llvm::json::Value &v,
                          zero::ZeroOptimizerPassOptions &o,
                          std::vector<std::string> &warnings) {
  auto number = [&](const llvm::json::Object &obj, llvm::StringRef key, double &out,
                    llvm::StringRef where) { return readNumber(path, obj, key, out, where); };
  const llvm::json::Object *opt = v.getAsObject();
  std::optional<llvm::StringRef> type = opt ? opt->getString("type") : std::nullopt;
  if (!type)
    return (path + ": optimizer must be an object with a \"type\"").str();
  std::string kind = type->lower();
  const llvm::json::Object *params = opt->getObject("params");
  llvm::json::Object none;
  if (!params)
    params = &none;
  // DeepSpeed's Adam is AdamW (decoupled decay) unless adam_w_mode is
  // false (its effective_adam_w_mode: AdamW, or adam_w_mode); torch_adam
  // only picks torch.optim's implementation of the same update. Its weight
  // decay defaults to 0.
  o.weightDecay = 0;
  if (kind == "adam" || kind == "adamw") {
    o.type = "adamw";
    if (kind == "adam")
      if (std::optional<bool> w = params->getBoolean("adam_w_mode"); w && !*w)
        o.type = "adam";
  } else if (kind == "sgd") {
    o.type = "sgd";
  } else {
    return (path + ": optimizer.type '" + *type +
            "' is not supported (Adam, AdamW, SGD)").str();
  }
  double lr = o.lr, eps = o.eps, wd = o.weightDecay, mom = o.momentum, damp = o.dampening;
  for (auto [key, out] : {std::pair<const char *, double *>{"lr", &lr},
                          {"eps", &eps},
                          {"weight_decay", &wd},
                          {"momentum", &mom},
                          {"dampening", &damp}})
    if (std::string e = number(*params, key, *out, "optimizer.params"); !e.empty())
      return e;
  o.lr = lr;
  o.eps = eps;
  o.weightDecay = wd;
  o.momentum = mom;
  o.dampening = damp;
  if (const llvm::json::Array *betas = params->getArray("betas")) {
    if (betas->size() != 2 || !(*betas)[0].getAsNumber() || !(*betas)[1].getAsNumber())
      return (path + ": optimizer.params.betas must be [beta1, beta2]").str();
    o.beta1 = *(*betas)[0].getAsNumber();
    o.beta2 = *(*betas)[1].getAsNumber();
  }
  if (std::optional<bool> n = params->getBoolean("nesterov"))
    o.nesterov = *n;
  // torch_adam builds torch.optim.AdamW, whose weight_decay defaults to 0.01
  // (DeepSpeed's own FusedAdam: 0).
  if (o.type == "adamw" &&
      params->getBoolean("torch_adam") == std::optional<bool>(true) &&
      !params->get("weight_decay")) {
    o.weightDecay = 0.01;
    warnings.push_back(
        "note: optimizer.params.weight_decay absent with torch_adam true -> "
        "0.01 (torch.optim.AdamW's default, which DeepSpeed builds)");
  }
  if (kind == "adam" || kind == "adamw")
    if (std::string e = checkAdamParams(path, *params, o); !e.empty())
      return e;
  for (const auto &kv : *params) {
    llvm::StringRef k = kv.first;
    if (k != "lr" && k != "eps" && k != "weight_decay" && k != "momentum" &&
        k != "dampening" && k != "betas" && k != "nesterov" &&
        k != "adam_w_mode" && k != "torch_adam" && k != "amsgrad" &&
        k != "bias_correction" && k != "max_grad_norm")
      warnings.push_back("optimizer.params." + k.str() + " is not supported and is ignored");
  }
  return "";
}

/// OneCycle's params (DeepSpeed's names and defaults; cycle_min_lr and
/// cycle_max_lr are required, as DeepSpeed's constructor requires them).
std::string readOneCycle(llvm::StringRef path, const llvm::json::Object &params,
                         zero::ZeroOptimizerPassOptions &o,
                         std::vector<std::string> &warnings) {
  for (const char *key : {"cycle_min_lr", "cycle_max_lr"})
    if (!params.get(key))
      return (path + ": scheduler.params." + key + " is required by OneCycle").str();
  double second = -1;
  for (auto [key, out] : {std::pair<const char *, double *>{"cycle_min_lr", &o.cycleMinLr},
                          {"cycle_max_lr", &o.cycleMaxLr},
                          {"decay_lr_rate", &o.decayLrRate},
                          {"cycle_first_step_size", &o.cycleFirstStepSize},
                          {"cycle_second_step_size", &second},
                          {"decay_step_size", &o.decayStepSize},
                          {"cycle_min_mom", &o.cycleMinMom},
                          {"cycle_max_mom", &o.cycleMaxMom},
                          {"decay_mom_rate", &o.decayMomRate}}) {
    if (const llvm::json::Value *v = params.get(key); v && v->kind() == llvm::json::Value::Null)
      continue; // cycle_second_step_size: null is the first's
    double value = *out;
    if (std::string e = readNumber(path, params, key, value, "scheduler.params"); !e.empty())
      return e;
    *out = value;
  }
  o.cycleSecondStepSize = second;
  if (const llvm::json::Value *m = params.get("cycle_momentum")) {
    std::optional<bool> b = m->getAsBoolean();
    if (!b)
      return (path + ": scheduler.params.cycle_momentum must be true or false").str();
    o.cycleMomentum = *b;
  }
  // The stair counts (DeepSpeed 0.19; 0.18 and before ignored them).
  for (auto [key, out] :
       {std::pair<const char *, int64_t *>{"cycle_first_stair_count",
                                           &o.cycleFirstStairCount},
        {"cycle_second_stair_count", &o.cycleSecondStairCount}}) {
    const llvm::json::Value *v = params.get(key);
    if (!v || v->kind() == llvm::json::Value::Null)
      continue; // cycle_second_stair_count: null is the first's
    std::optional<int64_t> n = v->getAsInteger();
    if (!n || *n < 0)
      return (path + ": scheduler.params." + key + " must be an integer >= 0")
          .str();
    *out = *n;
  }
  for (const auto &kv : params) {
    llvm::StringRef k = kv.first;
    if (k != "cycle_min_lr" && k != "cycle_max_lr" && k != "decay_lr_rate" &&
        k != "cycle_first_step_size" && k != "cycle_second_step_size" &&
        k != "decay_step_size" && k != "cycle_min_mom" &&
        k != "cycle_max_mom" && k != "decay_mom_rate" &&
        k != "cycle_momentum" && k != "last_batch_iteration" &&
        k != "cycle_first_stair_count" && k != "cycle_second_stair_count")
      warnings.push_back("scheduler.params." + k.str() + " is not supported and is ignored");
  }
  return "";
}

/// scheduler.params.last_batch_iteration: DeepSpeed's schedules start after
/// that step (-1, their default: at the beginning); another L leaves the
/// optimizer's lr for the first step and resumes the schedule at L + 1.
std::string readLastBatchIteration(llvm::StringRef path,
                                   const llvm::json::Object &params,
                                   zero::ZeroOptimizerPassOptions &o) {
  const llvm::json::Value *v = params.get("last_batch_iteration");
  if (!v)
    return "";
  std::optional<int64_t> k = v->getAsInteger();
  if (!k)
    return (path + ": scheduler.params.last_batch_iteration must be an integer")
        .str();
  if (*k < -1)
    return (path +
            ": scheduler.params.last_batch_iteration must be -1 (the start) "
            "or a step index >= 0, got " +
            llvm::Twine(*k))
        .str();
  o.lastBatchIteration = *k;
  return "";
}

/// WarmupDecayLR and WarmupCosineLR with total_num_steps at or below the
/// warmup (at least 2 steps, as DeepSpeed raises it): DeepSpeed warns and
/// keeps the lr at the decay's floor after the warmup.
void warnShortDecay(const zero::ZeroOptimizerPassOptions &o,
                    std::vector<std::string> &warnings) {
  const bool cosine = o.schedule == zero::LRSchedule::WarmupCosineLR;
  if (!cosine && o.schedule != zero::LRSchedule::WarmupDecayLR)
    return;
  const int64_t warmup = std::max<int64_t>(2, o.warmupNumSteps);
  if (o.totalNumSteps < 0 || o.totalNumSteps > warmup)
    return;
  warnings.push_back(
      "scheduler.params.total_num_steps " + std::to_string(o.totalNumSteps) +
      " is not above warmup_num_steps " + std::to_string(warmup) +
      ": no decay window; after the warmup the lr stays at " +
      (cosine ? "cos_min_ratio x the optimizer's lr" : "warmup_min_lr") +
      " (as DeepSpeed, which warns and clamps)");
}

/// The config's scheduler block ({"type", "params"}) into `o`.
std::string readScheduler(llvm::StringRef path, const llvm::json::Value &v,
                          zero::ZeroOptimizerPassOptions &o,
                          std::vector<std::string> &warnings) {
  auto number = [&](const llvm::json::Object &obj, llvm::StringRef key, double &out,
                    llvm::StringRef where) { return readNumber(path, obj, key, out, where); };
  const llvm::json::Object *sched = v.getAsObject();
  std::optional<llvm::StringRef> type = sched ? sched->getString("type") : std::nullopt;
  if (!type)
    return (path + ": scheduler must be an object with a \"type\"").str();
  if (*type != "WarmupLR" && *type != "WarmupDecayLR" && *type != "WarmupCosineLR" &&
      *type != "OneCycle" && *type != "LRRangeTest")
    return (path + ": scheduler.type '" + *type +
            "' is not supported (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, "
            "LRRangeTest)")
        .str();
  o.schedule = *zero::symbolizeLRSchedule(*type);
  const llvm::json::Object *params = sched->getObject("params");
  llvm::json::Object none;
  if (!params)
    params = &none;
  if (std::string e = readLastBatchIteration(path, *params, o); !e.empty())
    return e;
  if (*type == "OneCycle")
    return readOneCycle(path, *params, o, warnings);
  if (*type == "LRRangeTest") {
    for (auto [key, out] :
         {std::pair<const char *, double *>{"lr_range_test_min_lr", &o.lrRangeTestMinLr},
          {"lr_range_test_step_size", &o.lrRangeTestStepSize},
          {"lr_range_test_step_rate", &o.lrRangeTestStepRate}}) {
      double value = *out;
      if (std::string e = readNumber(path, *params, key, value, "scheduler.params"); !e.empty())
        return e;
      *out = value;
    }
    if (const llvm::json::Value *s = params->get("lr_range_test_staircase")) {
      std::optional<bool> b = s->getAsBoolean();
      if (!b)
        return (path + ": scheduler.params.lr_range_test_staircase must be true or false")
            .str();
      o.lrRangeTestStaircase = *b;
    }
    for (const auto &kv : *params) {
      llvm::StringRef k = kv.first;
      if (k != "lr_range_test_min_lr" && k != "lr_range_test_step_size" &&
          k != "lr_range_test_step_rate" && k != "lr_range_test_staircase" &&
          k != "last_batch_iteration")
        warnings.push_back("scheduler.params." + k.str() + " is not supported and is ignored");
    }
    return "";
  }
  double minLr = o.warmupMinLr, maxLr = o.warmupMaxLr, cosMin = o.cosMinRatio,
         warmMin = o.warmupMinRatio, steps = double(o.warmupNumSteps),
         total = double(o.totalNumSteps);
  for (auto [key, out] : {std::pair<const char *, double *>{"warmup_min_lr", &minLr},
                          {"warmup_max_lr", &maxLr},
                          {"cos_min_ratio", &cosMin},
                          {"warmup_min_ratio", &warmMin},
                          {"warmup_num_steps", &steps},
                          {"total_num_steps", &total}})
    if (std::string e = number(*params, key, *out, "scheduler.params"); !e.empty())
      return e;
  o.warmupMinLr = minLr;
  o.warmupMaxLr = maxLr;
  o.cosMinRatio = cosMin;
  o.warmupMinRatio = warmMin;
  o.warmupNumSteps = int64_t(steps);
  o.totalNumSteps = int64_t(total);
  if (std::optional<llvm::StringRef> w = params->getString("warmup_type")) {
    std::optional<zero::WarmupType> warmup = zero::symbolizeWarmupType(*w);
    if (!warmup)
      return (path + ": scheduler.params.warmup_type must be log or linear, got '" + *w +
              "'")
          .str();
    o.warmupType = *warmup;
  }
  for (const auto &kv : *params) {
    llvm::StringRef k = kv.first;
    if (k != "warmup_min_lr" && k != "warmup_max_lr" && k != "cos_min_ratio" &&
        k != "warmup_min_ratio" && k != "warmup_num_steps" && k != "total_num_steps" &&
        k != "warmup_type" && k != "last_batch_iteration")
      warnings.push_back("scheduler.params." + k.str() + " is not supported and is ignored");
  }
  warnShortDecay(o, warnings);
  return "";
}

} // namespace

namespace {

/// What does the job of a top-level DeepSpeed section that zero-opt does not
/// read (monitoring, profiling, the checkpointing API); null for others.
const char *usedInstead(llvm::StringRef key) {
  static constexpr const char *kLogs = "zero-run logs to --log-json and csv_monitor's CSV files";
  return llvm::StringSwitch<const char *>(key)
      .Case("activation_checkpointing",
            "it configures DeepSpeed's checkpointing API; zero-opt recomputes layers "
            "with --zero-pipeline activation-checkpoint-interval=K")
      .Case("tensorboard", kLogs)
      .Case("wandb", kLogs)
      .Case("comet", kLogs)
      .Case("wall_clock_breakdown", "zero-run --report and --trace give the step's times")
      .Case("flops_profiler", "zero-run logs each step's TFLOP/s and MFU (--log-json)")
      .Case("comms_logger", "zero-run --report and --trace give the collectives")
      .Case("memory_breakdown", "zero-run --report gives each arena's bytes and the peak RSS")
      .Default(nullptr);
}

/// Why a boolean zero_optimization knob of DeepSpeed's has nothing left to
/// decide here; null for any other key.
const char *withoutEffect(llvm::StringRef key) {
  static constexpr const char *kWholeOnSave =
      "zero-run --save always writes whole parameters, gathered from the shards (and "
      "zero-ckpt consolidate does for a checkpoint)";
  return llvm::StringSwitch<const char *>(key)
      .Case("overlap_comm", "zero-run always overlaps the collectives with compute (they "
                            "run on the communication stream, placed by zero-opt)")
      .Case("contiguous_gradients", "gradients live where the compile-time memory plan "
                                    "places them (nothing fragments)")
      .Case("allgather_partitions", "updated shards are always all-gathered")
      .Case("use_multi_rank_bucket_allreduce",
            "gradients are reduced in the buckets zero-opt plans (reduce_bucket_size)")
      .Case("round_robin_gradients", "it orders DeepSpeed's gradient copies to the CPU; "
                                     "zero-run copies none")
      .Case("stage3_gather_16bit_weights_on_model_save", kWholeOnSave)
      .Case("stage3_gather_fp16_weights_on_model_save", kWholeOnSave)
      .Case("memory_efficient_linear", "activations are freed where the compile-time "
                                       "memory plan says they die")
      .Case("elastic_checkpoint", "checkpoints resume at any world size already")
      .Case("legacy_stage1", "there is one stage 1")
      .Case("cpu_offload_use_pin_memory", "the CUDA backend's host arena is always pinned")
      .Default(nullptr);
}

/// zero_optimization.offload_optimizer and offload_param (DeepSpeed's
/// DeepSpeedZeroOffloadOptimizerConfig / ...ParamConfig): device "none",
/// "cpu" (the CPU backend holds everything in host memory already) or
/// "nvme" (the optimizer state, or stage 3's parameter shards, in swap files
/// under nvme_path, read ahead by buffer_count consumers). Both share one
/// nvme_path.
std::string readOffload(llvm::StringRef path, const std::string &section,
                        const llvm::json::Value &value, zero::ZeroSettings &opts,
                        std::vector<std::string> &warnings) {
  const std::string where = (path + ": zero_optimization." + section).str();
  const std::string given = opts.nvmePath;
  const llvm::json::Object *o = value.getAsObject();
  if (!o)
    return where + " must be an object";
  std::string device = "none";
  if (const llvm::json::Value *d = o->get("device")) {
    std::optional<llvm::StringRef> s = d->getAsString();
    if (!s || (*s != "none" && *s != "cpu" && *s != "nvme"))
      return where + ".device must be \"none\", \"cpu\" or \"nvme\"";
    device = s->str();
  }
  for (const auto &kv : *o) {
    const std::string key = kv.first.str();
    if (key == "device")
      continue;
    if (key == "nvme_path") {
      std::optional<llvm::StringRef> s = kv.second.getAsString();
      if (!s || s->empty())
        return where + ".nvme_path must be a directory path";
      if (!given.empty() && given != *s)
        return where + ".nvme_path " + s->str() + " differs from the other offload's " +
               given + "; give both the same directory (one swap file per rank holds both)";
      opts.nvmePath = s->str();
    } else if (key == "buffer_count") {
      std::optional<int64_t> n = kv.second.getAsInteger();
      if (!n || *n < 1)
        return where + ".buffer_count must be a positive integer";
      opts.offloadBufferCount = *n;
    } else if (key == "pin_memory" || key == "fast_init") {
      if (!kv.second.getAsBoolean())
        return where + "." + key + " must be true or false";
      warnings.push_back("zero_optimization." + section + "." + key +
                         " has no effect on the CPU backend (host memory is its memory)");
    } else if (section == "offload_param" && (key == "buffer_size" || key == "max_in_cpu")) {
      std::optional<int64_t> n = integerValue(kv.second);
      if (!n || *n < (key == "buffer_size" ? 1 : 0))
        return where + "." + key + " must be a " +
               (key == "buffer_size" ? "positive" : "non-negative") + " number of elements";
      (key == "buffer_size" ? opts.offloadParamBufferSize : opts.offloadMaxInCpu) = *n;
    } else if (section == "offload_optimizer" &&
               (key == "pipeline_read" || key == "pipeline_write" || key == "pipeline")) {
      if (!kv.second.getAsBoolean())
        return where + "." + key + " must be true or false";
      warnings.push_back("zero_optimization.offload_optimizer." + key +
                         ": zero-run always overlaps the swaps with the updates (reads "
                         "buffer_count updates ahead, writes back behind them)");
    } else {
      warnings.push_back("zero_optimization." + section + "." + key +
                         " is not supported and is ignored");
    }
  }
  const bool params = section == "offload_param";
  const std::string what = params ? "parameter shards" : "optimizer state";
  if (device == "nvme" && opts.nvmePath.empty())
    return where + ".device \"nvme\" needs nvme_path: the directory the " +
           (params ? "parameter shards'" : "optimizer state's") + " swap files are written to";
  if (device == "cpu")
    warnings.push_back("zero_optimization." + section + ".device \"cpu\": the " + what +
                       (params ? " go" : " goes") +
                       " to the host arena, pinned host memory on --backend cuda; the "
                       "CPU backend's memory is host memory already (nothing moves); "
                       "\"nvme\" moves " + (params ? "them" : "it") + " to swap files");
  if (params)
    opts.offloadParam = device == "none" ? "" : device;
  else
    opts.offloadOptimizer = device == "none" ? "" : device;
  return "";
}

/// DeepSpeed's "aio" section (libaio's settings for the NVMe swaps): checked
/// as DeepSpeed reads it, and noted as without effect: zero-run's swap files
/// are mapped and go through the page cache (a read-ahead and a write-back
/// thread per rank), not libaio.
std::string readAio(llvm::StringRef path, const llvm::json::Value &value,
                    std::vector<std::string> &warnings) {
  const std::string where = (path + ": aio").str();
  const llvm::json::Object *o = value.getAsObject();
  if (!o)
    return where + " must be an object";
  for (const auto &kv : *o) {
    const std::string key = kv.first.str();
    if (key == "block_size" || key == "queue_depth" || key == "thread_count" ||
        key == "intra_op_parallelism") {
      std::optional<int64_t> n = integerValue(kv.second);
      if (!n || *n < 1)
        return where + "." + key + " must be a positive integer";
    } else if (key == "single_submit" || key == "overlap_events" || key == "use_gds") {
      if (!kv.second.getAsBoolean())
        return where + "." + key + " must be true or false";
    } else {
      warnings.push_back("aio." + key + " is not a DeepSpeed aio setting and is ignored");
      continue;
    }
  }
  if (!o->empty())
    warnings.push_back("aio: zero-run maps its swap files and reads them ahead and writes "
                       "them back through the page cache (a thread each per rank), not "
                       "libaio; block_size, queue_depth, thread_count, single_submit and "
                       "overlap_events have no effect");
  return "";
}

} // namespace

namespace {

/// The batch sizes: DeepSpeed checks train_batch_size = micro batch x
/// accumulation x world size; with all of them given, that fixes the
/// data-parallel size (opts.dp, and `fixesWorld`).
std::string readWorldSize(llvm::StringRef path, const llvm::json::Object &root,
                          zero::ZeroSettings &opts, bool &fixesWorld) {
  auto intKey = [&](StringRef key) -> std::optional<int64_t> {
    const llvm::json::Value *v = root.get(key);
    return v ? integerValue(*v) : std::nullopt;
  };
  std::optional<int64_t> batch = intKey("train_batch_size"),
                         micro = intKey("train_micro_batch_size_per_gpu"),
                         accumulation = intKey("gradient_accumulation_steps");
  for (StringRef key : {"train_batch_size", "train_micro_batch_size_per_gpu",
                        "gradient_accumulation_steps"})
    if (root.get(key) && (!intKey(key) || *intKey(key) <= 0))
      return (path + ": " + key + " must be a positive integer").str();
  opts.configBatch = batch.value_or(0);
  opts.configMicroBatch = micro.value_or(0);
  opts.configAccumulation = accumulation.value_or(0);
  fixesWorld = batch && micro;
  if (!fixesWorld)
    return "";
  int64_t per = *micro * accumulation.value_or(1);
  if (per <= 0 || *batch % per != 0)
    return (path + ": train_batch_size " + Twine(*batch) +
            " is not a multiple of train_micro_batch_size_per_gpu x "
            "gradient_accumulation_steps (" + Twine(per) + ")")
        .str();
  opts.dp = *batch / per;
  if (!zero::isSupportedWorldSize(opts.dp))
    return (path + ": train_batch_size / (micro batch x accumulation) gives "
            "a world of " + Twine(opts.dp) + " ranks; at most " +
            Twine(zero::kMaxWorldSize) + " are supported")
        .str();
  return "";
}

/// The top-level sections other than zero_optimization: the training keys
/// are zero-opt --train's (readTrainingConfig), "aio" is checked, the batch
/// sizes that fixed the world are used; every other is noted as unused.
std::string checkSections(llvm::StringRef path, const llvm::json::Object &root,
                          const zero::ZeroSettings &opts, bool fixesWorld,
                          std::vector<std::string> &warnings) {
  for (const auto &kv : root) {
    StringRef key = kv.first;
    // The training keys are read by zero-opt --train (readTrainingConfig);
    // gradient_accumulation_steps is its micro-batches, and the micro-batch
    // size is checked against the model's batch (zero-autodiff).
    if (key == "optimizer" || key == "scheduler" ||
        key == "gradient_clipping" || key == "gradient_accumulation_steps" ||
        key == "gradient_allreduce_op" ||
        (opts.training &&
         (key == "bf16" || key == "bfloat16" || key == "fp16" ||
          key == "communication_data_type" || key == "data_types" ||
          key == "csv_monitor" || key == "steps_per_print")) ||
        (opts.training && (key == "train_micro_batch_size_per_gpu" ||
                           key == "train_batch_size")))
      continue;
    if (key == "zero_optimization" || (fixesWorld && (key == "train_batch_size" ||
        key == "train_micro_batch_size_per_gpu")))
      continue;
    if (key == "aio") {
      if (std::string e = readAio(path, kv.second, warnings); !e.empty())
        return e;
      continue;
    }
    if (const char *instead = usedInstead(key)) {
      warnings.push_back("'" + key.str() + "' is not used by zero-opt: " + instead);
      continue;
    }
    warnings.push_back(("'" + key.str() + "' is not used by zero-opt (only "
                        "zero_optimization settings and the batch sizes that fix "
                        "the world size shape the program)"));
  }
  return "";
}

/// The stage 3 sizes in elements, DeepSpeed's defaults (runtime/zero/config.py)
/// until the config gives them.
struct Stage3Sizes {
  int64_t prefetchElems = 50'000'000;
  int64_t maxLiveElems = 1'000'000'000;
  int64_t persistence = 100'000;
};

/// zero_optimization's deprecated cpu_offload / cpu_offload_param (`key`,
/// whose value is `value`): DeepSpeed's spellings of offload_optimizer /
/// offload_param {"device": "cpu"}, read as DeepSpeed reads them.
std::string readDeprecatedOffload(llvm::StringRef path, const std::string &key,
                                  const llvm::json::Value &value,
                                  const llvm::json::Object &zo, zero::ZeroSettings &opts,
                                  std::vector<std::string> &warnings) {
  const std::string now = key == "cpu_offload" ? "offload_optimizer" : "offload_param";
  std::optional<bool> on = value.getAsBoolean();
  if (!on)
    return (path + ": zero_optimization." + key + " must be true or false").str();
  if (zo.get(now))
    return (path + ": zero_optimization." + key + " is DeepSpeed's deprecated spelling of " +
            now + ", which the config also gives; keep " + now + " only")
        .str();
  warnings.push_back("zero_optimization." + key + " is deprecated in DeepSpeed; read as " +
                     now + (*on ? " {\"device\": \"cpu\"}" : " absent (false)"));
  if (!*on)
    return "";
  const llvm::json::Value device(llvm::json::Object{{"device", "cpu"}});
  return readOffload(path, now, device, opts, warnings);
}

/// Whether DeepSpeed 0.19's DeepSpeedZeroConfig takes `key`: a JSON name of
/// kZeroDefaults, the stage, its newer fields, or a field's Python name
/// (populate_by_name) where the JSON name is its stage3_ alias.
bool isZeroConfigKey(llvm::StringRef key) {
  if (key == "stage" || key == "compute_grad_norm" ||
      key == "parameter_alignment")
    return true;
  for (const ModelDefault &d : kZeroDefaults) {
    llvm::StringRef name(d.key);
    if (name == key ||
        (name.starts_with("stage3_") && name.drop_front(7) == key))
      return true;
  }
  return false;
}

/// A zero_optimization key by its JSON name: a field's Python name
/// (prefetch_bucket_size) as its stage3_ alias, which DeepSpeed takes alike.
std::string canonicalZeroKey(llvm::StringRef key) {
  for (const ModelDefault &d : kZeroDefaults)
    if (llvm::StringRef(d.key).starts_with("stage3_") &&
        llvm::StringRef(d.key).drop_front(7) == key)
      return d.key;
  return key.str();
}

/// An error for a key DeepSpeed's zero config refuses (extra="forbid"),
/// naming the nearest key it accepts.
std::string unknownZeroKey(llvm::StringRef path, llvm::StringRef key) {
  llvm::StringRef nearest = "stage";
  unsigned best = key.edit_distance(nearest);
  for (const ModelDefault &d : kZeroDefaults)
    if (unsigned distance = key.edit_distance(d.key); distance < best) {
      best = distance;
      nearest = d.key;
    }
  return (path + ": zero_optimization." + key +
          " is not a key of DeepSpeed's zero config, which refuses unknown "
          "keys (DeepSpeedZeroConfig, extra=\"forbid\"); did you mean " +
          nearest + "? (docs/training.md lists the keys zero-opt reads)")
      .str();
}

/// One key of zero_optimization (`zo`) into `opts` and `sizes`: an error
/// naming it, else empty.
std::string readZeroKey(llvm::StringRef path, const std::string &key,
                        const llvm::json::Value &value, const llvm::json::Object &zo,
                        zero::ZeroSettings &opts, Stage3Sizes &sizes,
                        std::vector<std::string> &warnings) {
  std::optional<int64_t> v = integerValue(value);
  auto needInt = [&]() -> std::string {
    if (!v || *v < 0)
      return (path + ": zero_optimization." + key + " must be a non-negative integer").str();
    return "";
  };
  // The sizes read as non-negative integers, and where each goes.
  int64_t *size = llvm::StringSwitch<int64_t *>(key)
                      .Case("stage", &opts.stage)
                      .Case("stage3_prefetch_bucket_size", &sizes.prefetchElems)
                      .Case("stage3_param_persistence_threshold", &sizes.persistence)
                      .Case("stage3_max_live_parameters", &sizes.maxLiveElems)
                      .Case("stage3_max_reuse_distance", &opts.maxReuseDistance)
                      .Case("reduce_bucket_size", &opts.reduceBucketElems)
                      .Default(nullptr);
  if (size || key == "zero_hpz_partition_size" || key == "allgather_bucket_size")
    if (std::string e = needInt(); !e.empty())
      return e;
  if (size) {
    *size = *v;
    if (key == "stage")
      opts.stageGiven = true;
    if (key == "reduce_bucket_size" && !opts.training)
      warnings.push_back("zero_optimization.reduce_bucket_size has no effect on a "
                         "forward program (there are no gradients to reduce; "
                         "zero-opt --train uses it)");
  } else if (key == "zero_quantized_weights" || key == "zero_quantized_gradients") {
    std::optional<bool> on = value.getAsBoolean();
    if (!on)
      return (path + ": zero_optimization." + key + " must be true or false").str();
    // ZeRO++'s formats: int8 weights, int4 gradients.
    if (key == "zero_quantized_weights")
      opts.quantizeWeights = *on ? 8 : 0;
    else
      opts.quantizeGradients = *on ? 4 : 0;
  } else if (key == "zero_hpz_partition_size") {
    opts.hpz = std::max<int64_t>(*v, 1);
  } else if (key == "allgather_bucket_size") {
    warnings.push_back(
        "zero_optimization.allgather_bucket_size is not used: at "
        "stages 1-2 each updated parameter is all-gathered on its own, "
        "and at stage 3 stage3_prefetch_bucket_size bounds each "
        "coalesced fetch (stage 0 gathers nothing)");
  } else if (key == "offload_optimizer" || key == "offload_param") {
    return readOffload(path, key, value, opts, warnings);
  } else if (key == "sub_group_size") {
    // DeepSpeed's optimizer steps sub-groups of at least this many
    // elements (whole parameters), each swapped in whole with NVMe
    // offload; zero-run swaps each parameter's state alone, never more.
    if (!v || *v < 1)
      return (path + ": zero_optimization.sub_group_size must be a positive integer").str();
  } else if (key == "cpu_offload" || key == "cpu_offload_param") {
    return readDeprecatedOffload(path, key, value, zo, opts, warnings);
  } else if (const char *why = withoutEffect(key)) {
    // DeepSpeed's run-time knobs that the compiled program settles
    // ahead of time: checked as DeepSpeed reads them, and noted.
    if (!value.getAsBoolean())
      return (path + ": zero_optimization." + key + " must be true or false").str();
    warnings.push_back("zero_optimization." + key + " has no effect: " + why);
  } else if (!isZeroConfigKey(key)) {
    return unknownZeroKey(path, key);
  } else {
    warnings.push_back("zero_optimization." + key + " is not supported and is ignored");
  }
  return "";
}

/// zero_optimization (`z`) into `opts`: each key (readZeroKey), then the
/// stage 3 sizes as the program's prefetch and bucket bytes.
std::string readZeroOptimization(llvm::StringRef path, const llvm::json::Value *z,
                                 zero::ZeroSettings &opts,
                                 std::vector<std::string> &warnings) {
  Stage3Sizes sizes;
  opts.maxReuseDistance = 1'000'000'000;
  // DeepSpeed's reduce_bucket_size where the config does not give it: its
  // engines reduce the gradients in buckets of 5e8 elements (stage 0's
  // allreduce_gradients too, MEMORY_OPT_ALLREDUCE_SIZE).
  if (opts.training)
    opts.reduceBucketElems = 500'000'000;
  const int64_t kBytesPerElement = 4; // fp32 programs
  if (z && z->getAsBoolean()) {
    // DeepSpeed's deprecated form (read_zero_config_deprecated): true is
    // stage 1, false stage 0.
    opts.stage = *z->getAsBoolean() ? 1 : 0;
    opts.stageGiven = true;
    warnings.push_back("note: zero_optimization " +
                       std::string(opts.stage ? "true" : "false") +
                       " is DeepSpeed's deprecated form of {\"stage\": " +
                       std::to_string(opts.stage) + "}: read as stage " +
                       std::to_string(opts.stage));
  } else if (z) {
    const llvm::json::Object *zo = z->getAsObject();
    if (!zo)
      return (path + ": zero_optimization must be an object (or DeepSpeed's "
                     "deprecated true / false)")
          .str();
    for (const auto &kv : *zo)
      if (std::string e = readZeroKey(path, canonicalZeroKey(kv.first),
                                      kv.second, *zo, opts, sizes, warnings);
          !e.empty())
        return e;
  }
  opts.persistenceThreshold = sizes.persistence;
  // Prefetch is bounded by bytes, not layers, as in DeepSpeed.
  opts.prefetch = sizes.prefetchElems > 0 ? 1 << 20 : 0;
  opts.prefetchBytes = std::min(sizes.prefetchElems, sizes.maxLiveElems) * kBytesPerElement;
  // As DeepSpeed's coalesced fetch: one bucket is at most one prefetch
  // bucket (stage3_prefetch_bucket_size elements).
  opts.bucketBytes = sizes.prefetchElems * kBytesPerElement;
  return "";
}

} // namespace

std::string zero::readDeepSpeedConfig(llvm::StringRef path, ZeroSettings &opts,
                                      std::vector<std::string> &warnings) {
  llvm::Expected<llvm::json::Value> parsed = loadConfig(path);
  if (!parsed)
    return llvm::toString(parsed.takeError());
  resolveZeroAutos(*parsed->getAsObject(), opts.training, warnings);
  const llvm::json::Object *root = parsed->getAsObject();
  bool fixesWorld = false;
  if (std::string e = readWorldSize(path, *root, opts, fixesWorld); !e.empty())
    return e;
  if (std::string e = checkSections(path, *root, opts, fixesWorld, warnings); !e.empty())
    return e;
  return readZeroOptimization(path, root->get("zero_optimization"), opts, warnings);
}

namespace {

/// A dtype name as DeepSpeed reads it, as "fp32", "fp16" or "bf16":
/// communication_data_type in any case (get_communication_data_type lowers
/// it); data_types' by DtypeEnum's spellings (fp32, float32, float,
/// torch.float32, ...). None for anything else.
std::optional<StringRef> canonicalDtype(StringRef name, bool communication) {
  if (communication) {
    const std::string lower = name.lower();
    for (StringRef t : {"fp32", "fp16", "bf16"})
      if (lower == t)
        return t;
    return std::nullopt;
  }
  return llvm::StringSwitch<std::optional<StringRef>>(name)
      .Cases("fp32", "float32", "float", "torch.float32", StringRef("fp32"))
      .Cases("fp16", "float16", "half", "torch.float16", StringRef("fp16"))
      .Cases("bf16", "bfloat16", "torch.bfloat16", StringRef("bf16"))
      .Default(std::nullopt);
}

/// One key of the "fp16" block into the loss scaler's settings: "" when
/// read, an error, or "?" when it is not a loss-scaler key.
std::string readLossScaler(StringRef path, StringRef key, const llvm::json::Value &v,
                           zero::TrainSettings &settings) {
  auto bad = [&](const char *what) {
    return (path + ": fp16." + key + " must be " + what).str();
  };
  if (key == "loss_scale" || key == "min_loss_scale") {
    // min_loss_scale is an int in DeepSpeed (DeepSpeedFP16Config).
    std::optional<double> d = v.getAsNumber();
    if (!d || *d < 0 ||
        (key == "min_loss_scale" && (*d < 1 || *d != std::floor(*d))))
      return bad(key == "loss_scale"
                     ? "a number >= 0 (0: dynamic)"
                     : "a whole number >= 1 (an int in DeepSpeed)");
    (key == "loss_scale" ? settings.lossScale : settings.minLossScale) = *d;
    return "";
  }
  if (key == "initial_scale_power" || key == "loss_scale_window" || key == "hysteresis") {
    std::optional<int64_t> n = integerValue(v);
    int64_t least = key == "initial_scale_power" ? 0 : 1;
    if (!n || *n < least || *n > (key == "initial_scale_power" ? 120 : int64_t(1) << 40))
      return bad(key == "initial_scale_power" ? "an integer in [0, 120]" : "an integer >= 1");
    (key == "initial_scale_power" ? settings.initialScalePower
     : key == "loss_scale_window" ? settings.lossScaleWindow
                                  : settings.hysteresis) = *n;
    return "";
  }
  if (key == "consecutive_hysteresis") {
    std::optional<bool> b = v.getAsBoolean();
    if (!b)
      return bad("true or false");
    settings.consecutiveHysteresis = *b;
    return "";
  }
  return "?";
}

/// data_types.grad_accum_dtype (DeepSpeed's get_data_types), given which of
/// fp16 and bf16 (`enabled`) the config turns on and the name of its bf16
/// block (`bf16Name`).
std::string readGradAccumDtype(StringRef path, const llvm::json::Object &root,
                               const bool enabled[2], const char *bf16Name,
                               zero::TrainSettings &settings,
                               std::vector<std::string> &warnings) {
  // data_types.grad_accum_dtype (DeepSpeed's get_data_types): the type the
  // micro-batches' gradients are summed in; by default the training's own.
  // DeepSpeed 0.19 takes any type at ZeRO stages 1-3 (its optimizers keep a
  // separate accumulation buffer; bf16 with fp32 at stage 1 is its
  // BF16_Optimizer) and only the training's own at stage 0 ("unsupported mix
  // of model_dtype and grad_accum_dtype", checked with the stage, in
  // zero-opt). zero-opt sums in the training's type or in fp32.
  if (const llvm::json::Value *d = root.get("data_types")) {
    const llvm::json::Object *types = d->getAsObject();
    if (!types)
      return (path + ": data_types must be an object").str();
    for (const auto &kv : *types) {
      if (kv.first != "grad_accum_dtype") {
        warnings.push_back("data_types." + kv.first.str() +
                           " is not supported and is ignored");
        continue;
      }
      if (kv.second.kind() == llvm::json::Value::Null)
        continue; // DeepSpeed's default, None: the training's own type
      std::optional<StringRef> given = kv.second.getAsString();
      std::optional<StringRef> t =
          given ? canonicalDtype(*given, /*communication=*/false)
                : std::nullopt;
      if (!t)
        return (path +
                ": data_types.grad_accum_dtype must be \"fp32\", \"fp16\" or "
                "\"bf16\" (or DeepSpeed's DtypeEnum spellings: \"float32\", "
                "\"float16\", \"bfloat16\", ...)")
            .str();
      const char *own = enabled[0] ? "fp16" : enabled[1] ? "bf16" : "fp32";
      const bool automatic =
          enabled[0] == enabled[1] && (root.get("fp16") || root.get(bf16Name));
      if (*t == own || (automatic && *t != "fp32"))
        continue;
      if (*t == "fp32") {
        // 16-bit training (or "auto": a bf16 export) summing in f32.
        settings.accumDtype = "fp32";
        continue;
      }
      if (own != StringRef("fp32")) {
        // The other 16-bit type: DeepSpeed's ZeRO optimizers cast each
        // gradient to it and sum there.
        settings.accumDtype = t->str();
        continue;
      }
      return (path + ": data_types.grad_accum_dtype \"" + *t +
              "\" with fp32 training is not supported: zero-opt sums fp32 "
              "gradients in fp32 (DeepSpeed 0.19 sums them in a 16-bit type "
              "at ZeRO stages 1-3 and refuses the mix at stage 0); give "
              "\"fp32\"")
          .str();
    }
  }
  return "";
}

/// The "fp16" and "bf16" blocks (DeepSpeed's runtime/precision_config.py and
/// fp16/loss_scaler.py defaults): which one is enabled, and fp16's loss
/// scaler, checked.
std::string readPrecision(StringRef path, const llvm::json::Object &root,
                          zero::TrainSettings &settings, std::vector<std::string> &warnings) {
  bool enabled[2] = {false, false};
  // "bfloat16" is DeepSpeed's older spelling of "bf16" (get_bfloat16_config
  // reads it when "bf16" is absent).
  const bool legacyBf16 = !root.get("bf16") && root.get("bfloat16");
  const char *names[2] = {"fp16", legacyBf16 ? "bfloat16" : "bf16"};
  if (legacyBf16)
    warnings.push_back(
        "note: bfloat16 is DeepSpeed's older spelling of bf16: read as bf16");
  else if (root.get("bfloat16"))
    warnings.push_back(
        "bfloat16 is ignored: DeepSpeed reads bf16 when both are given");
  for (int i = 0; i < 2; ++i) {
    const llvm::json::Value *v = root.get(names[i]);
    if (!v)
      continue;
    const llvm::json::Object *block = v->getAsObject();
    if (!block)
      return (path + ": " + names[i] + " must be an object").str();
    if (const llvm::json::Value *e = block->get("enabled")) {
      // "auto" (the Hugging Face Trainer fills it in): the model's own dtype
      // decides; a bf16 export trains through fp32 masters as it is.
      if (std::optional<bool> b = e->getAsBoolean())
        enabled[i] = *b;
      else if (e->getAsString() != std::optional<StringRef>("auto"))
        return (path + ": " + names[i] + ".enabled must be true, false or \"auto\"").str();
    }
    for (const auto &kv : *block) {
      StringRef key = kv.first;
      if (key == "enabled")
        continue;
      if (i == 0) {
        std::string e = readLossScaler(path, key, kv.second, settings);
        if (e != "?") {
          if (!e.empty())
            return e;
          continue;
        }
      }
      // bf16.check_grad_overflow (DeepSpeed 0.19, default true): a step whose
      // gradients are not finite is skipped. False lets ZeRO 1-3 apply it;
      // at stage 0 DeepSpeed's bf16 optimizer skips it still (zero-opt
      // follows the key).
      if (i == 1 && key == "check_grad_overflow") {
        std::optional<bool> b = kv.second.getAsBoolean();
        if (!b)
          return (path + ": " + names[i] +
                  ".check_grad_overflow must be true or false")
              .str();
        settings.checkGradOverflow = *b;
        continue;
      }
      warnings.push_back(std::string(names[i]) + "." + key.str() +
                         " is not supported and is ignored");
    }
  }
  if (enabled[0] && enabled[1])
    return (path + ": fp16 and bf16 are both enabled; DeepSpeed trains in one of "
                   "them: disable the other")
        .str();
  if (enabled[0])
    settings.precision = zero::Precision::FP16;
  if (enabled[1])
    settings.precision = zero::Precision::BF16;
  // communication_data_type: the gradients' reductions in fp32 instead of the
  // training's 16-bit type.
  if (const llvm::json::Value *c = root.get("communication_data_type")) {
    std::optional<StringRef> given = c->getAsString();
    std::optional<StringRef> t =
        given ? canonicalDtype(*given, /*communication=*/true) : std::nullopt;
    const char *own = enabled[0] ? "fp16" : enabled[1] ? "bf16" : "fp32";
    if (!t)
      return (path + ": communication_data_type must be \"fp32\", \"fp16\" or "
                     "\"bf16\" (any case, as DeepSpeed)")
          .str();
    if (*t != "fp32" && *t != own)
      return (path + ": communication_data_type \"" + *given + "\" with " +
              own + " training is not supported; give \"fp32\"" +
              (StringRef(own) == "fp32" ? ""
                                        : " or \"" + std::string(own) + "\""))
          .str();
    settings.step.commF32 = *t == "fp32" && settings.precision != zero::Precision::FP32;
  }
  return readGradAccumDtype(path, root, enabled, names[1], settings, warnings);
}

/// What DeepSpeed 0.19's engine makes of what the config leaves out, and its
/// gradient_allreduce_op: gradient_clipping absent clips at 1.0
/// (GRADIENT_CLIPPING_DEFAULT; 0.18 and before: 0, no clipping); WarmupLR
/// without warmup_max_lr peaks at the optimizer's lr (following --optimizer
/// lr=); "sum" sums the gradients over the ranks instead of averaging them.
std::string applyEngineDefaults(StringRef path, const llvm::json::Object &root,
                                zero::TrainSettings &settings,
                                std::vector<std::string> &warnings) {
  zero::ZeroOptimizerPassOptions &o = settings.step;
  if (!root.get("gradient_clipping")) {
    o.clip = 1.0;
    warnings.push_back(
        "note: gradient_clipping absent -> 1.0 (DeepSpeed 0.19's default; "
        "0.18 and before: 0, no clipping; give 0 to train without)");
  }
  const llvm::json::Object *sched = root.getObject("scheduler");
  const llvm::json::Object *params =
      sched ? sched->getObject("params") : nullptr;
  if (o.schedule == zero::LRSchedule::WarmupLR &&
      (!params || !params->get("warmup_max_lr"))) {
    o.warmupMaxLr = o.lr;
    settings.warmupMaxLrAuto = true;
    warnings.push_back("note: scheduler.params.warmup_max_lr absent -> " +
                       formatNumber(o.lr) +
                       " (WarmupLR peaks at the optimizer's lr, as DeepSpeed)");
  }
  if (const llvm::json::Value *v = root.get("gradient_allreduce_op")) {
    std::optional<StringRef> op = v->getAsString();
    const std::string given = op ? op->lower() : "";
    if (given != "mean" && given != "sum")
      return (path + ": gradient_allreduce_op must be \"mean\" or \"sum\" "
                     "(DeepSpeed's)")
          .str();
    // "sum" (DeepSpeed 0.19 at stages 0-2; zero-optimizer refuses it at 3,
    // as DeepSpeed does).
    o.gradientSum = given == "sum";
  }
  return "";
}

} // namespace

std::string zero::readTrainingConfig(llvm::StringRef path, TrainSettings &settings,
                                     std::vector<std::string> &warnings) {
  llvm::Expected<llvm::json::Value> parsed = loadConfig(path);
  if (!parsed)
    return llvm::toString(parsed.takeError());
  if (const llvm::json::Object *sched = parsed->getAsObject()->getObject("scheduler"))
    if (const llvm::json::Object *params = sched->getObject("params"))
      settings.warmupMaxLrAuto = isAuto(params->get("warmup_max_lr"));
  // The values given explicitly (before the autos are filled in): the
  // command line may repeat them, not contradict them.
  settings.configPath = path.str();
  settings.configValues.clear();
  if (const llvm::json::Object *opt = parsed->getAsObject()->getObject("optimizer"))
    if (const llvm::json::Object *params = opt->getObject("params")) {
      for (auto [key, cli] : {std::pair<const char *, const char *>{"lr", "lr"},
                              {"eps", "eps"},
                              {"weight_decay", "weight-decay"},
                              {"momentum", "momentum"},
                              {"dampening", "dampening"}})
        if (const llvm::json::Value *v = params->get(key); v && v->getAsNumber())
          settings.configValues.push_back(
              {cli, std::string("optimizer.params.") + key, {*v->getAsNumber()}, ""});
      if (const llvm::json::Array *b = params->getArray("betas");
          b && b->size() == 2 && (*b)[0].getAsNumber() && (*b)[1].getAsNumber())
        settings.configValues.push_back(
            {"betas", "optimizer.params.betas", {*(*b)[0].getAsNumber(), *(*b)[1].getAsNumber()},
             ""});
    }
  if (const llvm::json::Value *v = parsed->getAsObject()->get("gradient_clipping");
      v && v->getAsNumber())
    settings.configValues.push_back({"clip", "gradient_clipping", {*v->getAsNumber()}, ""});
  resolveTrainingAutos(*parsed->getAsObject(), warnings);
  const llvm::json::Object *root = parsed->getAsObject();
  auto &o = settings.step;
  if (const llvm::json::Value *v = root->get("gradient_accumulation_steps")) {
    std::optional<int64_t> k = integerValue(*v);
    if (!k || *k < 1)
      return (path + ": gradient_accumulation_steps must be a positive integer").str();
    settings.accumulation = *k;
  }
  if (const llvm::json::Value *v = root->get("train_micro_batch_size_per_gpu")) {
    std::optional<int64_t> b = integerValue(*v);
    if (!b || *b < 1)
      return (path + ": train_micro_batch_size_per_gpu must be a positive integer").str();
    settings.microBatchSize = *b;
  }
  if (const llvm::json::Value *v = root->get("gradient_clipping")) {
    std::optional<double> c = v->getAsNumber();
    if (!c || *c < 0)
      return (path + ": gradient_clipping must be a number >= 0").str();
    o.clip = *c;
  }
  // What zero-run logs: steps_per_print (its --log-every's default) and
  // DeepSpeed's csv_monitor files.
  if (const llvm::json::Value *v = root->get("steps_per_print")) {
    std::optional<int64_t> n = integerValue(*v);
    if (!n || *n < 1)
      return (path + ": steps_per_print must be a positive integer").str();
    o.stepsPerPrint = *n;
  }
  if (const llvm::json::Value *v = root->get("csv_monitor")) {
    const llvm::json::Object *csv = v->getAsObject();
    if (!csv)
      return (path + ": csv_monitor must be an object").str();
    bool enabled = false;
    std::string out, job = "DeepSpeedJobName"; // DeepSpeed's defaults
    for (const auto &kv : *csv) {
      const std::string key = kv.first.str();
      if (key == "enabled") {
        std::optional<bool> b = kv.second.getAsBoolean();
        if (!b)
          return (path + ": csv_monitor.enabled must be true or false").str();
        enabled = *b;
      } else if (key == "output_path" || key == "job_name") {
        std::optional<llvm::StringRef> s = kv.second.getAsString();
        if (!s)
          return (path + ": csv_monitor." + key + " must be a string").str();
        (key == "output_path" ? out : job) = s->str();
      } else {
        warnings.push_back("csv_monitor." + key + " is not supported and is ignored");
      }
    }
    if (enabled)
      o.csvMonitor = (out.empty() ? std::string() : out + "/") + job;
  }
  if (const llvm::json::Value *v = root->get("optimizer")) {
    if (std::string e = readOptimizer(path, *v, settings.step, warnings); !e.empty())
      return e;
    settings.configValues.push_back({"type", "optimizer.type", {}, settings.step.type});
  }
  if (const llvm::json::Value *v = root->get("scheduler"))
    if (std::string e = readScheduler(path, *v, settings.step, warnings); !e.empty())
      return e;
  if (std::string e = applyEngineDefaults(path, *root, settings, warnings);
      !e.empty())
    return e;
  return readPrecision(path, *root, settings, warnings);
}

