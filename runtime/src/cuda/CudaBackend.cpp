//===- CudaBackend.cpp - CUDA streams, events, memory and cuBLAS ----------===//
//
// The GPU implementation of the Backend interface, behind the same executor as
// the CPU one: each program stream keeps its host thread, which enqueues onto
// its own non-blocking CUDA stream. An event is a cudaEvent_t plus a host-side
// flag: a CUDA stream can only wait for an event that has already been
// recorded, so wait() first blocks the host thread until record() has run
// (cancellable, like the CPU event), then makes the CUDA stream wait on the
// device.
//
// Kernels (registerCudaKernels): every op of the CPU table.
// - CUDA kernels sharing the CPU kernels' host code (checks, attributes,
//   dispatch: cpu/kernels/*Kernels.h) and per-element math (math/*.h): the
//   elementwise, reduction, softmax and normalisation, optimizer, data
//   movement, gather/scatter and loss families (cuda/*.cu); Quantize and
//   Dequantize (cuda/QuantizeKernels.cu).
// - Kernels sharing the CPU kernels' checks (kernels::prepare*:
//   kernels/KernelLayouts.h) and per-element math (math/WindowMath.h,
//   ResizeMath.h, SelectionMath.h, FusedMath.h) with loops of their own:
//   MatMul and Gemm (cuBLAS for f32 / f64, through blasGemm below; a direct
//   kernel otherwise: cuda/MatMulKernels.cu), Conv / ConvTranspose (im2col
//   or col2im kernels around cuBLAS), the pools, BatchNormalization and
//   Resize (cuda/SpatialKernels.cu), TopK and OneHot
//   (cuda/SelectionKernels.cu), FusedElementwise (cuda/FusedKernels.cu).
// - Staged: the CPU kernel on host copies of the operands, copied in the
//   stream's order (the host thread waits for them); its checks, its bits.
//   Any CPU kernel without a CUDA one is registered this way automatically
//   (cudaStagedKernelNames() lists them; none today), so programs always
//   load.
// This backend is compiled here but has never run on a GPU in CI.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaBackend.h"

#include "kernels/HostEvent.h"
#include "kernels/KernelSlots.h"
#include "kernels/KernelSupport.h"
#include "kernels/QuantizeLayout.h"
#include "cuda/CudaKernels.h"
#include "cuda/QuantizeKernels.h"
#include "zrt/CpuBackend.h"
#include "zrt/CudaBackend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>

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

} // namespace

cudaStream_t launchStream() {
  return currentLaunch ? currentLaunch->stream : nullptr;
}

