//===- ReduceKernels.cu - Reduce* kernels on the GPU ----------------------===//
//
// The Reduce* kernels, ArgMax / ArgMin and CumSum of
// kernels/ReduceKernels.h (the CPU kernels' checks and reduction layout)
// with the math of math/ReduceMath.h. Reductions run in a fixed order chosen
// from the shapes only (deterministic; no atomics):
//
// - innermost run reduced ("scalar mode"): the flattened reduced space of
//   each output element is cut into chunks of kScalarChunk elements (at most
//   kMaxChunks; their number is chosen from the shape alone). One CUDA block
//   per (output, chunk): thread t accumulates elements t, t + kThreads, ...
//   of its chunk in order, then the block merges the kThreads partial
//   accumulators with a fixed binary tree in shared memory. A second kernel
//   merges each output's chunk accumulators the same way (thread t: chunks
//   t, t + kThreads, ...; then the tree). A full reduction of a large tensor
//   (the optimizer's gradient norms) so fills the GPU instead of one SM;
// - innermost run kept ("vector mode"): one thread per (output element,
//   slice of kVectorSlice reduced combinations), accumulating its slice in
//   row-major order; where there is more than one slice, a second kernel
//   adds each output's slice accumulators in slice order. Few outputs over
//   many rows (a bias's gradient) so use more than a few hundred threads.
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

/// Elements of the reduced space one block accumulates in scalar mode, and
/// the most chunks an output's reduced space is cut into.
constexpr int64_t kScalarChunk = 8192;
constexpr int64_t kMaxChunks = 4096;
/// Reduced combinations one thread accumulates in vector mode before its
/// slice is merged, and the most slices per output.
constexpr int64_t kVectorSlice = 32;
constexpr int64_t kMaxSlices = 256;

/// The number of chunks of `total` elements, from the shape alone.
inline int64_t chunksFor(int64_t total, int64_t chunk, int64_t most) {
  const int64_t c = (total + chunk - 1) / chunk;
  return c < 1 ? 1 : (c > most ? most : c);
}

/// Merges the kThreads accumulators in `partial` with a fixed binary tree;
/// the result is partial[0]. Every thread of the block must call it.
template <typename R>
__device__ void mergeBlock(typename R::Acc *partial, int t) {
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s)
      R::merge(partial[t], partial[t + s]);
    __syncthreads();
  }
}

/// Scalar mode, pass 1 (or the only pass when `chunks` is 1): block unit u
/// = o * chunks + c accumulates chunk c of output o's reduced space. With one
/// chunk it writes the output, else the chunk's accumulator to partials[u].
template <typename R, typename T>
__global__ void __launch_bounds__(kThreads)
    reduceScalarKernel(DeviceReduction l, const T *in, int64_t chunks,
                       int64_t chunkLen, typename R::Acc *partials, T *out) {
  using Acc = typename R::Acc;
  __shared__ Acc partial[kThreads];
  const int t = int(threadIdx.x);
  const int64_t total = l.numOffsets * l.inner;
  for (int64_t u = blockIdx.x; u < l.outerCount * chunks; u += gridDim.x) {
    const int64_t o = u / chunks, c = u - o * chunks;
    const int64_t begin = c * chunkLen;
    const int64_t end = begin + chunkLen < total ? begin + chunkLen : total;
    const T *src = in + l.keptOffset(o);
    Acc acc = R::init();
    if (l.numOffsets == 1) { // one contiguous run
      for (int64_t e = begin + t; e < end; e += kThreads)
        R::add(acc, src[e]);
    } else {
      for (int64_t e = begin + t; e < end; e += kThreads) {
        const int64_t r = e / l.inner, within = e - r * l.inner;
        R::add(acc, src[l.reducedOffset(r) + within]);
      }
    }
    partial[t] = acc;
    mergeBlock<R>(partial, t);
    if (t == 0) {
      if (chunks == 1)
        out[o] = R::finish(partial[0], l.count);
      else
        partials[u] = partial[0];
    }
    __syncthreads(); // partial is reused by the next unit
  }
}

