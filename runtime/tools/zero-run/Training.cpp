//===- Training.cpp - zero-run's training loop helpers --------------------===//
//
// The per-step log and the checkpoints of a training run (Training.h). The
// --log-json keys (step, loss, grad_norm, lr, time_s, samples_per_s) are an
// interface that tests assert on; docs/program-format.md lists them.
//
//===----------------------------------------------------------------------===//

#include "Training.h"

#include <cerrno>

#include <charconv>

#include "zrt/Bindings.h"
#include "zrt/Checkpoint.h"
#include "zrt/Checksum.h"
#include "zrt/OutputFile.h"
#include "zrt/TensorFile.h"
#include "zrt/Communicator.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
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

TrainingLog::TrainingLog(int64_t totalSteps, int64_t logEvery, bool progressBar,
                         std::string jsonPath)
    : totalSteps_(totalSteps), logEvery_(logEvery), progressBar_(progressBar),
      jsonPath_(std::move(jsonPath)) {}

Status TrainingLog::flush() {
  if (jsonPath_.empty() || written_ == json_.size())
    return Status::ok();
  const std::string text = json_.dump(2) + "\n";
  ZRT_RETURN_IF_ERROR(writeFileAtomically(jsonPath_, [&](int fd) {
    return writeAllToFd(fd, text.data(), text.size());
  }));
  written_ = json_.size();
  return Status::ok();
}

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
  if (r.lossScale) {
    std::snprintf(text, sizeof text, "  loss_scale %g", *r.lossScale);
    line += text;
  }
  if (r.skipped && *r.skipped)
    line += "  skipped (overflow)";
  std::snprintf(text, sizeof text, "  time %.1f ms", r.seconds * 1e3);
  line += text;
  if (r.samplesPerSecond > 0) {
    std::snprintf(text, sizeof text, "  samples/s %.1f", r.samplesPerSecond);
    line += text;
  }
  if (r.tokensPerSecond > 0) {
    std::snprintf(text, sizeof text, "  tokens/s %.0f", r.tokensPerSecond);
    line += text;
  }
  if (r.mfu) {
    std::snprintf(text, sizeof text, "  MFU %.1f%%", *r.mfu * 100);
    line += text;
  }
  return line;
}

std::string formatEvalLine(const EvalRecord &r, int64_t totalSteps) {
  char text[256];
  int n = std::snprintf(text, sizeof text,
                        "step %lld/%lld  eval_loss %.6f  perplexity %.2f  (%lld batches, "
                        "%.2f s)",
                        (long long)r.step, (long long)totalSteps, r.loss, std::exp(r.loss),
                        (long long)r.batches, r.seconds);
  return std::string(text, size_t(n));
}

Status TrainingLog::recordEval(const EvalRecord &r) {
  json_.push_back({{"step", r.step},
                   {"eval_loss", r.loss},
                   {"perplexity", std::exp(r.loss)},
                   {"eval_batches", r.batches},
                   {"eval_time_s", r.seconds}});
  lastEvalLoss_ = r.loss;
  clearBar(); // drawn again at the next step
  std::printf("%s\n", formatEvalLine(r, totalSteps_).c_str());
  std::fflush(stdout);
  return flush();
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
  std::string line = "\r[" + bar + "] " + std::to_string(r.step) + "/" +
                     std::to_string(totalSteps_);
  char text[96];
  std::snprintf(text, sizeof text, "  loss %.4f", r.loss);
  line += text;
  if (r.lr) {
    std::snprintf(text, sizeof text, "  lr %.2e", *r.lr);
    line += text;
  }
  if (lastEvalLoss_) {
    std::snprintf(text, sizeof text, "  eval %.4f (ppl %.1f)", *lastEvalLoss_,
                  std::exp(*lastEvalLoss_));
    line += text;
  }
  if (r.tokensPerSecond > 0) {
    std::snprintf(text, sizeof text, "  %.0f tok/s", r.tokensPerSecond);
    line += text;
  }
  if (r.mfu) {
    std::snprintf(text, sizeof text, "  MFU %.0f%%", *r.mfu * 100);
    line += text;
  }
  // The time left at the mean step time so far.
  secondsSoFar_ += r.seconds;
  ++stepsSoFar_;
  const double left = secondsSoFar_ / double(stepsSoFar_) * double(totalSteps_ - r.step);
  std::snprintf(text, sizeof text, "  ETA %d:%02d", int(left) / 60, int(left) % 60);
  line += text;
  std::fputs(line.c_str(), stderr);
  std::fputs("\033[K", stderr);
  std::fflush(stderr);
  barShown_ = true;
}

