//===- Training.cpp - zero-run's training loop helpers --------------------===//
//
// The per-step log and the checkpoints of a training run (Training.h). The
// --log-json keys (step, loss, grad_norm, lr, time_s, samples_per_s) are an
// interface that tests assert on; docs/program-format.md lists them.
//
//===----------------------------------------------------------------------===//

#include "Training.h"

#include "zrt/Bindings.h"
#include "zrt/Checkpoint.h"
#include "zrt/OutputFile.h"
#include "zrt/TensorFile.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

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
  // A pipeline: each global from the stages that hold it, which must agree
  // (a tied parameter's copies are stepped from one summed gradient).
  const bool pipelined = p.pipelined() && comm.worldSize() > 1;
  const std::vector<bool> held = globalsUsedOn(p, comm.rank());
  Status differ = Status::ok();
  std::vector<std::vector<uint8_t>> storage;
  std::vector<NamedTensor> tensors;
  for (size_t gi = 0; gi < p.globals.size(); ++gi) {
    const GlobalDesc &g = p.globals[gi];
    if (!isSaved(g, parameters))
      continue;
    const BufferDesc &b = p.buffers[g.buffer];
    std::vector<uint8_t> bytes(size_t(b.bytes()));
    if (g.shard || root || (pipelined && held[gi]))
      ZRT_RETURN_IF_ERROR(executor.readBuffer(g.buffer, bytes.data(), b.bytes()));
    if (pipelined) {
      // Every rank's piece (empty where its stage does not hold the global);
      // per stage (dp consecutive ranks) the whole tensor: the stage's dp
      // shards in order, or its replicated copy.
      std::vector<std::string> pieces = comm.gatherToRoot(
          held[gi] ? std::string(reinterpret_cast<const char *>(bytes.data()), bytes.size())
                   : std::string());
      if (!root)
        continue;
      const int dp = p.dataParallelSize();
      int from = -1;
      std::string whole;
      for (int first = 0; first + dp <= int(pieces.size()); first += dp) {
        std::string mine;
        bool complete = true;
        for (int r = first; r < first + dp; ++r) {
          complete &= !pieces[size_t(r)].empty();
          if (g.shard)
            mine += pieces[size_t(r)];
          else if (r == first)
            mine = pieces[size_t(r)];
        }
        if (!complete)
          continue;
        if (from < 0) {
          from = first / dp;
          whole = std::move(mine);
        } else if (mine != whole && differ.isOk()) {
          // Reported after the loop: every rank takes part in each gather.
          differ = Status::error("saving " + g.tensor + ": its copies on pipeline stages " +
                                 std::to_string(from) + " and " + std::to_string(first / dp) +
                                 " differ (a tied parameter's copies must be stepped "
                                 "identically)");
        }
      }
      if (from < 0)
        continue; // no stage holds it (nothing reads it)
      bytes.assign(whole.begin(), whole.end());
      if (g.shard)
        bytes.resize(size_t(g.shard->numel * dtypeSize(g.dtype)));
    } else if (g.shard) {
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
  ZRT_RETURN_IF_ERROR(differ);
  // `storage` does not reallocate the byte vectors' data when it grows, so
  // the pointers above stay valid.
  return root ? writeSafetensors(path, tensors) : Status::ok();
}

namespace {

std::string stepName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", (long long)step);
  return name;
}

/// fsync of a directory, so that renames in it are durable.
void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

Status writeTextFile(const std::string &path, const std::string &text) {
  return writeFileAtomically(path, [&](int fd) {
    return writeAllToFd(fd, text.data(), text.size()) && ::fsync(fd) == 0;
  });
}

} // namespace

