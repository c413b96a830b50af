//===- ShapeKernels.cu - Data movement kernels on the GPU -----------------===//
//
// Copy, LocalShard, Expand, Transpose, Concat, Split, Slice, Fill, Tile,
// Trilu, Range and Pad of kernels/ShapeKernels.h (the CPU kernels' checks
// and collapsed layouts) on the GPU: plain and 2-D copies are stream-ordered
// cudaMemcpy* calls; Transpose, Slice, Tile and Pad one thread per output
// element gathering from its input offset (Pad's per-dim index maps come
// from the host); Fill, Trilu and Range one thread per
// element (math/ShapeMath.h).
//
//===----------------------------------------------------------------------===//

#include "kernels/ShapeKernels.h"
#include "cuda/CudaLoops.cuh"

namespace zrt {
namespace cuda {
namespace {

template <typename U>
__global__ void __launch_bounds__(kThreads)
    gatherKernel(DevicePlan<1> plan, int64_t base, const U *src, U *dst) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       o < plan.numel; o += stride) {
    int64_t off[1];
    plan.offsets(o, off);
    dst[o] = src[base + off[0]];
  }
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    fillKernel(U value, U *dst, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    dst[i] = value;
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    tileKernel(DevicePlan<1> yDims, DevicePlan<1> xDims, const U *src, U *dst) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       o < yDims.numel; o += stride) {
    int64_t rest = o, off = 0;
    for (int d = yDims.rank - 1; d >= 0; --d) {
      const int64_t index = rest % yDims.dims[d];
      rest /= yDims.dims[d];
      off += (index % xDims.dims[d]) * xDims.strides[0][d];
    }
    dst[o] = src[off];
  }
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    triluKernel(bool upper, int64_t k, int64_t rowsPerMatrix, int64_t cols,
                int64_t n, const U *src, U *dst) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < n;
       g += stride) {
    const int64_t r = g / cols, j = g - r * cols;
    int64_t begin, end;
    math::triluKept(r % rowsPerMatrix, k, cols, upper, begin, end);
    dst[g] = j >= begin && j < end ? src[g] : U(0);
  }
}

/// Pad: maps holds maps[d] (y.shape[d] entries each: the input index, or
/// -1 for the constant) one after another, starting at mapStart[d].
template <typename U>
__global__ void __launch_bounds__(kThreads)
    padKernel(DevicePlan<1> yDims, DevicePlan<1> mapStart,
              DevicePlan<1> inStrides, const int64_t *maps, U value,
              const U *src, U *dst) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       o < yDims.numel; o += stride) {
    int64_t rest = o, off = 0;
    bool constant = false;
    for (int d = yDims.rank - 1; d >= 0; --d) {
      const int64_t index = rest % yDims.dims[d];
      rest /= yDims.dims[d];
      const int64_t m = maps[mapStart.dims[d] + index];
      constant |= m < 0;
      off += m * inStrides.dims[d];
    }
    dst[o] = constant ? value : src[off];
  }
}

/// y[o] = x[base + offset(o)], o row-major over `dims`, offset(o) the dot
/// product of o's multi-index with `strides` (input elements).
Status gather(const char *op, const std::vector<int64_t> &dims,
              const std::vector<int64_t> &strides, int64_t base,
              const TensorRef &x, const TensorRef &y) {
  cudaStream_t stream;
  ZRT_RETURN_IF_ERROR(streamFor(op, stream));
  if (dims.size() > size_t(kMaxDims))
    return Status::error(std::string(op) + ": " + std::to_string(dims.size()) +
                         " dims after collapsing (the CUDA kernel takes at "
                         "most " +
                         std::to_string(kMaxDims) + ")");
  DevicePlan<1> p;
  p.rank = int(dims.size());
  p.numel = y.numel();
  for (size_t d = 0; d < dims.size(); ++d) {
    p.dims[d] = dims[d];
    p.strides[0][d] = strides[d];
  }
  if (p.numel <= 0)
    return Status::ok();
  kernels::dispatchBySize(dtypeSize(x.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    gatherKernel<<<blocksFor(p.numel), kThreads, 0, stream>>>(
        p, base, x.as<U>(), y.as<U>());
  });
  return launched(op);
}

/// The CUDA loops of the kernels of ShapeKernels.h.
struct CudaShapeLoops : CudaLoops {
  static Status copyBytes(const KernelContext &, void *dst, const void *src,
                          uint64_t bytes) {
    return copy(dst, src, bytes);
  }

  static Status transpose(const KernelContext &, std::vector<int64_t> dims,
                          std::vector<int64_t> strides, const TensorRef &x,
                          const TensorRef &y) {
    return gather("Transpose", dims, strides, 0, x, y);
  }

