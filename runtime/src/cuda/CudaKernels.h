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

#include <cstdint>
#include <initializer_list>

namespace zrt {
namespace cuda {

/// The CUDA stream of the launch running on this host thread (set by the
/// CUDA backend's stream around each kernel call), or null outside one.
cudaStream_t launchStream();

/// "what: <CUDA error string>" when `err` is an error, else ok.
Status check(cudaError_t err, const char *what);

/// Whether cuBLAS takes these sizes (its dims are ints).
bool fitsBlas(std::initializer_list<int64_t> sizes);

/// Row-major C[m,n] = alpha * op(A) op(B) + beta * C (f32 or f64) through
/// cuBLAS on the current launch's stream, for `batch` products whose
/// operands lie `stride*` elements apart (0: shared); A and B are packed
/// (leading dimension their row length). Sizes must fit (fitsBlas).
template <typename T>
Status blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                T alpha, const T *a, const T *b, T beta, T *c, int64_t batch,
                int64_t strideA, int64_t strideB, int64_t strideC);

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
void registerCudaMatMulKernels(KernelTable &table);    // MatMulKernels.cu
void registerCudaSpatialKernels(KernelTable &table);   // SpatialKernels.cu
void registerCudaSelectionKernels(KernelTable &table); // SelectionKernels.cu
void registerCudaFusedKernels(KernelTable &table);     // FusedKernels.cu
/// Puts every kernel of `table` behind a trampoline that runs it on f32
/// copies of its f16/bf16 operands (HalfWidening.cu).
void widenHalfCudaKernels(KernelTable &table);

} // namespace cuda
} // namespace zrt

#endif // ZRT_CUDA_CUDAKERNELS_H