/// Scalar mode, pass 2: one block per output merges its `chunks`
/// accumulators.
template <typename R, typename T>
__global__ void __launch_bounds__(kThreads)
    mergeChunksKernel(int64_t outerCount, int64_t chunks, int64_t count,
                      const typename R::Acc *partials, T *out) {
  using Acc = typename R::Acc;
  __shared__ Acc partial[kThreads];
  const int t = int(threadIdx.x);
  for (int64_t o = blockIdx.x; o < outerCount; o += gridDim.x) {
    Acc acc = R::init();
    for (int64_t c = t; c < chunks; c += kThreads)
      R::merge(acc, partials[o * chunks + c]);
    partial[t] = acc;
    mergeBlock<R>(partial, t);
    if (t == 0)
      out[o] = R::finish(partial[0], count);
    __syncthreads();
  }
}

/// Vector mode, pass 1 (or the only pass when `slices` is 1): thread unit
/// g' = s * n + g accumulates slice s of output g's reduced combinations.
template <typename R, typename T>
__global__ void __launch_bounds__(kThreads)
    reduceVectorKernel(DeviceReduction l, const T *in, int64_t slices,
                       int64_t sliceLen, typename R::Acc *partials, T *out) {
  using Acc = typename R::Acc;
  const int64_t n = l.outerCount * l.inner;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       u < n * slices; u += stride) {
    const int64_t s = u / n, g = u - s * n;
    const int64_t o = g / l.inner, v = g - o * l.inner;
    const T *src = in + l.keptOffset(o) + v;
    const int64_t begin = s * sliceLen;
    const int64_t end =
        begin + sliceLen < l.numOffsets ? begin + sliceLen : l.numOffsets;
    Acc acc = R::init();
    for (int64_t r = begin; r < end; ++r)
      R::add(acc, src[l.reducedOffset(r)]);
    if (slices == 1)
      out[g] = R::finish(acc, l.count);
    else
      partials[u] = acc;
  }
}

/// Vector mode, pass 2: one thread per output adds its slices in order.
template <typename R, typename T>
__global__ void __launch_bounds__(kThreads)
    mergeSlicesKernel(int64_t n, int64_t slices, int64_t count,
                      const typename R::Acc *partials, T *out) {
  using Acc = typename R::Acc;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < n;
       g += stride) {
    Acc acc = partials[g];
    for (int64_t s = 1; s < slices; ++s)
      R::merge(acc, partials[s * n + g]);
    out[g] = R::finish(acc, count);
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
    using Acc = typename R::Acc;
    std::shared_ptr<void> scratch;
    if (layout.innerKept) {
      const int64_t n = l.outerCount * l.inner;
      if (n <= 0)
        return Status::ok();
      // Slices only where the outputs alone leave the GPU mostly idle.
      const int64_t slices =
          n >= (int64_t(1) << 16)
              ? 1
              : chunksFor(l.numOffsets, kVectorSlice, kMaxSlices);
      const int64_t sliceLen = (l.numOffsets + slices - 1) / slices;
      if (slices > 1)
        ZRT_RETURN_IF_ERROR(
            CudaLoops::allocate(uint64_t(n * slices) * sizeof(Acc), scratch));
      Acc *partials = static_cast<Acc *>(scratch.get());
      reduceVectorKernel<R><<<blocksFor(n * slices), kThreads, 0, stream>>>(
          l, in, slices, sliceLen, partials, out);
      if (slices > 1) {
        ZRT_RETURN_IF_ERROR(launched("Reduce"));
        mergeSlicesKernel<R><<<blocksFor(n), kThreads, 0, stream>>>(
            n, slices, l.count, partials, out);
      }
    } else if (l.outerCount > 0) {
      const int64_t total = l.numOffsets * l.inner;
      const int64_t chunks = chunksFor(total, kScalarChunk, kMaxChunks);
      const int64_t chunkLen = (total + chunks - 1) / chunks;
      if (chunks > 1)
        ZRT_RETURN_IF_ERROR(CudaLoops::allocate(
            uint64_t(l.outerCount * chunks) * sizeof(Acc), scratch));
      Acc *partials = static_cast<Acc *>(scratch.get());
      reduceScalarKernel<R>
          <<<gridFor(l.outerCount * chunks), kThreads, 0, stream>>>(
              l, in, chunks, chunkLen, partials, out);
      if (chunks > 1) {
        ZRT_RETURN_IF_ERROR(launched("Reduce"));
        mergeChunksKernel<R><<<gridFor(l.outerCount), kThreads, 0, stream>>>(
            l.outerCount, chunks, l.count, partials, out);
      }
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
