//===- Safetensors.cpp - Reading and writing safetensors files ------------===//
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of JSON
// mapping tensor names to {dtype, shape, data_offsets: [begin, end)} (offsets from
// the end of the header; an optional "__metadata__" entry of strings), then the
// data. open() parses and checks the whole header up front, so that later reads,
// done with pread on byte ranges, cannot run past the file.
//
//===----------------------------------------------------------------------===//

#include "zrt/TensorFile.h"
#include "zrt/Checksum.h"
#include "zrt/OutputFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace zrt {

namespace {
struct DTypeName {
  DType dtype;
  const char *name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::F32, "F32"}, {DType::F16, "F16"}, {DType::BF16, "BF16"},
    {DType::F64, "F64"}, {DType::I8, "I8"},   {DType::U8, "U8"},
    {DType::I32, "I32"}, {DType::I64, "I64"}, {DType::Bool, "BOOL"},
};
} // namespace

const char *safetensorsDTypeName(DType t) {
  for (const DTypeName &d : kDTypeNames)
    if (d.dtype == t)
      return d.name;
  return "?";
}

Expected<DType> parseSafetensorsDType(const std::string &name) {
  for (const DTypeName &d : kDTypeNames)
    if (name == d.name)
      return d.dtype;
  return Status::error("unsupported dtype \"" + name +
                       "\" (supported: F32 F16 BF16 F64 I64 I32 I8 U8 BOOL)");
}

SafetensorsFile::SafetensorsFile(SafetensorsFile &&other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_),
      entries_(std::move(other.entries_)), metadata_(std::move(other.metadata_)),
      bytesRead_(std::move(other.bytesRead_)) {
  other.fd_ = -1;
}

SafetensorsFile &SafetensorsFile::operator=(SafetensorsFile &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    entries_ = std::move(other.entries_);
    metadata_ = std::move(other.metadata_);
    bytesRead_ = std::move(other.bytesRead_);
    other.fd_ = -1;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

/// Reads exactly `bytes` at `offset`, retrying short reads.
static Status preadAll(int fd, void *dst, uint64_t bytes, uint64_t offset,
                       const std::string &path) {
  auto *out = static_cast<char *>(dst);
  while (bytes > 0) {
    ssize_t n = ::pread(fd, out, size_t(std::min<uint64_t>(bytes, 1u << 30)),
                        off_t(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return Status::error(path + ": read failed: " + std::strerror(errno));
    if (n == 0)
      return Status::error(path + ": unexpected end of file at byte " +
                           std::to_string(offset));
    out += n;
    bytes -= uint64_t(n);
    offset += uint64_t(n);
  }
  return Status::ok();
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  SafetensorsFile file;
  file.path_ = path;
  file.bytesRead_ = std::make_unique<std::atomic<uint64_t>>(0);
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd_ < 0)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(file.fd_, &st) != 0)
    return Status::error(path + ": cannot stat: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    return Status::error(path + ": is a directory, not a safetensors file");
  uint64_t fileSize = uint64_t(st.st_size);
  const std::string bad = path + ": not a safetensors file: ";
  if (fileSize < 8)
    return Status::error(bad + "only " + std::to_string(fileSize) + " bytes");
  uint8_t lenBytes[8];
  ZRT_RETURN_IF_ERROR(preadAll(file.fd_, lenBytes, 8, 0, path));
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | lenBytes[i];
  if (headerLen > fileSize - 8 || headerLen > (uint64_t(1) << 30))
    return Status::error(bad + "header length " + std::to_string(headerLen) +
                         " exceeds the file size " + std::to_string(fileSize));
  std::string header(size_t(headerLen), '\0');
  ZRT_RETURN_IF_ERROR(preadAll(file.fd_, header.data(), headerLen, 8, path));
  nlohmann::json json = nlohmann::json::parse(header, nullptr,
                                              /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object())
    return Status::error(bad + "the header is not a JSON object");

  uint64_t dataStart = 8 + headerLen, dataSize = fileSize - dataStart;
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it.value().is_object())
        for (auto m = it.value().begin(); m != it.value().end(); ++m)
          if (m.value().is_string())
            file.metadata_[m.key()] = m.value().get<std::string>();
      continue;
    }
    const nlohmann::json &t = it.value();
    std::string where = path + ": tensor \"" + it.key() + "\": ";
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() ||
        !t.contains("shape") || !t["shape"].is_array() ||
        !t.contains("data_offsets") || !t["data_offsets"].is_array() ||
        t["data_offsets"].size() != 2)
      return Status::error(where + "header entry needs dtype, shape and "
                                   "data_offsets [begin, end]");
    SafetensorsEntry e;
    e.name = it.key();
    Expected<DType> dtype = parseSafetensorsDType(t["dtype"].get<std::string>());
    if (!dtype)
      return Status::error(where + dtype.status().message());
    e.dtype = *dtype;
    uint64_t numel = 1;
    for (const nlohmann::json &d : t["shape"]) {
      if (!d.is_number_unsigned())
        return Status::error(where + "shape entries must be non-negative integers");
      uint64_t dim = d.get<uint64_t>();
      if (dim > (uint64_t(1) << 62) ||
          __builtin_mul_overflow(numel, dim, &numel))
        return Status::error(where + "shape is too large");
      e.shape.push_back(int64_t(dim));
    }
    const nlohmann::json &off = t["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return Status::error(where + "data_offsets must be non-negative integers");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    uint64_t bytes;
    if (__builtin_mul_overflow(numel, uint64_t(dtypeSize(e.dtype)), &bytes) ||
        end < begin || end - begin != bytes)
      return Status::error(where + "data_offsets [" + std::to_string(begin) +
                           ", " + std::to_string(end) + ") do not hold " +
                           std::to_string(numel) + " " + t["dtype"].get<std::string>() +
                           " elements");
    if (end > dataSize)
      return Status::error(where + "data_offsets end " + std::to_string(end) +
                           " lies past the end of the file (" +
                           std::to_string(dataSize) +
                           " data bytes); the file is truncated");
    e.fileOffset = dataStart + begin;
    e.bytes = bytes;
    file.entries_.push_back(std::move(e));
  }
  std::sort(file.entries_.begin(), file.entries_.end(),
            [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
              return a.fileOffset < b.fileOffset;
            });
  return file;
}

