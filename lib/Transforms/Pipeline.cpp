//===- Pipeline.cpp - ZeRO options to a pass list -------------------------===//
//
// The two ways users configure ZeRO, --zero-pipeline="stage=3 dp=4 ..." and a
// DeepSpeed ds_config.json, both land in ZeroPipelineOptions and expand to the
// same pass list: partition, prefetch, bucket, release.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Passes.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;

std::string zero::parseZeroPipelineOptions(llvm::StringRef spec,
                                           ZeroPipelineOptions &opts) {
  SmallVector<StringRef> tokens;
  spec.split(tokens, ' ', -1, /*KeepEmpty=*/false);
  SmallVector<StringRef> all;
  for (StringRef t : tokens)
    t.split(all, ',', -1, false);
  llvm::StringSet<> seen;
  for (StringRef token : all) {
    auto [key, value] = token.split('=');
    int64_t v;
    if (value.empty() || value.getAsInteger(10, v))
      return ("--zero-pipeline: '" + token +
              "' is not KEY=INTEGER (keys: stage, dp, prefetch, prefetch-bytes, "
              "bucket-bytes, persistence-threshold, max-reuse-distance)")
          .str();
    if (key == "stage")
      opts.stage = v;
    else if (key == "dp")
      opts.dp = v;
    else if (key == "prefetch")
      opts.prefetchDepth = v;
    else if (key == "prefetch-bytes")
      opts.prefetchBytes = v;
    else if (key == "bucket-bytes")
      opts.bucketBytes = v;
    else if (key == "persistence-threshold")
      opts.persistenceThreshold = v;
    else if (key == "max-reuse-distance")
      opts.maxReuseDistance = v;
    else
      return ("--zero-pipeline: unknown option '" + key +
              "' (keys: stage, dp, prefetch, prefetch-bytes, bucket-bytes, "
              "persistence-threshold, max-reuse-distance)")
          .str();
    int64_t lowest = key == "dp" ? 1 : key == "max-reuse-distance" ? -1 : 0;
    if (v < lowest)
      return ("--zero-pipeline: " + key + " must be >= " + std::to_string(lowest) +
              ", got " + value)
          .str();
    if (key == "dp" && v > kMaxWorldSize)
      return ("--zero-pipeline: dp must be at most " + Twine(kMaxWorldSize) +
              ", got " + value)
          .str();
    if (!seen.insert(key).second)
      return ("--zero-pipeline: '" + key + "' is given twice; give each option once")
          .str();
  }
  opts.any = true;
  return "";
}

std::string zero::readDeepSpeedConfig(llvm::StringRef path, ZeroPipelineOptions &opts,
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
    if (root->get(key) && !intKey(key))
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
    if (key == "zero_optimization" || (batch && micro && (key == "train_batch_size" ||
        key == "train_micro_batch_size_per_gpu" || key == "gradient_accumulation_steps")))
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
      } else if (key == "allgather_bucket_size") {
        if (auto e = needInt(); !e.empty())
          return e;
        warnings.push_back("zero_optimization.allgather_bucket_size is a ZeRO-1/2 "
                           "setting and has no effect at stage 3, where "
                           "stage3_prefetch_bucket_size bounds each coalesced fetch");
      } else if (key == "reduce_bucket_size") {
        if (auto e = needInt(); !e.empty())
          return e;
        warnings.push_back("zero_optimization.reduce_bucket_size has no effect on a "
                           "forward program (there are no gradients to reduce)");
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
  opts.any = true;
  return "";
}

void zero::buildZeroPipeline(OpPassManager &pm, const ZeroPipelineOptions &opts) {
  ZeroPartitionPassOptions partition;
  partition.stage = opts.stage;
  partition.dp = opts.dp < 0 ? 1 : opts.dp;
  partition.persistenceThreshold = opts.persistenceThreshold;
  partition.maxReuseDistance = opts.maxReuseDistance;
  pm.addPass(createZeroPartitionPass(partition));
  if (opts.stage == 3) {
    // Prefetch decides where each gather runs (under its byte budget); bucket
    // then only coalesces gathers that already sit together.
    if (opts.prefetchDepth > 0) {
      ZeroPrefetchPassOptions prefetch;
      prefetch.depth = opts.prefetchDepth;
      prefetch.bytes = opts.prefetchBytes;
      pm.addPass(createZeroPrefetchPass(prefetch));
    }
    if (opts.bucketBytes > 0) {
      ZeroBucketPassOptions bucket;
      bucket.bytes = opts.bucketBytes;
      pm.addPass(createZeroBucketPass(bucket));
    }
    pm.addPass(createZeroReleasePass());
  }
}
