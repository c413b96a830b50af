//===- Registry.cpp - The CPU kernel table --------------------------------===//
//
// registerCpuKernels (declared in zrt/Kernel.h) fills a KernelTable with every
// CPU kernel; each kernel family registers its own names, see docs/kernels.md
// for the list and the normalised attributes each kernel reads.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "kernels/KernelSupport.h"
#include "zrt/CpuBackend.h"

namespace zrt {

void registerCpuKernels(KernelTable &table) {
  cpu::registerBinaryKernels(table);
  cpu::registerUnaryKernels(table);
  cpu::registerMatMulKernels(table);
  cpu::registerReduceKernels(table);
  cpu::registerNormalizationKernels(table);
  cpu::registerShapeKernels(table);
  cpu::registerIndexingKernels(table);
  cpu::registerLossKernels(table);
  cpu::registerOptimizerKernels(table);
  cpu::registerQuantizeKernels(table);
  cpu::registerConvKernels(table);
  cpu::registerPoolKernels(table);
  cpu::registerResizeKernels(table);
  cpu::registerSelectionKernels(table);
  cpu::registerFusedKernels(table);
}

std::vector<std::string> cpuKernelNames() {
  KernelTable table;
  registerCpuKernels(table);
  return table.names();
}

} // namespace zrt
