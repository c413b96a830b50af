//===- OutputFile.h - Files written whole or not at all ---------*- C++ -*-===//
//
// zero-run's outputs (--output, --report-json, --trace) go through
// writeFileAtomically: the bytes go to a uniquely named temporary next to the
// target, removed on failure and on SIGINT/SIGTERM, and renamed over the
// target only once complete, so a full disk or a killed rank never leaves a
// truncated file under the final name. Targets that exist and are not regular
// files (/dev/null, a FIFO) are written in place and never replaced; a
// symlink is followed, so the link survives.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_OUTPUTFILE_H
#define ZRT_OUTPUTFILE_H

#include "zrt/Status.h"

#include <cstdint>
#include <functional>
#include <string>

namespace zrt {

/// Writes `bytes` bytes from `data` to `fd`, retrying short writes; false on
/// an error (errno says which).
bool writeAllToFd(int fd, const void *data, uint64_t bytes);

/// Creates `path` with the bytes `write(fd)` writes (it returns false on a
/// write error, with errno set), atomically as described above.
Status writeFileAtomically(const std::string &path,
                           const std::function<bool(int fd)> &write);

/// True when `a` and `b` name the same existing file (links followed).
bool isSameFile(const std::string &a, const std::string &b);

} // namespace zrt

#endif // ZRT_OUTPUTFILE_H
