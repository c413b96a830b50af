//===- CudaBackend.cpp - CUDA streams, events, memory and cuBLAS ----------===//
//
// The GPU implementation of the Backend interface, behind the same executor as
// the CPU one: each program stream keeps its host thread, which enqueues onto its
// own non-blocking CUDA stream. An event is a cudaEvent_t plus a host-side flag:
// a CUDA stream can only wait for an event that has already been recorded, so
// wait() first blocks the host thread until record() has run (cancellable, like
// the CPU event), then makes the CUDA stream wait on the device.
//
// Kernels: MatMul and Gemm (f32) through cuBLAS; Quantize and Dequantize
// (cuda/QuantizeKernels.cu, sharing the CPU kernel's checks and arithmetic);
// every other op of the CPU table is registered as a stub that reports "not implemented on the CUDA backend", so
// programs load and fail at the first such instruction with a clear message.
// This backend is compiled here but has never run on a GPU in CI; keep it small.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaBackend.h"

#include "cpu/HostEvent.h"
#include "cpu/kernels/QuantizeLayout.h"
#include "cuda/QuantizeKernels.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <thread>

namespace zrt {
namespace cuda {

Status check(cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return Status::ok();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(err));
}

namespace {

Status checkBlas(cublasStatus_t st, const char *what) {
  if (st == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(std::string(what) + ": cuBLAS status " +
                       std::to_string(int(st)));
}

/// What a CUDA kernel function needs besides its operands. Set by the stream
/// for the duration of one launch, on the stream's host thread.
struct LaunchContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  /// One word of device memory for a kernel's error flag (Quantize's first
  /// non-finite element).
  unsigned long long *flag = nullptr;
};
thread_local const LaunchContext *currentLaunch = nullptr;

class DeviceAllocator final : public Allocator {
public:
  explicit DeviceAllocator(int device) : device_(device) {}
  Expected<void *> allocate(uint64_t bytes, const std::string &what) override {
    ZRT_RETURN_IF_ERROR(check(cudaSetDevice(device_), "cudaSetDevice"));
    void *p = nullptr;
    cudaError_t err = cudaMalloc(&p, size_t(std::max<uint64_t>(bytes, 1)));
    if (err != cudaSuccess)
      return Status::error("cannot allocate " + std::to_string(bytes) +
                           " bytes of GPU memory for " + what + ": " +
                           cudaGetErrorString(err));
    ZRT_RETURN_IF_ERROR(check(cudaMemset(p, 0, size_t(bytes)), "cudaMemset"));
    return p;
  }
  void deallocate(void *ptr) override { cudaFree(ptr); }
  bool hostAccessible() const override { return false; }
  Status copyFromHost(void *dst, const void *src, uint64_t bytes) override {
    return check(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyHostToDevice),
                 "cudaMemcpy to the GPU");
  }
  Status copyToHost(void *dst, const void *src, uint64_t bytes) override {
    return check(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyDeviceToHost),
                 "cudaMemcpy from the GPU");
  }

private:
  int device_;
};

