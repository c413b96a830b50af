//===- Reduce.cpp - Reductions, arg max/min and cumulative sums -----------===//
//
// All Reduce* kernels share one driver (runReduction) parameterised by a
// reducer policy (init / add / addRun / merge / finish). The driver collapses
// the input into alternating kept and reduced dim groups and then either
// reduces contiguous runs into one accumulator per output element (the last
// group is reduced) or accumulates whole contiguous rows into a vector of
// accumulators (the last group is kept), in parallel over output elements.
// ArgMax/ArgMin and CumSum work on the [outer, axis, inner] view of one axis.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "kernels/ReduceKernels.h"

#include <memory>

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

//===----------------------------------------------------------------------===//
// Reducer policies
//===----------------------------------------------------------------------===//

/// A reducer of math/ReduceMath.h plus the CPU's loop over a contiguous run
/// (vectorised partial sums for the sum-like ones, one pass with a running
/// maximum for LogSumExp).
template <typename M> struct CpuReducer : M {
  using typename M::Acc;
  template <typename T> static void addRun(Acc &acc, const T *p, int64_t n) {
    if constexpr (M::kKind == math::ReducerKind::SumLike) {
      acc += sumMapped(p, n, typename M::MapFn{});
    } else if constexpr (M::kKind == math::ReducerKind::LogSumExp) {
      if (n <= 0)
        return;
      const T runMax = maxOf(p, n);
      if (!std::isfinite(runMax)) { // NaN, +inf or all -inf: the slow rules
        for (int64_t i = 0; i < n; ++i)
          M::add(acc, p[i]);
        return;
      }
      M::merge(acc, Acc{runMax, sumMapped(p, n, [runMax](T x) {
                          return expOf(T(x - runMax));
                        })});
    } else {
      for (int64_t i = 0; i < n; ++i)
        M::add(acc, p[i]);
    }
  }
};

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

} // namespace

namespace {

/// Input offset of output row `o` (multi-index over keptDims).
inline int64_t keptOffset(const ReductionLayout &layout, int64_t o) {
  int64_t off = 0;
  for (size_t d = layout.keptDims.size(); d-- > 0;) {
    off += (o % layout.keptDims[d]) * layout.keptStrides[d];
    o /= layout.keptDims[d];
  }
  return off;
}

/// acc[v] = add(acc[v], row[v]) for v < n: the vector-mode inner loop.
template <typename R, typename T>
ZRT_HOT_LOOP void accumulateRow(typename R::Acc *__restrict acc,
                                const T *__restrict row, int64_t n) {
  for (int64_t v = 0; v < n; ++v)
    R::add(acc[v], row[v]);
}

template <typename R, typename T>
void runReduction(const KernelContext &ctx, const ReductionLayout &layout,
                  const T *in, T *out) {
  using Acc = typename R::Acc;
  const std::vector<int64_t> &offsets = layout.reducedOffsets;
  if (layout.innerKept) {
    // Vector mode: out[o, v] accumulates rows in[base + r + v].
    const int64_t width = layout.inner;
    parallelOuterInner(
        ctx, layout.outerCount, layout.count, width,
        [&](int64_t o, int64_t vBegin, int64_t vEnd) {
          const int64_t base = keptOffset(layout, o);
          // (not std::vector: Acc may be bool)
          std::unique_ptr<Acc[]> acc(new Acc[size_t(vEnd - vBegin)]);
          std::fill_n(acc.get(), vEnd - vBegin, R::init());
          for (int64_t r : offsets)
            accumulateRow<R>(acc.get(), in + base + r + vBegin, vEnd - vBegin);
          T *dst = out + o * width + vBegin;
          for (int64_t v = 0; v < vEnd - vBegin; ++v)
            dst[v] = R::finish(acc[size_t(v)], layout.count);
        });
    return;
  }
  // Scalar mode: each output reduces runs of `inner` contiguous elements.
  const int64_t run = layout.inner;
  const int64_t numRuns = int64_t(offsets.size());
  auto reduceRuns = [&](int64_t base, int64_t begin, int64_t end, Acc &acc) {
    // Elements [begin, end) of the flattened (offsets x run) space.
    while (begin < end) {
      const int64_t r = begin / run, within = begin % run;
      const int64_t len = std::min(end - begin, run - within);
      R::addRun(acc, in + base + offsets[size_t(r)] + within, len);
      begin += len;
    }
  };
  const int64_t total = numRuns * run;
  // Whether a reduction is split into partial sums is decided by the shape
  // alone, so the summation order never depends on the thread count.
  if (layout.outerCount >= kParallelTasks || total < 2 * kElementGrain) {
    parallelRange(ctx, layout.outerCount, rowGrain(total, kElementGrain),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t o = begin; o < end; ++o) {
                      Acc acc = R::init();
                      reduceRuns(keptOffset(layout, o), 0, total, acc);
                      out[o] = R::finish(acc, layout.count);
                    }
                  });
    return;
  }
  // Few large reductions: split each into partial accumulators.
  const int64_t parts = std::min<int64_t>(total / kElementGrain, kMaxChunks);
  std::unique_ptr<Acc[]> partial(new Acc[size_t(parts)]);
  for (int64_t o = 0; o < layout.outerCount; ++o) {
    const int64_t base = keptOffset(layout, o);
    parallelRange(ctx, parts, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        partial[size_t(p)] = R::init();
        reduceRuns(base, p * total / parts, (p + 1) * total / parts,
                   partial[size_t(p)]);
      }
    });
    Acc acc = R::init();
    for (int64_t p = 0; p < parts; ++p)
      R::merge(acc, partial[size_t(p)]);
    out[o] = R::finish(acc, layout.count);
  }
}