namespace {

/// Device memory. Its fills and host copies (weights, inputs, outputs,
/// checkpoints) go through a non-blocking stream of its own (never the
/// legacy default stream, which would serialise with every other stream)
/// and a pinned host buffer that large copies are cut into, so transfers
/// run at full PCIe speed; each call returns when its copy is done.
class DeviceAllocator final : public Allocator {
public:
  explicit DeviceAllocator(int device) : device_(device) {}
  ~DeviceAllocator() override {
    for (auto &entry : cached_)
      cudaFree(entry.second);
    for (cudaEvent_t e : halfDone_)
      if (e)
        cudaEventDestroy(e);
    if (pinned_)
      cudaFreeHost(pinned_);
    if (stream_)
      cudaStreamDestroy(stream_);
  }
  Expected<void *> allocate(uint64_t bytes, const std::string &what) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ZRT_RETURN_IF_ERROR(prepare());
    // Caching: a block freed earlier (an executor's arenas, released when a
    // program is replaced) is reused when it fits without wasting more than
    // its request again; cudaMalloc/cudaFree synchronise the device.
    const uint64_t want = std::max<uint64_t>(bytes, 1);
    void *p = nullptr;
    if (auto it = cached_.lower_bound(want); it != cached_.end() && it->first <= 2 * want) {
      p = it->second;
      sizes_[p] = it->first;
      cached_.erase(it);
    } else {
      cudaError_t err = cudaMalloc(&p, size_t(want));
      if (err == cudaErrorMemoryAllocation && !cached_.empty()) {
        // Out of memory: give the cached blocks back and try once more.
        (void)cudaGetLastError();
        for (auto &entry : cached_)
          cudaFree(entry.second);
        cached_.clear();
        err = cudaMalloc(&p, size_t(want));
      }
      if (err != cudaSuccess)
        return Status::error("cannot allocate " + std::to_string(bytes) +
                             " bytes of GPU memory for " + what + ": " +
                             cudaGetErrorString(err));
      sizes_[p] = want;
    }
    Status st =
        check(cudaMemsetAsync(p, 0, size_t(bytes), stream_), "cudaMemsetAsync");
    if (st.isOk())
      st = check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    if (!st.isOk()) {
      sizes_.erase(p);
      cudaFree(p);
      return st;
    }
    return p;
  }
  void deallocate(void *ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(ptr);
    if (it == sizes_.end()) {
      cudaFree(ptr);
      return;
    }
    cached_.emplace(it->second, ptr);
    sizes_.erase(it);
  }
  /// A host arena (ZeRO-Offload to the CPU): pinned host memory mapped into
  /// the device's address space; kernels, cuBLAS and NCCL read and write it
  /// through the returned pointer, over the bus.
  Expected<void *> allocateHost(uint64_t bytes, const std::string &what) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ZRT_RETURN_IF_ERROR(prepare());
    const size_t want = size_t(std::max<uint64_t>(bytes, 1));
    void *host = nullptr;
    cudaError_t err =
        cudaHostAlloc(&host, want, cudaHostAllocMapped | cudaHostAllocPortable);
    if (err != cudaSuccess)
      return Status::error("cannot allocate " + std::to_string(bytes) +
                           " bytes of pinned host memory for " + what + ": " +
                           cudaGetErrorString(err) +
                           " (offload device \"cpu\" keeps that state in host memory; "
                           "\"nvme\" needs --backend cpu)");
    std::memset(host, 0, want);
    void *device = nullptr;
    if (Status st = check(cudaHostGetDevicePointer(&device, host, 0),
                          "cudaHostGetDevicePointer");
        !st.isOk()) {
      cudaFreeHost(host);
      return st;
    }
    hostOf_[device] = host;
    return device;
  }
  void deallocateHost(void *ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = hostOf_.find(ptr);
    cudaFreeHost(it == hostOf_.end() ? ptr : it->second);
    if (it != hostOf_.end())
      hostOf_.erase(it);
  }
  bool hostAccessible() const override { return false; }
  Status copyFromHost(void *dst, const void *src, uint64_t bytes) override {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice);
  }
  Status copyToHost(void *dst, const void *src, uint64_t bytes) override {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost);
  }

