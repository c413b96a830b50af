//===- Checkpoint.cpp - Sharded training checkpoints ----------------------===//
//
// The reading side of zero-run's checkpoints (Checkpoint.h): the manifest,
// element ranges assembled from the ranks' pieces, and streamed
// consolidation into one safetensors file.
//
//===----------------------------------------------------------------------===//

#include "zrt/Checkpoint.h"

#include "zrt/OutputFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace zrt {

Expected<DType> parseSafetensorsDType(const std::string &name);

uint64_t CheckpointTensor::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= uint64_t(d);
  return n;
}

const CheckpointTensor *CheckpointManifest::find(const std::string &name) const {
  for (const CheckpointTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

std::string checkpointRankFile(const std::string &checkpointDir, const std::string &kind,
                               int rank) {
  char name[64];
  std::snprintf(name, sizeof name, "%s-rank-%05d.safetensors", kind.c_str(), rank);
  return checkpointDir + "/" + name;
}

Expected<std::string> resolveCheckpoint(const std::string &dir) {
  if (std::ifstream(dir + "/manifest.json"))
    return dir;
  std::ifstream latest(dir + "/latest");
  std::string name;
  if (!latest || !(latest >> name))
    return Status::error(dir + ": no checkpoint (neither " + dir + "/latest, which zero-run "
                         "--save-dir writes, nor a manifest.json)");
  return dir + "/" + name;
}

Expected<CheckpointManifest> readCheckpointManifest(const std::string &checkpointDir) {
  const std::string path = checkpointDir + "/manifest.json";
  std::ifstream in(path);
  if (!in)
    return Status::error(path + " is missing: the checkpoint is incomplete");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json m = nlohmann::json::parse(text.str(), nullptr, false);
  auto bad = [&](const std::string &why) {
    return Status::error(path + ": not a zero-run checkpoint manifest (" + why + ")");
  };
  if (m.is_discarded() || !m.is_object())
    return bad("not JSON");
  if (m.value("format", "") != "zero-checkpoint-2")
    return bad("format is not zero-checkpoint-2");
  if (!m["step"].is_number_integer() || m["step"].get<int64_t>() < 0)
    return bad("no step");
  CheckpointManifest manifest;
  manifest.path = checkpointDir;
  manifest.step = m["step"].get<int64_t>();
  manifest.worldSize = m.value("world_size", 1);
  if (m.contains("program") && m["program"].is_string())
    manifest.program = m["program"].get<std::string>();
  if (!m["tensors"].is_array())
    return bad("no tensors");
  for (const nlohmann::json &t : m["tensors"]) {
    CheckpointTensor ct;
    if (!t.is_object() || !t["name"].is_string() || !t["dtype"].is_string() ||
        !t["shape"].is_array() || !t["kind"].is_string() || !t["pieces"].is_array())
      return bad("a tensor entry lacks name, dtype, shape, kind or pieces");
    ct.name = t["name"].get<std::string>();
    Expected<DType> dtype = parseSafetensorsDType(t["dtype"].get<std::string>());
    if (!dtype)
      return bad(ct.name + ": " + dtype.status().message());
    ct.dtype = *dtype;
    ct.shape = t["shape"].get<std::vector<int64_t>>();
    ct.kind = t["kind"].get<std::string>();
    uint64_t covered = 0;
    for (const nlohmann::json &p : t["pieces"]) {
      CheckpointPiece piece{p.value("rank", 0), p.value("offset", uint64_t(0)),
                            p.value("count", uint64_t(0))};
      if (piece.offset != covered)
        return bad(ct.name + ": its pieces do not cover it in order");
      covered += piece.count;
      ct.pieces.push_back(piece);
    }
    if (covered != ct.numel())
      return bad(ct.name + ": its pieces hold " + std::to_string(covered) + " of " +
                 std::to_string(ct.numel()) + " elements");
    manifest.tensors.push_back(std::move(ct));
  }
  return manifest;
}

Expected<const SafetensorsFile *> CheckpointReader::file(const std::string &kind, int rank) {
  std::string path = checkpointRankFile(manifest_.path, kind, rank);
  auto it = files_.find(path);
  if (it == files_.end()) {
    Expected<SafetensorsFile> f = SafetensorsFile::open(path);
    if (!f)
      return f.status();
    it = files_.emplace(path, std::make_unique<SafetensorsFile>(std::move(*f))).first;
  }
  return it->second.get();
}

Status CheckpointReader::read(const CheckpointTensor &tensor, uint64_t first, uint64_t last,
                              void *dst) {
  const uint64_t elem = dtypeSize(tensor.dtype);
  for (const CheckpointPiece &p : tensor.pieces) {
    uint64_t b = std::max(first, p.offset), e = std::min(last, p.offset + p.count);
    if (b >= e)
      continue;
    Expected<const SafetensorsFile *> f = file(tensor.kind, p.rank);
    if (!f)
      return f.status();
    const SafetensorsEntry *entry = (*f)->find(tensor.name);
    if (!entry || entry->dtype != tensor.dtype || uint64_t(entry->numel()) != p.count)
      return Status::error((*f)->path() + ": no " + safetensorsDTypeName(tensor.dtype) +
                           " tensor \"" + tensor.name + "\" of " + std::to_string(p.count) +
                           " elements, as the manifest says");
    ZRT_RETURN_IF_ERROR((*f)->read(*entry, (b - p.offset) * elem, (e - b) * elem,
                                   static_cast<char *>(dst) + (b - first) * elem));
  }
  return Status::ok();
}

Status consolidateCheckpoint(const CheckpointManifest &manifest, const std::string &kind,
                             const std::string &out, uint64_t chunkBytes) {
  CheckpointReader reader(manifest);
  std::vector<StreamedTensor> tensors;
  std::vector<char> buffer;
  Status failure = Status::ok();
  for (const CheckpointTensor &t : manifest.tensors) {
    if (t.kind != kind)
      continue;
    tensors.push_back({t.name, t.dtype, t.shape, [&, tp = &t](int fd) {
                         const uint64_t elem = dtypeSize(tp->dtype);
                         const uint64_t step = std::max<uint64_t>(1, chunkBytes / elem);
                         for (uint64_t b = 0; b < tp->numel(); b += step) {
                           uint64_t e = std::min(tp->numel(), b + step);
                           buffer.resize(size_t((e - b) * elem));
                           Status s = reader.read(*tp, b, e, buffer.data());
                           if (!s.isOk()) {
                             failure = s;
                             return false;
                           }
                           if (!writeAllToFd(fd, buffer.data(), buffer.size()))
                             return false;
                         }
                         return true;
                       }});
  }
  Status written = writeSafetensorsStreamed(out, tensors);
  if (!failure.isOk())
    return failure;
  return written;
}

} // namespace zrt
