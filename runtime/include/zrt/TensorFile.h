//===- TensorFile.h - safetensors and .npy files ----------------*- C++ -*-===//
//
// Readers and writers for the tensor files zero-run exchanges with users:
// safetensors for weights, inputs and outputs (an 8-byte little-endian header
// length, a JSON header of name -> dtype/shape/data_offsets, then raw bytes), and
// NumPy .npy (v1-v3, little-endian, C order) for inputs. The safetensors reader
// only parses the header on open and reads byte ranges on demand with pread, so a
// rank can read just its shard of a large weights file.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TENSORFILE_H
#define ZRT_TENSORFILE_H

#include "zrt/Status.h"
#include "zrt/Tensor.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace zrt {

class Xxh3Stream;
struct StreamedTensor;

/// The safetensors dtype string of `t` ("F32", "BF16", "BOOL", ...).
const char *safetensorsDTypeName(DType t);
/// The DType for a safetensors dtype string; an error for others.
Expected<DType> parseSafetensorsDType(const std::string &name);

/// One tensor of a safetensors file.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t fileOffset = 0; ///< absolute offset of the first byte in the file
  uint64_t bytes = 0;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

/// An open safetensors file: the parsed header and a descriptor for reads.
class SafetensorsFile {
public:
  /// Opens `path` and checks its header: valid JSON, known dtypes, data
  /// offsets matching dtype and shape and lying inside the file.
  static Expected<SafetensorsFile> open(const std::string &path);
  SafetensorsFile(SafetensorsFile &&other) noexcept;
  SafetensorsFile &operator=(SafetensorsFile &&other) noexcept;
  ~SafetensorsFile();

  const std::string &path() const { return path_; }
  /// Tensors in file order.
  const std::vector<SafetensorsEntry> &entries() const { return entries_; }
  /// The tensor called `name`, or null.
  const SafetensorsEntry *find(const std::string &name) const;
  /// Reads `bytes` bytes of `entry` starting `byteOffset` bytes into it.
  Status read(const SafetensorsEntry &entry, uint64_t byteOffset,
              uint64_t bytes, void *dst) const;
  /// Total bytes read() has read so far.
  uint64_t bytesRead() const { return bytesRead_->load(); }
  /// The header's "__metadata__" strings.
  const std::map<std::string, std::string> &metadata() const { return metadata_; }
  /// How many tensors have a checksum in the metadata ("xxh3.NAME": 16 hex
  /// digits, as writeSafetensorsWithChecksums and zero-opt --weights-out
  /// write them).
  size_t numChecksums() const;
  /// Reads the tensors with index `first` modulo `stride` (all by default)
  /// that have a checksum and compares: an error names the file and the
  /// damaged tensor.
  Status verifyChecksums(size_t first = 0, size_t stride = 1) const;

private:
  SafetensorsFile() = default;
  std::string path_;
  int fd_ = -1;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
  std::unique_ptr<std::atomic<uint64_t>> bytesRead_;
};

/// A tensor to write: name, type, shape and `numel * dtypeSize` bytes at data.
struct NamedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// What a safetensors file was written with, as the bytes streamed out: its
/// size, the XXH3-64 of all of its bytes, and of each tensor's data bytes (in
/// the order given).
struct SafetensorsDigest {
  uint64_t fileBytes = 0;
  uint64_t fileXxh3 = 0;
  std::vector<uint64_t> tensorXxh3;
};

/// Writes `tensors` to a safetensors file at `path`, in the given order
/// (atomically: zrt/OutputFile.h); `digest`, when given, receives its
/// checksums, computed while writing.
Status writeSafetensors(const std::string &path,
                        const std::vector<NamedTensor> &tensors,
                        SafetensorsDigest *digest = nullptr);

/// Where a streamed tensor's bytes go: the file, through the checksums.
class TensorSink {
public:
  /// Appends `bytes` bytes; false on a write error (errno says which).
  bool write(const void *data, uint64_t bytes);

private:
  friend Status writeSafetensorsStreamed(const std::string &,
                                         const std::vector<StreamedTensor> &,
                                         SafetensorsDigest *,
                                         const std::map<std::string, std::string> &);
  TensorSink(int fd, Xxh3Stream *file) : fd_(fd), file_(file) {}
  int fd_;
  Xxh3Stream *file_, *tensor_ = nullptr;
  uint64_t written_ = 0;
};

/// A tensor written by a callback: `write` puts exactly numel * dtypeSize
/// bytes into the sink (so a tensor can be streamed in pieces).
struct StreamedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::function<bool(TensorSink &)> write;
};

/// The bytes a safetensors file of `tensors` starts with: the 8-byte header
/// length and the JSON header, padded to 8 bytes.
std::string safetensorsPrefix(const std::vector<StreamedTensor> &tensors,
                              const std::map<std::string, std::string> &metadata = {});

/// Writes a safetensors file whose tensors' bytes come from their callbacks,
/// in the given order (atomically, as writeSafetensors, with `digest` too).
Status writeSafetensorsStreamed(const std::string &path,
                                const std::vector<StreamedTensor> &tensors,
                                SafetensorsDigest *digest = nullptr,
                                const std::map<std::string, std::string> &metadata = {});

/// "xxh3.NAME": the metadata key of tensor NAME's checksum.
std::string tensorChecksumKey(const std::string &tensor);

/// Writes `tensors` as writeSafetensors does, with each tensor's XXH3-64 in
/// the header's metadata ("xxh3.NAME"), so that whoever reads the file later
/// (zero-run --weights, zero-ckpt verify) can check it. zero-run's --save and
/// --save-optimizer files are written so.
Status writeSafetensorsWithChecksums(const std::string &path,
                                     const std::vector<NamedTensor> &tensors);

/// A whole .npy array in memory.
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// Reads a .npy file (format 1.0, 2.0 or 3.0; little-endian or byte-sized
/// dtypes f2/f4/f8/i1/i4/i8/u1/b1; C order).
Expected<NpyArray> readNpy(const std::string &path);

/// Writes a .npy file (format 1.0).
Status writeNpy(const std::string &path, DType dtype,
                const std::vector<int64_t> &shape, const void *data);

} // namespace zrt

#endif // ZRT_TENSORFILE_H
