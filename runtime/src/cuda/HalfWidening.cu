//===- HalfWidening.cu - f16/bf16 operands for the CUDA kernels -----------===//
//
// The CUDA backend's kernels compute in f32 (or wider); a 16-bit program
// (zero-mixed-precision, a 16-bit export) reaches them through the
// trampolines of widenHalfCudaKernels, as the CPU's reach its kernels
// (cpu/HalfWidening.cpp): each f16/bf16 operand is widened (exactly) into
// stream-ordered device scratch, the f32 kernel runs on the copies, and each
// 16-bit output is rounded once to nearest even (math/HalfMath.h, the CPU's
// conversions, on the device). Operands that share a buffer share one copy,
// so a kernel that updates an input in place sees its own writes. A result
// is therefore the f32 kernel's on the widened inputs rounded once, the
// bits the CPU trampolines give wherever the two f32 kernels agree.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaKernels.h"
#include "cuda/CudaLoops.cuh"
#include "kernels/KernelSlots.h"
#include "math/HalfMath.h"

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace zrt {
namespace cuda {
namespace {

using kernels::isHalf;

__global__ void __launch_bounds__(kThreads)
    widenKernel(bool bf16, const uint16_t *src, float *dst, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = bf16 ? math::bfloat16ToFloat(src[i]) : math::halfToFloat(src[i]);
}

__global__ void __launch_bounds__(kThreads)
    narrowKernel(bool bf16, const float *src, uint16_t *dst, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = bf16 ? math::floatToBfloat16(src[i]) : math::floatToHalf(src[i]);
}

/// `fn` on f32 copies of the 16-bit operands (see the file comment).
Status runWidened(KernelFn fn, const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  bool any = false;
  for (const std::vector<TensorRef> *operands : {&in, &out})
    for (const TensorRef &t : *operands)
      any |= t.data && isHalf(t.dtype);
  if (!any)
    return fn(ctx, in, out, attrs);
  cudaStream_t stream;
  ZRT_RETURN_IF_ERROR(streamFor("16-bit operands", stream));
  // One f32 copy per distinct 16-bit buffer, as large as its largest operand.
  std::map<const void *, int64_t> sizes;
  for (const std::vector<TensorRef> *operands : {&in, &out})
    for (const TensorRef &t : *operands)
      if (t.data && isHalf(t.dtype))
        sizes[t.data] = std::max(sizes[t.data], t.numel());
  std::map<const void *, std::shared_ptr<void>> copies;
  for (const auto &[data, numel] : sizes)
    ZRT_RETURN_IF_ERROR(CudaLoops::allocate(uint64_t(numel) * sizeof(float), copies[data]));
  // Inputs widened (a buffer once, at its largest input view).
  std::map<const void *, int64_t> widened;
  for (const TensorRef &t : in) {
    if (!t.data || !isHalf(t.dtype) || widened[t.data] >= t.numel())
      continue;
    widenKernel<<<blocksFor(t.numel()), kThreads, 0, stream>>>(
        t.dtype == DType::BF16, t.as<uint16_t>(), static_cast<float *>(copies[t.data].get()),
        t.numel());
    ZRT_RETURN_IF_ERROR(launched("16-bit operands: widening"));
    widened[t.data] = t.numel();
  }
  auto wide = [&](const std::vector<TensorRef> &operands) {
    std::vector<TensorRef> w = operands;
    for (TensorRef &t : w)
      if (t.data && isHalf(t.dtype))
        t = TensorRef{copies[t.data].get(), DType::F32, t.shape};
    return w;
  };
  ZRT_RETURN_IF_ERROR(fn(ctx, wide(in), wide(out), attrs));
  for (const TensorRef &t : out)
    if (t.data && isHalf(t.dtype)) {
      narrowKernel<<<blocksFor(t.numel()), kThreads, 0, stream>>>(
          t.dtype == DType::BF16, static_cast<const float *>(copies[t.data].get()),
          t.as<uint16_t>(), t.numel());
      ZRT_RETURN_IF_ERROR(launched("16-bit operands: rounding"));
    }
  return Status::ok(); // the copies are freed on the stream, after these kernels
}

/// The f32 kernels behind the trampolines, by slot; filled once.
constexpr size_t kMaxWidened = 320;
std::array<KernelFn, kMaxWidened> widenedSlots{};
SlotAssigner slotOfOp(kMaxWidened, "cuda/HalfWidening.cu");
std::mutex slotsMutex;

Status runSlot(size_t slot, const KernelContext &ctx, const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out, const AttrMap &attrs) {
  return runWidened(widenedSlots[slot], ctx, in, out, attrs);
}

} // namespace

void widenHalfCudaKernels(KernelTable &table) {
  std::lock_guard<std::mutex> lock(slotsMutex);
  for (const std::string &op : table.names()) {
    auto [slot, fresh] = slotOfOp.slotOf(op);
    if (fresh)
      widenedSlots[slot] = table.lookup(op);
    table.add(op, KernelSlots<runSlot, kMaxWidened>::entries[slot]);
  }
}

} // namespace cuda
} // namespace zrt
