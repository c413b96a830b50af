//===- ZeroCkpt.cpp - zero-ckpt: checkpoint tools -------------------------===//
//
//   zero-ckpt consolidate DIR -o model.safetensors [--optimizer opt.safetensors]
//
// DIR is a zero-run --save-dir (its newest checkpoint, DIR/latest) or one
// checkpoint directory. The ranks' pieces of every trained parameter (and,
// with --optimizer, of the optimizer state) are streamed into one
// safetensors file under the ONNX initializer names, a bounded chunk at a
// time: the peak memory does not grow with the model.
//
//===----------------------------------------------------------------------===//

#include "zrt/Checkpoint.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

const char *kUsage =
    "usage: zero-ckpt consolidate DIR -o MODEL.safetensors [--optimizer OPT.safetensors]\n"
    "  DIR: a zero-run --save-dir (its newest checkpoint) or one checkpoint directory\n"
    "  -o FILE            the trained parameters, whole, under their initializer names\n"
    "  --optimizer FILE   the optimizer state and counters, whole\n";

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

int main(int argc, char **argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc < 2 || std::strcmp(argv[1], "consolidate") != 0)
    return fail(std::string(argc < 2 ? "no command" : "unknown command '" +
                                                           std::string(argv[1]) + "'") +
                    "\n" + kUsage,
                2);
  std::string dir, model, optimizer;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-o" || a == "--optimizer") && i + 1 < argc)
      (a == "-o" ? model : optimizer) = argv[++i];
    else if (!a.empty() && a[0] == '-')
      return fail("unknown or incomplete option " + a + "\n" + kUsage, 2);
    else if (dir.empty())
      dir = a;
    else
      return fail("unexpected argument " + a + "\n" + kUsage, 2);
  }
  if (dir.empty() || model.empty())
    return fail("consolidate needs DIR and -o FILE\n" + std::string(kUsage), 2);
  zrt::Expected<std::string> path = zrt::resolveCheckpoint(dir);
  if (!path)
    return fail(path.status().message());
  zrt::Expected<zrt::CheckpointManifest> manifest = zrt::readCheckpointManifest(*path);
  if (!manifest)
    return fail(manifest.status().message());
  zrt::Status s = zrt::consolidateCheckpoint(*manifest, "model", model);
  if (!s.isOk())
    return fail(s.message());
  if (!optimizer.empty()) {
    s = zrt::consolidateCheckpoint(*manifest, "optimizer", optimizer);
    if (!s.isOk())
      return fail(s.message());
  }
  std::printf("%s: step %lld, %zu tensors (saved by %d rank(s)) -> %s%s%s; peak RSS %ld KiB\n",
              path->c_str(), (long long)manifest->step, manifest->tensors.size(),
              manifest->worldSize, model.c_str(), optimizer.empty() ? "" : ", ",
              optimizer.c_str(), peakRssKiB());
  return 0;
}