/// The CPU loops of the Reduce* kernels (reduce::reduceKernel).
struct CpuReduceLoops {
  template <typename M, typename T>
  static Status reduce(const KernelContext &ctx, const ReductionLayout &layout,
                       const T *in, T *out) {
    runReduction<CpuReducer<M>>(ctx, layout, in, out);
    return Status::ok();
  }

  template <typename T, bool IsMax>
  static Status argExtremum(const KernelContext &ctx, const AxisSplit &split,
                            bool last, const TensorRef &x, const TensorRef &y) {
    const T *src = x.as<T>();
    int64_t *dst = y.as<int64_t>();
    parallelOuterInner(ctx, split.outer, split.axis, split.inner,
                       [&](int64_t o, int64_t ib, int64_t ie) {
                         const T *base = src + o * split.axis * split.inner;
                         std::vector<T> best(base + ib, base + ie);
                         std::vector<int64_t> index(size_t(ie - ib), 0);
                         for (int64_t a = 1; a < split.axis; ++a) {
                           const T *row = base + a * split.inner;
                           for (int64_t i = ib; i < ie; ++i)
                             if (math::argBetter<T, IsMax>(
                                     row[i], best[size_t(i - ib)], last)) {
                               best[size_t(i - ib)] = row[i];
                               index[size_t(i - ib)] = a;
                             }
                         }
                         std::copy(index.begin(), index.end(),
                                   dst + o * split.inner + ib);
                       });
    return Status::ok();
  }

  template <typename T>
  static Status cumSum(const KernelContext &ctx, const AxisSplit &split,
                       bool exclusive, bool reverse, const TensorRef &x,
                       const TensorRef &y) {
    const T *src = x.as<T>();
    T *dst = y.as<T>();
    parallelOuterInner(
        ctx, split.outer, split.axis, split.inner,
        [&](int64_t o, int64_t ib, int64_t ie) {
          const int64_t base = o * split.axis * split.inner;
          std::vector<T> running(size_t(ie - ib), T(0));
          for (int64_t step = 0; step < split.axis; ++step) {
            const int64_t a = reverse ? split.axis - 1 - step : step;
            const T *row = src + base + a * split.inner;
            T *outRow = dst + base + a * split.inner;
            for (int64_t i = ib; i < ie; ++i) {
              const T x = row[i]; // read before writing (in-place safe)
              outRow[i] =
                  math::cumSumStep(running[size_t(i - ib)], x, exclusive);
            }
          }
        });
    return Status::ok();
  }
};

//===----------------------------------------------------------------------===//
// ArgMax / ArgMin
//===----------------------------------------------------------------------===//

} // namespace

namespace {

/// runReduction's vector mode for reducer R (over f32) on 16-bit rows.
template <typename R>
void reduceKeptHalf(const KernelContext &ctx, const ReductionLayout &layout, DType dt,
                    const uint16_t *in, uint16_t *out) {
  const int64_t width = layout.inner;
  parallelOuterInner(ctx, layout.outerCount, layout.count, width,
                     [&](int64_t o, int64_t vBegin, int64_t vEnd) {
                       const int64_t base = keptOffset(layout, o);
                       const int64_t n = vEnd - vBegin;
                       thread_local std::vector<float> acc, row;
                       acc.assign(size_t(n), R::init());
                       if (row.size() < size_t(n))
                         row.resize(size_t(n));
                       for (int64_t r : layout.reducedOffsets) {
                         widenHalfRow(dt, in + base + r + vBegin, row.data(), n);
                         accumulateRow<R>(acc.data(), row.data(), n);
                       }
                       for (int64_t v = 0; v < n; ++v)
                         acc[size_t(v)] = R::finish(acc[size_t(v)], layout.count);
                       narrowHalfRow(dt, acc.data(), out + o * width + vBegin, n);
                     });
}

} // namespace

bool reduceHalfKeptRows(const std::string &op, const KernelContext &ctx,
                        const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out, const AttrMap &attrs,
                        Status &status) {
  if (in.size() != 1 || out.size() != 1 || !in[0].data || !out[0].data)
    return false;
  const DType dt = in[0].dtype;
  if ((dt != DType::BF16 && dt != DType::F16) || out[0].dtype != dt)
    return false;
  if (op != "ReduceSum" && op != "ReduceMean" && op != "ReduceSumSquare")
    return false;
  ReductionLayout layout;
  if (!planReduction(op.c_str(), in[0].shape, attrs.getInts("axes"), layout).isOk() ||
      !layout.innerKept ||
      out[0].numel() != layout.outerCount * layout.inner)
    return false; // the f32 kernel reports what is wrong, or handles it
  const uint16_t *src = in[0].as<uint16_t>();
  uint16_t *dst = out[0].as<uint16_t>();
  if (op == "ReduceSum")
    reduceKeptHalf<CpuReducer<math::SumReducer<float>>>(ctx, layout, dt, src, dst);
  else if (op == "ReduceMean")
    reduceKeptHalf<CpuReducer<math::MeanReducer<float>>>(ctx, layout, dt, src, dst);
  else
    reduceKeptHalf<CpuReducer<math::SumSquareReducer<float>>>(ctx, layout, dt, src, dst);
  status = Status::ok();
  return true;
}

void registerReduceKernels(KernelTable &table) {
  reduce::addReduceKernels<CpuReduceLoops>(table);
}

} // namespace cpu
} // namespace zrt
