//===- LossKernels.cu - Cross-entropy losses on the GPU -------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss of
// kernels/LossKernels.h (the CPU kernels' operand, attribute and label
// checks: the labels are copied to the host, which waits for the stream,
// and checked there) with math/LossMath.h:
// - the log-sum-exp of each (n, d) over the classes: one CUDA block per row
//   when d = 1 (fixed shared-memory trees for the maximum and the sum), one
//   thread per (n, d) otherwise;
// - log_prob: one thread per element;
// - the reduction over the targets: one thread, in target order, in double,
//   as on the CPU (the target count is the token count).
//
//===----------------------------------------------------------------------===//

#include "kernels/LossKernels.h"
#include "cuda/CudaLoops.cuh"
#include "math/NormMath.h"

namespace zrt {
namespace cuda {
namespace {

/// The fixed-tree block reduction of NormalizationKernels.cu.
template <typename T, bool IsMax> __device__ T blockCombine(T *red, T value) {
  const int t = int(threadIdx.x);
  red[t] = value;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s)
      red[t] = IsMax ? (red[t + s] > red[t] ? red[t + s] : red[t])
                     : red[t] + red[t + s];
    __syncthreads();
  }
  const T result = red[0];
  __syncthreads();
  return result;
}

/// lse[n] over the c contiguous classes of row n (d = 1).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    lseRowKernel(int64_t rows, int64_t c, const T *x, T *lse) {
  __shared__ T red[kThreads];
  const int t = int(threadIdx.x);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *base = x + row * c;
    T best = c > 0 ? base[0] : T(0);
    for (int64_t k = t; k < c; k += kThreads)
      best = base[k] > best ? base[k] : best;
    const T max = blockCombine<T, true>(red, best);
    T sum = T(0);
    for (int64_t k = t; k < c; k += kThreads)
      sum += math::softmaxExp(base[k], max);
    sum = blockCombine<T, false>(red, sum);
    if (t == 0)
      lse[row] = math::logSumExpOf(max, sum);
  }
}

/// lse[n * d + j] over the classes at stride d (d > 1), one thread each.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    lseColumnKernel(int64_t n, int64_t c, int64_t d, const T *x, T *lse) {
  const int64_t total = n * d;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < total;
       g += stride) {
    const int64_t row = g / d, j = g - row * d;
    const T *base = x + row * c * d + j;
    T max = c > 0 ? base[0] : T(0);
    for (int64_t k = 1; k < c; ++k)
      max = base[k * d] > max ? base[k * d] : max;
    T sum = T(0);
    for (int64_t k = 0; k < c; ++k)
      sum += math::softmaxExp(base[k * d], max);
    lse[g] = math::logSumExpOf(max, sum);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    logProbKernel(int64_t n, int64_t c, int64_t d, const T *x, const T *lse,
                  T *lp) {
  const int64_t total = n * c * d;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < total;
       g += stride) {
    const int64_t j = g % d, row = g / (c * d);
    lp[g] = x[g] - lse[row * d + j];
  }
}

/// The target reduction, on one thread; logProb(n, k, j) =
/// x[(n c + k) d + j] - (lse ? lse[n d + j] : 0).
template <typename T>
__global__ void nllKernel(int64_t n, int64_t c, int64_t d, const T *x,
                          const T *lse, const int64_t *label, const T *weights,
                          bool hasIgnore, int64_t ignoreIndex,
                          math::LossReduction reduction, T *out) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  double weightedSum = 0, weightTotal = 0;
  for (int64_t row = 0; row < n; ++row)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t i = row * d + j;
      const int64_t target = label[i];
      const bool ignored = hasIgnore && target == ignoreIndex;
      double logProb = 0, weight = 0;
      if (!ignored) {
        const T v = x[(row * c + target) * d + j];
        logProb = double(lse ? math::logProbOf(v, lse[i]) : v);
        weight = weights ? double(weights[target]) : 1.0;
      }
      const double value = math::nllAccumulate(ignored, logProb, weight,
                                               weightedSum, weightTotal);
      if (reduction == math::LossReduction::None)
        out[i] = T(value);
    }
  if (reduction != math::LossReduction::None)
    out[0] = T(math::nllReduced(reduction, weightedSum, weightTotal));
}

