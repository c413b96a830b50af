//===- OptionValues.cpp - The names of the enum options' values -----------===//
//
// The enum options of the passes (Passes.td, with cl::values) and the
// pipelines that set them from a DeepSpeed config or --zero-pipeline spell
// each value one way; these tables are that spelling, for the IR attributes
// that carry it and for the config reader.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Passes.h"

#include "llvm/Support/ErrorHandling.h"

using namespace zero;
using llvm::StringRef;

namespace {

template <typename E>
using NameTable = llvm::ArrayRef<std::pair<E, StringRef>>;

const std::pair<PipelineSchedule, StringRef> kPipelineSchedules[] = {
    {PipelineSchedule::OneFOneB, "1f1b"}, {PipelineSchedule::GPipe, "gpipe"}};
const std::pair<TiedGrads, StringRef> kTiedGrads[] = {{TiedGrads::MicroBatch, "micro-batch"},
                                                      {TiedGrads::Step, "step"}};
const std::pair<LossKind, StringRef> kLossKinds[] = {{LossKind::CrossEntropy, "cross-entropy"},
                                                     {LossKind::CausalLM, "causal-lm"}};
const std::pair<LRSchedule, StringRef> kLRSchedules[] = {
    {LRSchedule::Constant, "constant"},
    {LRSchedule::WarmupLR, "WarmupLR"},
    {LRSchedule::WarmupDecayLR, "WarmupDecayLR"},
    {LRSchedule::WarmupCosineLR, "WarmupCosineLR"},
    {LRSchedule::OneCycle, "OneCycle"},
    {LRSchedule::LRRangeTest, "LRRangeTest"}};
const std::pair<WarmupType, StringRef> kWarmupTypes[] = {{WarmupType::Log, "log"},
                                                         {WarmupType::Linear, "linear"}};
const std::pair<Precision, StringRef> kPrecisions[] = {
    {Precision::FP32, "fp32"}, {Precision::BF16, "bf16"}, {Precision::FP16, "fp16"}};

template <typename E>
StringRef nameIn(NameTable<E> table, E value) {
  for (const auto &[v, name] : table)
    if (v == value)
      return name;
  llvm_unreachable("an enum option value without a name");
}

template <typename E>
std::optional<E> valueIn(NameTable<E> table, StringRef name) {
  for (const auto &[v, n] : table)
    if (n == name)
      return v;
  return std::nullopt;
}

} // namespace

StringRef zero::stringify(PipelineSchedule v) {
  return nameIn<PipelineSchedule>(kPipelineSchedules, v);
}
StringRef zero::stringify(TiedGrads v) { return nameIn<TiedGrads>(kTiedGrads, v); }
StringRef zero::stringify(LossKind v) { return nameIn<LossKind>(kLossKinds, v); }
StringRef zero::stringify(LRSchedule v) { return nameIn<LRSchedule>(kLRSchedules, v); }
StringRef zero::stringify(WarmupType v) { return nameIn<WarmupType>(kWarmupTypes, v); }
StringRef zero::stringify(Precision v) { return nameIn<Precision>(kPrecisions, v); }
std::optional<Precision> zero::parsePrecision(StringRef name) {
  return valueIn<Precision>(kPrecisions, name);
}

std::optional<PipelineSchedule> zero::parsePipelineSchedule(StringRef name) {
  return valueIn<PipelineSchedule>(kPipelineSchedules, name);
}
std::optional<TiedGrads> zero::parseTiedGrads(StringRef name) {
  return valueIn<TiedGrads>(kTiedGrads, name);
}
std::optional<LossKind> zero::parseLossKind(StringRef name) {
  return valueIn<LossKind>(kLossKinds, name);
}
std::optional<LRSchedule> zero::parseLRSchedule(StringRef name) {
  return valueIn<LRSchedule>(kLRSchedules, name);
}
std::optional<WarmupType> zero::parseWarmupType(StringRef name) {
  return valueIn<WarmupType>(kWarmupTypes, name);
}
