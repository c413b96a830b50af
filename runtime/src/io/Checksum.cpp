//===- Checksum.cpp - XXH3 checksums of files and byte streams ------------===//
//
// See zrt/Checksum.h. xxhash.h is compiled in (XXH_INLINE_ALL): the checksum
// code lives in this file, and the binaries need no libxxhash at run time.
//
//===----------------------------------------------------------------------===//

#include "zrt/Checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace zrt {

struct Xxh3Stream::State {
  XXH3_state_t xxh;
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) {
  XXH3_64bits_reset(&state_->xxh);
}
Xxh3Stream::~Xxh3Stream() = default;
Xxh3Stream::Xxh3Stream(Xxh3Stream &&) noexcept = default;
Xxh3Stream &Xxh3Stream::operator=(Xxh3Stream &&) noexcept = default;

void Xxh3Stream::update(const void *data, size_t bytes) {
  XXH3_64bits_update(&state_->xxh, data, bytes);
}

uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(&state_->xxh); }

uint64_t xxh3(const void *data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::string checksumHex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", (unsigned long long)value);
  return text;
}

std::optional<uint64_t> parseChecksumHex(const std::string &text) {
  if (text.size() != 16)
    return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0)
      return std::nullopt;
    value = value << 4 | uint64_t(digit);
  }
  return value;
}

Expected<uint64_t> xxh3OfFileRange(int fd, uint64_t offset, uint64_t bytes,
                                   const std::string &path) {
  Xxh3Stream hash;
  std::vector<char> chunk(size_t(std::min<uint64_t>(bytes, 4u << 20)));
  while (bytes > 0) {
    size_t want = size_t(std::min<uint64_t>(bytes, chunk.size()));
    ssize_t got = ::pread(fd, chunk.data(), want, off_t(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return Status::error(path + ": read failed at byte " + std::to_string(offset) + ": " +
                           (got == 0 ? "the file ends early" : std::strerror(errno)));
    hash.update(chunk.data(), size_t(got));
    offset += uint64_t(got);
    bytes -= uint64_t(got);
  }
  return hash.digest();
}

} // namespace zrt
