//===- Checkpoint.cpp - Sharded training checkpoints ----------------------===//
//
// The reading side of zero-run's checkpoints (Checkpoint.h): the manifest,
// element ranges assembled from the ranks' pieces, and streamed
// consolidation into one safetensors file.
//
//===----------------------------------------------------------------------===//

#include "zrt/Checkpoint.h"

#include "zrt/Checksum.h"
#include "zrt/OutputFile.h"

#include "math/HalfMath.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

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

namespace {

/// `text` for an error message: printable ASCII as is, other bytes as \xNN,
/// at most 64 of them.
std::string printable(const std::string &text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < 64; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return text.size() > 64 ? out + "..." : out;
}

/// Whether `name` is a checkpoint directory's name: step-NNNNNNNN.
bool isStepName(const std::string &name) {
  if (name.size() != 13 || name.compare(0, 5, "step-") != 0)
    return false;
  return std::all_of(name.begin() + 5, name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

bool fileExists(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// The checksum of the manifest's compact JSON without "manifest_xxh3".
uint64_t manifestChecksum(nlohmann::json m) {
  m.erase("manifest_xxh3");
  const std::string text = m.dump();
  return xxh3(text.data(), text.size());
}

constexpr const char *kFormat2 = "zero-checkpoint-2", *kFormat3 = "zero-checkpoint-3";

/// A piece's checksum from the manifest (format 3), or why it is unusable.
Expected<std::optional<uint64_t>> readChecksum(const nlohmann::json &j, bool required) {
  if (!j.contains("xxh3")) {
    if (required)
      return Status::error("has no xxh3 checksum");
    return std::optional<uint64_t>();
  }
  std::optional<uint64_t> v =
      j["xxh3"].is_string() ? parseChecksumHex(j["xxh3"].get<std::string>()) : std::nullopt;
  if (!v)
    return Status::error("has an xxh3 checksum that is not 16 hex digits");
  return v;
}

/// The "tensors" entries of a manifest, checked.
Status readTensorEntries(const nlohmann::json &m, CheckpointManifest &manifest,
                         const std::function<Status(const std::string &)> &bad) {
  if (!m.contains("tensors") || !m["tensors"].is_array())
    return bad("no tensors");
  const bool v3 = manifest.formatVersion >= 3;
  std::set<std::string> names;
  for (const nlohmann::json &t : m["tensors"]) {
    CheckpointTensor ct;
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() ||
        !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array() || !t.contains("kind") || !t["kind"].is_string() ||
        !t.contains("pieces") || !t["pieces"].is_array())
      return bad("a tensor entry lacks name, dtype, shape, kind or pieces");
    ct.name = t["name"].get<std::string>();
    if (!names.insert(ct.name).second)
      return bad("tensor \"" + ct.name + "\" is listed twice");
    Expected<DType> dtype = parseSafetensorsDType(t["dtype"].get<std::string>());
    if (!dtype)
      return bad(ct.name + ": " + dtype.status().message());
    ct.dtype = *dtype;
    for (const nlohmann::json &d : t["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return bad(ct.name + ": its shape is not a list of sizes");
      ct.shape.push_back(d.get<int64_t>());
    }
    ct.kind = t["kind"].get<std::string>();
    if (ct.kind != "model" && ct.kind != "optimizer")
      return bad(ct.name + ": kind \"" + ct.kind + "\" is neither model nor optimizer");
    uint64_t covered = 0;
    for (const nlohmann::json &p : t["pieces"]) {
      if (!p.is_object() || !p.contains("rank") || !p["rank"].is_number_integer() ||
          !p.contains("offset") || !p["offset"].is_number_unsigned() ||
          !p.contains("count") || !p["count"].is_number_unsigned())
        return bad(ct.name + ": a piece lacks rank, offset or count");
      CheckpointPiece piece{p["rank"].get<int>(), p["offset"].get<uint64_t>(),
                            p["count"].get<uint64_t>(), std::nullopt};
      if (piece.rank < 0 || piece.rank >= manifest.worldSize)
        return bad(ct.name + ": a piece is in rank " + std::to_string(piece.rank) +
                   "'s file, outside world_size " + std::to_string(manifest.worldSize));
      if (piece.offset != covered)
        return bad(ct.name + ": its pieces do not cover it in order");
      Expected<std::optional<uint64_t>> sum = readChecksum(p, v3);
      if (!sum)
        return bad(ct.name + ": its piece in rank " + std::to_string(piece.rank) + "'s file " +
                   sum.status().message());
      piece.xxh3 = *sum;
      covered += piece.count;
      ct.pieces.push_back(piece);
    }
    if (covered != ct.numel())
      return bad(ct.name + ": its pieces hold " + std::to_string(covered) + " of " +
                 std::to_string(ct.numel()) + " elements");
    manifest.tensors.push_back(std::move(ct));
  }
  if (v3 && (!m.contains("tensor_count") || !m["tensor_count"].is_number_unsigned() ||
             m["tensor_count"].get<uint64_t>() != manifest.tensors.size()))
    return bad("it lists " + std::to_string(manifest.tensors.size()) +
               " tensors, its tensor_count says otherwise");
  return Status::ok();
}

/// The "files" entries of a format 3 manifest (else the files world_size
/// implies), checked against world_size and the directory.
Status readFileEntries(const nlohmann::json &m, CheckpointManifest &manifest,
                       const std::function<Status(const std::string &)> &bad) {
  const bool v3 = manifest.formatVersion >= 3;
  if (v3 && (!m.contains("files") || !m["files"].is_array()))
    return bad("no files");
  size_t next = 0;
  for (int rank = 0; rank < manifest.worldSize; ++rank)
    for (const char *kind : {"model", "optimizer"}) {
      CheckpointFile file{kind, rank, 0, std::nullopt};
      const std::string name = checkpointRankFile("", kind, rank).substr(1);
      if (v3) {
        const nlohmann::json &f =
            next < m["files"].size() ? m["files"][next] : nlohmann::json();
        ++next;
        if (!f.is_object() || f.value("name", "") != name ||
            !f.contains("bytes") || !f["bytes"].is_number_unsigned())
          return bad("world_size is " + std::to_string(manifest.worldSize) +
                     " but its files do not list " + name + " (with its bytes) in place");
        file.bytes = f["bytes"].get<uint64_t>();
        Expected<std::optional<uint64_t>> sum = readChecksum(f, true);
        if (!sum)
          return bad(name + " " + sum.status().message());
        file.xxh3 = *sum;
      }
      if (!fileExists(manifest.path + "/" + name))
        return Status::error(manifest.path + "/" + name + " is missing: manifest.json says " +
                             std::to_string(manifest.worldSize) +
                             " rank(s) saved the checkpoint, each writing a model and an "
                             "optimizer file");
      manifest.files.push_back(std::move(file));
    }
  if (v3 && next != m["files"].size())
    return bad("its files list more than the " + std::to_string(2 * manifest.worldSize) +
               " files of world_size " + std::to_string(manifest.worldSize));
  return Status::ok();
}

} // namespace

Expected<std::string> resolveCheckpoint(const std::string &dir) {
  if (std::ifstream(dir + "/manifest.json"))
    return dir;
  std::ifstream latest(dir + "/latest", std::ios::binary);
  if (!latest)
    return Status::error(dir + ": no checkpoint (neither " + dir + "/latest, which zero-run "
                         "--save-dir writes, nor a manifest.json)");
  std::string text((std::istreambuf_iterator<char>(latest)), std::istreambuf_iterator<char>());
  std::string name = text;
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r'))
    name.pop_back();
  if (!isStepName(name))
    return Status::error(dir + "/latest should name a checkpoint directory in " + dir +
                         " (step-NNNNNNNN) but holds \"" + printable(name) +
                         "\"; pass one of its step-NNNNNNNN directories instead");
  return dir + "/" + name;
}

std::string sealCheckpointManifest(const nlohmann::json &manifest) {
  nlohmann::json sealed = manifest;
  sealed["manifest_xxh3"] = checksumHex(manifestChecksum(manifest));
  return sealed.dump(1) + "\n";
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
    return Status::error(path + ": not a valid zero-run checkpoint manifest (" + why + ")");
  };
  if (m.is_discarded() || !m.is_object())
    return bad("not JSON");
  CheckpointManifest manifest;
  manifest.path = checkpointDir;
  const std::string format = m.value("format", "");
  if (format == kFormat2)
    manifest.formatVersion = 2;
  else if (format != kFormat3)
    return bad("format is neither " + std::string(kFormat3) + " nor " + kFormat2);
  if (manifest.formatVersion >= 3) {
    std::optional<uint64_t> sealed =
        m.contains("manifest_xxh3") && m["manifest_xxh3"].is_string()
            ? parseChecksumHex(m["manifest_xxh3"].get<std::string>())
            : std::nullopt;
    if (!sealed || *sealed != manifestChecksum(m))
      return Status::error(path + " was changed or damaged after zero-run wrote it (its "
                           "manifest_xxh3 checksum does not match); resume from another "
                           "step-NNNNNNNN checkpoint");
  }
  if (!m.contains("step") || !m["step"].is_number_integer() || m["step"].get<int64_t>() < 0)
    return bad("no step");
  manifest.step = m["step"].get<int64_t>();
  if (!m.contains("world_size") || !m["world_size"].is_number_integer() ||
      m["world_size"].get<int64_t>() < 1 || m["world_size"].get<int64_t>() > (1 << 20))
    return bad("no world_size");
  manifest.worldSize = m["world_size"].get<int>();
  if (m.contains("program") && m["program"].is_string())
    manifest.program = m["program"].get<std::string>();
  ZRT_RETURN_IF_ERROR(readTensorEntries(m, manifest, bad));
  ZRT_RETURN_IF_ERROR(readFileEntries(m, manifest, bad));
  return manifest;
}

namespace {

/// The tensors of `file` whose checksums differ from the manifest's (format
/// 3), or why its header cannot be read.
std::string locateDamage(const CheckpointManifest &manifest, const CheckpointFile &file,
                         const std::string &path) {
  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  if (!f)
    return path + ": its checksum does not match manifest.json and its header is damaged (" +
           f.status().message() + ")";
  std::string damaged;
  for (const CheckpointTensor &t : manifest.tensors)
    for (const CheckpointPiece &p : t.pieces) {
      if (t.kind != file.kind || p.rank != file.rank || !p.xxh3)
        continue;
      const SafetensorsEntry *e = f->find(t.name);
      if (!e)
        continue;
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      Expected<uint64_t> sum = fd >= 0 ? xxh3OfFileRange(fd, e->fileOffset, e->bytes, path)
                                       : Expected<uint64_t>(Status::error("cannot open"));
      if (fd >= 0)
        ::close(fd);
      if (!sum || *sum != *p.xxh3)
        damaged += (damaged.empty() ? "" : ", ") + ("\"" + t.name + "\"");
    }
  if (damaged.empty())
    return path + ": its checksum does not match manifest.json (the damage is in its header "
                  "or padding, not in a tensor's data)";
  return path + ": tensor(s) " + damaged + " do not match their checksums in manifest.json: "
         "the data is damaged";
}

/// What is wrong with one rank file, or nothing.
std::vector<std::string> verifyFile(const CheckpointManifest &manifest,
                                    const CheckpointFile &file) {
  const std::string path = checkpointRankFile(manifest.path, file.kind, file.rank);
  std::vector<std::string> problems;
  if (file.xxh3) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      if (fd >= 0)
        ::close(fd);
      return {path + ": cannot read: " + std::strerror(errno)};
    }
    if (uint64_t(st.st_size) != file.bytes) {
      ::close(fd);
      return {path + " is " + std::to_string(st.st_size) + " bytes, manifest.json says " +
              std::to_string(file.bytes) + ": the file was truncated or replaced"};
    }
    Expected<uint64_t> sum = xxh3OfFileRange(fd, 0, file.bytes, path);
    ::close(fd);
    if (!sum)
      return {sum.status().message()};
    if (*sum != *file.xxh3)
      return {locateDamage(manifest, file, path)};
  }
  // The tensors it holds are exactly the pieces the manifest puts in it.
  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  if (!f)
    return {f.status().message()};
  std::set<std::string> listed;
  for (const CheckpointTensor &t : manifest.tensors)
    for (const CheckpointPiece &p : t.pieces)
      if (t.kind == file.kind && p.rank == file.rank) {
        listed.insert(t.name);
        const SafetensorsEntry *e = f->find(t.name);
        if (!e)
          problems.push_back(path + " lacks tensor \"" + t.name +
                             "\", which manifest.json places in it");
        else if (e->dtype != t.dtype || uint64_t(e->numel()) != p.count)
          problems.push_back(path + ": tensor \"" + t.name + "\" is not the " +
                             std::to_string(p.count) + " " + safetensorsDTypeName(t.dtype) +
                             " elements manifest.json says");
      }
  for (const SafetensorsEntry &e : f->entries())
    if (!listed.count(e.name))
      problems.push_back(path + " holds tensor \"" + e.name +
                         "\", which manifest.json does not list for it (was its entry "
                         "removed?)");
  return problems;
}

} // namespace