const SafetensorsEntry *SafetensorsFile::find(const std::string &name) const {
  for (const SafetensorsEntry &e : entries_)
    if (e.name == name)
      return &e;
  return nullptr;
}

Status SafetensorsFile::read(const SafetensorsEntry &entry, uint64_t byteOffset,
                             uint64_t bytes, void *dst) const {
  if (byteOffset > entry.bytes || bytes > entry.bytes - byteOffset)
    return Status::error(path_ + ": tensor \"" + entry.name + "\": read of [" +
                         std::to_string(byteOffset) + ", " +
                         std::to_string(byteOffset + bytes) +
                         ") is outside its " + std::to_string(entry.bytes) +
                         " bytes");
  ZRT_RETURN_IF_ERROR(
      preadAll(fd_, dst, bytes, entry.fileOffset + byteOffset, path_));
  *bytesRead_ += bytes;
  return Status::ok();
}

bool TensorSink::write(const void *data, uint64_t bytes) {
  if (file_)
    file_->update(data, size_t(bytes));
  if (tensor_)
    tensor_->update(data, size_t(bytes));
  written_ += bytes;
  return writeAllToFd(fd_, data, bytes);
}

std::string safetensorsPrefix(const std::vector<StreamedTensor> &tensors,
                              const std::map<std::string, std::string> &metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const StreamedTensor &t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape)
      numel *= uint64_t(d);
    uint64_t bytes = numel * dtypeSize(t.dtype);
    header[t.name] = {{"dtype", safetensorsDTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the reference
  // implementation does.
  text.append((8 - (text.size() % 8)) % 8, ' ');
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i)
    prefix[size_t(i)] = char(uint8_t(uint64_t(text.size()) >> (8 * i)));
  return prefix + text;
}

Status writeSafetensorsStreamed(const std::string &path,
                                const std::vector<StreamedTensor> &tensors,
                                SafetensorsDigest *digest,
                                const std::map<std::string, std::string> &metadata) {
  const std::string prefix = safetensorsPrefix(tensors, metadata);
  std::vector<uint64_t> sizes;
  for (const StreamedTensor &t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape)
      numel *= uint64_t(d);
    sizes.push_back(numel * dtypeSize(t.dtype));
  }
  // The checksums are kept as the bytes go out: no second pass over them.
  std::optional<Xxh3Stream> fileHash;
  if (digest) {
    fileHash.emplace();
    *digest = SafetensorsDigest{};
  }
  Status written = writeFileAtomically(path, [&](int fd) {
    TensorSink sink(fd, fileHash ? &*fileHash : nullptr);
    if (!sink.write(prefix.data(), prefix.size()))
      return false;
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::optional<Xxh3Stream> tensorHash;
      if (digest)
        tensorHash.emplace();
      sink.tensor_ = tensorHash ? &*tensorHash : nullptr;
      const uint64_t before = sink.written_;
      if (!tensors[i].write(sink))
        return false;
      if (sink.written_ - before != sizes[i]) {
        errno = EIO; // a callback that wrote the wrong size: a bug, not a disk
        return false;
      }
      if (digest)
        digest->tensorXxh3.push_back(tensorHash->digest());
    }
    if (digest) {
      digest->fileBytes = sink.written_;
      digest->fileXxh3 = fileHash->digest();
    }
    return true;
  });
  return written;
}