class DeviceStream final : public Stream {
public:
  DeviceStream(int device) : device_(device) {}
  ~DeviceStream() override {
    if (context_.flag)
      cudaFree(context_.flag);
    if (context_.blas)
      cublasDestroy(context_.blas);
    if (context_.stream)
      cudaStreamDestroy(context_.stream);
  }
  Status init() {
    ZRT_RETURN_IF_ERROR(check(cudaSetDevice(device_), "cudaSetDevice"));
    ZRT_RETURN_IF_ERROR(check(
        cudaStreamCreateWithFlags(&context_.stream, cudaStreamNonBlocking),
        "cudaStreamCreate"));
    ZRT_RETURN_IF_ERROR(checkBlas(cublasCreate(&context_.blas), "cublasCreate"));
    ZRT_RETURN_IF_ERROR(check(cudaMalloc(reinterpret_cast<void **>(&context_.flag),
                                         sizeof *context_.flag),
                              "cudaMalloc"));
    return checkBlas(cublasSetStream(context_.blas, context_.stream),
                     "cublasSetStream");
  }
  Status launch(KernelFn fn, const std::vector<TensorRef> &inputs,
                const std::vector<TensorRef> &outputs,
                const AttrMap &attrs) override {
    ZRT_RETURN_IF_ERROR(bindThread());
    currentLaunch = &context_;
    KernelContext ctx;
    ctx.parallelFor = [](int64_t n,
                         const std::function<void(int64_t, int64_t)> &f) {
      f(0, n);
    };
    Status st = fn(ctx, inputs, outputs, attrs);
    currentLaunch = nullptr;
    return st;
  }
  Status synchronize() override {
    ZRT_RETURN_IF_ERROR(bindThread());
    return check(cudaStreamSynchronize(context_.stream), "cudaStreamSynchronize");
  }
  cudaStream_t stream() const { return context_.stream; }
  /// Makes this backend's device current on the calling host thread.
  Status bindThread() {
    if (boundThread_ == std::this_thread::get_id())
      return Status::ok();
    ZRT_RETURN_IF_ERROR(check(cudaSetDevice(device_), "cudaSetDevice"));
    boundThread_ = std::this_thread::get_id();
    return Status::ok();
  }

private:
  int device_;
  LaunchContext context_;
  std::thread::id boundThread_;
};

class DeviceEvent final : public HostEvent {
public:
  ~DeviceEvent() override {
    if (event_)
      cudaEventDestroy(event_);
  }
  Status init() {
    return check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                 "cudaEventCreate");
  }
  Status record(Stream &stream) override {
    auto &s = static_cast<DeviceStream &>(stream);
    ZRT_RETURN_IF_ERROR(s.bindThread());
    ZRT_RETURN_IF_ERROR(check(cudaEventRecord(event_, s.stream()), "cudaEventRecord"));
    return HostEvent::record(stream);
  }
  Status wait(Stream &stream) override {
    ZRT_RETURN_IF_ERROR(HostEvent::wait(stream));
    auto &s = static_cast<DeviceStream &>(stream);
    ZRT_RETURN_IF_ERROR(s.bindThread());
    return check(cudaStreamWaitEvent(s.stream(), event_, 0), "cudaStreamWaitEvent");
  }

private:
  cudaEvent_t event_ = nullptr;
};

/// Row-major C[m,n] = alpha * op(A) op(B) + beta * C through column-major
/// cuBLAS: C^T = op(B)^T op(A)^T, so B goes first.
Status sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
             float alpha, const float *a, const float *b, float beta, float *c,
             int64_t batch, int64_t strideA, int64_t strideB, int64_t strideC) {
  if (!currentLaunch)
    return Status::error("cuBLAS call outside a CUDA stream launch");
  int lda = int(transA ? m : k), ldb = int(transB ? k : n);
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  return checkBlas(cublasSgemmStridedBatched(
                       currentLaunch->blas, opB, opA, int(n), int(m), int(k),
                       &alpha, b, ldb, strideB, a, lda, strideA, &beta, c,
                       int(n), strideC, int(batch)),
                   "cublasSgemmStridedBatched");
}

