//===- OutputFile.h - Outputs that appear whole or not at all ---*- C++ -*-===//
//
// Every file zero-opt writes (the MLIR or .zrt output, the weights) goes
// through OutputFile: bytes go to a uniquely named temporary next to the
// target, removed on failure and on SIGINT/SIGTERM, and renamed over the
// target only when every output of the run is complete. Targets that are not
// regular files (/dev/null, a FIFO) are written through in place and never
// replaced; a symlink is followed, so the link survives.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_SUPPORT_OUTPUTFILE_H
#define ZERO_SUPPORT_OUTPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>
#include <string>

namespace zero {

/// One output file of a tool run. Write through `os()`, then `commit()`; an
/// OutputFile destroyed without a commit leaves the target untouched.
class OutputFile {
public:
  /// Opens `path` for writing ("-" is standard output). Returns null and sets
  /// `error` (a sentence naming the path) when it cannot be created.
  static std::unique_ptr<OutputFile> open(llvm::StringRef path,
                                          std::string &error);
  ~OutputFile();
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;

  /// Where the bytes go.
  llvm::raw_ostream &os() { return *os_; }
  /// The name the user gave.
  llvm::StringRef path() const { return path_; }
  /// Flushes and checks every write; for a temporary, renames it over the
  /// target. Returns an error sentence, empty on success.
  std::string commit();
  /// Removes the temporary (if any) without touching the target.
  void discard();

private:
  OutputFile() = default;
  std::string path_;   ///< as given
  std::string target_; ///< the file renamed over (symlinks followed)
  std::optional<llvm::sys::fs::TempFile> temp_;
  std::unique_ptr<llvm::raw_fd_ostream> file_;
  llvm::raw_ostream *os_ = nullptr;
  bool done_ = false;
};

/// True when `a` and `b` name the same existing file (links followed).
bool isSameFile(llvm::StringRef a, llvm::StringRef b);

} // namespace zero

#endif // ZERO_SUPPORT_OUTPUTFILE_H
