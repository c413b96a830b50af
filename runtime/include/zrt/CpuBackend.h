//===- CpuBackend.h - The CPU backend ------------------------------*- C++ -*-===//
//
// Library zrt_cpu: host memory, a thread per stream, the CPU kernel table.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CPUBACKEND_H
#define ZRT_CPUBACKEND_H

#include "zrt/Backend.h"
#include "zrt/Kernel.h"
#include "zrt/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace zrt {

/// The CPU backend: arenas are page-aligned host memory, kernels run on the
/// calling stream thread and split loops over a pool of `numThreads` threads
/// (shared by all streams; OpenBLAS is set to the same count).
std::unique_ptr<Backend> createCpuBackend(int numThreads);

/// The instruction set the CPU backend's products run ("avx512bf16",
/// "avx512", "avx2" or "generic"): the CPU's best, lowered by the environment
/// variable ZRT_CPU_ISA. Within one ISA a product's bits never depend on the layout
/// (threads, ranks, micro-batches); between ISAs they may differ.
const char *cpuKernelIsa();

/// An error when ZRT_CPU_ISA names no ISA, or one this CPU cannot run.
Status checkCpuKernelIsa();

/// Adds every CPU kernel to `table` (runtime/src/cpu/kernels).
void registerCpuKernels(KernelTable &table);

/// The op names of the CPU kernel table, sorted.
std::vector<std::string> cpuKernelNames();

} // namespace zrt

#endif // ZRT_CPUBACKEND_H
