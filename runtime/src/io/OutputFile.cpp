//===- OutputFile.cpp - Files written whole or not at all -----------------===//
//
// See zrt/OutputFile.h. One temporary at a time is registered for removal by
// the SIGINT/SIGTERM handler (rank 0 writes its outputs one after another).
//
//===----------------------------------------------------------------------===//

#include "zrt/OutputFile.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace zrt {
namespace {

/// The temporary being written, for the signal handler to remove.
char pendingPath[PATH_MAX + 64];
std::atomic<bool> pending{false};

void removePendingAndReraise(int sig) {
  if (pending.load())
    ::unlink(pendingPath);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

/// Installs the removal handler for the duration of one write.
class PendingTemporary {
public:
  explicit PendingTemporary(const std::string &path) {
    std::strncpy(pendingPath, path.c_str(), sizeof(pendingPath) - 1);
    pending.store(true);
    struct sigaction sa {};
    sa.sa_handler = removePendingAndReraise;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oldInt_);
    sigaction(SIGTERM, &sa, &oldTerm_);
  }
  ~PendingTemporary() {
    sigaction(SIGINT, &oldInt_, nullptr);
    sigaction(SIGTERM, &oldTerm_, nullptr);
    pending.store(false);
  }

private:
  struct sigaction oldInt_ {}, oldTerm_ {};
};

} // namespace

bool writeAllToFd(int fd, const void *data, uint64_t bytes) {
  auto *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, size_t(std::min<uint64_t>(bytes, 1u << 30)));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return false;
    }
    p += n;
    bytes -= uint64_t(n);
  }
  return true;
}

Status writeFileAtomically(const std::string &path,
                           const std::function<bool(int fd)> &write) {
  std::string target = path;
  char real[PATH_MAX];
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
      ::realpath(path.c_str(), real))
    target = real;
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return Status::error(path + ": cannot write: it is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    // A device or a FIFO: write through, never replace it.
    int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return Status::error(path + ": cannot write: " + std::strerror(errno));
    bool ok = write(fd);
    int err = errno;
    ::close(fd);
    if (!ok)
      return Status::error(path + ": write failed: " + std::strerror(err));
    return Status::ok();
  }
  size_t slash = target.rfind('/');
  std::string dir = slash == std::string::npos ? "." : target.substr(0, slash + 1);
  std::string name = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string tmp = (slash == std::string::npos ? std::string() : dir) + "." +
                    name + "-XXXXXX.tmp";
  std::vector<char> buf(tmp.begin(), tmp.end());
  buf.push_back('\0');
  int fd = ::mkstemps(buf.data(), 4);
  if (fd < 0)
    return Status::error(path + ": cannot create: " + std::strerror(errno) +
                         " (does the directory exist and is it writable?)");
  tmp.assign(buf.data());
  PendingTemporary guard(tmp);
  ::fchmod(fd, 0644 & ~[] {
    mode_t m = ::umask(0);
    ::umask(m);
    return m;
  }());
  bool ok = write(fd);
  int err = errno;
  // Durable before it replaces the old file (a crash after the rename must
  // not leave an empty file under the name).
  if (ok && ::fsync(fd) != 0 && errno != EINVAL) {
    ok = false;
    err = errno;
  }
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  // Fault injection for the tests: die the hardest way (no cleanup is
  // possible) with the bytes written but not yet renamed into place.
  if (const char *fault = std::getenv("ZRT_FAULT_KILL_BEFORE_RENAME"))
    if (*fault && target.size() >= std::strlen(fault) &&
        target.compare(target.size() - std::strlen(fault), std::string::npos,
                       fault) == 0)
      ::raise(SIGKILL);
  if (ok && ::rename(tmp.c_str(), target.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status::error(path + ": write failed: " + std::strerror(err) +
                         "; nothing was written under that name");
  }
  return Status::ok();
}

bool isSameFile(const std::string &a, const std::string &b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

} // namespace zrt
