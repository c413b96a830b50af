//===- ZeroCkpt.cpp - zero-ckpt: checkpoint tools -------------------------===//
//
//   zero-ckpt consolidate DIR -o model.safetensors [--optimizer opt.safetensors]
//   zero-ckpt verify DIR | FILE.safetensors
//
// DIR is a zero-run --save-dir (its newest checkpoint, DIR/latest) or one
// checkpoint directory. consolidate streams the ranks' pieces of every
// trained parameter (and, with --optimizer, of the optimizer state) into one
// safetensors file under the ONNX initializer names, a bounded chunk at a
// time: the peak memory does not grow with the model. Both check the
// manifest and every rank file first (sizes, checksums, the tensors each
// holds: zrt/Checkpoint.h); verify only checks, naming each damaged file
// and tensor.
//
//===----------------------------------------------------------------------===//

#include "zrt/Checkpoint.h"
#include "zrt/TensorFile.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <optional>
#include <vector>

namespace {

const char *kUsage =
    "usage: zero-ckpt consolidate DIR -o MODEL.safetensors [--optimizer OPT.safetensors]\n"
    "                             [--dtype fp32|fp16|bf16]\n"
    "       zero-ckpt verify DIR | FILE.safetensors\n"
    "  DIR: a zero-run --save-dir (its newest checkpoint) or one checkpoint directory\n"
    "  -o FILE            the trained parameters, whole, under their initializer names\n"
    "  --optimizer FILE   the optimizer state and counters, whole\n"
    "  --dtype T          the parameters in T (default: as trained; 16-bit training's\n"
    "                     fp32 masters where the checkpoint has them)\n"
    "  verify             checks the manifest and every file's size, checksum and\n"
    "                     tensors; exit status 1 names each damaged file and tensor;\n"
    "                     of a weights file, the checksums in its metadata\n";

/// This process's peak resident set (VmHWM, kB), or -1.
long peakRssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::atol(line.c_str() + 6);
  return -1;
}

int fail(const std::string &message, int code = 1) {
  std::fprintf(stderr, "zero-ckpt: error: %s\n", message.c_str());
  return code;
}

} // namespace

/// The checked manifest of the checkpoint DIR names, with its files
/// verified; the problems are printed.
zrt::Expected<zrt::CheckpointManifest> openVerified(const std::string &dir) {
  zrt::Expected<std::string> path = zrt::resolveCheckpoint(dir);
  if (!path)
    return path.status();
  zrt::Expected<zrt::CheckpointManifest> manifest = zrt::readCheckpointManifest(*path);
  if (!manifest)
    return manifest.status();
  std::vector<std::string> problems = zrt::verifyCheckpointFiles(*manifest);
  for (size_t i = 1; i < problems.size(); ++i)
    std::fprintf(stderr, "zero-ckpt: error: %s\n", problems[i].c_str());
  if (!problems.empty())
    return zrt::Status::error(problems.front() + (problems.size() > 1
                                                      ? " (and the " +
                                                            std::to_string(problems.size() - 1) +
                                                            " problem(s) above)"
                                                      : ""));
  if (manifest->formatVersion < 3)
    std::fprintf(stderr, "zero-ckpt: warning: %s was written before checkpoints carried "
                         "checksums: its structure is checked, its data cannot be\n",
                 path->c_str());
  return manifest;
}

/// verify FILE.safetensors: the checksums its writer put in its metadata.
int verifyFile(const std::string &path) {
  zrt::Expected<zrt::SafetensorsFile> file = zrt::SafetensorsFile::open(path);
  if (!file)
    return fail(file.status().message());
  if (file->numChecksums() == 0)
    return fail(path + " carries no checksums (only zero-opt --weights-out and zero-run "
                "--save / --save-optimizer files do): nothing to verify");
  zrt::Status s = file->verifyChecksums();
  if (!s.isOk())
    return fail(s.message());
  std::printf("%s: %zu tensors, %zu with checksums: every checksum matches\n", path.c_str(),
              file->entries().size(), file->numChecksums());
  return 0;
}

int verify(int argc, char **argv) {
  if (argc != 3 || argv[2][0] == '-')
    return fail("verify needs exactly one DIR\n" + std::string(kUsage), 2);
  struct stat st {};
  if (::stat(argv[2], &st) == 0 && S_ISREG(st.st_mode))
    return verifyFile(argv[2]);
  zrt::Expected<zrt::CheckpointManifest> manifest = openVerified(argv[2]);
  if (!manifest)
    return fail(manifest.status().message());
  std::printf("%s: step %lld, %zu tensors in %zu files (saved by %d rank(s)): %s\n",
              manifest->path.c_str(), (long long)manifest->step, manifest->tensors.size(),
              manifest->files.size(), manifest->worldSize,
              manifest->formatVersion >= 3 ? "every checksum matches"
                                           : "structure intact (no checksums)");
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "verify") == 0)
    return verify(argc, argv);
  if (argc < 2 || std::strcmp(argv[1], "consolidate") != 0)
    return fail(std::string(argc < 2 ? "no command" : "unknown command '" +
                                                           std::string(argv[1]) + "'") +
                    "\n" + kUsage,
                2);
  std::string dir, model, optimizer;
  std::optional<zrt::DType> dtype;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-o" || a == "--optimizer") && i + 1 < argc) {
      (a == "-o" ? model : optimizer) = argv[++i];
    } else if (a == "--dtype" && i + 1 < argc) {
      std::string t = argv[++i];
      if (t == "fp32" || t == "f32")
        dtype = zrt::DType::F32;
      else if (t == "fp16" || t == "f16")
        dtype = zrt::DType::F16;
      else if (t == "bf16")
        dtype = zrt::DType::BF16;
      else
        return fail("--dtype " + t + ": expected fp32, fp16 or bf16\n" + kUsage, 2);
    } else if (!a.empty() && a[0] == '-')
      return fail("unknown or incomplete option " + a + "\n" + kUsage, 2);
    else if (dir.empty())
      dir = a;
    else
      return fail("unexpected argument " + a + "\n" + kUsage, 2);
  }
  if (dir.empty() || model.empty())
    return fail("consolidate needs DIR and -o FILE\n" + std::string(kUsage), 2);
  zrt::Expected<zrt::CheckpointManifest> manifest = openVerified(dir);
  if (!manifest)
    return fail(manifest.status().message());
  zrt::Status s = zrt::consolidateCheckpoint(*manifest, "model", model, dtype);
  if (!s.isOk())
    return fail(s.message());
  if (!optimizer.empty()) {
    s = zrt::consolidateCheckpoint(*manifest, "optimizer", optimizer);
    if (!s.isOk())
      return fail(s.message());
  }
  std::printf("%s: step %lld, %zu tensors (saved by %d rank(s)) -> %s%s%s; peak RSS %ld KiB\n",
              manifest->path.c_str(), (long long)manifest->step, manifest->tensors.size(),
              manifest->worldSize, model.c_str(), optimizer.empty() ? "" : ", ",
              optimizer.c_str(), peakRssKiB());
  return 0;
}