private:
  /// Pinned staging buffer size: copies are cut into pieces of this size,
  /// alternating between its two halves so the host memcpy of one piece
  /// overlaps the DMA of the previous one.
  static constexpr size_t kPinnedBytes = size_t(32) << 20;

  /// The device, the stream and the pinned buffer, made on first use.
  Status prepare() {
    ZRT_RETURN_IF_ERROR(check(cudaSetDevice(device_), "cudaSetDevice"));
    if (!stream_)
      ZRT_RETURN_IF_ERROR(
          check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                "cudaStreamCreate"));
    if (!pinned_) {
      ZRT_RETURN_IF_ERROR(
          check(cudaHostAlloc(&pinned_, kPinnedBytes, cudaHostAllocDefault),
                "cudaHostAlloc"));
      for (cudaEvent_t &e : halfDone_)
        ZRT_RETURN_IF_ERROR(
            check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                  "cudaEventCreate"));
    }
    return Status::ok();
  }

  Status copy(void *dst, const void *src, uint64_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0)
      return Status::ok();
    std::lock_guard<std::mutex> lock(mutex_);
    ZRT_RETURN_IF_ERROR(prepare());
    const size_t half = kPinnedBytes / 2;
    auto *d = static_cast<char *>(dst);
    auto *s = static_cast<const char *>(src);
    int h = 0;
    for (uint64_t done = 0; done < bytes; done += half, h ^= 1) {
      const size_t len = size_t(std::min<uint64_t>(half, bytes - done));
      char *stage = static_cast<char *>(pinned_) + size_t(h) * half;
      // The half is free once its previous copy has finished.
      ZRT_RETURN_IF_ERROR(
          check(cudaEventSynchronize(halfDone_[h]), "cudaEventSynchronize"));
      if (kind == cudaMemcpyHostToDevice) {
        std::memcpy(stage, s + done, len);
        ZRT_RETURN_IF_ERROR(
            check(cudaMemcpyAsync(d + done, stage, len, cudaMemcpyDefault, stream_),
                  "cudaMemcpyAsync to the GPU"));
        ZRT_RETURN_IF_ERROR(
            check(cudaEventRecord(halfDone_[h], stream_), "cudaEventRecord"));
      } else {
        ZRT_RETURN_IF_ERROR(
            check(cudaMemcpyAsync(stage, s + done, len, cudaMemcpyDefault, stream_),
                  "cudaMemcpyAsync from the GPU"));
        ZRT_RETURN_IF_ERROR(
            check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
        std::memcpy(d + done, stage, len);
      }
    }
    return check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  int device_;
  /// Freed blocks by size, and the size of each block handed out.
  std::multimap<uint64_t, void *> cached_;
  std::unordered_map<void *, uint64_t> sizes_;
  /// Host arenas: the host pointer of each device pointer handed out.
  std::unordered_map<void *, void *> hostOf_;
  std::mutex mutex_;
  cudaStream_t stream_ = nullptr;
  void *pinned_ = nullptr;
  cudaEvent_t halfDone_[2] = {nullptr, nullptr};
};

class DeviceStream final : public Stream {
public:
  DeviceStream(int device, int rank, int worldSize)
      : device_(device), rank_(rank), worldSize_(worldSize) {}
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
    ctx.rank = rank_;
    ctx.worldSize = worldSize_;
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
  int rank_, worldSize_;
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

//===----------------------------------------------------------------------===//
// Staged kernels: the CPU kernel on host copies
//===----------------------------------------------------------------------===//

/// Runs CPU kernel `fn` on host copies of the operands: every distinct
/// operand buffer (outputs too: a kernel may update one in place) is copied
/// to the host in stream order, the kernel runs once the stream has caught
/// up, and the outputs are copied back; returns after the copies are done.
/// Operands that share a data pointer share one host copy, so in-place
/// kernels see their aliasing; partially overlapping operands are not
/// supported (the program format never produces them).
Status runStaged(KernelFn fn, const KernelContext &ctx,
                 const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &attrs) {
  if (!currentLaunch)
    return Status::error("staged kernel called outside a CUDA stream launch");
  cudaStream_t stream = currentLaunch->stream;
  // One host copy per distinct buffer, as large as its largest operand. The
  // copies are pageable: a device-to-host cudaMemcpyAsync into pageable
  // memory returns when it is done and a host-to-device one once the source
  // has been staged, so no transfer outlives these buffers, error paths
  // included.
  std::map<const void *, uint64_t> sizes;
  for (const std::vector<TensorRef> *operands : {&in, &out})
    for (const TensorRef &t : *operands)
      if (t.data && t.bytes() != 0)
        sizes[t.data] = std::max(sizes[t.data], t.bytes());
  std::map<const void *, std::unique_ptr<uint8_t[]>> copies;
  // An operand in a host arena makes its copy host-to-host, which does not
  // wait for the stream: let the stream catch up first.
  ZRT_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream),
                            "staged kernel: cudaStreamSynchronize"));
  for (const auto &entry : sizes) {
    std::unique_ptr<uint8_t[]> &host = copies[entry.first];
    host.reset(new uint8_t[size_t(entry.second)]);
    ZRT_RETURN_IF_ERROR(
        check(cudaMemcpyAsync(host.get(), entry.first, size_t(entry.second),
                              cudaMemcpyDefault, stream),
              "staged kernel: cudaMemcpyAsync to the host"));
  }
  auto onHost = [&](const std::vector<TensorRef> &operands) {
    std::vector<TensorRef> host = operands;
    for (TensorRef &t : host)
      if (t.data && t.bytes() != 0)
        t.data = copies[t.data].get();
    return host;
  };
  const std::vector<TensorRef> hostIn = onHost(in), hostOut = onHost(out);
  ZRT_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream),
                            "staged kernel: cudaStreamSynchronize"));
  KernelContext hostCtx = ctx; // serial: this stream's host thread
  hostCtx.numThreads = 1;
  ZRT_RETURN_IF_ERROR(fn(hostCtx, hostIn, hostOut, attrs));
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].data && out[i].bytes() != 0)
      ZRT_RETURN_IF_ERROR(check(cudaMemcpyAsync(out[i].data, hostOut[i].data,
                                                size_t(out[i].bytes()),
                                                cudaMemcpyDefault, stream),
                                "staged kernel: cudaMemcpyAsync to the GPU"));
  return check(cudaStreamSynchronize(stream),
               "staged kernel: cudaStreamSynchronize");
}

