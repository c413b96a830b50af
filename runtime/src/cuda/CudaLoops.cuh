//===- CudaLoops.cuh - The CUDA side of the shared kernels ------*- CUDA
//-*-===//
//
// cuda::CudaLoops: the CUDA implementation of the Loops policy that the
// shared kernel templates (kernels/ElementwiseKernels.h, ...) run their
// inner loops with; kernels::CpuLoops (cpu/kernels/CpuLoops.h) is the CPU one.
// Only launch geometry lives here: the per-element math is the same functor
// on both backends. Everything is enqueued on the CUDA stream of the current
// launch (cuda::launchStream(), set by the CUDA backend's stream around each
// kernel call); nothing waits for it except read(), which copies one element
// of operand data to the host for the kernels whose checks need it.
//
// Every loop is elementwise (one thread per output element, grid-stride), so
// its results do not depend on the launch geometry.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_CUDALOOPS_CUH
#define ZRT_CUDA_CUDALOOPS_CUH

#include "kernels/KernelSupport.h"
#include "cuda/CudaKernels.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

namespace zrt {
namespace cuda {

/// Threads per block of every elementwise launch (a power of two: the
/// reductions' trees).
constexpr int kThreads = 256;
/// Blocks beyond this are covered by grid-stride loops.
constexpr int64_t kMaxBlocks = 1 << 20;
/// Dims of a broadcast plan a kernel takes by value.
constexpr int kMaxDims = 8;

inline unsigned blocksFor(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return unsigned(blocks < kMaxBlocks ? (blocks > 0 ? blocks : 1) : kMaxBlocks);
}
inline unsigned gridFor(int64_t units) {
  return unsigned(units < kMaxBlocks ? (units > 0 ? units : 1) : kMaxBlocks);
}

/// The stream of the current launch, or an error naming the caller.
inline Status streamFor(const char *what, cudaStream_t &stream) {
  stream = launchStream();
  if (!stream)
    return Status::error(std::string(what) +
                         ": called outside a CUDA stream launch");
  return Status::ok();
}

/// "what: kernel launch: <CUDA error>" after a launch.
inline Status launched(const char *what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess)
    return Status::ok();
  return Status::error(std::string(what) +
                       ": kernel launch: " + cudaGetErrorString(err));
}

/// A broadcast plan with N inputs, by value.
template <int N> struct DevicePlan {
  int rank = 0;
  int64_t numel = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  /// The offsets into each input of output element o.
  ZRT_HD void offsets(int64_t o, int64_t (&off)[N]) const {
    for (int i = 0; i < N; ++i)
      off[i] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t index = o % dims[d];
      o /= dims[d];
      for (int i = 0; i < N; ++i)
        off[i] += index * strides[i][d];
    }
  }
};

template <int N>
Status toDevicePlan(const char *op, const kernels::BroadcastPlan &plan,
                    DevicePlan<N> &out) {
  if (plan.dims.size() > size_t(kMaxDims))
    return Status::error(std::string(op) + ": broadcasting over " +
                         std::to_string(plan.dims.size()) +
                         " collapsed dims (the CUDA kernels take at most " +
                         std::to_string(kMaxDims) + ")");
  out.rank = int(plan.dims.size());
  out.numel = plan.numel;
  for (size_t d = 0; d < plan.dims.size(); ++d) {
    out.dims[d] = plan.dims[d];
    for (int i = 0; i < N; ++i)
      out.strides[i][d] = plan.strides[size_t(i)][d];
  }
  return Status::ok();
}

template <typename Op, typename T, typename TO>
__global__ void __launch_bounds__(kThreads)
    mapKernel(Op op, const T *in, TO *out, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    out[i] = op(in[i]);
}

