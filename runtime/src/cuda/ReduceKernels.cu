//===- ReduceKernels.cu - Reduce* kernels on the GPU ----------------------===//
//
// The Reduce* kernels, ArgMax / ArgMin and CumSum of
// kernels/ReduceKernels.h (the CPU kernels' checks and reduction layout)
// with the math of math/ReduceMath.h. Reductions run in a fixed order chosen
// from the shapes only (deterministic; no atomics):
//
// - innermost run reduced ("scalar mode"): one CUDA block per output
//   element; thread t accumulates elements t, t + kThreads, ... of the
//   flattened reduced space in order, then the block merges the kThreads
//   partial accumulators with a fixed binary tree in shared memory;
// - innermost run kept ("vector mode"): one thread per output element,
//   accumulating the reduced combinations in row-major order.
// ArgMax / ArgMin and CumSum: one thread per column of the [outer, axis,
// inner] view, in axis order (the CPU's order, so the same results).
//
//===----------------------------------------------------------------------===//

#include "kernels/ReduceKernels.h"
#include "cuda/CudaLoops.cuh"

namespace zrt {
namespace cuda {
namespace {

/// The layout of kernels::ReductionLayout, by value.
struct DeviceReduction {
  int keptRank = 0, reducedRank = 0;
  int64_t keptDims[kMaxDims] = {}, keptStrides[kMaxDims] = {};
  int64_t reducedDims[kMaxDims] = {}, reducedStrides[kMaxDims] = {};
  int64_t numOffsets = 1; ///< product of reducedDims
  int64_t inner = 1;
  int64_t outerCount = 1;
  int64_t count = 1;

  /// Input offset of output row o (multi-index over keptDims).
  ZRT_HD int64_t keptOffset(int64_t o) const {
    int64_t off = 0;
    for (int d = keptRank - 1; d >= 0; --d) {
      off += (o % keptDims[d]) * keptStrides[d];
      o /= keptDims[d];
    }
    return off;
  }
  /// Offset of the r-th combination of the non-innermost reduced dims.
  ZRT_HD int64_t reducedOffset(int64_t r) const {
    int64_t off = 0;
    for (int d = reducedRank - 1; d >= 0; --d) {
      off += (r % reducedDims[d]) * reducedStrides[d];
      r /= reducedDims[d];
    }
    return off;
  }
};

Status toDevice(const char *op, const kernels::ReductionLayout &l,
                DeviceReduction &d) {
  if (l.keptDims.size() > size_t(kMaxDims) ||
      l.reducedDims.size() > size_t(kMaxDims))
    return Status::error(std::string(op) +
                         ": too many alternating kept and reduced dims for "
                         "the CUDA kernel");
  d.keptRank = int(l.keptDims.size());
  d.reducedRank = int(l.reducedDims.size());
  for (int i = 0; i < d.keptRank; ++i) {
    d.keptDims[i] = l.keptDims[size_t(i)];
    d.keptStrides[i] = l.keptStrides[size_t(i)];
  }
  for (int i = 0; i < d.reducedRank; ++i) {
    d.reducedDims[i] = l.reducedDims[size_t(i)];
    d.reducedStrides[i] = l.reducedStrides[size_t(i)];
  }
  d.numOffsets = int64_t(l.reducedOffsets.size());
  d.inner = l.inner;
  d.outerCount = l.outerCount;
  d.count = l.count;
  return Status::ok();
}

template <typename R, typename T>
__global__ void __launch_bounds__(kThreads)
    reduceScalarKernel(DeviceReduction l, const T *in, T *out) {
  using Acc = typename R::Acc;
  __shared__ Acc partial[kThreads];
  const int t = int(threadIdx.x);
  const int64_t total = l.numOffsets * l.inner;
  for (int64_t o = blockIdx.x; o < l.outerCount; o += gridDim.x) {
    const int64_t base = l.keptOffset(o);
    Acc acc = R::init();
    for (int64_t e = t; e < total; e += kThreads) {
      const int64_t r = e / l.inner, within = e - r * l.inner;
      R::add(acc, in[base + l.reducedOffset(r) + within]);
    }
    partial[t] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (t < s)
        R::merge(partial[t], partial[t + s]);
      __syncthreads();
    }
    if (t == 0)
      out[o] = R::finish(partial[0], l.count);
    __syncthreads(); // partial is reused by the next output
  }
}

template <typename R, typename T>
__global__ void __launch_bounds__(kThreads)
    reduceVectorKernel(DeviceReduction l, const T *in, T *out) {
  using Acc = typename R::Acc;
  const int64_t n = l.outerCount * l.inner;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < n;
       g += stride) {
    const int64_t o = g / l.inner, v = g - o * l.inner;
    const T *src = in + l.keptOffset(o) + v;
    Acc acc = R::init();
    for (int64_t r = 0; r < l.numOffsets; ++r)
      R::add(acc, src[l.reducedOffset(r)]);
    out[g] = R::finish(acc, l.count);
  }
}

/// ArgMax / ArgMin: one thread per (outer, inner) column, scanning the axis
/// in order as the CPU does.
template <typename T, bool IsMax>
__global__ void __launch_bounds__(kThreads)
    argExtremumKernel(int64_t outer, int64_t axisLen, int64_t inner, bool last,
                      const T *in, int64_t *out) {
  const int64_t n = outer * inner;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < n;
       g += stride) {
    const int64_t o = g / inner, i = g - o * inner;
    const T *x = in + o * axisLen * inner + i;
    T best = x[0];
    int64_t index = 0;
    for (int64_t a = 1; a < axisLen; ++a)
      if (math::argBetter<T, IsMax>(x[a * inner], best, last)) {
        best = x[a * inner];
        index = a;
      }
    out[g] = index;
  }
}