/// The CPU kernels behind the staged entries, by slot; filled once.
constexpr size_t kMaxStaged = 256;
std::array<KernelFn, kMaxStaged> stagedSlots{};

Status runStagedSlot(size_t slot, const KernelContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &attrs) {
  return runStaged(stagedSlots[slot], ctx, in, out, attrs);
}
constexpr const std::array<KernelFn, kMaxStaged> &kStagedEntries =
    KernelSlots<runStagedSlot, kMaxStaged>::entries;

/// Quantize (docs/kernels.md): the CPU kernel's checks, then the CUDA kernel;
/// waits for the stream to report a non-finite element as the CPU does.
Status quantizeKernel(const KernelContext &, const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out, const AttrMap &attrs) {
  kernels::QuantizeLayout l;
  ZRT_RETURN_IF_ERROR(kernels::prepareQuantize(in, out, attrs, l));
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
  return kernels::quantizeNonFiniteError(l, int64_t(bad), value);
}

/// Dequantize (docs/kernels.md): the CPU kernel's checks, then the CUDA kernel.
Status dequantizeKernel(const KernelContext &, const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out,
                        const AttrMap &attrs) {
  kernels::QuantizeLayout l;
  ZRT_RETURN_IF_ERROR(kernels::prepareDequantize(in, out, attrs, l));
  if (!currentLaunch)
    return Status::error("Dequantize: called outside a CUDA stream launch");
  return check(launchDequantize(l, static_cast<const uint8_t *>(in[0].data),
                                in[1].as<float>(), out[0].as<float>(),
                                currentLaunch->stream),
               "Dequantize: kernel launch");
}

} // namespace

bool fitsBlas(std::initializer_list<int64_t> sizes) {
  for (int64_t v : sizes)
    if (v < 0 || v > int64_t(std::numeric_limits<int>::max()))
      return false;
  return true;
}

/// Row-major C^T = op(B)^T op(A)^T in column-major cuBLAS: B goes first.
template <typename T>
Status blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                T alpha, const T *a, const T *b, T beta, T *c, int64_t batch,
                int64_t strideA, int64_t strideB, int64_t strideC) {
  if (!currentLaunch)
    return Status::error("cuBLAS call outside a CUDA stream launch");
  int lda = int(transA ? m : k), ldb = int(transB ? k : n);
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>)
    return checkBlas(cublasSgemmStridedBatched(
                         currentLaunch->blas, opB, opA, int(n), int(m), int(k),
                         &alpha, b, ldb, strideB, a, lda, strideA, &beta, c,
                         int(n), strideC, int(batch)),
                     "cublasSgemmStridedBatched");
  else
    return checkBlas(cublasDgemmStridedBatched(
                         currentLaunch->blas, opB, opA, int(n), int(m), int(k),
                         &alpha, b, ldb, strideB, a, lda, strideA, &beta, c,
                         int(n), strideC, int(batch)),
                     "cublasDgemmStridedBatched");
}
template Status blasGemm<float>(bool, bool, int64_t, int64_t, int64_t, float,
                                const float *, const float *, float, float *,
                                int64_t, int64_t, int64_t, int64_t);