template <typename Op, typename TA, typename TB, typename TO>
__global__ void __launch_bounds__(kThreads)
    broadcast2Kernel(DevicePlan<2> plan, Op op, const TA *a, const TB *b,
                     TO *out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       o < plan.numel; o += stride) {
    int64_t off[2];
    plan.offsets(o, off);
    out[o] = op(a[off[0]], b[off[1]]);
  }
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    whereKernel(DevicePlan<3> plan, const uint8_t *cond, const U *x, const U *y,
                U *out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       o < plan.numel; o += stride) {
    int64_t off[3];
    plan.offsets(o, off);
    out[o] = cond[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    broadcastCopyKernel(DevicePlan<1> plan, const U *in, U *out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       o < plan.numel; o += stride) {
    int64_t off[1];
    plan.offsets(o, off);
    out[o] = in[off[0]];
  }
}

template <typename Body>
__global__ void __launch_bounds__(kThreads)
    forEachKernel(Body body, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    body(i);
}

struct CudaLoops {
  /// Operand data is device memory: kernels read it through read().
  static constexpr bool kHostData = false;

  template <typename Op, typename T, typename TO>
  static Status map(const KernelContext &, int64_t, const Op &op, const T *in,
                    TO *out, int64_t n) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("elementwise kernel", stream));
    if (n <= 0)
      return Status::ok();
    mapKernel<<<blocksFor(n), kThreads, 0, stream>>>(op, in, out, n);
    return launched("elementwise kernel");
  }

  template <typename TA, typename TB, typename TO, typename Op>
  static Status broadcast2(const KernelContext &,
                           const kernels::BroadcastPlan &plan, const Op &op,
                           const TA *pa, const TB *pb, TO *po) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("broadcast kernel", stream));
    DevicePlan<2> p;
    ZRT_RETURN_IF_ERROR(toDevicePlan("broadcast kernel", plan, p));
    if (p.numel <= 0)
      return Status::ok();
    broadcast2Kernel<<<blocksFor(p.numel), kThreads, 0, stream>>>(p, op, pa, pb,
                                                                  po);
    return launched("broadcast kernel");
  }

  template <typename U>
  static Status where(const KernelContext &, const kernels::BroadcastPlan &plan,
                      const uint8_t *cond, const U *px, const U *py, U *po) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("Where", stream));
    DevicePlan<3> p;
    ZRT_RETURN_IF_ERROR(toDevicePlan("Where", plan, p));
    if (p.numel <= 0)
      return Status::ok();
    whereKernel<<<blocksFor(p.numel), kThreads, 0, stream>>>(p, cond, px, py,
                                                             po);
    return launched("Where");
  }

  template <typename Body>
  static Status forEach(const KernelContext &, int64_t n, int64_t,
                        const Body &body) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("elementwise kernel", stream));
    if (n <= 0)
      return Status::ok();
    forEachKernel<<<blocksFor(n), kThreads, 0, stream>>>(body, n);
    return launched("elementwise kernel");
  }

  /// `in` broadcast to `out`'s shape (same element size), with the checks
  /// of the CPU's kernels::broadcastCopy.
  static Status broadcastCopy(const KernelContext &, const char *op,
                              const TensorRef &in, const TensorRef &out) {
    kernels::BroadcastPlan plan;
    ZRT_RETURN_IF_ERROR(kernels::planBroadcastCopy(op, in, out, plan));
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    DevicePlan<1> p;
    ZRT_RETURN_IF_ERROR(toDevicePlan(op, plan, p));
    if (p.numel <= 0)
      return Status::ok();
    kernels::dispatchBySize(dtypeSize(out.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      broadcastCopyKernel<<<blocksFor(p.numel), kThreads, 0, stream>>>(
          p, in.as<U>(), out.as<U>());
    });
    return launched(op);
  }

  static Status copy(void *dst, const void *src, uint64_t bytes) {
    if (dst == src || bytes == 0)
      return Status::ok();
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("copy", stream));
    // The direction from the pointers: either may be a host arena's.
    return check(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDefault, stream),
                 "cudaMemcpyAsync");
  }

  static Status fill(void *dst, uint8_t byte, uint64_t bytes) {
    if (bytes == 0)
      return Status::ok();
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("fill", stream));
    return check(cudaMemsetAsync(dst, byte, size_t(bytes), stream),
                 "cudaMemsetAsync");
  }

  /// One element of device memory to the host; waits for the stream (the
  /// element may be written by earlier work on it).
  template <typename T> static Status read(const T *src, T &value) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("read", stream));
    ZRT_RETURN_IF_ERROR(check(
        cudaMemcpyAsync(&value, src, sizeof(T), cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync"));
    return check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  /// One element from the host to device memory, in stream order (the value
  /// is staged before the call returns).
  template <typename T> static Status write(T *dst, T value) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("write", stream));
    return check(
        cudaMemcpyAsync(dst, &value, sizeof(T), cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync");
  }

  /// Stream-ordered device scratch, freed on the stream when the last owner
  /// lets go (after the kernels enqueued so far).
  static Status allocate(uint64_t bytes, std::shared_ptr<void> &storage) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor("scratch", stream));
    void *p = nullptr;
    ZRT_RETURN_IF_ERROR(
        check(cudaMallocAsync(&p, size_t(bytes ? bytes : 1), stream),
              "cudaMallocAsync"));
    storage = std::shared_ptr<void>(
        p, [stream](void *q) { cudaFreeAsync(q, stream); });
    return Status::ok();
  }
};

} // namespace cuda
} // namespace zrt

#endif // ZRT_CUDA_CUDALOOPS_CUH
