//===- Checksum.h - XXH3 checksums of files and byte streams ---*- C++ -*-===//
//
// The checksums the checkpoints carry (Checkpoint.h): XXH3-64 (Debian's
// libxxhash, used header-only, so no binary depends on it), computed as the
// bytes stream out to a file and verified by re-reading. Written as 16
// lowercase hex digits.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CHECKSUM_H
#define ZRT_CHECKSUM_H

#include "zrt/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace zrt {

/// XXH3-64 of a byte stream fed in pieces: equal to xxh3() of the pieces
/// concatenated.
class Xxh3Stream {
public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(Xxh3Stream &&) noexcept;
  Xxh3Stream &operator=(Xxh3Stream &&) noexcept;
  void update(const void *data, size_t bytes);
  uint64_t digest() const;

private:
  struct State;
  std::unique_ptr<State> state_;
};

/// XXH3-64 of `bytes` bytes at `data`.
uint64_t xxh3(const void *data, size_t bytes);

/// "0123456789abcdef": 16 lowercase hex digits.
std::string checksumHex(uint64_t value);
/// The value of 16 hex digits; nothing for any other text.
std::optional<uint64_t> parseChecksumHex(const std::string &text);

/// XXH3-64 of bytes [offset, offset + bytes) of the open file `fd` (named
/// `path` in errors), read in bounded chunks.
Expected<uint64_t> xxh3OfFileRange(int fd, uint64_t offset, uint64_t bytes,
                                   const std::string &path);

} // namespace zrt

#endif // ZRT_CHECKSUM_H