  template <bool ToWhole>
  static Status
  concatOrSplit(const KernelContext &, const std::vector<TensorRef> &parts,
                const TensorRef &whole, int64_t axis, int64_t outer,
                int64_t innerBytes, int64_t wholeRow,
                const std::vector<int64_t> &partOffset) {
    const char *op = ToWhole ? "Concat" : "Split";
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    char *wholeData = static_cast<char *>(whole.data);
    for (size_t i = 0; i < parts.size(); ++i) {
      const int64_t bytes = parts[i].shape[size_t(axis)] * innerBytes;
      if (bytes == 0 || outer == 0)
        continue;
      char *w = wholeData + partOffset[i];
      char *p = static_cast<char *>(parts[i].data);
      const cudaError_t err =
          ToWhole ? cudaMemcpy2DAsync(w, size_t(wholeRow), p, size_t(bytes),
                                      size_t(bytes), size_t(outer),
                                      cudaMemcpyDefault, stream)
                  : cudaMemcpy2DAsync(p, size_t(bytes), w, size_t(wholeRow),
                                      size_t(bytes), size_t(outer),
                                      cudaMemcpyDefault, stream);
      ZRT_RETURN_IF_ERROR(check(err, "cudaMemcpy2DAsync"));
    }
    return Status::ok();
  }

  static Status slice(const KernelContext &,
                      const std::vector<int64_t> &strides, int64_t base,
                      const TensorRef &x, const TensorRef &y) {
    return gather("Slice", y.shape, strides, base, x, y);
  }

  static Status tile(const KernelContext &, const TensorRef &x,
                     const TensorRef &y) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("Tile", stream));
    if (y.shape.size() > size_t(kMaxDims))
      return Status::error("Tile: rank " + std::to_string(y.shape.size()) +
                           " (the CUDA kernel takes at most " +
                           std::to_string(kMaxDims) + ")");
    DevicePlan<1> yDims, xDims;
    yDims.rank = xDims.rank = int(y.shape.size());
    yDims.numel = y.numel();
    const std::vector<int64_t> inStrides = kernels::contiguousStrides(x.shape);
    for (size_t d = 0; d < y.shape.size(); ++d) {
      yDims.dims[d] = y.shape[d];
      xDims.dims[d] = x.shape[d];
      xDims.strides[0][d] = inStrides[d];
    }
    kernels::dispatchBySize(dtypeSize(x.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      tileKernel<<<blocksFor(yDims.numel), kThreads, 0, stream>>>(
          yDims, xDims, x.as<U>(), y.as<U>());
    });
    return launched("Tile");
  }

  static Status trilu(const KernelContext &, bool upper, int64_t k,
                      int64_t rowsPerMatrix, int64_t cols, int64_t rows,
                      const TensorRef &x, const TensorRef &y) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("Trilu", stream));
    const int64_t n = rows * cols;
    if (n <= 0)
      return Status::ok();
    kernels::dispatchBySize(dtypeSize(x.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      triluKernel<<<blocksFor(n), kThreads, 0, stream>>>(
          upper, k, rowsPerMatrix, cols, n, x.as<U>(), y.as<U>());
    });
    return launched("Trilu");
  }

  static Status pad(const KernelContext &,
                    const std::vector<std::vector<int64_t>> &maps,
                    uint64_t fill, const TensorRef &x, const TensorRef &y) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("Pad", stream));
    if (y.shape.size() > size_t(kMaxDims))
      return Status::error("Pad: rank " + std::to_string(y.shape.size()) +
                           " (the CUDA kernel takes at most " +
                           std::to_string(kMaxDims) + ")");
    DevicePlan<1> yDims, mapStart, inStrides;
    yDims.rank = int(y.shape.size());
    yDims.numel = y.numel();
    const std::vector<int64_t> strides = kernels::contiguousStrides(x.shape);
    std::vector<int64_t> all;
    for (size_t d = 0; d < y.shape.size(); ++d) {
      yDims.dims[d] = y.shape[d];
      mapStart.dims[d] = int64_t(all.size());
      inStrides.dims[d] = strides[d];
      all.insert(all.end(), maps[d].begin(), maps[d].end());
    }
    std::shared_ptr<void> device;
    ZRT_RETURN_IF_ERROR(allocate(all.size() * sizeof(int64_t), device));
    // From pageable memory: returns once `all` has been staged.
    ZRT_RETURN_IF_ERROR(check(cudaMemcpyAsync(device.get(), all.data(),
                                              all.size() * sizeof(int64_t),
                                              cudaMemcpyHostToDevice, stream),
                              "cudaMemcpyAsync"));
    kernels::dispatchBySize(dtypeSize(x.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      U value;
      std::memcpy(&value, &fill, sizeof(U));
      padKernel<<<blocksFor(yDims.numel), kThreads, 0, stream>>>(
          yDims, mapStart, inStrides,
          static_cast<const int64_t *>(device.get()), value, x.as<U>(),
          y.as<U>());
    });
    return launched("Pad");
  }

  static Status fillElements(const KernelContext &, void *data, size_t es,
                             uint64_t bits, int64_t count) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("Fill", stream));
    if (count <= 0)
      return Status::ok();
    kernels::dispatchBySize(es, [&](auto tag) {
      using U = typename decltype(tag)::type;
      // The element's bytes are the low bytes of `bits` (little-endian).
      fillKernel<<<blocksFor(count), kThreads, 0, stream>>>(
          U(bits), static_cast<U *>(data), count);
    });
    return launched("Fill");
  }
};

} // namespace

void registerCudaShapeKernels(KernelTable &table) {
  kernels::shape::addShapeKernels<CudaShapeLoops>(table);
}

} // namespace cuda
} // namespace zrt