Status saveCheckpoint(const Executor &executor, Communicator &comm,
                      const std::string &dir, int64_t step) {
  namespace fs = std::filesystem;
  const bool root = comm.rank() == 0;
  const std::string name = stepName(step);
  const std::string tmp = dir + "/." + name + ".tmp", final = dir + "/" + name;
  Status status = Status::ok();
  if (root) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!ec)
      fs::remove_all(tmp, ec);
    if (!ec)
      fs::create_directory(tmp, ec);
    if (ec)
      status = Status::error("--save-dir " + dir + ": cannot create " + tmp + ": " +
                             ec.message());
  }
  comm.barrier(); // the directory exists before any rank writes into it
  // Each rank writes its own pieces: its shard of every sharded global (the
  // elements it owns, padding dropped), and rank 0 the replicated ones whole.
  const Program &p = executor.program();
  const int rank = comm.rank();
  Status mine = Status::ok();
  for (bool parameters : {true, false}) {
    std::vector<std::vector<uint8_t>> storage;
    std::vector<NamedTensor> tensors;
    for (const GlobalDesc &g : p.globals) {
      if (!isSaved(g, parameters) || (!g.shard && !root))
        continue;
      const BufferDesc &b = p.buffers[g.buffer];
      uint64_t first = 0, last = uint64_t(b.numel());
      if (g.shard)
        std::tie(first, last) = g.shard->range(rank);
      std::vector<uint8_t> bytes(size_t(b.bytes()));
      Status read = executor.readBuffer(g.buffer, bytes.data(), b.bytes());
      if (!read.isOk()) {
        mine = read;
        break;
      }
      bytes.resize(size_t((last - first) * dtypeSize(g.dtype)));
      storage.push_back(std::move(bytes));
      std::vector<int64_t> shape = g.shard ? std::vector<int64_t>{int64_t(last - first)} : g.shape;
      tensors.push_back({g.tensor, g.dtype, shape, storage.back().data()});
    }
    if (mine.isOk()) {
      std::string path = checkpointRankFile(tmp, parameters ? "model" : "optimizer", rank);
      mine = writeSafetensors(path, tensors);
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
      }
    }
  }
  // Rank 0 learns whether every rank's files are written.
  std::vector<std::string> statuses = comm.gatherToRoot(mine.isOk() ? "" : mine.message());
  if (!root)
    return Status::ok();
  ZRT_RETURN_IF_ERROR(status);
  for (size_t r = 0; r < statuses.size(); ++r)
    if (!statuses[r].empty())
      return Status::error("--save-dir " + dir + ": rank " + std::to_string(r) +
                           " could not write its checkpoint files: " + statuses[r]);
  // The manifest last: a directory with one is complete.
  nlohmann::json tensors = nlohmann::json::array();
  for (const GlobalDesc &g : p.globals) {
    bool model = isSaved(g, true);
    if (!model && !isSaved(g, false))
      continue;
    uint64_t numel = 1;
    for (int64_t d : g.shape)
      numel *= uint64_t(d);
    nlohmann::json pieces = nlohmann::json::array();
    if (g.shard) {
      for (int r = 0; r < g.shard->world; ++r) {
        auto [first, last] = g.shard->range(r);
        if (last > first)
          pieces.push_back({{"rank", r}, {"offset", first}, {"count", last - first}});
      }
    } else {
      pieces.push_back({{"rank", 0}, {"offset", 0}, {"count", numel}});
    }
    tensors.push_back({{"name", g.tensor},
                       {"dtype", safetensorsDTypeName(g.dtype)},
                       {"shape", g.shape},
                       {"kind", model ? "model" : "optimizer"},
                       {"pieces", pieces}});
  }
  nlohmann::json manifest = {{"format", "zero-checkpoint-2"},
                             {"step", step},
                             {"data_position", step},
                             {"world_size", p.worldSize},
                             {"program", p.path},
                             {"scheduler", "the lr is a function of optimizer.step"},
                             {"rng", "rng.step in the optimizer files (Dropout masks)"},
                             {"tensors", tensors}};
  ZRT_RETURN_IF_ERROR(writeTextFile(tmp + "/manifest.json", manifest.dump(1) + "\n"));
  syncDirectory(tmp);
  std::error_code ec;
  if (fs::exists(final, ec))
    fs::remove_all(final, ec);
  fs::rename(tmp, final, ec);
  if (ec)
    return Status::error("--save-dir " + dir + ": cannot rename " + tmp + " to " + final +
                         ": " + ec.message());
  syncDirectory(dir);
  ZRT_RETURN_IF_ERROR(writeTextFile(dir + "/latest", name + "\n"));
  syncDirectory(dir);
  return Status::ok();
}

Expected<CheckpointInfo> readLatestCheckpoint(const std::string &dir) {
  Expected<std::string> path = resolveCheckpoint(dir);
  if (!path)
    return Status::error("--resume " + path.status().message());
  Expected<CheckpointManifest> manifest = readCheckpointManifest(*path);
  if (!manifest)
    return Status::error("--resume " + dir + ": " + manifest.status().message());
  CheckpointInfo info;
  info.path = *path;
  info.step = manifest->step;
  info.worldSize = manifest->worldSize;
  return info;
}

Status loadCheckpoint(Executor &executor, const CheckpointInfo &checkpoint, int rank) {
  Expected<CheckpointManifest> manifest = readCheckpointManifest(checkpoint.path);
  if (!manifest)
    return manifest.status();
  CheckpointReader reader(*manifest);
  const Program &p = executor.program();
  for (const GlobalDesc &g : p.globals) {
    if (!isSaved(g, true) && !isSaved(g, false))
      continue;
    const CheckpointTensor *t = manifest->find(g.tensor);
    if (!t)
      return Status::error(checkpoint.path + ": no tensor \"" + g.tensor + "\" (global " +
                           g.name + "); the checkpoint was saved from another program");
    if (t->dtype != g.dtype || t->shape != g.shape)
      return Status::error(checkpoint.path + ": tensor \"" + g.tensor + "\" is " +
                           safetensorsDTypeName(t->dtype) + "[" + shapeString(t->shape) +
                           "], the program expects " + safetensorsDTypeName(g.dtype) + "[" +
                           shapeString(g.shape) + "]");
    const BufferDesc &b = p.buffers[g.buffer];
    uint64_t first = 0, last = t->numel();
    if (g.shard)
      std::tie(first, last) = g.shard->range(rank);
    std::vector<uint8_t> bytes(size_t(b.bytes()), 0);
    if (last > first)
      ZRT_RETURN_IF_ERROR(reader.read(*t, first, last, bytes.data()));
    ZRT_RETURN_IF_ERROR(executor.writeBuffer(g.buffer, bytes.data(), b.bytes()));
  }
  return Status::ok();
}

} // namespace zrt
