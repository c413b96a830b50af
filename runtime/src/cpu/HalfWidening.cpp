//===- HalfWidening.cpp - f16 and bf16 operands through the f32 kernels ---===//
//
// The CPU kernels compute in f32 (and f64); a program stored in 16 bits (an
// fp16 or bf16 export, or one zero-mixed-precision wrote) runs them through
// widenHalfKernels' trampolines: each f16/bf16 input is widened to an f32
// copy (exact), the f32 kernel runs, and each f16/bf16 output is rounded
// back (to nearest even; NaN stays NaN). So a 16-bit kernel's result is the
// f32 kernel's on the widened values, rounded once: the same bits at any
// thread count, as the f32 kernels are. An elementwise kernel whose operands
// all have one shape runs a slice of kChunk elements at a time through
// buffers that stay in cache. Kernels that take 16-bit operands themselves
// skip the trampoline: those that only move elements or convert them (Cast,
// Transpose, Gather, a scatter without reduction, Where, Pad, Fill, ...) and
// the products (MatMul, Gemm: B widened as it is packed, A a task's rows at a
// time, C rounded from an f32 tile; the same bits as through the trampoline),
// and FusedElementwise (a block of each operand at a time).
// Calls without 16-bit operands go straight to the kernel.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "CpuHalf.h"

#include "kernels/KernelSlots.h"
#include "kernels/KernelSupport.h"
#include "kernels/ReduceKernels.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <set>
#include <utility>

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

/// Kernels that take 16-bit operands themselves: they move elements by their
/// size, convert them (Cast), compute products in f32 (MatMul, Gemm), or
/// widen and round a block at a time (FusedElementwise).
const std::set<std::string> &nativeKernels() {
  static const std::set<std::string> names = {
      "Cast",  "Copy",   "LocalShard", "Expand", "Transpose", "Concat",
      "Split", "Slice",  "Tile",       "Gather", "GatherElements", "GatherND",
      "Where", "Pad",    "Fill",       "Trilu",  "MatMul",    "Gemm",
      "ScatterND", "FusedElementwise",
  };
  return names;
}

/// Scatters that take 16-bit operands themselves when they only place
/// elements (no reduction); with one, their sums are f32 sums rounded once.
/// (ScatterND reduces 16-bit rows itself: IndexingKernels.h.)
const std::set<std::string> &placingKernels() {
  static const std::set<std::string> names = {"ScatterElements"};
  return names;
}

/// Kernels that compute each output element from the same element of every
/// operand when all operands have one shape (the elementwise ones): such a
/// call may run on slices.
const std::set<std::string> &elementwiseKernels() {
  static const std::set<std::string> names = [] {
    KernelTable table;
    registerUnaryKernels(table);
    registerBinaryKernels(table);
    std::set<std::string> out;
    for (const std::string &name : table.names())
      out.insert(name);
    return out;
  }();
  return names;
}

/// Elements of one slice of an elementwise call: its f32 buffers (a few per
/// call) stay in L2.
constexpr int64_t kChunk = 65536;

/// `n` elements of `src` (f16 or bf16 bits) as f32 into `dst`.
void widen(const KernelContext &ctx, DType t, const uint16_t *src, float *dst, int64_t n) {
  parallelRange(ctx, n, kChunk, [&](int64_t b, int64_t e) {
    widenHalfRow(t, src + b, dst + b, e - b);
  });
}

/// `n` f32 elements of `src` rounded to f16 or bf16 bits into `dst`.
void narrow(const KernelContext &ctx, DType t, const float *src, uint16_t *dst, int64_t n) {
  parallelRange(ctx, n, kChunk, [&](int64_t b, int64_t e) {
    narrowHalfRow(t, src + b, dst + b, e - b);
  });
}