/// CumSum: one thread per (outer, inner) column, in axis order.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    cumSumKernel(int64_t outer, int64_t axisLen, int64_t inner, bool exclusive,
                 bool reverse, const T *in, T *out) {
  const int64_t n = outer * inner;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < n;
       g += stride) {
    const int64_t o = g / inner, i = g - o * inner;
    const int64_t base = o * axisLen * inner + i;
    T acc = T(0);
    for (int64_t step = 0; step < axisLen; ++step) {
      const int64_t a = reverse ? axisLen - 1 - step : step;
      const T x = in[base + a * inner]; // read before writing (in-place safe)
      out[base + a * inner] = math::cumSumStep(acc, x, exclusive);
    }
  }
}

/// The CUDA loops of the kernels of ReduceKernels.h.
struct CudaReduceLoops {
  template <typename R, typename T>
  static Status reduce(const KernelContext &,
                       const kernels::ReductionLayout &layout, const T *in,
                       T *out) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("Reduce", stream));
    DeviceReduction l;
    ZRT_RETURN_IF_ERROR(toDevice("Reduce", layout, l));
    if (layout.innerKept) {
      const int64_t n = l.outerCount * l.inner;
      if (n > 0)
        reduceVectorKernel<R>
            <<<blocksFor(n), kThreads, 0, stream>>>(l, in, out);
    } else if (l.outerCount > 0) {
      reduceScalarKernel<R>
          <<<gridFor(l.outerCount), kThreads, 0, stream>>>(l, in, out);
    }
    return launched("Reduce");
  }

  template <typename T, bool IsMax>
  static Status argExtremum(const KernelContext &, const kernels::AxisSplit &split,
                            bool last, const TensorRef &x, const TensorRef &y) {
    const char *op = IsMax ? "ArgMax" : "ArgMin";
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    const int64_t n = split.outer * split.inner;
    if (n <= 0 || split.axis <= 0)
      return Status::ok();
    argExtremumKernel<T, IsMax><<<blocksFor(n), kThreads, 0, stream>>>(
        split.outer, split.axis, split.inner, last, x.as<T>(), y.as<int64_t>());
    return launched(op);
  }

  template <typename T>
  static Status cumSum(const KernelContext &, const kernels::AxisSplit &split,
                       bool exclusive, bool reverse, const TensorRef &x,
                       const TensorRef &y) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("CumSum", stream));
    const int64_t n = split.outer * split.inner;
    if (n <= 0)
      return Status::ok();
    cumSumKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
        split.outer, split.axis, split.inner, exclusive, reverse, x.as<T>(),
        y.as<T>());
    return launched("CumSum");
  }
};

} // namespace

void registerCudaReduceKernels(KernelTable &table) {
  kernels::reduce::addReduceKernels<CudaReduceLoops>(table);
}

} // namespace cuda
} // namespace zrt
