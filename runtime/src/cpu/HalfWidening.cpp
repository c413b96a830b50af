//===- HalfWidening.cpp - f16 and bf16 operands through the f32 kernels ---===//
//
// The CPU kernels compute in f32 (and f64); a program stored in 16 bits (an
// fp16 or bf16 export) runs them through widenHalfKernels' trampolines: each
// f16/bf16 input is widened to an f32 copy (exact), the f32 kernel runs, and
// each f16/bf16 output is rounded back (to nearest even; NaN stays NaN). So a
// 16-bit kernel's result is the f32 kernel's on the widened values, rounded
// once: the same bits at any thread count, as the f32 kernels are. Kernels
// that only move elements or convert them (Cast, Transpose, Gather, ...)
// take 16-bit operands as they are. Calls without 16-bit operands go
// straight to the kernel.
//
//===----------------------------------------------------------------------===//

#include "CpuHalf.h"

#include "math/HalfMath.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>

namespace zrt {
namespace cpu {
namespace {

bool isHalf(DType t) { return t == DType::F16 || t == DType::BF16; }

/// Kernels that take 16-bit operands themselves: they move elements by their
/// size, or convert them (Cast).
const std::set<std::string> &nativeKernels() {
  static const std::set<std::string> names = {
      "Cast",  "Copy",   "LocalShard", "Expand",   "Transpose",      "Concat",
      "Split", "Slice",  "Tile",       "Gather",   "GatherElements", "GatherND",
  };
  return names;
}

/// `n` elements of `src` (f16 or bf16 bits) as f32 into `dst`.
void widen(const KernelContext &ctx, DType t, const uint16_t *src, float *dst, int64_t n) {
  ctx.parallelFor(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      dst[i] = t == DType::F16 ? math::halfToFloat(src[i]) : math::bfloat16ToFloat(src[i]);
  });
}

/// `n` f32 elements of `src` rounded to f16 or bf16 bits into `dst`.
void narrow(const KernelContext &ctx, DType t, const float *src, uint16_t *dst, int64_t n) {
  ctx.parallelFor(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      dst[i] = t == DType::F16 ? math::floatToHalf(src[i]) : math::floatToBfloat16(src[i]);
  });
}

Status runWidened(KernelFn fn, const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  bool any = false;
  for (const TensorRef &t : in)
    any |= isHalf(t.dtype);
  for (const TensorRef &t : out)
    any |= isHalf(t.dtype);
  if (!any)
    return fn(ctx, in, out, attrs);
  // The f32 copies live in buffers of this thread, kept between calls (a
  // kernel never calls another through a trampoline), so that a 16-bit
  // program does not allocate and fault in fresh pages at every op; one
  // over kKeptFloats is given back after the call, so a large operand (an
  // LM head) costs its memory only while its kernel runs.
  constexpr size_t kKeptFloats = size_t(4) << 20; // 16 MiB
  thread_local std::vector<std::vector<float>> storage;
  size_t used = 0;
  struct GiveBack {
    std::vector<std::vector<float>> &buffers;
    ~GiveBack() {
      for (std::vector<float> &b : buffers)
        if (b.capacity() > kKeptFloats)
          std::vector<float>().swap(b);
    }
  } giveBack{storage};
  auto wide = [&](const TensorRef &t) {
    if (storage.size() <= used)
      storage.emplace_back();
    std::vector<float> &buf = storage[used++];
    if (buf.size() < size_t(t.numel()))
      buf.resize(size_t(t.numel()));
    return TensorRef{buf.data(), DType::F32, t.shape};
  };
  std::vector<TensorRef> win = in, wout = out;
  for (size_t i = 0; i < in.size(); ++i)
    if (isHalf(in[i].dtype)) {
      win[i] = wide(in[i]);
      widen(ctx, in[i].dtype, in[i].as<uint16_t>(), win[i].as<float>(), in[i].numel());
    }
  for (size_t i = 0; i < out.size(); ++i)
    if (isHalf(out[i].dtype)) {
      wout[i] = wide(out[i]);
      // An output that is also an input (in place) starts from its value.
      for (size_t j = 0; j < in.size(); ++j)
        if (in[j].data == out[i].data && isHalf(in[j].dtype))
          std::copy(win[j].as<float>(), win[j].as<float>() + out[i].numel(),
                    wout[i].as<float>());
    }
  ZRT_RETURN_IF_ERROR(fn(ctx, win, wout, attrs));
  for (size_t i = 0; i < out.size(); ++i)
    if (isHalf(out[i].dtype))
      narrow(ctx, out[i].dtype, wout[i].as<float>(), out[i].as<uint16_t>(), out[i].numel());
  return Status::ok();
}

/// The f32 kernels behind the trampolines, by slot; filled once (every
/// table gets the same kernel for an op, so the slots never change).
constexpr size_t kMaxWidened = 320;
std::array<KernelFn, kMaxWidened> widenedSlots{};
std::map<std::string, size_t> slotOfOp;
std::mutex slotsMutex;

template <size_t I>
Status widenedKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &attrs) {
  return runWidened(widenedSlots[I], ctx, in, out, attrs);
}

template <size_t... I>
constexpr std::array<KernelFn, sizeof...(I)> widenedEntries(std::index_sequence<I...>) {
  return {{&widenedKernel<I>...}};
}
constexpr std::array<KernelFn, kMaxWidened> kWidenedEntries =
    widenedEntries(std::make_index_sequence<kMaxWidened>());

} // namespace

void widenHalfKernels(KernelTable &table) {
  std::lock_guard<std::mutex> lock(slotsMutex);
  for (const std::string &op : table.names()) {
    if (nativeKernels().count(op))
      continue;
    auto it = slotOfOp.find(op);
    if (it == slotOfOp.end()) {
      if (slotOfOp.size() >= kMaxWidened) {
        // A kernel table that outgrew the slots: a build error in spirit.
        std::fprintf(stderr, "zrt: internal error: more CPU kernels than kMaxWidened (%zu) "
                             "in HalfWidening.cpp; raise it\n", kMaxWidened);
        std::abort();
      }
      it = slotOfOp.emplace(op, slotOfOp.size()).first;
      widenedSlots[it->second] = table.lookup(op);
    }
    table.add(op, kWidenedEntries[it->second]);
  }
}

} // namespace cpu
} // namespace zrt
