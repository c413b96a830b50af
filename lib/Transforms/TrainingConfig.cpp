//===- TrainingConfig.cpp - Training settings to a pass list ---------------===//
//
// zero-opt --train: the optimizer from --optimizer or a DeepSpeed config
// (optimizer / scheduler / gradient_clipping / gradient_accumulation_steps,
// with DeepSpeed's defaults), expanded to zero-add-loss, zero-autodiff and
// zero-optimizer.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;

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

std::string zero::readTrainingConfig(llvm::StringRef path, TrainSettings &settings,
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
  auto &o = settings.step;
  auto number = [&](const llvm::json::Object &obj, llvm::StringRef key, double &out,
                    llvm::StringRef where) -> std::string {
    const llvm::json::Value *v = obj.get(key);
    if (!v)
      return "";
    std::optional<double> d = v->getAsNumber();
    if (!d)
      return (path + ": " + where + "." + key + " must be a number").str();
    out = *d;
    return "";
  };
  if (const llvm::json::Value *v = root->get("gradient_accumulation_steps")) {
    std::optional<int64_t> k = v->getAsInteger();
    if (!k || *k < 1)
      return (path + ": gradient_accumulation_steps must be a positive integer").str();
    settings.accumulation = *k;
  }
  if (const llvm::json::Value *v = root->get("train_micro_batch_size_per_gpu")) {
    std::optional<int64_t> b = v->getAsInteger();
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
  if (const llvm::json::Value *v = root->get("optimizer")) {
    const llvm::json::Object *opt = v->getAsObject();
    std::optional<llvm::StringRef> type = opt ? opt->getString("type") : std::nullopt;
    if (!type)
      return (path + ": optimizer must be an object with a \"type\"").str();
    std::string kind = type->lower();
    const llvm::json::Object *params = opt->getObject("params");
    llvm::json::Object none;
    if (!params)
      params = &none;
    // DeepSpeed's Adam is AdamW (decoupled decay) unless adam_w_mode is
    // false; its weight decay defaults to 0.
    o.weightDecay = 0;
    if (kind == "adam" || kind == "adamw") {
      o.type = "adamw";
      if (kind == "adam")
        if (std::optional<bool> w = params->getBoolean("adam_w_mode"); w && !*w)
          o.type = "adam";
      if (std::optional<bool> t = params->getBoolean("torch_adam"); t && kind == "adam" &&
                                                                     !params->get("adam_w_mode"))
        o.type = "adam"; // torch.optim.Adam
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
    for (const auto &kv : *params) {
      llvm::StringRef k = kv.first;
      if (k != "lr" && k != "eps" && k != "weight_decay" && k != "momentum" &&
          k != "dampening" && k != "betas" && k != "nesterov" && k != "adam_w_mode" &&
          k != "torch_adam")
        warnings.push_back("optimizer.params." + k.str() + " is not supported and is ignored");
    }
  }
  if (const llvm::json::Value *v = root->get("scheduler")) {
    const llvm::json::Object *sched = v->getAsObject();
    std::optional<llvm::StringRef> type = sched ? sched->getString("type") : std::nullopt;
    if (!type)
      return (path + ": scheduler must be an object with a \"type\"").str();
    if (*type != "WarmupLR" && *type != "WarmupDecayLR" && *type != "WarmupCosineLR")
      return (path + ": scheduler.type '" + *type +
              "' is not supported (WarmupLR, WarmupDecayLR, WarmupCosineLR)").str();
    o.schedule = type->str();
    const llvm::json::Object *params = sched->getObject("params");
    llvm::json::Object none;
    if (!params)
      params = &none;
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
    if (std::optional<llvm::StringRef> w = params->getString("warmup_type"))
      o.warmupType = w->str();
    for (const auto &kv : *params) {
      llvm::StringRef k = kv.first;
      if (k != "warmup_min_lr" && k != "warmup_max_lr" && k != "cos_min_ratio" &&
          k != "warmup_min_ratio" && k != "warmup_num_steps" && k != "total_num_steps" &&
          k != "warmup_type" && k != "last_batch_iteration")
        warnings.push_back("scheduler.params." + k.str() + " is not supported and is ignored");
    }
  }
  return "";
}

void zero::buildTrainingPipeline(OpPassManager &pm, const TrainSettings &settings) {
  if (!settings.lossKind.empty()) {
    ZeroAddLossPassOptions loss;
    loss.kind = settings.lossKind;
    loss.labels = settings.labels;
    loss.output = settings.lossOutput;
    pm.addPass(createZeroAddLossPass(loss));
  }
  ZeroAutodiffPassOptions ad;
  ad.freeze = settings.freeze;
  ad.lossOutput = settings.trainOutput;
  ad.accumulation = settings.accumulation;
  ad.microBatchSize = settings.microBatchSize;
  ad.world = settings.step.world;
  ad.stage = settings.step.stage;
  const int64_t checkpoint = settings.zeroGiven ? settings.zero.activationCheckpointInterval : 0;
  ad.tagMicroBatches = settings.zeroGiven && (settings.zero.pp > 1 || checkpoint > 0);
  pm.addPass(createZeroAutodiffPass(ad));
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
