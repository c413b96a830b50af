//===- QuantizeKernels.h - CUDA Quantize / Dequantize launchers -*- C++ -*-===//
//
// The launchers of cuda/QuantizeKernels.cu, called by CudaBackend.cpp after
// it has checked the operands with the CPU kernel's host code
// (kernels/QuantizeLayout.h). Pointers are device memory; everything is
// enqueued on `stream` and nothing waits for it.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_QUANTIZEKERNELS_H
#define ZRT_CUDA_QUANTIZEKERNELS_H

#include "math/QuantizeMath.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace zrt {
namespace cuda {

/// x [chunks·m] -> data [chunks·D], scales [chunks·B]. Sets *firstBad to the
/// lowest index of a non-finite element of x, or to chunks·m when there is
/// none (the blocks holding one get no bytes).
cudaError_t launchQuantize(const qmath::Layout &l, const float *x,
                           uint8_t *data, float *scales,
                           unsigned long long *firstBad, cudaStream_t stream);

/// data [chunks·D], scales [chunks·B] -> y [chunks·m].
cudaError_t launchDequantize(const qmath::Layout &l, const uint8_t *data,
                             const float *scales, float *y,
                             cudaStream_t stream);

} // namespace cuda
} // namespace zrt

#endif // ZRT_CUDA_QUANTIZEKERNELS_H