Status TrainingLog::record(const StepRecord &r) {
  nlohmann::json entry = {{"step", r.step}, {"loss", r.loss}};
  if (r.gradNorm)
    entry["grad_norm"] = *r.gradNorm;
  if (r.lr)
    entry["lr"] = *r.lr;
  if (r.lossScale)
    entry["loss_scale"] = *r.lossScale;
  if (r.skipped)
    entry["skipped"] = *r.skipped;
  entry["time_s"] = r.seconds;
  entry["samples_per_s"] = r.samplesPerSecond;
  if (r.tokensPerSecond > 0)
    entry["tokens_per_s"] = r.tokensPerSecond;
  if (r.flopsPerSecond > 0)
    entry["tflops"] = r.flopsPerSecond / 1e12;
  if (r.mfu)
    entry["mfu"] = *r.mfu;
  json_.push_back(std::move(entry));
  if (!csvDir_.empty()) {
    ZRT_RETURN_IF_ERROR(appendCsv("train_loss", r.step, r.loss));
    if (r.lr)
      ZRT_RETURN_IF_ERROR(appendCsv("lr", r.step, *r.lr));
    if (r.lossScale)
      ZRT_RETURN_IF_ERROR(appendCsv("loss_scale", r.step, *r.lossScale));
  }
  const bool logged = r.step % logEvery_ == 0 || r.step == totalSteps_;
  if (logged) {
    clearBar();
    std::printf("%s\n", formatStepLine(r, totalSteps_).c_str());
    std::fflush(stdout);
  }
  if (progressBar_)
    drawBar(r);
  return logged ? flush() : Status::ok();
}

void TrainingLog::finish() { clearBar(); }

Status TrainingLog::openCsvMonitor(const std::string &dir, double samplesPerStep) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::error("csv_monitor: cannot create " + dir + ": " + ec.message() +
                         "; fix the config's csv_monitor.output_path");
  csvDir_ = dir;
  csvSamplesPerStep_ = samplesPerStep;
  return Status::ok();
}

Status TrainingLog::appendCsv(const std::string &name, int64_t step, double value) {
  const std::string path = csvDir_ + "/Train_Samples_" + name + ".csv";
  std::FILE *f = std::fopen(path.c_str(), "a");
  if (!f)
    return Status::error("csv_monitor: cannot append to " + path + ": " +
                         std::strerror(errno));
  char number[64];
  // The shortest text that reads back as the same double (Python's repr).
  auto [end, err] = std::to_chars(number, number + sizeof number, value);
  *end = 0;
  bool ok = true;
  if (std::ftell(f) == 0)
    ok = std::fprintf(f, "step,%s\n", name.c_str()) > 0;
  ok = ok && std::fprintf(f, "%lld,%s\n",
                          (long long)std::llround(double(step) * csvSamplesPerStep_),
                          number) > 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok)
    return Status::error("csv_monitor: cannot write " + path + ": " + std::strerror(errno));
  return Status::ok();
}

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

