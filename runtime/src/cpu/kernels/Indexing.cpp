//===- Indexing.cpp - Gather and scatter kernels --------------------------===//
//
// Gather, GatherElements, GatherND, ScatterElements and ScatterND. Indices may
// be I64 or I32 and count from the end when negative; they are range-checked
// and normalised once up front so that the copy loops never read out of bounds.
// Scatters run serially so that duplicate indices behave like the ONNX
// reference (last write wins, or reductions apply in index order).
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "CpuLoops.h"
#include "kernels/IndexingKernels.h"

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

using indexing::checkElementsShapes;
using indexing::normalizeIndex;
using indexing::offsetWithoutAxis;

/// The CPU loops of the gathers of IndexingKernels.h.
struct CpuIndexingLoops : CpuLoops {
  static Status readIndices(const char *op, const TensorRef &indices,
                            std::vector<int64_t> &values) {
    return indexing::readIndices(op, indices, values);
  }

  static Status gather(const KernelContext &ctx, const AxisSplit &split,
                       const std::vector<int64_t> &index, const TensorRef &data,
                       const TensorRef &y) {
    const int64_t count = int64_t(index.size());
    dispatchBySize(dtypeSize(data.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U *src = data.as<U>();
      U *dst = y.as<U>();
      const int64_t inner = split.inner;
      parallelRange(ctx, split.outer * count, rowGrain(inner, kElementGrain),
                    [&](int64_t b, int64_t e) {
                      for (int64_t t = b; t < e; ++t) {
                        const int64_t o = t / count, i = t % count;
                        const U *s =
                            src + (o * split.axis + index[size_t(i)]) * inner;
                        U *d = dst + t * inner;
                        if (inner == 1)
                          *d = *s;
                        else
                          std::memcpy(d, s, size_t(inner) * sizeof(U));
                      }
                    });
    });
    return Status::ok();
  }

  static Status gatherRows(const KernelContext &ctx,
                           const std::vector<int64_t> &offsets, int64_t slice,
                           const TensorRef &data, const TensorRef &y) {
    dispatchBySize(dtypeSize(data.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U *src = data.as<U>();
      U *dst = y.as<U>();
      parallelRange(
          ctx, int64_t(offsets.size()), rowGrain(slice, kElementGrain),
          [&](int64_t begin, int64_t end) {
            for (int64_t t = begin; t < end; ++t)
              std::copy_n(src + offsets[size_t(t)], slice, dst + t * slice);
          });
    });
    return Status::ok();
  }

  static Status gatherElements(const KernelContext &ctx,
                               const std::vector<int64_t> &indexShape,
                               const std::vector<int64_t> &strides,
                               int64_t axis, const std::vector<int64_t> &index,
                               const TensorRef &data, const TensorRef &y) {
    dispatchBySize(dtypeSize(data.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U *src = data.as<U>();
      U *dst = y.as<U>();
      parallelRange(
          ctx, int64_t(index.size()), kElementGrain / 4,
          [&](int64_t b, int64_t e) {
            for (int64_t k = b; k < e; ++k)
              dst[k] =
                  src[offsetWithoutAxis(indexShape, strides, size_t(axis), k) +
                      index[size_t(k)] * strides[size_t(axis)]];
          });
    });
    return Status::ok();
  }

  template <typename T>
  static Status
  scatterElements(const KernelContext &, const std::vector<int64_t> &indexShape,
                  const std::vector<int64_t> &strides, int64_t axis,
                  const std::vector<int64_t> &index, const TensorRef &updates,
                  const TensorRef &out, math::ScatterReduction reduction) {
    const T *src = updates.as<T>();
    T *dst = out.as<T>();
    for (size_t k = 0; k < index.size(); ++k)
      math::scatterInto(
          dst[offsetWithoutAxis(indexShape, strides, size_t(axis), int64_t(k)) +
              index[k] * strides[size_t(axis)]],
          src[k], reduction);
    return Status::ok();
  }

  template <typename T>
  static Status scatterRows(const KernelContext &,
                            const std::vector<int64_t> &offsets, int64_t slice,
                            const TensorRef &updates, const TensorRef &out,
                            math::ScatterReduction reduction) {
    const int64_t tuples = int64_t(offsets.size());
    const T *src = updates.as<T>();
    T *dst = out.as<T>();
    for (int64_t t = 0; t < tuples; ++t)
      for (int64_t i = 0; i < slice; ++i)
        math::scatterInto(dst[offsets[size_t(t)] + i], src[t * slice + i],
                          reduction);
    return Status::ok();
  }
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

} // namespace

void registerIndexingKernels(KernelTable &table) {
  indexing::addIndexingKernels<CpuIndexingLoops>(table);
}

} // namespace cpu
} // namespace zrt