/// The CUDA loops of the losses of LossKernels.h.
struct CudaLossLoops : CudaLoops {
  static Status readLabels(const char *op, const TensorRef &labels,
                           std::vector<int64_t> &values) {
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    std::vector<uint8_t> host(size_t(labels.bytes()));
    if (!host.empty()) {
      ZRT_RETURN_IF_ERROR(
          check(cudaMemcpyAsync(host.data(), labels.data, host.size(),
                                cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync"));
      ZRT_RETURN_IF_ERROR(
          check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
    }
    values.resize(size_t(labels.numel()));
    kernels::dispatchType(kernels::IndexTypes{}, labels.dtype, [&](auto tag) {
      using I = typename decltype(tag)::type;
      const I *p = reinterpret_cast<const I *>(host.data());
      std::copy(p, p + values.size(), values.begin());
    });
    return Status::ok();
  }

  /// The reduction kernel, after uploading the checked labels.
  template <typename T>
  static Status runNll(const char *op, cudaStream_t stream,
                       const kernels::loss::LossShape &shape, const T *x,
                       const T *lse, const kernels::loss::NllPlan &plan,
                       const TensorRef &loss) {
    std::shared_ptr<void> labels;
    ZRT_RETURN_IF_ERROR(
        allocate(uint64_t(plan.label.size()) * sizeof(int64_t), labels));
    if (!plan.label.empty())
      // From pageable memory: returns once the labels have been staged.
      ZRT_RETURN_IF_ERROR(
          check(cudaMemcpyAsync(labels.get(), plan.label.data(),
                                plan.label.size() * sizeof(int64_t),
                                cudaMemcpyHostToDevice, stream),
                "cudaMemcpyAsync"));
    nllKernel<T><<<1, 1, 0, stream>>>(
        shape.n, shape.c, shape.d, x, lse,
        static_cast<const int64_t *>(labels.get()),
        plan.weights ? plan.weights->as<T>() : nullptr, plan.hasIgnore,
        plan.ignoreIndex, plan.reduction, loss.as<T>());
    return launched(op);
  }

  template <typename T>
  static Status
  softmaxCrossEntropy(const KernelContext &, const kernels::loss::LossShape &shape,
                      const TensorRef &scores, const TensorRef *logProb,
                      const kernels::loss::NllPlan &plan, const TensorRef &loss) {
    const char *op = "SoftmaxCrossEntropyLoss";
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    const int64_t rows = shape.n * shape.d;
    std::shared_ptr<void> lseStorage;
    ZRT_RETURN_IF_ERROR(allocate(uint64_t(rows) * sizeof(T), lseStorage));
    T *lse = static_cast<T *>(lseStorage.get());
    const T *x = scores.as<T>();
    if (rows > 0) {
      if (shape.d == 1)
        lseRowKernel<T>
            <<<gridFor(rows), kThreads, 0, stream>>>(rows, shape.c, x, lse);
      else
        lseColumnKernel<T><<<blocksFor(rows), kThreads, 0, stream>>>(
            shape.n, shape.c, shape.d, x, lse);
      ZRT_RETURN_IF_ERROR(launched(op));
    }
    if (logProb && scores.numel() > 0) {
      logProbKernel<T><<<blocksFor(scores.numel()), kThreads, 0, stream>>>(
          shape.n, shape.c, shape.d, x, lse, logProb->as<T>());
      ZRT_RETURN_IF_ERROR(launched(op));
    }
    return runNll<T>(op, stream, shape, x, lse, plan, loss);
  }

  template <typename T>
  static Status nll(const KernelContext &, const kernels::loss::LossShape &shape,
                    const TensorRef &logProbs, const kernels::loss::NllPlan &plan,
                    const TensorRef &loss) {
    const char *op = "NegativeLogLikelihoodLoss";
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(op, stream));
    return runNll<T>(op, stream, shape, logProbs.as<T>(), nullptr, plan, loss);
  }
};

} // namespace

void registerCudaLossKernels(KernelTable &table) {
  kernels::loss::addLossKernels<CudaLossLoops>(table);
}

} // namespace cuda
} // namespace zrt