namespace {

/// Where a saved global (Parameter, OptimizerState, Counter) is taken from,
/// by --save and by the checkpoints alike: the first pipeline stage that
/// holds it (a program not cut into stages: the world), its elements split
/// among that stage's ranks as they hold them, each replica's shard of a
/// sharded global (padding dropped) or a replicated one whole on the stage's
/// first rank. The other stages' copies are only compared with it.
struct SavedGlobal {
  size_t global = 0;
  std::vector<int> stages;             ///< every stage holding a copy
  std::vector<CheckpointPiece> pieces; ///< world ranks; the tensor, in order
  /// --save of a 16-bit parameter writes its fp32 master (the optimizer state
  /// NAME.master, `global` here) under the parameter's name; else empty.
  std::string savedAs;
};

/// The fp32 master copy of 16-bit Parameter global `g` (zero-optimizer's
/// NAME.master optimizer state), or -1.
int masterOf(const Program &p, const GlobalDesc &g) {
  if (g.dtype != DType::BF16 && g.dtype != DType::F16)
    return -1;
  for (size_t i = 0; i < p.globals.size(); ++i)
    if (p.globals[i].role == GlobalRole::OptimizerState &&
        p.globals[i].tensor == g.tensor + ".master" && p.globals[i].shape == g.shape)
      return int(i);
  return -1;
}

/// The saved globals of one kind (`parameters`, else optimizer state and
/// counters) that some stage holds, in program order; every rank computes
/// the same plan, so each knows which collectives the others take part in.
std::vector<SavedGlobal> planSavedGlobals(const Program &p, bool parameters,
                                         bool masters = false) {
  const int dp = p.dataParallelSize();
  const std::vector<std::vector<int>> holding = stagesHoldingGlobals(p);
  std::vector<SavedGlobal> plan;
  for (size_t pi = 0; pi < p.globals.size(); ++pi) {
    size_t gi = pi;
    std::string savedAs;
    if (masters && parameters)
      if (int m = masterOf(p, p.globals[pi]); m >= 0) {
        gi = size_t(m);
        savedAs = p.globals[pi].tensor;
      }
    const GlobalDesc &g = p.globals[gi];
    if (!isSaved(p.globals[pi], parameters) || holding[gi].empty())
      continue; // no stage holds it: nothing reads it
    SavedGlobal saved{gi, holding[gi], {}, savedAs};
    const int first = holding[gi].front() * dp;
    if (g.shard) {
      for (int d = 0; d < dp; ++d) {
        auto [b, e] = g.shard->range(d);
        if (e > b)
          saved.pieces.push_back({first + d, b, e - b});
      }
    } else {
      saved.pieces.push_back({first, 0, uint64_t(p.buffers[g.buffer].numel())});
    }
    plan.push_back(std::move(saved));
  }
  return plan;
}

/// The first `count` elements of global `g`'s buffer on this rank: its shard
/// without the padding, or the replicated tensor.
Status readHeld(const Executor &executor, const GlobalDesc &g, uint64_t count,
                std::vector<uint8_t> &bytes) {
  bytes.resize(size_t(executor.program().buffers[g.buffer].bytes()));
  ZRT_RETURN_IF_ERROR(
      executor.readBuffer(g.buffer, bytes.data(), bytes.size()));
  bytes.resize(size_t(count * dtypeSize(g.dtype)));
  return Status::ok();
}

/// The elements of global `g` that `rank` holds (its replica's shard, or the
/// whole tensor): its piece, or what the piece on an earlier stage must equal.
uint64_t heldCount(const Program &p, const GlobalDesc &g, int rank) {
  if (!g.shard)
    return uint64_t(p.buffers[g.buffer].numel());
  auto [b, e] = g.shard->range(rank % p.dataParallelSize());
  return e - b;
}

/// Whether every stage holding a copy of a global holds the same bytes (a
/// tied parameter's copies are stepped from one summed gradient, so they
/// must): each rank hashes the copies it holds, rank 0 compares them replica
/// by replica, so the copies never travel. Every rank calls it (one gather);
/// the failure is reported on rank 0.
Status checkCopiesAgree(const Executor &executor, Communicator &comm,
                        const std::vector<SavedGlobal> &plan) {
  const Program &p = executor.program();
  if (!p.pipelined() || comm.worldSize() == 1)
    return Status::ok();
  const int dp = p.dataParallelSize(), stage = comm.rank() / dp;
  Status read = Status::ok();
  // Per global with copies on several stages: 0 where this rank holds none.
  std::vector<uint64_t> hashes;
  std::vector<uint8_t> bytes;
  for (const SavedGlobal &saved : plan) {
    if (saved.stages.size() < 2)
      continue;
    uint64_t hash = 0;
    const GlobalDesc &g = p.globals[saved.global];
    if (std::find(saved.stages.begin(), saved.stages.end(), stage) !=
        saved.stages.end()) {
      Status s = readHeld(executor, g, heldCount(p, g, comm.rank()), bytes);
      if (s.isOk())
        hash = hashBytes(bytes.data(), bytes.size()) | 1;
      else if (read.isOk())
        read = s;
    }
    hashes.push_back(hash);
  }
  std::vector<std::string> all = comm.gatherToRoot(std::string(
      reinterpret_cast<const char *>(hashes.data()), hashes.size() * 8));
  ZRT_RETURN_IF_ERROR(read);
  if (comm.rank() != 0)
    return Status::ok();
  auto hashOf = [&](int rank, size_t k) {
    uint64_t h = 0;
    if (all[size_t(rank)].size() >= (k + 1) * 8)
      std::memcpy(&h, all[size_t(rank)].data() + k * 8, 8);
    return h;
  };
  size_t k = 0;
  for (const SavedGlobal &saved : plan) {
    if (saved.stages.size() < 2)
      continue;
    for (int d = 0; d < dp; ++d) {
      const int first = saved.stages.front();
      for (int other : saved.stages)
        if (hashOf(other * dp + d, k) != hashOf(first * dp + d, k))
          return Status::error(
              "saving " + p.globals[saved.global].tensor +
              ": its copies on pipeline stages " + std::to_string(first) +
              " and " + std::to_string(other) +
              " differ (a tied parameter's copies must be stepped "
              "identically)");
    }
    ++k;
  }
  return Status::ok();
}

} // namespace

