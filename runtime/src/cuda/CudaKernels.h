//===- CudaKernels.h - The CUDA kernel table --------------------*- C++ -*-===//
//
// The kernels of the CUDA backend: the families whose host code is shared
// with the CPU kernels and whose loops run on the GPU (cuda/*.cu), and the
// registration of the whole table (CudaBackend.cpp), which needs no GPU.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_CUDAKERNELS_H
#define ZRT_CUDA_CUDAKERNELS_H

#include "zrt/Kernel.h"

#include <cuda_runtime_api.h>

namespace zrt {
namespace cuda {

/// The CUDA stream of the launch running on this host thread (set by the
/// CUDA backend's stream around each kernel call), or null outside one.
cudaStream_t launchStream();

/// "what: <CUDA error string>" when `err` is an error, else ok.
Status check(cudaError_t err, const char *what);

// The GPU kernel families (each adds the names it implements).
void registerCudaElementwiseKernels(
    KernelTable &table);                            // ElementwiseKernels.cu
void registerCudaReduceKernels(KernelTable &table); // ReduceKernels.cu
void registerCudaNormalizationKernels(
    KernelTable &table); // NormalizationKernels.cu
void registerCudaOptimizerKernels(KernelTable &table); // OptimizerKernels.cu
void registerCudaShapeKernels(KernelTable &table);     // ShapeKernels.cu
void registerCudaIndexingKernels(KernelTable &table);  // IndexingKernels.cu
void registerCudaLossKernels(KernelTable &table);      // LossKernels.cu

} // namespace cuda
} // namespace zrt

#endif // ZRT_CUDA_CUDAKERNELS_H
