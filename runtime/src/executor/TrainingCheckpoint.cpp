//===- TrainingCheckpoint.cpp - Saving and resuming a training run --------===//
//
// What zrt/TrainingCheckpoint.h declares: --save and --save-optimizer files
// (saveGlobals), the --save-dir checkpoints (saveCheckpoint: each rank's
// pieces, then rank 0's manifest), and their reading back (--resume). The
// files' formats and checks are zrt/Checkpoint.h's (zrt_io).
//
//===----------------------------------------------------------------------===//

#include "zrt/TrainingCheckpoint.h"

#include "zrt/Bindings.h"
#include "zrt/Checkpoint.h"
#include "zrt/Checksum.h"
#include "zrt/OutputFile.h"
#include "zrt/TensorFile.h"

#include "math/HalfMath.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

namespace zrt {

namespace {

bool isSaved(const GlobalDesc &g, bool parameters) {
  return parameters ? g.role == GlobalRole::Parameter
                    : g.role == GlobalRole::OptimizerState ||
                          g.role == GlobalRole::Counter;
}

/// `count` elements of `dtype` at `src` as f32.
std::vector<float> toF32(DType dtype, const uint8_t *src, size_t count) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = math::halfToFloat(h);
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
          saved.pieces.push_back({first + d, b, e - b, {}});
      }
    } else {
      saved.pieces.push_back({first, 0, uint64_t(p.buffers[g.buffer].numel()), {}});
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


/// Rank 0 makes DIR/.step-NNNNNNNN.tmp (empty); the error is rank 0's.
Status createTmpDirectory(const std::string &dir, const std::string &tmp) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!ec)
    fs::remove_all(tmp, ec);
  if (!ec)
    fs::create_directory(tmp, ec);
  if (ec)
    return Status::error("--save-dir " + dir + ": cannot create " + tmp + ": " +
                         ec.message());
  return Status::ok();
}

/// This rank's model-rank-R and optimizer-rank-R files in `tmp`: its pieces
/// (planSavedGlobals: its shard of every sharded global, padding dropped; a
/// stage's first rank the replicated ones whole), each global from the first
/// pipeline stage holding it; `plans` gets both plans. `wrote` gets each
/// file's size and checksum and each piece's checksum (by kind, then tensor
/// name), for the manifest. Every rank calls it (the copies' comparison).
Status writeRankFiles(const Executor &executor, Communicator &comm, const std::string &tmp,
                      std::vector<SavedGlobal> (&plans)[2], nlohmann::json &wrote) {
  const Program &p = executor.program();
  const int rank = comm.rank();
  Status mine = Status::ok();
  wrote = {{"files", nlohmann::json::object()}, {"pieces", nlohmann::json::object()}};
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
    if (!mine.isOk())
      continue;
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
  return mine;
}

/// The manifest of the checkpoint of `step` (zrt/Checkpoint.h): every saved
/// tensor in program order with its pieces and their checksums (`ranks`:
/// what each rank wrote, writeRankFiles), and every rank's files.
nlohmann::json checkpointManifest(const Program &p, const std::vector<SavedGlobal> (&plans)[2],
                                  const std::vector<nlohmann::json> &ranks, int64_t step) {
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
  return manifest;
}

/// The manifest last (a directory with one is complete), then `tmp` renamed
/// to DIR/`name` and DIR/latest pointed at it, each step made durable.
Status publishCheckpoint(const std::string &dir, const std::string &tmp,
                         const std::string &name, const nlohmann::json &manifest) {
  namespace fs = std::filesystem;
  const std::string final = dir + "/" + name;
  ZRT_RETURN_IF_ERROR(writeTextFile(tmp + "/manifest.json", sealCheckpointManifest(manifest)));
  syncDirectory(tmp);
  std::error_code ec;
  if (fs::exists(final, ec))
    fs::remove_all(final, ec);
  fs::rename(tmp, final, ec);
  if (ec)
    return Status::error("--save-dir " + dir + ": cannot rename " + tmp + " to " + final +
                         ": " + ec.message());
  syncDirectory(dir);
  return Status::ok();
}

} // namespace

Status saveCheckpoint(const Executor &executor, Communicator &comm,
                      const std::string &dir, int64_t step) {
  const bool root = comm.rank() == 0;
  const std::string name = stepName(step);
  const std::string tmp = dir + "/." + name + ".tmp";
  Status status = root ? createTmpDirectory(dir, tmp) : Status::ok();
  comm.barrier(); // the directory exists before any rank writes into it
  std::vector<SavedGlobal> plans[2];
  nlohmann::json wrote;
  Status mine = writeRankFiles(executor, comm, tmp, plans, wrote);
  // Rank 0 learns whether every rank's files are written, and their sums.
  std::vector<std::string> reports = comm.gatherToRoot(
      mine.isOk() ? wrote.dump() : nlohmann::json{{"error", mine.message()}}.dump());
  if (!root)
    return Status::ok();
  // A failed checkpoint leaves no directory behind, only the previous ones.
  auto discard = [&](const Status &error) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
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
  Status published =
      publishCheckpoint(dir, tmp, name, checkpointManifest(executor.program(), plans, ranks, step));
  if (!published.isOk())
    return discard(published);
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