Status saveGlobals(const Executor &executor, Communicator &comm, bool parameters,
                   const std::string &path) {
  const Program &p = executor.program();
  const bool root = comm.rank() == 0;
  // The trained parameters are the fp32 masters where there are some.
  const std::vector<SavedGlobal> plan = planSavedGlobals(p, parameters, /*masters=*/true);
  Status failed = checkCopiesAgree(executor, comm, plan);
  std::vector<std::vector<uint8_t>> storage;
  std::vector<NamedTensor> tensors;
  for (const SavedGlobal &saved : plan) {
    const GlobalDesc &g = p.globals[saved.global];
    const uint64_t elem = dtypeSize(g.dtype);
    std::vector<uint8_t> bytes; // this rank's piece, if it has one
    for (const CheckpointPiece &piece : saved.pieces)
      if (piece.rank == comm.rank()) {
        Status read = readHeld(executor, g, piece.count, bytes);
        if (!read.isOk() && failed.isOk())
          failed = read;
      }
    // The pieces gathered to rank 0 (unless they are all its own), in order.
    bool allOnRoot = true;
    for (const CheckpointPiece &piece : saved.pieces)
      allOnRoot &= piece.rank == 0;
    if (!allOnRoot) {
      std::vector<std::string> got = comm.gatherToRoot(std::string(
          reinterpret_cast<const char *>(bytes.data()), bytes.size()));
      if (!root)
        continue;
      bytes.clear();
      for (const CheckpointPiece &piece : saved.pieces) {
        const std::string &s = got[size_t(piece.rank)];
        if (s.size() != piece.count * elem && failed.isOk())
          failed = Status::error("saving " + g.tensor + ": rank " +
                                 std::to_string(piece.rank) +
                                 " could not read its " +
                                 std::to_string(piece.count) + " elements");
        bytes.insert(bytes.end(), s.begin(), s.end());
      }
    }
    if (!root)
      continue;
    DType dtype = g.dtype;
    if (parameters && (dtype == DType::F16 || dtype == DType::BF16 ||
                       dtype == DType::F64)) {
      std::vector<float> f32 = toF32(dtype, bytes.data(), bytes.size() / elem);
      bytes.assign(reinterpret_cast<const uint8_t *>(f32.data()),
                   reinterpret_cast<const uint8_t *>(f32.data() + f32.size()));
      dtype = DType::F32;
    }
    storage.push_back(std::move(bytes));
    tensors.push_back({saved.savedAs.empty() ? g.tensor : saved.savedAs, dtype, g.shape,
                       storage.back().data()});
  }
  ZRT_RETURN_IF_ERROR(failed);
  // `storage` does not reallocate the byte vectors' data when it grows, so
  // the pointers above stay valid.
  return root ? writeSafetensorsWithChecksums(path, tensors) : Status::ok();
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
  // Each rank writes its own pieces (planSavedGlobals: its shard of every
  // sharded global, padding dropped; a stage's first rank the replicated
  // ones whole), each global from the first pipeline stage holding it.
  const Program &p = executor.program();
  const int rank = comm.rank();
  Status mine = Status::ok();
  std::vector<SavedGlobal> plans[2];
  // What this rank wrote, for the manifest: each file's size and checksum,
  // each piece's checksum (by kind, then tensor name).
  nlohmann::json wrote = {{"files", nlohmann::json::object()},
                            {"pieces", nlohmann::json::object()}};
  for (bool parameters : {true, false}) {
    const char *kind = parameters ? "model" : "optimizer";
    std::vector<SavedGlobal> &plan = plans[parameters ? 0 : 1];
    plan = planSavedGlobals(p, parameters);
    // Another stage's copy of a global (a tied parameter's) is not written,
    // so it is compared with the written one here.
    Status same = checkCopiesAgree(executor, comm, plan);
    if (!same.isOk() && mine.isOk())
      mine = same;
    std::vector<std::vector<uint8_t>> storage;
    std::vector<NamedTensor> tensors;
    for (const SavedGlobal &saved : plan) {
      const GlobalDesc &g = p.globals[saved.global];
      for (const CheckpointPiece &piece : saved.pieces) {
        if (piece.rank != rank || !mine.isOk())
          continue;
        std::vector<uint8_t> bytes;
        mine = readHeld(executor, g, piece.count, bytes);
        storage.push_back(std::move(bytes));
        std::vector<int64_t> shape =
            g.shard ? std::vector<int64_t>{int64_t(piece.count)} : g.shape;
        tensors.push_back({g.tensor, g.dtype, shape, storage.back().data()});
      }
    }
    if (mine.isOk()) {
      std::string path = checkpointRankFile(tmp, kind, rank);
      SafetensorsDigest digest;
      mine = writeSafetensors(path, tensors, &digest);
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
      }
      wrote["files"][kind] = {{"bytes", digest.fileBytes},
                                {"xxh3", checksumHex(digest.fileXxh3)}};
      nlohmann::json pieces = nlohmann::json::object();
      for (size_t i = 0; i < tensors.size() && i < digest.tensorXxh3.size(); ++i)
        pieces[tensors[i].name] = checksumHex(digest.tensorXxh3[i]);
      wrote["pieces"][kind] = std::move(pieces);
    }
  }
  // Rank 0 learns whether every rank's files are written, and their sums.
  std::vector<std::string> reports = comm.gatherToRoot(
      mine.isOk() ? wrote.dump() : nlohmann::json{{"error", mine.message()}}.dump());
  if (!root)
    return Status::ok();
  // A failed checkpoint leaves no directory behind, only the previous ones.
  auto discard = [&](const Status &error) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return error;
  };
  if (!status.isOk())
    return discard(status);
  std::vector<nlohmann::json> ranks;
  for (size_t r = 0; r < reports.size(); ++r) {
    nlohmann::json report = nlohmann::json::parse(reports[r], nullptr, false);
    std::string error = report.is_discarded() ? "no report" : report.value("error", "");
    if (!error.empty())
      return discard(Status::error(
          "--save-dir " + dir + ": rank " + std::to_string(r) +
          " could not write its checkpoint files: " + error));
    ranks.push_back(std::move(report));
  }
  // The manifest last: a directory with one is complete.
  const int dp = p.dataParallelSize();
  std::vector<const SavedGlobal *> inProgramOrder;
  for (const std::vector<SavedGlobal> &plan : plans)
    for (const SavedGlobal &saved : plan)
      inProgramOrder.push_back(&saved);
  std::sort(inProgramOrder.begin(), inProgramOrder.end(),
            [](const SavedGlobal *a, const SavedGlobal *b) {
              return a->global < b->global;
            });
  nlohmann::json tensors = nlohmann::json::array();
  for (const SavedGlobal *saved : inProgramOrder) {
    const GlobalDesc &g = p.globals[saved->global];
    const char *kind = isSaved(g, true) ? "model" : "optimizer";
    nlohmann::json pieces = nlohmann::json::array();
    for (const CheckpointPiece &piece : saved->pieces)
      pieces.push_back({{"rank", piece.rank},
                        {"offset", piece.offset},
                        {"count", piece.count},
                        {"xxh3", ranks[size_t(piece.rank)]["pieces"][kind].value(
                                     g.tensor, std::string())}});
    nlohmann::json entry = {{"name", g.tensor},
                            {"dtype", safetensorsDTypeName(g.dtype)},
                            {"shape", g.shape},
                            {"kind", kind},
                            {"pieces", pieces}};
    if (p.pipelined())
      entry["stages"] = saved->stages; // every stage holding a copy
    tensors.push_back(std::move(entry));
  }
  nlohmann::json files = nlohmann::json::array();
  for (int r = 0; r < int(ranks.size()); ++r)
    for (const char *kind : {"model", "optimizer"})
      files.push_back({{"name", checkpointRankFile("", kind, r).substr(1)},
                       {"bytes", ranks[size_t(r)]["files"][kind].value("bytes", uint64_t(0))},
                       {"xxh3", ranks[size_t(r)]["files"][kind].value("xxh3", "")}});
  nlohmann::json manifest = {{"format", "zero-checkpoint-3"},
                             {"step", step},
                             {"data_position", step},
                             {"world_size", p.worldSize},
                             {"program", p.path},
                             {"scheduler", "the lr is a function of optimizer.step"},
                             {"rng", "rng.step in the optimizer files (Dropout masks)"},
                             {"tensor_count", tensors.size()},
                             {"tensors", tensors},
                             {"files", files}};
  if (p.pipelined())
    manifest["pipeline"] = {{"stages", p.worldSize / dp}, {"dp", dp}};
  Status written =
      writeTextFile(tmp + "/manifest.json", sealCheckpointManifest(manifest));
  if (!written.isOk())
    return discard(written);
  syncDirectory(tmp);
  std::error_code ec;
  if (fs::exists(final, ec))
    fs::remove_all(final, ec);
  fs::rename(tmp, final, ec);
  if (ec)
    return discard(Status::error("--save-dir " + dir + ": cannot rename " +
                                 tmp + " to " + final + ": " + ec.message()));
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
    return Status::error(
        "--resume " + dir + ": " + manifest.status().message() +
        "; resume from another of its step-NNNNNNNN checkpoints "
        "(--resume DIR/step-NNNNNNNN)");
  CheckpointInfo info;
  info.path = *path;
  info.step = manifest->step;
  info.worldSize = manifest->worldSize;
  return info;
}

