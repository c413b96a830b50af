//===- CudaBackend.h - Internals shared by the CUDA backend -----*- C++ -*-===//
//
// What the NCCL communicator needs from the CUDA backend: the CUDA stream behind
// an executor Stream, so collectives are enqueued in order with that stream's
// kernels. Only compiled with ZRT_ENABLE_CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_CUDABACKEND_H
#define ZRT_CUDA_CUDABACKEND_H

#include "zrt/Backend.h"

#include <cuda_runtime_api.h>

namespace zrt {
namespace cuda {

/// The CUDA stream of a stream created by the CUDA backend, or null for any
/// other Stream.
cudaStream_t streamOf(Stream *stream);

/// "what: <CUDA error string>" when `err` is an error, else ok.
Status check(cudaError_t err, const char *what);

} // namespace cuda
} // namespace zrt

#endif // ZRT_CUDA_CUDABACKEND_H