/// ONNX MatMul for f32 with equal batch dimensions (or a 2-D right operand
/// shared by every batch).
Status matMulKernel(const KernelContext &, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &) {
  if (in.size() != 2 || out.size() != 1)
    return Status::error("MatMul: expects 2 inputs and 1 output");
  const TensorRef &a = in[0], &b = in[1], &c = out[0];
  if (a.dtype != DType::F32 || b.dtype != DType::F32 || c.dtype != DType::F32)
    return Status::error("MatMul: only f32 is implemented on the CUDA backend");
  if (a.rank() < 2 || b.rank() < 2)
    return Status::error("MatMul: 1-D operands are not implemented on the CUDA "
                         "backend");
  int64_t m = a.shape[a.rank() - 2], k = a.shape[a.rank() - 1];
  int64_t n = b.shape[b.rank() - 1];
  if (b.shape[b.rank() - 2] != k)
    return Status::error("MatMul: inner dimensions differ (" +
                         shapeString(a.shape) + " x " + shapeString(b.shape) + ")");
  int64_t batch = a.numel() / std::max<int64_t>(1, m * k);
  int64_t strideB = b.rank() == 2 ? 0 : k * n;
  if (strideB && b.numel() / std::max<int64_t>(1, k * n) != batch)
    return Status::error("MatMul: batch broadcasting is not implemented on the "
                         "CUDA backend");
  if (c.numel() != batch * m * n)
    return Status::error("MatMul: output " + shapeString(c.shape) +
                         " does not match the product");
  return sgemm(false, false, m, n, k, 1.0f, a.as<float>(), b.as<float>(), 0.0f,
               c.as<float>(), batch, m * k, strideB, m * n);
}

/// ONNX Gemm for f32; C, if given, must have the output's full shape.
Status gemmKernel(const KernelContext &, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  if (in.size() < 2 || out.size() != 1)
    return Status::error("Gemm: expects 2 or 3 inputs and 1 output");
  if (!currentLaunch)
    return Status::error("Gemm: called outside a CUDA stream launch");
  const TensorRef &a = in[0], &b = in[1], &y = out[0];
  bool ta = attrs.getInt("transA", 0) != 0, tb = attrs.getInt("transB", 0) != 0;
  if (a.rank() != 2 || b.rank() != 2 || a.dtype != DType::F32 ||
      b.dtype != DType::F32 || y.dtype != DType::F32)
    return Status::error("Gemm: only 2-D f32 is implemented on the CUDA backend");
  int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  int64_t n = tb ? b.shape[0] : b.shape[1];
  if ((tb ? b.shape[1] : b.shape[0]) != k || y.numel() != m * n)
    return Status::error("Gemm: shapes do not match");
  float beta = 0.0f;
  if (in.size() == 3) {
    if (in[2].numel() != m * n)
      return Status::error("Gemm: a broadcast C is not implemented on the CUDA "
                           "backend");
    ZRT_RETURN_IF_ERROR(check(cudaMemcpyAsync(y.data, in[2].data, y.bytes(),
                                              cudaMemcpyDeviceToDevice,
                                              currentLaunch->stream),
                              "cudaMemcpyAsync"));
    beta = float(attrs.getFloat("beta", 1.0));
  }
  return sgemm(ta, tb, m, n, k, float(attrs.getFloat("alpha", 1.0)),
               a.as<float>(), b.as<float>(), beta, y.as<float>(), 1, 0, 0, 0);
}

/// Quantize (docs/kernels.md): the CPU kernel's checks, then the CUDA kernel;
/// waits for the stream to report a non-finite element as the CPU does.
Status quantizeKernel(const KernelContext &, const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out, const AttrMap &attrs) {
  cpu::QuantizeLayout l;
  ZRT_RETURN_IF_ERROR(cpu::prepareQuantize(in, out, attrs, l));
  if (!currentLaunch)
    return Status::error("Quantize: called outside a CUDA stream launch");
  cudaStream_t stream = currentLaunch->stream;
  const float *x = in[0].as<float>();
  ZRT_RETURN_IF_ERROR(check(
      launchQuantize(l, x, static_cast<uint8_t *>(out[0].data),
                     out[1].as<float>(), currentLaunch->flag, stream),
      "Quantize: kernel launch"));
  unsigned long long bad = 0;
  ZRT_RETURN_IF_ERROR(check(cudaMemcpyAsync(&bad, currentLaunch->flag,
                                            sizeof bad, cudaMemcpyDeviceToHost,
                                            stream),
                            "Quantize: cudaMemcpyAsync"));
  ZRT_RETURN_IF_ERROR(
      check(cudaStreamSynchronize(stream), "Quantize: cudaStreamSynchronize"));
  if (bad >= (unsigned long long)in[0].numel())
    return Status::ok();
  float value = 0.0f;
  ZRT_RETURN_IF_ERROR(check(cudaMemcpyAsync(&value, x + bad, sizeof value,
                                            cudaMemcpyDeviceToHost, stream),
                            "Quantize: cudaMemcpyAsync"));
  ZRT_RETURN_IF_ERROR(
      check(cudaStreamSynchronize(stream), "Quantize: cudaStreamSynchronize"));
  return cpu::quantizeNonFiniteError(l, int64_t(bad), value);
}

