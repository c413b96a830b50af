//===- OptimizerKernels.cu - AdamW and SGD on the GPU ---------------------===//
//
// AdamW / Adam and SGD of kernels/OptimizerKernels.h (the CPU kernels'
// checks and host-side scalars: step, lr and grad_scale are read to the host,
// which waits for the stream) with the element updates of
// math/OptimizerMath.h, one thread per element. This file is compiled with
// --fmad=false (runtime/CMakeLists.txt) so that the only fused multiply-adds
// are the std::fma calls, as on the CPU: the same bits on both backends.
// Each thread reads its element of every input before writing any output,
// so in-place updates are safe.
//
//===----------------------------------------------------------------------===//

#include "kernels/OptimizerKernels.h"
#include "cuda/CudaLoops.cuh"

namespace zrt {
namespace cuda {
namespace {

__global__ void __launch_bounds__(kThreads)
    adamKernel(math::AdamScalars s, const float *param, const float *grad,
               const float *expAvg, const float *expAvgSq, float *paramOut,
               float *expAvgOut, float *expAvgSqOut, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float p = param[i], m = expAvg[i], v = expAvgSq[i];
    math::adamElement(s, p, grad[i], m, v);
    paramOut[i] = p;
    expAvgOut[i] = m;
    expAvgSqOut[i] = v;
  }
}

__global__ void __launch_bounds__(kThreads)
    sgdKernel(math::SgdScalars s, const float *param, const float *grad,
              const float *buffer, float *paramOut, float *bufferOut,
              int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float p = param[i];
    float buf = s.hasMomentum && !s.firstStep ? buffer[i] : 0.0f;
    math::sgdElement(s, p, grad[i], buf);
    paramOut[i] = p;
    if (s.hasMomentum)
      bufferOut[i] = buf;
  }
}

/// The CUDA loops of optimizer::adamWKernel and optimizer::sgdKernel.
struct CudaOptimizerLoops : CudaLoops {
  static Status adam(const KernelContext &, const math::AdamScalars &s,
                     const float *param, const float *grad, const float *expAvg,
                     const float *expAvgSq, float *paramOut, float *expAvgOut,
                     float *expAvgSqOut, int64_t n) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("AdamW", stream));
    if (n <= 0)
      return Status::ok();
    adamKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        s, param, grad, expAvg, expAvgSq, paramOut, expAvgOut, expAvgSqOut, n);
    return launched("AdamW");
  }
  static Status sgd(const KernelContext &, const math::SgdScalars &s,
                    const float *param, const float *grad, const float *buffer,
                    float *paramOut, float *bufferOut, int64_t n) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("SGD", stream));
    if (n <= 0)
      return Status::ok();
    sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(s, param, grad, buffer,
                                                     paramOut, bufferOut, n);
    return launched("SGD");
  }
};

/// SwapIn / SwapOut: ZeRO-Offload's swaps of a swap-file arena, which this
/// backend does not map (Executor refuses such a program before it runs:
/// "run it with --backend cpu"); the table holds them so that both backends
/// know the same ops.
Status swapNotOnGpu(const KernelContext &, const std::vector<TensorRef> &,
                    const std::vector<TensorRef> &, const AttrMap &) {
  return Status::error("SwapIn/SwapOut: optimizer state offloaded to NVMe runs on the CPU "
                       "backend only; run with --backend cpu");
}

} // namespace

void registerCudaOptimizerKernels(KernelTable &table) {
  kernels::optimizer::addOptimizerKernels<CudaOptimizerLoops>(table);
  table.add("SwapIn", swapNotOnGpu);
  table.add("SwapOut", swapNotOnGpu);
}

} // namespace cuda
} // namespace zrt