/// How an elementwise call is cut into slices: runs of `rows` outer rows of
/// `inner` elements (the output's trailing dims `innerShape`). An input is
/// the output's shape (sliced with it), broadcast over the outer rows (its
/// shape, leading 1s dropped, is `innerShape`: passed whole), or one element
/// (passed whole as a scalar).
struct SlicePlan {
  int64_t inner = 1;
  std::vector<int64_t> innerShape;
  std::vector<int> kind; ///< per input: 0 sliced, 1 inner, 2 scalar, 3 absent
};

/// Whether the call's operands allow slicing (see SlicePlan); fills `plan`.
bool planSlices(const std::vector<TensorRef> &in, const std::vector<TensorRef> &out,
                SlicePlan &plan) {
  if (out.empty())
    return false;
  const std::vector<int64_t> &shape = out[0].shape;
  for (const TensorRef &t : out)
    if (t.shape != shape)
      return false;
  plan.kind.assign(in.size(), 0);
  bool haveInner = false;
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorRef &t = in[i];
    if (!t.data) {
      plan.kind[i] = 3;
      continue;
    }
    if (t.shape == shape)
      continue;
    if (t.numel() == 1) {
      plan.kind[i] = 2;
      continue;
    }
    size_t lead = 0;
    while (lead < t.shape.size() && t.shape[lead] == 1)
      ++lead;
    const std::vector<int64_t> stripped(t.shape.begin() + int64_t(lead), t.shape.end());
    if (stripped.size() > shape.size() ||
        !std::equal(stripped.begin(), stripped.end(), shape.end() - int64_t(stripped.size())))
      return false;
    if (haveInner && stripped != plan.innerShape)
      return false;
    haveInner = true;
    plan.innerShape = stripped;
    plan.kind[i] = 1;
  }
  plan.inner = 1;
  for (int64_t d : plan.innerShape)
    plan.inner *= d;
  return plan.inner > 0 && plan.inner <= kChunk;
}

/// An elementwise kernel on slices of about kChunk elements (whole rows of
/// SlicePlan::inner): each slice's 16-bit operands widened into buffers of
/// the slice (in-place operands share theirs; broadcast ones widened once),
/// the kernel run on the slice (on this thread: the slices are the parallel
/// tasks), its 16-bit outputs rounded back. Each element is computed as in
/// one call over the whole tensors.
Status runSliced(KernelFn fn, const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &attrs,
                 const SlicePlan &plan) {
  const int64_t rows = out[0].numel() / plan.inner;
  const int64_t rowsPerSlice = std::max<int64_t>(1, kChunk / plan.inner);
  const int64_t sliceFloats = rowsPerSlice * plan.inner;
  KernelContext serial = ctx;
  serial.numThreads = 1;
  serial.parallelFor = [](int64_t count, const std::function<void(int64_t, int64_t)> &body) {
    if (count > 0)
      body(0, count);
  };
  serial.constants = nullptr;
  std::mutex failure;
  Status status;
  parallelRange(ctx, (rows + rowsPerSlice - 1) / rowsPerSlice, 1, [&](int64_t c0, int64_t c1) {
    thread_local std::vector<float> buffers;
    const size_t operands = in.size() + out.size();
    if (buffers.size() < operands * size_t(sliceFloats))
      buffers.resize(operands * size_t(sliceFloats));
    // Broadcast inputs: widened once per task.
    std::vector<TensorRef> sin(in.size()), sout(out.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const TensorRef &t = in[i];
      if (plan.kind[i] == 0 || plan.kind[i] == 3) {
        sin[i] = t;
        continue;
      }
      std::vector<int64_t> shape =
          plan.kind[i] == 2 ? std::vector<int64_t>{} : plan.innerShape;
      if (!isHalf(t.dtype)) {
        sin[i] = TensorRef{t.data, t.dtype, shape};
        continue;
      }
      float *buf = buffers.data() + i * size_t(sliceFloats);
      widenHalfRow(t.dtype, t.as<uint16_t>(), buf, t.numel());
      sin[i] = TensorRef{buf, DType::F32, shape};
    }
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * rowsPerSlice, r = std::min(rowsPerSlice, rows - r0);
      const int64_t b = r0 * plan.inner, len = r * plan.inner;
      std::vector<int64_t> shape = {r};
      shape.insert(shape.end(), plan.innerShape.begin(), plan.innerShape.end());
      auto slice = [&](const TensorRef &t, size_t slot, bool widenIt) {
        if (!isHalf(t.dtype))
          return TensorRef{static_cast<char *>(t.data) + size_t(b) * dtypeSize(t.dtype),
                           t.dtype, shape};
        float *buf = buffers.data() + slot * size_t(sliceFloats);
        if (widenIt)
          widenHalfRow(t.dtype, t.as<uint16_t>() + b, buf, len);
        return TensorRef{buf, DType::F32, shape};
      };
      for (size_t i = 0; i < in.size(); ++i)
        if (plan.kind[i] == 0)
          sin[i] = slice(in[i], i, true);
      for (size_t o = 0; o < out.size(); ++o) {
        // An output that is also a sliced input (in place) shares its buffer.
        size_t slot = in.size() + o;
        for (size_t i = 0; i < in.size(); ++i)
          if (plan.kind[i] == 0 && in[i].data == out[o].data && isHalf(in[i].dtype))
            slot = i;
        sout[o] = slice(out[o], slot, false);
      }
      Status s = fn(serial, sin, sout, attrs);
      if (!s) {
        std::lock_guard<std::mutex> lock(failure);
        if (status)
          status = s;
        return;
      }
      for (size_t o = 0; o < out.size(); ++o)
        if (isHalf(out[o].dtype))
          narrowHalfRow(out[o].dtype, sout[o].as<float>(), out[o].as<uint16_t>() + b, len);
    }
  });
  return status;
}

