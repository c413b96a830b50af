//===- SelectionKernels.cu - TopK and OneHot on the GPU -------------------===//
//
// The CPU kernels' checks (kernels::prepareTopK, kernels::prepareOneHot:
// kernels/KernelLayouts.h) with the GPU loops:
//
// - TopK: one CUDA block per line sorts the line's indices in scratch with a
//   bitonic network (padded to a power of two; padding sorts last) under
//   math::topKBefore, a strict total order (the better value, then the lower
//   index; NaN largest), then writes the first k. A total order has one
//   sorted result, so Values and Indices are the CPU's exactly.
// - OneHot: math::OneHotFn, one thread per output element.
//
//===----------------------------------------------------------------------===//

#include "kernels/KernelLayouts.h"
#include "cuda/CudaLoops.cuh"
#include "math/SelectionMath.h"

#include <algorithm>

namespace zrt {
namespace cuda {
namespace {

/// Most bytes of TopK's index scratch per launch (at least one line).
constexpr int64_t kTopKScratchBytes = int64_t(64) << 20;

/// Lines [first, first + count) of [outer, n, inner]: block b sorts lines
/// first + b, first + b + gridDim.x, ... in order[b * padded, ...).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    topKKernel(const T *x, T *values, int64_t *indices, int64_t first,
               int64_t count, int64_t n, int64_t inner, int64_t k,
               int64_t padded, bool largest, int64_t *order) {
  int64_t *idx = order + int64_t(blockIdx.x) * padded;
  const int t = int(threadIdx.x);
  for (int64_t l = first + blockIdx.x; l < first + count; l += gridDim.x) {
    const int64_t o = l / inner, i = l % inner;
    const T *line = x + o * n * inner + i;
    for (int64_t j = t; j < padded; j += kThreads)
      idx[j] = j;
    __syncthreads();
    // before(a, b): entries before padding, padding by index.
    auto before = [&](int64_t a, int64_t b) {
      if (a >= n || b >= n)
        return a < n || (b >= n && a < b);
      return math::topKBefore(line[a * inner], a, line[b * inner], b, largest);
    };
    for (int64_t size = 2; size <= padded; size <<= 1) {
      for (int64_t stride = size >> 1; stride > 0; stride >>= 1) {
        for (int64_t j = t; j < padded; j += kThreads) {
          const int64_t partner = j ^ stride;
          if (partner <= j)
            continue;
          const int64_t a = idx[j], b = idx[partner];
          const bool ascending = (j & size) == 0;
          if (ascending ? before(b, a) : before(a, b)) {
            idx[j] = b;
            idx[partner] = a;
          }
        }
        __syncthreads();
      }
    }
    for (int64_t j = t; j < k; j += kThreads) {
      const int64_t at = (o * k + j) * inner + i;
      values[at] = line[idx[j] * inner];
      indices[at] = idx[j];
    }
    __syncthreads(); // idx is reused by the next line
  }
}

Status topK(const KernelContext &, const std::vector<TensorRef> &in,
            const std::vector<TensorRef> &out, const AttrMap &attrs) {
  kernels::TopKLayout l;
  ZRT_RETURN_IF_ERROR(kernels::prepareTopK(in, out, attrs, l));
  cudaStream_t stream;
  ZRT_RETURN_IF_ERROR(streamFor("TopK", stream));
  const int64_t lines = l.split.outer * l.split.inner, n = l.split.axis;
  if (lines == 0 || l.k == 0 || n == 0)
    return Status::ok();
  int64_t padded = 1;
  while (padded < n)
    padded <<= 1;
  const int64_t perLine = padded * int64_t(sizeof(int64_t));
  const int64_t blocks = std::max<int64_t>(
      1, std::min<int64_t>({lines, kTopKScratchBytes / perLine, kMaxBlocks}));
  std::shared_ptr<void> scratch;
  ZRT_RETURN_IF_ERROR(CudaLoops::allocate(uint64_t(blocks * perLine), scratch));
  const TensorRef &x = in[0];
  kernels::dispatchType(kernels::NumericTypes{}, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    topKKernel<T><<<unsigned(blocks), kThreads, 0, stream>>>(
        x.as<T>(), out[0].as<T>(), out[1].as<int64_t>(), 0, lines, n,
        l.split.inner, l.k, padded, l.largest,
        static_cast<int64_t *>(scratch.get()));
  });
  return launched("TopK");
}

Status oneHot(const KernelContext &ctx, const std::vector<TensorRef> &in,
              const std::vector<TensorRef> &out, const AttrMap &attrs) {
  kernels::OneHotLayout l;
  ZRT_RETURN_IF_ERROR(kernels::prepareOneHot(in, out, attrs, l));
  const TensorRef &indices = *l.indices, &values = *l.values, &y = out[0];
  const int64_t total = l.outer * l.depth * l.inner;
  if (total == 0)
    return Status::ok();
  Status status;
  kernels::dispatchType(kernels::NumericTypes{}, indices.dtype, [&](auto itag) {
    using I = typename decltype(itag)::type;
    kernels::dispatchBySize(dtypeSize(y.dtype), [&](auto vtag) {
      using U = typename decltype(vtag)::type;
      status = CudaLoops::forEach(
          ctx, total, 0,
          math::OneHotFn<I, U>{indices.as<I>(), values.as<U>(), y.as<U>(),
                               l.depth, l.inner});
    });
  });
  return status;
}

} // namespace

void registerCudaSelectionKernels(KernelTable &table) {
  table.add("TopK", topK);
  table.add("OneHot", oneHot);
}

} // namespace cuda
} // namespace zrt