Status loadCheckpoint(Executor &executor, const CheckpointInfo &checkpoint, int rank,
                      int worldSize) {
  Expected<CheckpointManifest> manifest = readCheckpointManifest(checkpoint.path);
  if (!manifest)
    return manifest.status();
  // The ranks share the checking of the files (sizes, checksums, the
  // tensors each holds) before any of their bytes is used.
  std::vector<std::string> problems = verifyCheckpointFiles(*manifest, rank, worldSize);
  if (!problems.empty())
    return Status::error(checkpoint.path + " is damaged: " + problems.front() +
                         "; resume from another of its directory's step-NNNNNNNN "
                         "checkpoints (--resume DIR/step-NNNNNNNN)");
  if (manifest->formatVersion < 3 && rank == 0)
    std::fprintf(stderr, "zero-run: warning: %s was written before checkpoints carried "
                         "checksums: its data cannot be verified\n",
                 checkpoint.path.c_str());
  CheckpointReader reader(*manifest);
  const Program &p = executor.program();
  const std::string other =
      "; it was saved from " +
      (manifest->program.empty() ? "another program" : manifest->program) +
      ": resume with that program, or train from --weights without "
      "--resume";
  // Each rank reads its own globals (a pipeline stage's), and of a sharded
  // one its replica's element range, from whichever pieces hold it: the
  // checkpoint may come from another world size or pipeline layout.
  const std::vector<bool> held = globalsUsedOn(p, rank);
  for (size_t gi = 0; gi < p.globals.size(); ++gi) {
    const GlobalDesc &g = p.globals[gi];
    if ((!isSaved(g, true) && !isSaved(g, false)) || !held[gi])
      continue;
    const CheckpointTensor *t = manifest->find(g.tensor);
    if (!t)
      return Status::error(checkpoint.path + ": no tensor \"" + g.tensor +
                           "\" (global " + g.name + ")" + other);
    if (t->dtype != g.dtype || t->shape != g.shape)
      return Status::error(checkpoint.path + ": tensor \"" + g.tensor +
                           "\" is " + safetensorsDTypeName(t->dtype) + "[" +
                           shapeString(t->shape) + "], the program expects " +
                           safetensorsDTypeName(g.dtype) + "[" +
                           shapeString(g.shape) + "]" + other);
    const BufferDesc &b = p.buffers[g.buffer];
    uint64_t first = 0, last = t->numel();
    if (g.shard)
      std::tie(first, last) = g.shard->range(rank % p.dataParallelSize());
    std::vector<uint8_t> bytes(size_t(b.bytes()), 0);
    if (last > first) {
      Status read = reader.read(*t, first, last, bytes.data());
      if (!read.isOk())
        return Status::error(
            checkpoint.path + " is damaged: " + read.message() +
            "; resume from another of its directory's step-NNNNNNNN "
            "checkpoints (--resume DIR/step-NNNNNNNN)");
    }
    ZRT_RETURN_IF_ERROR(executor.writeBuffer(g.buffer, bytes.data(), b.bytes()));
  }
  return Status::ok();
}

} // namespace zrt
