//===- IndexingKernels.cu - Gathers on the GPU ----------------------------===//
//
// Gather, GatherND, GatherElements, ScatterElements and ScatterND of
// kernels/IndexingKernels.h (the CPU kernels' operand and index checks:
// the indices are copied to the host, which waits for the stream, and
// checked and normalised there exactly as on the CPU). The host turns them
// into one offset per row, uploaded to stream-ordered scratch. Gathers: one
// thread per output element copies data[offset[row] + j]. Scatters: one
// thread per column applies the rows in index order (deterministic, the
// CPU's order for duplicates; ScatterElements' rows are single elements, so
// it runs on one thread).
//
//===----------------------------------------------------------------------===//

#include "kernels/IndexingKernels.h"
#include "cuda/CudaLoops.cuh"

namespace zrt {
namespace cuda {
namespace {

template <typename U>
__global__ void __launch_bounds__(kThreads)
    gatherRowsKernel(const int64_t *offsets, int64_t rows, int64_t rowLen,
                     const U *src, U *dst) {
  const int64_t n = rows * rowLen;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < n;
       g += stride) {
    const int64_t t = g / rowLen, j = g - t * rowLen;
    dst[g] = src[offsets[t] + j];
  }
}

/// Scatter: one thread per column j of the rows, applying every row's
/// update to that column in row (index) order, so duplicate destinations
/// combine in the CPU's order. A row length of 1 (ScatterElements) is one
/// thread.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    scatterRowsKernel(const int64_t *offsets, int64_t rows, int64_t rowLen,
                      const T *src, T *dst, math::ScatterReduction reduction) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < rowLen;
       j += stride)
    for (int64_t t = 0; t < rows; ++t)
      math::scatterInto(dst[offsets[t] + j], src[t * rowLen + j], reduction);
}

/// Uploads host offsets to stream-ordered scratch.
Status uploadOffsets(cudaStream_t stream, const std::vector<int64_t> &offsets,
                     std::shared_ptr<void> &scratch) {
  ZRT_RETURN_IF_ERROR(
      CudaLoops::allocate(offsets.size() * sizeof(int64_t), scratch));
  if (offsets.empty())
    return Status::ok();
  // From pageable memory: returns once `offsets` has been staged.
  return check(cudaMemcpyAsync(scratch.get(), offsets.data(),
                               offsets.size() * sizeof(int64_t),
                               cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync");
}

/// The CUDA loops of the gathers and scatters of IndexingKernels.h.
struct CudaIndexingLoops : CudaLoops {
  /// The indices copied to the host, then read as the CPU reads them.
  static Status readIndices(const char *op, const TensorRef &indices,
                            std::vector<int64_t> &values) {
    if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
      return kernels::indexing::readIndices(op, indices, values); // the error
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    std::vector<uint8_t> host(size_t(indices.bytes()));
    if (!host.empty()) {
      ZRT_RETURN_IF_ERROR(
          check(cudaMemcpyAsync(host.data(), indices.data, host.size(),
                                cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync"));
      ZRT_RETURN_IF_ERROR(
          check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
    }
    TensorRef onHost = indices;
    onHost.data = host.data();
    return kernels::indexing::readIndices(op, onHost, values);
  }

  static Status gatherRows(const KernelContext &,
                           const std::vector<int64_t> &offsets, int64_t rowLen,
                           const TensorRef &data, const TensorRef &y) {
    const char *op = "gather";
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    const int64_t rows = int64_t(offsets.size());
    if (rows == 0 || rowLen <= 0)
      return Status::ok();
    std::shared_ptr<void> scratch;
    ZRT_RETURN_IF_ERROR(uploadOffsets(stream, offsets, scratch));
    kernels::dispatchBySize(dtypeSize(data.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      gatherRowsKernel<<<blocksFor(rows * rowLen), kThreads, 0, stream>>>(
          static_cast<const int64_t *>(scratch.get()), rows, rowLen,
          data.as<U>(), y.as<U>());
    });
    return launched(op);
  }

  static Status gather(const KernelContext &ctx, const kernels::AxisSplit &split,
                       const std::vector<int64_t> &index, const TensorRef &data,
                       const TensorRef &y) {
    const int64_t count = int64_t(index.size());
    std::vector<int64_t> offsets(size_t(split.outer * count));
    for (int64_t t = 0; t < split.outer * count; ++t) {
      const int64_t o = t / count, i = t % count;
      offsets[size_t(t)] = (o * split.axis + index[size_t(i)]) * split.inner;
    }
    return gatherRows(ctx, offsets, split.inner, data, y);
  }

  static Status gatherElements(const KernelContext &ctx,
                               const std::vector<int64_t> &indexShape,
                               const std::vector<int64_t> &strides,
                               int64_t axis, const std::vector<int64_t> &index,
                               const TensorRef &data, const TensorRef &y) {
    std::vector<int64_t> offsets(index.size());
    for (size_t k = 0; k < index.size(); ++k)
      offsets[k] = kernels::indexing::offsetWithoutAxis(indexShape, strides,
                                                    size_t(axis), int64_t(k)) +
                   index[k] * strides[size_t(axis)];
    return gatherRows(ctx, offsets, 1, data, y);
  }

  template <typename T>
  static Status scatterRows(const KernelContext &,
                            const std::vector<int64_t> &offsets, int64_t rowLen,
                            const TensorRef &updates, const TensorRef &out,
                            math::ScatterReduction reduction) {
    const char *op = "scatter";
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    const int64_t rows = int64_t(offsets.size());
    if (rows == 0 || rowLen <= 0)
      return Status::ok();
    std::shared_ptr<void> scratch;
    ZRT_RETURN_IF_ERROR(uploadOffsets(stream, offsets, scratch));
    scatterRowsKernel<T><<<blocksFor(rowLen), kThreads, 0, stream>>>(
        static_cast<const int64_t *>(scratch.get()), rows, rowLen,
        updates.as<T>(), out.as<T>(), reduction);
    return launched(op);
  }

  template <typename T>
  static Status scatterElements(const KernelContext &ctx,
                                const std::vector<int64_t> &indexShape,
                                const std::vector<int64_t> &strides,
                                int64_t axis, const std::vector<int64_t> &index,
                                const TensorRef &updates, const TensorRef &out,
                                math::ScatterReduction reduction) {
    std::vector<int64_t> offsets(index.size());
    for (size_t k = 0; k < index.size(); ++k)
      offsets[k] = kernels::indexing::offsetWithoutAxis(indexShape, strides,
                                                    size_t(axis), int64_t(k)) +
                   index[k] * strides[size_t(axis)];
    return scatterRows<T>(ctx, offsets, 1, updates, out, reduction);
  }
};

} // namespace

void registerCudaIndexingKernels(KernelTable &table) {
  kernels::indexing::addIndexingKernels<CudaIndexingLoops>(table);
}

} // namespace cuda
} // namespace zrt