std::vector<std::string> verifyCheckpointFiles(const CheckpointManifest &manifest, int first,
                                               int stride) {
  std::vector<std::string> problems;
  for (size_t i = size_t(first); i < manifest.files.size(); i += size_t(std::max(1, stride))) {
    std::vector<std::string> found = verifyFile(manifest, manifest.files[i]);
    problems.insert(problems.end(), found.begin(), found.end());
  }
  return problems;
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

namespace {

/// Where consolidation takes a tensor from, and the type it writes it in.
struct ConsolidatedTensor {
  const CheckpointTensor *saved;  ///< named and shaped as this one
  const CheckpointTensor *source; ///< read from: itself, or its fp32 master
  DType dtype;                    ///< written as
};

/// Elements [first, last) of `t` read from its source and converted to its
/// dtype into `out` (f32, f16, bf16 convert; other types are copied).
Status readConverted(CheckpointReader &reader, const ConsolidatedTensor &t, uint64_t first,
                     uint64_t last, std::vector<char> &raw, std::vector<char> &out) {
  const DType from = t.source->dtype;
  raw.resize(size_t((last - first) * dtypeSize(from)));
  ZRT_RETURN_IF_ERROR(reader.read(*t.source, first, last, raw.data()));
  if (from == t.dtype) {
    out.swap(raw);
    return Status::ok();
  }
  out.resize(size_t((last - first) * dtypeSize(t.dtype)));
  for (uint64_t i = 0; i < last - first; ++i) {
    float v = 0;
    uint16_t h = 0;
    if (from == DType::F32) {
      std::memcpy(&v, raw.data() + 4 * i, 4);
    } else {
      std::memcpy(&h, raw.data() + 2 * i, 2);
      v = from == DType::BF16 ? math::bfloat16ToFloat(h) : math::halfToFloat(h);
    }
    if (t.dtype == DType::F32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      h = t.dtype == DType::BF16 ? math::floatToBfloat16(v) : math::floatToHalf(v);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return Status::ok();
}

} // namespace

Status consolidateCheckpoint(const CheckpointManifest &manifest, const std::string &kind,
                             const std::string &out, std::optional<DType> dtype,
                             uint64_t chunkBytes) {
  if (dtype && *dtype != DType::F32 && *dtype != DType::F16 && *dtype != DType::BF16)
    return Status::error("consolidate: --dtype must be fp32, fp16 or bf16");
  CheckpointReader reader(manifest);
  // The model's tensors come from their fp32 masters where mixed-precision
  // training kept some (NAME.master), as zero-run --save writes them.
  std::vector<ConsolidatedTensor> plan;
  for (const CheckpointTensor &t : manifest.tensors) {
    if (t.kind != kind)
      continue;
    ConsolidatedTensor c{&t, &t, t.dtype};
    const bool floating = t.dtype == DType::F32 || t.dtype == DType::F16 ||
                          t.dtype == DType::BF16;
    if (kind == "model" && floating) {
      const CheckpointTensor *m = manifest.find(t.name + ".master");
      if (m && m->kind == "optimizer" && m->dtype == DType::F32 && m->numel() == t.numel())
        c = {&t, m, DType::F32};
      if (dtype)
        c.dtype = *dtype;
    }
    plan.push_back(c);
  }
  std::vector<char> raw, converted;
  // Calls `use` on each chunk of `t` as written; false when `use` fails (a
  // write error, errno set) or a read fails (then `failure` says why).
  Status failure = Status::ok();
  auto forEachChunk = [&](const ConsolidatedTensor &t,
                          const std::function<bool(const std::vector<char> &)> &use) {
    const uint64_t elem = std::max(dtypeSize(t.dtype), dtypeSize(t.source->dtype));
    const uint64_t step = std::max<uint64_t>(1, chunkBytes / elem);
    for (uint64_t b = 0; b < t.saved->numel(); b += step) {
      uint64_t e = std::min(t.saved->numel(), b + step);
      if (Status s = readConverted(reader, t, b, e, raw, converted); !s.isOk()) {
        failure = s;
        return false;
      }
      if (!use(converted))
        return false;
    }
    return true;
  };
  // Each whole tensor's checksum goes into the file's metadata, as zero-run
  // --save writes it (so the file checks itself wherever it is loaded): one
  // pass over the pieces before the header is written.
  std::map<std::string, std::string> metadata;
  for (const ConsolidatedTensor &t : plan) {
    Xxh3Stream hash;
    if (!forEachChunk(t, [&](const std::vector<char> &bytes) {
          hash.update(bytes.data(), bytes.size());
          return true;
        }))
      return failure;
    metadata[tensorChecksumKey(t.saved->name)] = checksumHex(hash.digest());
  }
  std::vector<StreamedTensor> tensors;
  for (const ConsolidatedTensor &t : plan)
    tensors.push_back({t.saved->name, t.dtype, t.saved->shape, [&, tp = &t](TensorSink &sink) {
                         return forEachChunk(*tp, [&](const std::vector<char> &bytes) {
                           return sink.write(bytes.data(), bytes.size());
                         });
                       }});
  Status written = writeSafetensorsStreamed(out, tensors, nullptr, metadata);
  if (!failure.isOk())
    return failure;
  return written;
}

} // namespace zrt
