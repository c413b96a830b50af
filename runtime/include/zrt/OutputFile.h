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
#include <memory>
#include <string>

namespace zrt {

/// Writes `bytes` bytes from `data` to `fd`, retrying short writes; false on
/// an error (errno says which).
bool writeAllToFd(int fd, const void *data, uint64_t bytes);

/// Creates `path` with the bytes `write(fd)` writes (it returns false on a
/// write error, with errno set), atomically as described above.
Status writeFileAtomically(const std::string &path,
                           const std::function<bool(int fd)> &write);

/// Checks, before any work, that an output `path` (given as `flag`) can be
/// written when its time comes: a file is created and removed beside it
/// (nothing is left behind). An existing directory, a missing or read-only
/// parent directory are errors naming `flag` and the path; an existing
/// non-regular file (/dev/null, a FIFO) is written in place and passes.
Status checkCreatable(const std::string &flag, const std::string &path);

/// Checks that `dir` (given as `flag`) is a directory files can be created
/// in, creating it (and its parents) if needed.
Status checkCreatableDirectory(const std::string &flag, const std::string &dir);

/// An advisory lock (flock) on DIR/.zero-run.lock, held until destroyed:
/// a second process asking for it fails at once, naming the holder (its
/// host, pid and start time, which the lock file records).
class DirectoryLock {
public:
  static Expected<std::unique_ptr<DirectoryLock>> acquire(const std::string &flag,
                                                          const std::string &dir);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock &) = delete;
  DirectoryLock &operator=(const DirectoryLock &) = delete;

private:
  explicit DirectoryLock(int fd) : fd_(fd) {}
  int fd_;
};

/// True when `a` and `b` name the same existing file (links followed).
bool isSameFile(const std::string &a, const std::string &b);

} // namespace zrt

#endif // ZRT_OUTPUTFILE_H
