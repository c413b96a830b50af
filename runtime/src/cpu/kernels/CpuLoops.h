//===- CpuLoops.h - The CPU side of the kernels shared with CUDA -*- C++
//-*-===//
//
// The kernels whose host code (operand checks, attribute parsing, dtype
// dispatch) is shared with the CUDA backend are templates over a `Loops`
// policy that runs their inner loops: CpuLoops here (parallelRange over the
// vectorised, target_clones'd loops the CPU kernels always had) and
// cuda::CudaLoops (cuda/CudaLoops.cuh: grid-stride kernel launches on the
// launch's CUDA stream). The per-element math is the same functor either way
// (math/ElementwiseMath.h). Every member returns a Status: the CUDA ones
// report launch errors.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CPU_KERNELS_CPULOOPS_H
#define ZRT_CPU_KERNELS_CPULOOPS_H

#include "kernels/KernelSupport.h"

namespace zrt {
namespace cpu {
using namespace kernels;

/// out[i] = fn(in[i]), compiled per CPU flavour.
template <typename Op, typename T, typename TO>
ZRT_HOT_LOOP void unaryLoop(const Op &op, const T *in, TO *out, int64_t n) {
  mapElements(in, out, n, op);
}

/// out[i] = fn(a[i*sa], b[i*sb]) for i < n with sa, sb in {0, 1}.
template <typename TA, typename TB, typename TO, typename Fn>
ZRT_HOT_LOOP void binaryRow(const Fn &fn, const TA *a, int64_t sa, const TB *b,
                            int64_t sb, TO *out, int64_t n) {
  if (sa == 1 && sb == 1) {
    zipElements(a, b, out, n, fn);
  } else if (sa == 0 && sb == 1) {
    const TA x = *a;
    mapElements(b, out, n, [&](TB y) { return fn(x, y); });
  } else if (sa == 1 && sb == 0) {
    const TB y = *b;
    mapElements(a, out, n, [&](TA x) { return fn(x, y); });
  } else {
    std::fill(out, out + n, fn(*a, *b));
  }
}

struct CpuLoops {
  /// Operand data is host memory: kernels may read it directly.
  static constexpr bool kHostData = true;

  /// out[i] = op(in[i]) for i < n (in == out allowed), in chunks of `grain`.
  template <typename Op, typename T, typename TO>
  static Status map(const KernelContext &ctx, int64_t grain, const Op &op,
                    const T *in, TO *out, int64_t n) {
    parallelRange(ctx, n, grain, [&](int64_t b, int64_t e) {
      unaryLoop(op, in + b, out + b, e - b);
    });
    return Status::ok();
  }

  /// out = op(a, b) with a and b broadcast by `plan` (two inputs).
  template <typename TA, typename TB, typename TO, typename Op>
  static Status broadcast2(const KernelContext &ctx, const BroadcastPlan &plan,
                           const Op &op, const TA *pa, const TB *pb, TO *po) {
    const int64_t sa = plan.innerStride(0), sb = plan.innerStride(1);
    parallelRange(
        ctx, plan.numel, kElementGrain, [&](int64_t begin, int64_t end) {
          forEachBroadcastRow(plan, begin, end,
                              [&](int64_t o, const int64_t *inOff, int64_t n) {
                                binaryRow(op, pa + inOff[0], sa, pb + inOff[1],
                                          sb, po + o, n);
                              });
        });
    return Status::ok();
  }

  /// out = cond ? x : y broadcast by `plan` (three inputs), by element size.
  template <typename U>
  static Status where(const KernelContext &ctx, const BroadcastPlan &plan,
                      const uint8_t *cond, const U *px, const U *py, U *po) {
    const int64_t sc = plan.innerStride(0), sx = plan.innerStride(1),
                  sy = plan.innerStride(2);
    parallelRange(ctx, plan.numel, kElementGrain, [&](int64_t b, int64_t e) {
      forEachBroadcastRow(plan, b, e,
                          [&](int64_t o, const int64_t *off, int64_t n) {
                            const uint8_t *c = cond + off[0];
                            const U *xs = px + off[1], *ys = py + off[2];
                            U *dst = po + o;
                            if (sc == 1 && sx == 1 && sy == 1) {
                              for (int64_t i = 0; i < n; ++i)
                                dst[i] = c[i] ? xs[i] : ys[i];
                            } else {
                              for (int64_t i = 0; i < n; ++i)
                                dst[i] = c[i * sc] ? xs[i * sx] : ys[i * sy];
                            }
                          });
    });
    return Status::ok();
  }

  /// body(i) for i < n, in chunks of `grain`.
  template <typename Body>
  static Status forEach(const KernelContext &ctx, int64_t n, int64_t grain,
                        const Body &body) {
    parallelRange(ctx, n, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        body(i);
    });
    return Status::ok();
  }

  /// `in` broadcast to `out`'s shape (same element size).
  static Status broadcastCopy(const KernelContext &ctx, const char *op,
                              const TensorRef &in, const TensorRef &out) {
    return cpu::broadcastCopy(ctx, op, in, out);
  }

  /// memcpy (skipped onto itself and for 0 bytes).
  static Status copy(void *dst, const void *src, uint64_t bytes) {
    if (dst != src && bytes != 0)
      std::memcpy(dst, src, size_t(bytes));
    return Status::ok();
  }

  /// memset.
  static Status fill(void *dst, uint8_t byte, uint64_t bytes) {
    if (bytes != 0)
      std::memset(dst, byte, size_t(bytes));
    return Status::ok();
  }

  /// Writes one element of operand data from host memory.
  template <typename T> static Status write(T *dst, T value) {
    *dst = value;
    return Status::ok();
  }

  /// Reads one element of operand data into host memory.
  template <typename T> static Status read(const T *src, T &value) {
    value = *src;
    return Status::ok();
  }
};

} // namespace cpu
} // namespace zrt

#endif // ZRT_CPU_KERNELS_CPULOOPS_H