/// Dequantize (docs/kernels.md): the CPU kernel's checks, then the CUDA kernel.
Status dequantizeKernel(const KernelContext &, const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out,
                        const AttrMap &attrs) {
  cpu::QuantizeLayout l;
  ZRT_RETURN_IF_ERROR(cpu::prepareDequantize(in, out, attrs, l));
  if (!currentLaunch)
    return Status::error("Dequantize: called outside a CUDA stream launch");
  return check(launchDequantize(l, static_cast<const uint8_t *>(in[0].data),
                                in[1].as<float>(), out[0].as<float>(),
                                currentLaunch->stream),
               "Dequantize: kernel launch");
}

Status notImplementedKernel(const KernelContext &, const std::vector<TensorRef> &,
                            const std::vector<TensorRef> &, const AttrMap &) {
  return Status::error("not implemented on the CUDA backend (it has MatMul, "
                       "Gemm, Quantize and Dequantize); run with --backend "
                       "cpu");
}

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(int device) : device_(device), allocator_(device) {
    KernelTable cpu;
    registerCpuKernels(cpu);
    for (const std::string &op : cpu.names())
      kernels_.add(op, notImplementedKernel);
    kernels_.add("MatMul", matMulKernel);
    kernels_.add("Gemm", gemmKernel);
    kernels_.add("Quantize", quantizeKernel);
    kernels_.add("Dequantize", dequantizeKernel);
  }
  std::string name() const override { return "cuda"; }
  Allocator &allocator() override { return allocator_; }
  const KernelTable &kernels() const override { return kernels_; }
  Expected<std::unique_ptr<Stream>> createStream(int,
                                                 const StreamDesc &) override {
    auto stream = std::make_unique<DeviceStream>(device_);
    ZRT_RETURN_IF_ERROR(stream->init());
    return std::unique_ptr<Stream>(std::move(stream));
  }
  Expected<std::unique_ptr<Event>> createEvent() override {
    ZRT_RETURN_IF_ERROR(check(cudaSetDevice(device_), "cudaSetDevice"));
    auto event = std::make_unique<DeviceEvent>();
    ZRT_RETURN_IF_ERROR(event->init());
    return std::unique_ptr<Event>(std::move(event));
  }
  int numThreads() const override { return 1; }

private:
  int device_;
  DeviceAllocator allocator_;
  KernelTable kernels_;
};

} // namespace

cudaStream_t streamOf(Stream *stream) {
  auto *s = dynamic_cast<DeviceStream *>(stream);
  return s ? s->stream() : nullptr;
}

} // namespace cuda

Expected<std::unique_ptr<Backend>> createCudaBackend(int device) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    return Status::error(std::string("no usable CUDA device: ") +
                         cudaGetErrorString(err));
  if (device < 0 || device >= count)
    return Status::error("CUDA device " + std::to_string(device) +
                         " does not exist (this host has " +
                         std::to_string(count) + ")");
  ZRT_RETURN_IF_ERROR(cuda::check(cudaSetDevice(device), "cudaSetDevice"));
  return std::unique_ptr<Backend>(std::make_unique<cuda::CudaBackend>(device));
}

} // namespace zrt
