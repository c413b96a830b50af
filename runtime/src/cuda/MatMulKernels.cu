//===- MatMulKernels.cu - MatMul and Gemm on the GPU ----------------------===//
//
// MatMul and Gemm with the CPU kernels' checks (kernels::prepareMatMul,
// kernels::prepareGemm: kernels/KernelLayouts.h):
//
// - f32 / f64 through cuBLAS (cuda::blasGemm): MatMul whenever its batch
//   dims collapse to at most one broadcast dim (equal batches, a shared A or
//   B, 1-D operands), folding A's batch into M when B is shared; Gemm
//   always (C broadcast into Y first, then beta).
// - anything else (integer dtypes, batches broadcast in several dims, empty
//   K): a direct kernel, one thread per output element accumulating over k
//   in order (integers wrap as on the CPU and get the CPU's final
//   alpha/beta step in double: the same bits).
//
//===----------------------------------------------------------------------===//

#include "kernels/KernelLayouts.h"
#include "cuda/CudaLoops.cuh"

#include <type_traits>

namespace zrt {
namespace cuda {
namespace {

/// a * b + acc in T; integers wrap (unsigned arithmetic), as the CPU's loop.
template <typename T> __device__ T multiplyAdd(T acc, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(U(acc) + U(U(a) * U(b))));
  } else {
    return T(acc + a * b);
  }
}

/// The final step of one output element: the CPU's integer path (alpha and
/// beta in double), or alpha * acc + beta * c for floats.
template <typename T>
__device__ T finish(T acc, double alpha, double beta, const T *c) {
  if constexpr (std::is_integral_v<T>) {
    const double v =
        alpha * double(acc) + (beta == 0 ? 0.0 : beta * double(*c));
    return math::fromDoubleNum<T>(v);
  } else {
    T v = alpha == 1.0 ? acc : T(T(alpha) * acc);
    if (beta != 0)
      v = T(v + T(beta) * *c);
    return v;
  }
}

/// MatMul: output element e of [batch, m, n]; the batch plan gives the
/// matrices of A and B.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    matMulDirectKernel(DevicePlan<2> plan, int64_t m, int64_t n, int64_t k,
                       const T *a, const T *b, T *y) {
  const int64_t total = plan.numel * m * n;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t batch = e / (m * n), r = (e / n) % m, c = e % n;
    int64_t off[2];
    plan.offsets(batch, off);
    const T *ar = a + off[0] * m * k + r * k;
    const T *bc = b + off[1] * k * n + c;
    T acc = T(0);
    for (int64_t p = 0; p < k; ++p)
      acc = multiplyAdd(acc, ar[p], bc[p * n]);
    y[e] = finish<T>(acc, 1.0, 0.0, nullptr);
  }
}

/// Gemm: output element e of [m, n]; y holds C (broadcast) when beta != 0.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    gemmDirectKernel(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                     int64_t lda, int64_t ldb, double alpha, double beta,
                     const T *a, const T *b, T *y) {
  const int64_t total = m * n;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t r = e / n, c = e % n;
    T acc = T(0);
    for (int64_t p = 0; p < k; ++p) {
      const T av = transA ? a[p * lda + r] : a[r * lda + p];
      const T bv = transB ? b[c * ldb + p] : b[p * ldb + c];
      acc = multiplyAdd(acc, av, bv);
    }
    y[e] = finish<T>(acc, alpha, beta, y + e);
  }
}

Status matMulKernel(const KernelContext &, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &) {
  kernels::MatMulLayout l;
  ZRT_RETURN_IF_ERROR(kernels::prepareMatMul(in, out, l));
  const TensorRef &a = in[0], &b = in[1], &y = out[0];
  cudaStream_t stream;
  ZRT_RETURN_IF_ERROR(streamFor("MatMul", stream));
  const int64_t m = l.m, n = l.n, k = l.k, batch = l.plan.numel;
  if (batch == 0 || m == 0 || n == 0)
    return Status::ok();
  const bool isFloat = a.dtype == DType::F32 || a.dtype == DType::F64;
  if (isFloat && k > 0 && l.plan.dims.size() <= 1) {
    // At most one collapsed batch dim: each operand's matrices are strided
    // (stride 1: one per batch index, 0: shared).
    int64_t sa = 0, sb = 0;
    if (l.plan.dims.size() == 1) {
      sa = l.plan.strides[0][0];
      sb = l.plan.strides[1][0];
    }
    int64_t mm = m, count = batch;
    if (sb == 0 && sa == 1) { // B shared: fold A's batch into M
      mm = m * batch;
      count = 1;
    }
    if (fitsBlas({mm, n, k, count})) {
      if (a.dtype == DType::F64)
        return blasGemm<double>(false, false, mm, n, k, 1.0, a.as<double>(),
                                b.as<double>(), 0.0, y.as<double>(), count,
                                sa * m * k, sb * k * n, m * n);
      return blasGemm<float>(false, false, mm, n, k, 1.0f, a.as<float>(),
                             b.as<float>(), 0.0f, y.as<float>(), count,
                             sa * m * k, sb * k * n, m * n);
    }
  }
  DevicePlan<2> plan;
  ZRT_RETURN_IF_ERROR(toDevicePlan("MatMul", l.plan, plan));
  kernels::dispatchType(kernels::NumericTypes{}, a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    matMulDirectKernel<T><<<blocksFor(batch * m * n), kThreads, 0, stream>>>(
        plan, m, n, k, a.as<T>(), b.as<T>(), y.as<T>());
  });
  return launched("MatMul");
}

Status gemmKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  kernels::GemmLayout l;
  ZRT_RETURN_IF_ERROR(kernels::prepareGemm(in, out, attrs, l));
  const TensorRef &a = in[0], &b = in[1], &y = out[0];
  cudaStream_t stream;
  ZRT_RETURN_IF_ERROR(streamFor("Gemm", stream));
  if (l.hasC)
    ZRT_RETURN_IF_ERROR(CudaLoops::broadcastCopy(ctx, "Gemm", in[2], y));
  if (l.m == 0 || l.n == 0)
    return Status::ok();
  const bool isFloat = a.dtype == DType::F32 || a.dtype == DType::F64;
  if (isFloat && l.k > 0 && fitsBlas({l.m, l.n, l.k})) {
    if (a.dtype == DType::F64)
      return blasGemm<double>(l.transA, l.transB, l.m, l.n, l.k, l.alpha,
                              a.as<double>(), b.as<double>(), l.beta,
                              y.as<double>(), 1, 0, 0, 0);
    return blasGemm<float>(l.transA, l.transB, l.m, l.n, l.k, float(l.alpha),
                           a.as<float>(), b.as<float>(), float(l.beta),
                           y.as<float>(), 1, 0, 0, 0);
  }
  kernels::dispatchType(kernels::NumericTypes{}, a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gemmDirectKernel<T><<<blocksFor(l.m * l.n), kThreads, 0, stream>>>(
        l.transA, l.transB, l.m, l.n, l.k, a.shape[1], b.shape[1], l.alpha,
        l.beta, a.as<T>(), b.as<T>(), y.as<T>());
  });
  return launched("Gemm");
}

} // namespace

void registerCudaMatMulKernels(KernelTable &table) {
  table.add("MatMul", matMulKernel);
  table.add("Gemm", gemmKernel);
}

} // namespace cuda
} // namespace zrt