Status runWidened(KernelFn fn, bool elementwise, const KernelContext &ctx,
                  const std::vector<TensorRef> &in, const std::vector<TensorRef> &out,
                  const AttrMap &attrs) {
  bool any = false;
  for (const TensorRef &t : in)
    any |= isHalf(t.dtype);
  for (const TensorRef &t : out)
    any |= isHalf(t.dtype);
  if (!any)
    return fn(ctx, in, out, attrs);
  SlicePlan plan;
  if (elementwise && out[0].numel() > 0 && planSlices(in, out, plan))
    return runSliced(fn, ctx, in, out, attrs, plan);
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
std::array<bool, kMaxWidened> elementwiseSlots{};
std::array<bool, kMaxWidened> placingSlots{};
/// The op of each slot (for the kernels that take some 16-bit calls
/// themselves: reduceHalfKeptRows).
std::array<std::string, kMaxWidened> slotNames{};
SlotAssigner slotOfOp(kMaxWidened, "cpu/HalfWidening.cpp");
std::mutex slotsMutex;

Status runSlot(size_t slot, const KernelContext &ctx, const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out, const AttrMap &attrs) {
  if (placingSlots[slot] && attrs.getString("reduction", "none") == "none")
    return widenedSlots[slot](ctx, in, out, attrs);
  // A sum of 16-bit rows (a bias gradient) widens a tile of a row at a time.
  if (Status status; reduceHalfKeptRows(slotNames[slot], ctx, in, out, attrs, status))
    return status;
  return runWidened(widenedSlots[slot], elementwiseSlots[slot], ctx, in, out, attrs);
}

} // namespace

void widenHalfKernels(KernelTable &table) {
  std::lock_guard<std::mutex> lock(slotsMutex);
  for (const std::string &op : table.names()) {
    if (nativeKernels().count(op))
      continue;
    auto [slot, fresh] = slotOfOp.slotOf(op);
    if (fresh) {
      widenedSlots[slot] = table.lookup(op);
      elementwiseSlots[slot] = elementwiseKernels().count(op) != 0;
      placingSlots[slot] = placingKernels().count(op) != 0;
      slotNames[slot] = op;
    }
    table.add(op, KernelSlots<runSlot, kMaxWidened>::entries[slot]);
  }
}

} // namespace cpu
} // namespace zrt
