//===- KernelTablesTest.cpp - The CPU and CUDA kernel tables agree --------===//
//
// zrt-kernel-tables: builds both kernel tables (no GPU needed) and fails,
// naming them, when an op of the CPU table is missing from the CUDA one (or
// the other way round). With --list it prints every op with the CUDA
// backend's implementation: "gpu" (a CUDA kernel) or "staged" (the CPU
// kernel on host copies). `--drop OP` leaves OP out of the CUDA table first
// (the self-test of the failure message). Only built with ZRT_ENABLE_CUDA;
// run by ctest.
//
//===----------------------------------------------------------------------===//

#include "zrt/Kernel.h"
#include "zrt/CpuBackend.h"
#include "zrt/CudaBackend.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  bool list = false;
  std::string drop;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--list") == 0)
      list = true;
    else if (std::strcmp(argv[i], "--drop") == 0 && i + 1 < argc)
      drop = argv[++i];
  }
  const std::vector<std::string> cpu = zrt::cpuKernelNames();
  std::vector<std::string> cuda = zrt::cudaKernelNames();
  cuda.erase(std::remove(cuda.begin(), cuda.end(), drop), cuda.end());
  const std::vector<std::string> stagedList = zrt::cudaStagedKernelNames();
  const std::set<std::string> cpuSet(cpu.begin(), cpu.end());
  const std::set<std::string> cudaSet(cuda.begin(), cuda.end());
  const std::set<std::string> staged(stagedList.begin(), stagedList.end());
  int failures = 0;
  for (const std::string &op : cpu)
    if (!cudaSet.count(op)) {
      std::printf("FAIL: %s is a CPU kernel but not a CUDA kernel\n",
                  op.c_str());
      ++failures;
    }
  for (const std::string &op : cuda)
    if (!cpuSet.count(op)) {
      std::printf("FAIL: %s is a CUDA kernel but not a CPU kernel\n",
                  op.c_str());
      ++failures;
    }
  for (const std::string &op : staged)
    if (!cudaSet.count(op)) {
      std::printf("FAIL: staged kernel %s is not in the CUDA table\n",
                  op.c_str());
      ++failures;
    }
  if (list)
    for (const std::string &op : cpu)
      std::printf("%-28s cpu  cuda:%s\n", op.c_str(),
                  !cudaSet.count(op) ? "missing"
                  : staged.count(op) ? "staged"
                                     : "gpu");
  std::printf("%zu CPU kernels, %zu CUDA kernels (%zu on the GPU, %zu "
              "staged), %d missing\n",
              cpu.size(), cuda.size(), cuda.size() - staged.size(),
              staged.size(), failures);
  return failures == 0 ? 0 : 1;
}
