//===- CudaBackend.h - The CUDA backend and NCCL -------------------*- C++ -*-===//
//
// Library zrt_cuda (built where a CUDA toolkit is, ZRT_HAVE_CUDA): cudaMalloc
// arenas, CUDA streams and events, the CUDA kernel table, NCCL collectives.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDABACKEND_H
#define ZRT_CUDABACKEND_H

#include "zrt/Backend.h"
#include "zrt/Communicator.h"
#include "zrt/Kernel.h"
#include "zrt/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace zrt {

/// The CUDA backend on `device`: cudaMalloc arenas, CUDA streams and events,
/// every kernel of the CPU table (docs/kernels.md, "CUDA backend").
Expected<std::unique_ptr<Backend>> createCudaBackend(int device);
/// The GPU a rank uses: $ZRT_CUDA_DEVICE when set (an override for every
/// rank of the host), else the launcher's local rank
/// (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID) or
/// `localRank` (the MPI_COMM_TYPE_SHARED split), modulo the number of GPUs.
/// Fails on a bad override or when there is no GPU.
Expected<int> cudaDeviceForRank(int localRank);
/// An NCCL communicator for the same world as `control`, whose unique id is
/// broadcast over `control` (MPI). NCCL is loaded with dlopen("libnccl.so.2").
/// `control` must outlive it.
Expected<std::unique_ptr<Communicator>>
createNcclCommunicator(Communicator &control, int device);

/// Adds every CUDA kernel to `table` (runtime/src/cuda; needs no GPU to
/// build the table, only to run it).
void registerCudaKernels(KernelTable &table);

/// The op names of the CUDA kernel table, sorted.
std::vector<std::string> cudaKernelNames();

/// The CUDA kernels that run the CPU kernel on host copies of their operands
/// (no GPU kernel yet), sorted; a subset of cudaKernelNames().
std::vector<std::string> cudaStagedKernelNames();

} // namespace zrt

#endif // ZRT_CUDABACKEND_H
