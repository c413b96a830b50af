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
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
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

namespace {

/// Creates and removes a temporary file in `dir`; errno's message on failure.
std::string tryCreateIn(const std::string &dir) {
  std::string name = (dir.empty() ? std::string(".") : dir) + "/.zero-run-probe-XXXXXX";
  std::vector<char> buf(name.begin(), name.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0)
    return std::strerror(errno);
  ::close(fd);
  ::unlink(buf.data());
  return "";
}

std::string parentOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

Status checkCreatable(const std::string &flag, const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return Status::error(flag + " " + path + " is a directory; give a file name");
    if (!S_ISREG(st.st_mode))
      return Status::ok(); // written in place (/dev/null, a FIFO)
  }
  // A symlink's target is what gets replaced.
  std::string target = path;
  char real[PATH_MAX];
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
      ::realpath(path.c_str(), real))
    target = real;
  const std::string dir = parentOf(target);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(flag + " " + path + ": its directory " + dir +
                         " does not exist; create it first (checked before the run, so "
                         "that no work is lost)");
  std::string why = tryCreateIn(dir);
  if (!why.empty())
    return Status::error(flag + " " + path + ": cannot create files in " + dir + ": " + why +
                         " (checked before the run, so that no work is lost)");
  return Status::ok();
}

Status checkCreatableDirectory(const std::string &flag, const std::string &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(flag + " " + dir + ": cannot create the directory" +
                         (ec ? ": " + ec.message() : std::string(": a file has its name")));
  std::string why = tryCreateIn(dir);
  if (!why.empty())
    return Status::error(flag + " " + dir + ": cannot create files in it: " + why +
                         " (checked before the run, so that no work is lost)");
  return Status::ok();
}

Expected<std::unique_ptr<DirectoryLock>> DirectoryLock::acquire(const std::string &flag,
                                                                const std::string &dir) {
  const std::string path = dir + "/.zero-run.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::error(flag + " " + dir + ": cannot create its lock file " + path + ": " +
                         std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char holder[256] = {0};
    ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    std::string who = n > 0 ? std::string(holder, size_t(n)) : std::string();
    while (!who.empty() && (who.back() == '\n' || who.back() == ' '))
      who.pop_back();
    if (err != EWOULDBLOCK)
      return Status::error(flag + " " + dir + ": cannot lock " + path + ": " +
                           std::strerror(err));
    return Status::error(flag + " " + dir + " is in use by another zero-run (" +
                         (who.empty() ? std::string("holder unknown") : who) +
                         "), which holds " + path +
                         "; wait for it to finish or give another --save-dir");
  }
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  char text[512];
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  int len = std::snprintf(text, sizeof text, "host %s, pid %ld, since %s\n", host,
                          (long)::getpid(), when);
  if (::ftruncate(fd, 0) != 0 || !writeAllToFd(fd, text, uint64_t(len))) {
    ::close(fd);
    return Status::error(flag + " " + dir + ": cannot write its lock file " + path + ": " +
                         std::strerror(errno));
  }
  return std::unique_ptr<DirectoryLock>(new DirectoryLock(fd));
}

DirectoryLock::~DirectoryLock() { ::close(fd_); }

bool isSameFile(const std::string &a, const std::string &b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

} // namespace zrt
