//===- FuzzProgram.cpp - libFuzzer target: the .zrt program loader --------===//
//
// Any bytes given to the loader must come back as a program that passed
// verification and validation, or as an error: never a crash, a hang or a
// sanitizer report. Built only with scripts/sanitize.sh (clang, libFuzzer,
// ASan + UBSan).
//
//===----------------------------------------------------------------------===//

#include "zrt/Kernel.h"
#include "zrt/Program.h"
#include "zrt/CpuBackend.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const zrt::KernelTable *kernels = [] {
    auto *table = new zrt::KernelTable();
    zrt::registerCpuKernels(*table);
    return table;
  }();
  zrt::Expected<zrt::Program> program =
      zrt::parseProgram(data, size, "fuzz.zrt", kernels);
  (void)program;
  return 0;
}
