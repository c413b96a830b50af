//===- Training.cpp - zero-run's training loop helpers --------------------===//
//
// The per-step log and the checkpoints of a training run (Training.h). The
// --log-json keys (step, loss, grad_norm, lr, time_s, samples_per_s) are an
// interface that tests assert on; docs/program-format.md lists them.
//
//===----------------------------------------------------------------------===//

#include "Training.h"

#include "zrt/TensorFile.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace zrt {

namespace {

bool isSaved(const GlobalDesc &g, bool parameters) {
  return parameters ? g.role == GlobalRole::Parameter
                    : g.role == GlobalRole::OptimizerState ||
                          g.role == GlobalRole::Counter;
}

float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ffu;
  float value;
  if (exponent == 0)
    value = std::ldexp(float(mantissa), -24); // zero and subnormals
  else if (exponent == 31)
    value = mantissa ? NAN : INFINITY;
  else
    value = std::ldexp(float(mantissa | 0x400u), exponent - 25);
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits |= sign;
  std::memcpy(&value, &bits, 4);
  return value;
}

/// `count` elements of `dtype` at `src` as f32.
std::vector<float> toF32(DType dtype, const uint8_t *src, size_t count) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = halfBitsToFloat(h);
      break;
    }
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      uint32_t bits = uint32_t(h) << 16;
      std::memcpy(&out[i], &bits, 4);
      break;
    }
    case DType::F64: {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      out[i] = float(d);
      break;
    }
    default:
      std::memcpy(&out[i], src + 4 * i, 4);
      break;
    }
  }
  return out;
}

} // namespace

TrainingLog::TrainingLog(int64_t totalSteps, int64_t logEvery, bool progressBar)
    : totalSteps_(totalSteps), logEvery_(logEvery), progressBar_(progressBar) {}

std::string formatStepLine(const StepRecord &r, int64_t totalSteps) {
  char text[256];
  int n = std::snprintf(text, sizeof text, "step %lld/%lld  loss %.6f",
                        (long long)r.step, (long long)totalSteps, r.loss);
  std::string line(text, size_t(n));
  if (r.gradNorm) {
    std::snprintf(text, sizeof text, "  grad_norm %.4f", *r.gradNorm);
    line += text;
  }
  if (r.lr) {
    std::snprintf(text, sizeof text, "  lr %.3e", *r.lr);
    line += text;
  }
  std::snprintf(text, sizeof text, "  time %.1f ms", r.seconds * 1e3);
  line += text;
  if (r.samplesPerSecond > 0) {
    std::snprintf(text, sizeof text, "  samples/s %.1f", r.samplesPerSecond);
    line += text;
  }
  return line;
}

void TrainingLog::clearBar() {
  if (barShown_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    barShown_ = false;
  }
}

void TrainingLog::drawBar(const StepRecord &r) {
  constexpr int kWidth = 30;
  const int filled = int(kWidth * r.step / std::max<int64_t>(1, totalSteps_));
  std::string bar(size_t(filled), '#');
  bar.append(size_t(kWidth - filled), '.');
  std::fprintf(stderr, "\r[%s] %lld/%lld  loss %.4f", bar.c_str(),
               (long long)r.step, (long long)totalSteps_, r.loss);
  std::fflush(stderr);
  barShown_ = true;
}

void TrainingLog::record(const StepRecord &r) {
  nlohmann::json entry = {{"step", r.step}, {"loss", r.loss}};
  if (r.gradNorm)
    entry["grad_norm"] = *r.gradNorm;
  if (r.lr)
    entry["lr"] = *r.lr;
  entry["time_s"] = r.seconds;
  entry["samples_per_s"] = r.samplesPerSecond;
  json_.push_back(std::move(entry));
  if (r.step % logEvery_ == 0 || r.step == totalSteps_) {
    clearBar();
    std::printf("%s\n", formatStepLine(r, totalSteps_).c_str());
    std::fflush(stdout);
  }
  if (progressBar_)
    drawBar(r);
}

void TrainingLog::finish() { clearBar(); }

Expected<float> readScalarOutput(const Executor &executor,
                                 const std::string &name) {
  const BindingDesc *out = executor.program().findOutput(name);
  if (!out)
    return Status::error(executor.program().path + ": no output \"" + name +
                         "\"");
  float value = 0;
  ZRT_RETURN_IF_ERROR(executor.readBuffer(out->buffer, &value, sizeof value));
  return value;
}

Status saveGlobals(const Executor &executor, Communicator &comm, bool parameters,
                   const std::string &path) {
  const Program &p = executor.program();
  const bool root = comm.rank() == 0;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<NamedTensor> tensors;
  for (const GlobalDesc &g : p.globals) {
    if (!isSaved(g, parameters))
      continue;
    const BufferDesc &b = p.buffers[g.buffer];
    std::vector<uint8_t> bytes(size_t(b.bytes()));
    if (g.shard || root)
      ZRT_RETURN_IF_ERROR(executor.readBuffer(g.buffer, bytes.data(), b.bytes()));
    if (g.shard) {
      // Every rank's shard, in rank order; the padding past numel dropped.
      std::vector<std::string> shards = comm.gatherToRoot(
          std::string(reinterpret_cast<const char *>(bytes.data()), bytes.size()));
      if (!root)
        continue;
      std::vector<uint8_t> full;
      for (const std::string &s : shards)
        full.insert(full.end(), s.begin(), s.end());
      full.resize(size_t(g.shard->numel * dtypeSize(g.dtype)));
      bytes = std::move(full);
    }
    if (!root)
      continue;
    const uint64_t numel = g.shard ? g.shard->numel : uint64_t(b.numel());
    DType dtype = g.dtype;
    if (parameters && (dtype == DType::F16 || dtype == DType::BF16 ||
                       dtype == DType::F64)) {
      std::vector<float> f32 = toF32(dtype, bytes.data(), size_t(numel));
      bytes.assign(reinterpret_cast<const uint8_t *>(f32.data()),
                   reinterpret_cast<const uint8_t *>(f32.data() + f32.size()));
      dtype = DType::F32;
    }
    storage.push_back(std::move(bytes));
    tensors.push_back({g.tensor, dtype, g.shape, storage.back().data()});
  }
  // `storage` does not reallocate the byte vectors' data when it grows, so
  // the pointers above stay valid.
  return root ? writeSafetensors(path, tensors) : Status::ok();
}

} // namespace zrt