template Status blasGemm<double>(bool, bool, int64_t, int64_t, int64_t, double,
                                 const double *, const double *, double,
                                 double *, int64_t, int64_t, int64_t, int64_t);

namespace {

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(int device) : device_(device), allocator_(device) {
    registerCudaKernels(kernels_);
  }
  std::string name() const override { return "cuda"; }
  Allocator &allocator() override { return allocator_; }
  const KernelTable &kernels() const override { return kernels_; }
  Expected<std::unique_ptr<Stream>> createStream(int,
                                                 const StreamDesc &) override {
    auto stream = std::make_unique<DeviceStream>(device_, rank_, worldSize_);
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

namespace {

/// The CUDA table and the names of its staged entries, built once.
struct CudaTables {
  KernelTable table;
  std::vector<std::string> staged;
};

const CudaTables &cudaTables() {
  static const CudaTables tables = [] {
    CudaTables t;
    KernelTable cpu;
    registerCpuKernels(cpu);
    // The GPU kernels.
    cuda::registerCudaElementwiseKernels(t.table);
    cuda::registerCudaReduceKernels(t.table);
    cuda::registerCudaNormalizationKernels(t.table);
    cuda::registerCudaOptimizerKernels(t.table);
    cuda::registerCudaShapeKernels(t.table);
    cuda::registerCudaIndexingKernels(t.table);
    cuda::registerCudaLossKernels(t.table);
    cuda::registerCudaMatMulKernels(t.table);
    cuda::registerCudaSpatialKernels(t.table);
    cuda::registerCudaSelectionKernels(t.table);
    cuda::registerCudaFusedKernels(t.table);
    t.table.add("Quantize", cuda::quantizeKernel);
    t.table.add("Dequantize", cuda::dequantizeKernel);
    // Everything else (nothing today): the CPU kernel, staged.
    size_t slot = 0;
    for (const std::string &op : cpu.names()) {
      if (t.table.lookup(op))
        continue;
      if (slot == cuda::kMaxStaged) {
        std::fprintf(stderr,
                     "zrt: more than %zu staged CUDA kernels; raise "
                     "kMaxStaged in CudaBackend.cpp\n",
                     cuda::kMaxStaged);
        std::abort();
      }
      cuda::stagedSlots[slot] = cpu.lookup(op);
      t.table.add(op, cuda::kStagedEntries[slot]);
      t.staged.push_back(op);
      ++slot;
    }
    // f16/bf16 operands: every kernel on f32 copies of them.
    cuda::widenHalfCudaKernels(t.table);
    return t;
  }();
  return tables;
}

} // namespace

void registerCudaKernels(KernelTable &table) {
  const KernelTable &cuda = cudaTables().table;
  for (const std::string &op : cuda.names())
    table.add(op, cuda.lookup(op));
}

std::vector<std::string> cudaKernelNames() {
  return cudaTables().table.names();
}

std::vector<std::string> cudaStagedKernelNames() { return cudaTables().staged; }

Expected<int> cudaDeviceForRank(int localRank) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0)
    return Status::error(
        std::string("no usable CUDA device: ") +
        (err != cudaSuccess ? cudaGetErrorString(err) : "none found"));
  auto envInt = [](const char *name, int &value) {
    const char *text = std::getenv(name);
    if (!text || !*text)
      return false;
    char *end = nullptr;
    const long v = std::strtol(text, &end, 10);
    value = (*end == '\0' && v >= 0 && v <= 1 << 20) ? int(v) : -1;
    return true;
  };
  int device = 0;
  if (envInt("ZRT_CUDA_DEVICE", device)) {
    if (device < 0 || device >= count)
      return Status::error(std::string("ZRT_CUDA_DEVICE=") +
                           std::getenv("ZRT_CUDA_DEVICE") +
                           " is not a CUDA device of this host (it has " +
                           std::to_string(count) + ")");
    return device;
  }
  int local = localRank;
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    int v = 0;
    if (envInt(name, v) && v >= 0) {
      local = v;
      break;
    }
  }
  return std::max(local, 0) % count;
}

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
