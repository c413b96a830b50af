//===- Optimizer.cpp - Optimizer steps and learning-rate schedules --------===//
//
// The kernels a training program ends each step with (docs/kernels.md,
// "Training"): AdamW/Adam and SGD update a parameter and its optimizer state
// elementwise (host code and math shared with the CUDA backend:
// OptimizerKernels.h, math/OptimizerMath.h), and LrSchedule turns the step
// counter into the step's learning rate with DeepSpeed's schedules.
//
// The updates follow PyTorch's single-tensor implementations
// (torch/optim/adam.py `_single_tensor_adam`, torch/optim/sgd.py
// `_single_tensor_sgd`) operation by operation in f32, with the scalars
// rounded to f32 where ATen rounds them, and a fused multiply-add exactly
// where ATen's vectorised CPU kernels use one (lerp_, and add_/add with
// alpha); this file is compiled with -ffp-contract=off so that the compiler
// adds no others. The host-side scalars (bias corrections, step size) are
// computed in double like the Python code. Results are therefore the same at
// any thread count and on any x86-64 clone of the loops.
//
// Every output may be the same buffer as an input (the compiler updates the
// parameter and the state in place): the loops read a block of every input
// before writing that block of any output.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "CpuLoops.h"
#include "kernels/OptimizerKernels.h"

#include "io/SwapFiles.h"

#include <unistd.h>

#include <cmath>

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

/// Like ZRT_HOT_LOOP, with FMA in the vector clones: std::fma is a single
/// instruction there (the default clone calls the C library's fmaf, which
/// gives the same result).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&         \
    defined(__linux__)
#define ZRT_OPTIMIZER_LOOP                                                     \
  __attribute__((target_clones("avx512f", "arch=haswell", "default")))
#else
#define ZRT_OPTIMIZER_LOOP
#endif

/// Elements per block: the inputs of a block are copied to the stack before
/// its outputs are written, which makes in-place updates safe.
constexpr int64_t kBlock = 512;

using optimizer::checkScalar;
using optimizer::numberAttr;

//===----------------------------------------------------------------------===//
// AdamW / Adam, SGD
//===----------------------------------------------------------------------===//

/// One block of the update, in place on the (stack) copies.
ZRT_OPTIMIZER_LOOP
void adamBlock(const math::AdamScalars &s, float *__restrict param,
               const float *__restrict grad, float *__restrict expAvg,
               float *__restrict expAvgSq, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    math::adamElement(s, param[i], grad[i], expAvg[i], expAvgSq[i]);
}

ZRT_OPTIMIZER_LOOP
void sgdBlock(const math::SgdScalars &s, float *__restrict param,
              const float *__restrict grad, float *__restrict buffer,
              int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    math::sgdElement(s, param[i], grad[i], buffer[i]);
}

/// The CPU loops of AdamW and SGD (optimizer::adamWKernel / sgdKernel).
struct CpuOptimizerLoops : CpuLoops {
  static Status adam(const KernelContext &ctx, const math::AdamScalars &s,
                     const float *param, const float *grad, const float *expAvg,
                     const float *expAvgSq, float *paramOut, float *expAvgOut,
                     float *expAvgSqOut, int64_t n) {
    parallelRange(ctx, n, kElementGrain, [&](int64_t begin, int64_t end) {
      float p[kBlock], g[kBlock], m[kBlock], v[kBlock];
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t len = std::min(kBlock, end - b);
        const size_t bytes = size_t(len) * sizeof(float);
        std::memcpy(p, param + b, bytes);
        std::memcpy(g, grad + b, bytes);
        std::memcpy(m, expAvg + b, bytes);
        std::memcpy(v, expAvgSq + b, bytes);
        adamBlock(s, p, g, m, v, len);
        std::memcpy(paramOut + b, p, bytes);
        std::memcpy(expAvgOut + b, m, bytes);
        std::memcpy(expAvgSqOut + b, v, bytes);
      }
    });
    return Status::ok();
  }
  static Status sgd(const KernelContext &ctx, const math::SgdScalars &s,
                    const float *param, const float *grad, const float *buffer,
                    float *paramOut, float *bufferOut, int64_t n) {
    const bool hasMomentum = s.hasMomentum;
    parallelRange(ctx, n, kElementGrain, [&](int64_t begin, int64_t end) {
      float p[kBlock], g[kBlock], buf[kBlock];
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t len = std::min(kBlock, end - b);
        const size_t bytes = size_t(len) * sizeof(float);
        std::memcpy(p, param + b, bytes);
        std::memcpy(g, grad + b, bytes);
        if (hasMomentum && !s.firstStep)
          std::memcpy(buf, buffer + b, bytes);
        sgdBlock(s, p, g, buf, len);
        std::memcpy(paramOut + b, p, bytes);
        if (hasMomentum)
          std::memcpy(bufferOut + b, buf, bytes);
      }
    });
    return Status::ok();
  }
};

/// The pages of `t` (page-aligned in an offload arena: zero-lower-to-runtime
/// starts each offloaded global on a page).
std::pair<void *, size_t> pagesOf(const TensorRef &t) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(t.data) + t.bytes() + page - 1) / page * page;
  return {reinterpret_cast<void *>(begin), size_t(end - begin)};
}

/// SwapIn(state...): ZeRO-Offload's read-ahead of an update's offloaded
/// state: the kernel starts reading its pages from the swap file and
/// returns (the update, some instructions later, finds them resident).
Status swapInKernel(const KernelContext &, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &, const AttrMap &) {
  for (const TensorRef &t : in)
    if (t.data && t.bytes() > 0) {
      auto [p, n] = pagesOf(t);
      swapInPages(p, n);
    }
  return Status::ok();
}

/// SwapOut() -> state...: the updated state's pages leave memory: their
/// writes to the swap file are queued (the kernel does them while the next
/// instructions run) and they are unmapped (io/SwapFiles.h).
Status swapOutKernel(const KernelContext &, const std::vector<TensorRef> &,
                     const std::vector<TensorRef> &out, const AttrMap &) {
  for (const TensorRef &t : out)
    if (t.data && t.bytes() > 0) {
      auto [p, n] = pagesOf(t);
      swapOutPages(p, n);
    }
  return Status::ok();
}

} // namespace

void registerOptimizerKernels(KernelTable &table) {
  optimizer::addOptimizerKernels<CpuOptimizerLoops>(table);
  table.add("SwapIn", swapInKernel);
  table.add("SwapOut", swapOutKernel);
}

} // namespace cpu
} // namespace zrt
