//===- OutputFile.cpp - Outputs that appear whole or not at all -----------===//
//
// See OutputFile.h. Temporaries are created by llvm::sys::fs::TempFile, which
// registers them for removal on signals and renames them into place.
//
//===----------------------------------------------------------------------===//

#include "zero/Support/OutputFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/Path.h"

using namespace zero;
namespace fs = llvm::sys::fs;

std::unique_ptr<OutputFile> OutputFile::open(llvm::StringRef path,
                                             std::string &error) {
  std::unique_ptr<OutputFile> out(new OutputFile());
  out->path_ = path.str();
  if (path == "-") {
    out->os_ = &llvm::outs();
    return out;
  }
  // Follow a symlink to what it names: the link itself stays.
  llvm::SmallString<256> target(path);
  fs::file_status linkStatus;
  if (!fs::status(path, linkStatus, /*follow=*/false) &&
      linkStatus.type() == fs::file_type::symlink_file) {
    llvm::SmallString<256> real;
    if (!fs::real_path(path, real))
      target = real;
  }
  fs::file_status status;
  const bool exists = !fs::status(target, status);
  if (exists && status.type() == fs::file_type::directory_file) {
    error = "cannot write '" + path.str() + "': it is a directory";
    return nullptr;
  }
  if (exists && status.type() != fs::file_type::regular_file) {
    // A device or a FIFO: write through, never rename over it.
    std::error_code ec;
    out->file_ = std::make_unique<llvm::raw_fd_ostream>(
        target, ec, fs::CD_OpenExisting, fs::FA_Write, fs::OF_None);
    if (ec) {
      error = "cannot write '" + path.str() + "': " + ec.message();
      return nullptr;
    }
    out->os_ = out->file_.get();
    out->target_ = std::string(target);
    return out;
  }
  llvm::StringRef dir = llvm::sys::path::parent_path(target);
  llvm::SmallString<256> model(dir.empty() ? "." : dir);
  llvm::sys::path::append(model, "." + llvm::sys::path::filename(target).str() +
                                     "-%%%%%%%%.tmp");
  llvm::Expected<fs::TempFile> temp = fs::TempFile::create(model);
  if (!temp) {
    error = "cannot write '" + path.str() +
            "': " + llvm::toString(temp.takeError()) +
            " (does the directory exist and is it writable?)";
    return nullptr;
  }
  out->temp_.emplace(std::move(*temp));
  out->file_ = std::make_unique<llvm::raw_fd_ostream>(out->temp_->FD,
                                                      /*shouldClose=*/false);
  out->os_ = out->file_.get();
  out->target_ = std::string(target);
  return out;
}

OutputFile::~OutputFile() { discard(); }

std::string OutputFile::commit() {
  if (done_)
    return "";
  done_ = true;
  os_->flush();
  if (file_ && file_->has_error()) {
    std::string msg = "writing '" + path_ + "' failed: " +
                      file_->error().message() + " (is the disk full?)";
    file_->clear_error();
    if (temp_)
      llvm::consumeError(temp_->discard());
    temp_.reset();
    return msg;
  }
  file_.reset();
  if (!temp_)
    return "";
  llvm::Error err = temp_->keep(target_);
  temp_.reset();
  if (err)
    return "cannot move the output into place at '" + path_ +
           "': " + llvm::toString(std::move(err));
  return "";
}

void OutputFile::discard() {
  if (done_)
    return;
  done_ = true;
  if (file_) {
    file_->flush();
    file_->clear_error();
    file_.reset();
  }
  if (temp_)
    llvm::consumeError(temp_->discard());
  temp_.reset();
}

bool zero::isSameFile(llvm::StringRef a, llvm::StringRef b) {
  bool same = false;
  return !fs::equivalent(a, b, same) && same;
}