Status writeSafetensors(const std::string &path,
                        const std::vector<NamedTensor> &tensors,
                        SafetensorsDigest *digest) {
  std::vector<StreamedTensor> streamed;
  std::vector<uint64_t> sizes;
  streamed.reserve(tensors.size());
  for (const NamedTensor &t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape)
      numel *= uint64_t(d);
    sizes.push_back(numel * dtypeSize(t.dtype));
    streamed.push_back({t.name, t.dtype, t.shape, [&t, bytes = sizes.back()](TensorSink &sink) {
                          return sink.write(t.data, bytes);
                        }});
  }
  if (!digest)
    return writeSafetensorsStreamed(path, streamed);
  // The tensors are in memory: their checksums are taken on a thread of its
  // own from the bytes being written, while the write (and its fsync) goes
  // on, so they add next to nothing to a checkpoint's time.
  const std::string prefix = safetensorsPrefix(streamed);
  SafetensorsDigest sums;
  std::thread hasher([&] {
    Xxh3Stream file;
    file.update(prefix.data(), prefix.size());
    sums.fileBytes = prefix.size();
    for (size_t i = 0; i < tensors.size(); ++i) {
      Xxh3Stream tensor;
      const char *p = static_cast<const char *>(tensors[i].data);
      for (uint64_t b = 0; b < sizes[i]; b += 1u << 16) {
        const size_t n = size_t(std::min<uint64_t>(sizes[i] - b, 1u << 16));
        tensor.update(p + b, n);
        file.update(p + b, n);
      }
      sums.tensorXxh3.push_back(tensor.digest());
      sums.fileBytes += sizes[i];
    }
    sums.fileXxh3 = file.digest();
  });
  Status written = writeSafetensorsStreamed(path, streamed);
  hasher.join();
  if (written.isOk())
    *digest = std::move(sums);
  return written;
}

std::string tensorChecksumKey(const std::string &tensor) { return "xxh3." + tensor; }

size_t SafetensorsFile::numChecksums() const {
  size_t n = 0;
  for (const SafetensorsEntry &e : entries_)
    n += metadata_.count(tensorChecksumKey(e.name));
  return n;
}

Status SafetensorsFile::verifyChecksums(size_t first, size_t stride) const {
  for (size_t i = first; i < entries_.size(); i += std::max<size_t>(1, stride)) {
    const SafetensorsEntry &e = entries_[i];
    auto it = metadata_.find(tensorChecksumKey(e.name));
    if (it == metadata_.end())
      continue;
    std::optional<uint64_t> want = parseChecksumHex(it->second);
    if (!want)
      return Status::error(path_ + ": the checksum of tensor \"" + e.name +
                           "\" in its metadata is not 16 hex digits");
    Expected<uint64_t> got = xxh3OfFileRange(fd_, e.fileOffset, e.bytes, path_);
    if (!got)
      return got.status();
    if (*got != *want)
      return Status::error(path_ + ": tensor \"" + e.name +
                           "\" does not match the checksum its writer recorded in the "
                           "file's metadata: the file is damaged");
  }
  return Status::ok();
}

Status writeSafetensorsWithChecksums(const std::string &path,
                                     const std::vector<NamedTensor> &tensors) {
  std::map<std::string, std::string> metadata;
  for (const NamedTensor &t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape)
      numel *= uint64_t(d);
    metadata[tensorChecksumKey(t.name)] =
        checksumHex(xxh3(t.data, size_t(numel * dtypeSize(t.dtype))));
  }
  std::vector<StreamedTensor> streamed;
  for (const NamedTensor &t : tensors)
    streamed.push_back({t.name, t.dtype, t.shape, [&t](TensorSink &sink) {
                          uint64_t numel = 1;
                          for (int64_t d : t.shape)
                            numel *= uint64_t(d);
                          return sink.write(t.data, numel * dtypeSize(t.dtype));
                        }});
  return writeSafetensorsStreamed(path, streamed, nullptr, metadata);
}

} // namespace zrt
