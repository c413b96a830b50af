//===- NormalizationKernels.cu - Softmax and norms on the GPU -------------===//
//
// Softmax / LogSoftmax and LayerNormalization / RMSNormalization of
// kernels/NormalizationKernels.h (the CPU kernels' checks, attributes and
// Scale/B broadcasting) with the arithmetic of math/NormMath.h:
//
// - a row along the innermost axis (Softmax with inner = 1, every
//   normalisation): one CUDA block per row; each thread reduces the elements
//   t, t + kThreads, ... in order, then a fixed binary tree in shared memory
//   combines the threads (the maximum, then the sum of exponentials; the sums
//   of d and d^2). The order depends on the row length only: deterministic.
// - Softmax over a middle axis: one thread per (outer, inner) column, the
//   CPU's column algorithm.
//
// Every input element is read before the first barrier and written after the
// last one, so in-place calls are safe.
//
//===----------------------------------------------------------------------===//

#include "kernels/NormalizationKernels.h"
#include "cuda/CudaLoops.cuh"

namespace zrt {
namespace cuda {
namespace {

/// Combines red[0, kThreads) into red[0] with a fixed tree; `combine(a, b)`
/// returns the combination. Ends with a barrier.
template <typename T, typename Combine>
__device__ T blockReduce(T *red, T value, Combine combine) {
  const int t = int(threadIdx.x);
  red[t] = value;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s)
      red[t] = combine(red[t], red[t + s]);
    __syncthreads();
  }
  const T result = red[0];
  __syncthreads(); // red is reused
  return result;
}

struct MaxCombine {
  template <typename T> __device__ T operator()(T a, T b) const {
    return b > a ? b : a;
  }
};
struct SumCombine {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

template <typename T, bool Log>
__global__ void __launch_bounds__(kThreads)
    softmaxRowKernel(int64_t rows, int64_t n, const T *in, T *out) {
  __shared__ T red[kThreads];
  const int t = int(threadIdx.x);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *x = in + row * n;
    T *y = out + row * n;
    // The row's maximum (NaNs are skipped like the CPU's maxOf, but one
    // reaches the output through the sum).
    T best = x[0];
    for (int64_t i = t; i < n; i += kThreads)
      best = x[i] > best ? x[i] : best;
    const T max = blockReduce(red, best, MaxCombine{});
    T sum = T(0);
    for (int64_t i = t; i < n; i += kThreads)
      sum += math::softmaxExp(x[i], max);
    sum = blockReduce(red, sum, SumCombine{});
    if (Log) {
      const T shift = math::logSoftmaxShift(max, sum);
      for (int64_t i = t; i < n; i += kThreads)
        y[i] = math::logSoftmaxValue(x[i], shift);
    } else {
      const T scale = math::softmaxScale(sum);
      for (int64_t i = t; i < n; i += kThreads)
        y[i] = math::softmaxValue(math::softmaxExp(x[i], max), scale);
    }
  }
}

template <typename T, bool Log>
__global__ void __launch_bounds__(kThreads)
    softmaxColumnKernel(int64_t outer, int64_t axisLen, int64_t inner,
                        const T *in, T *out) {
  const int64_t n = outer * inner;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < n;
       g += stride) {
    const int64_t o = g / inner, i = g - o * inner;
    const T *x = in + o * axisLen * inner + i;
    T *y = out + o * axisLen * inner + i;
    T max = x[0];
    for (int64_t a = 1; a < axisLen; ++a)
      max = x[a * inner] > max ? x[a * inner] : max;
    T sum = T(0);
    for (int64_t a = 0; a < axisLen; ++a)
      sum += math::softmaxExp(x[a * inner], max);
    if (Log) {
      const T shift = math::logSoftmaxShift(max, sum);
      for (int64_t a = 0; a < axisLen; ++a)
        y[a * inner] = math::logSoftmaxValue(x[a * inner], shift);
    } else {
      const T scale = math::softmaxScale(sum);
      for (int64_t a = 0; a < axisLen; ++a)
        y[a * inner] =
            math::softmaxValue(math::softmaxExp(x[a * inner], max), scale);
    }
  }
}

template <typename T, bool RMS>
__global__ void __launch_bounds__(kThreads)
    normalizeKernel(int64_t rows, int64_t cols, const T *in, T *out, const T *w,
                    const T *b, T epsilon, kernels::norm::Statistic meanOut,
                    kernels::norm::Statistic invStdOut) {
  __shared__ T red[kThreads];
  const int t = int(threadIdx.x);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *x = in + row * cols;
    T *y = out + row * cols;
    // Sums of d and d^2 for d = x - shift, the first element as the shift
    // (as the CPU's one-pass moments).
    const T shift = RMS || cols == 0 ? T(0) : x[0];
    T sum = T(0), squares = T(0);
    for (int64_t c = t; c < cols; c += kThreads) {
      const T d = x[c] - shift;
      sum += d;
      squares += d * d;
    }
    sum = blockReduce(red, sum, SumCombine{});
    squares = blockReduce(red, squares, SumCombine{});
    T mean, invStd;
    math::normStatistics<T, RMS>(sum, squares, cols, shift, epsilon, mean,
                                 invStd);
    for (int64_t c = t; c < cols; c += kThreads)
      y[c] = b ? math::normValueBias(x[c], mean, invStd, w[c], b[c])
               : math::normValue(x[c], mean, invStd, w[c]);
    if (t == 0) {
      if (meanOut.data)
        math::storeStatistic(meanOut.data, meanOut.isF64, row, double(mean));
      if (invStdOut.data)
        math::storeStatistic(invStdOut.data, invStdOut.isF64, row,
                             double(invStd));
    }
  }
}

/// The CUDA loops of norm::softmaxKernel and norm::normalizationKernel.
struct CudaNormLoops : CudaLoops {
  template <typename T, bool Log>
  static Status softmax(const KernelContext &, const kernels::AxisSplit &split,
                        const T *src, T *dst) {
    const char *op = Log ? "LogSoftmax" : "Softmax";
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    if (split.outer <= 0 || split.axis <= 0 || split.inner <= 0)
      return Status::ok();
    if (split.inner == 1)
      softmaxRowKernel<T, Log><<<gridFor(split.outer), kThreads, 0, stream>>>(
          split.outer, split.axis, src, dst);
    else
      softmaxColumnKernel<T, Log>
          <<<blocksFor(split.outer * split.inner), kThreads, 0, stream>>>(
              split.outer, split.axis, split.inner, src, dst);
    return launched(op);
  }

  template <typename T>
  static Status allocateRow(int64_t count, kernels::norm::RowParameter<T> &result) {
    ZRT_RETURN_IF_ERROR(allocate(uint64_t(count) * sizeof(T), result.storage));
    result.data = static_cast<const T *>(result.storage.get());
    return Status::ok();
  }

  template <typename T, bool RMS>
  static Status normalize(const KernelContext &, int64_t rows, int64_t cols,
                          const T *src, T *dst, const T *w, const T *b,
                          T epsilon, kernels::norm::Statistic mean,
                          kernels::norm::Statistic invStdDev) {
    const char *op = RMS ? "RMSNormalization" : "LayerNormalization";
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    if (rows <= 0)
      return Status::ok();
    normalizeKernel<T, RMS><<<gridFor(rows), kThreads, 0, stream>>>(
        rows, cols, src, dst, w, b, epsilon, mean, invStdDev);
    return launched(op);
  }
};

} // namespace

void registerCudaNormalizationKernels(KernelTable &table) {
  kernels::norm::addNormalizationKernels<CudaNormLoops>(table);
}

} // namespace cuda
} // namespace zrt
