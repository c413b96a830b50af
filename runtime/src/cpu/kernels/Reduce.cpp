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

#include "KernelSupport.h"

#include <memory>

namespace zrt {
namespace cpu {
namespace {

//===----------------------------------------------------------------------===//
// Reducer policies
//===----------------------------------------------------------------------===//

/// Sums of f(x): Sum, Mean, SumSquare, L1, L2, LogSum differ only in f and
/// in the final transform.
template <typename T, typename Map, typename Finish> struct SumLikeReducer {
  using Acc = T;
  static Acc init() { return T(0); }
  static void add(Acc &acc, T x) { acc += Map{}(x); }
  static void addRun(Acc &acc, const T *p, int64_t n) {
    acc += sumMapped(p, n, Map{});
  }
  static void merge(Acc &acc, const Acc &other) { acc += other; }
  static T finish(const Acc &acc, int64_t count) {
    return Finish{}(acc, count);
  }
};

struct MapIdentity {
  template <typename T> T operator()(T x) const { return x; }
};
struct MapSquare {
  template <typename T> T operator()(T x) const { return x * x; }
};
struct MapAbs {
  template <typename T> T operator()(T x) const { return x < T(0) ? T(-x) : x; }
};
struct FinishIdentity {
  template <typename T> T operator()(T acc, int64_t) const { return acc; }
};
struct FinishMean {
  template <typename T> T operator()(T acc, int64_t count) const {
    if constexpr (std::is_integral_v<T>)
      return count == 0 ? T(0) : T(acc / T(count));
    else
      return acc / T(count);
  }
};
struct FinishSqrt {
  template <typename T> T operator()(T acc, int64_t) const {
    return T(std::sqrt(double(acc)));
  }
};
struct FinishLog {
  template <typename T> T operator()(T acc, int64_t) const {
    return T(std::log(double(acc)));
  }
};

/// Max (IsMax) or Min, NaN-propagating like numpy.
template <typename T, bool IsMax> struct ExtremumReducer {
  using Acc = T;
  static Acc init() {
    if constexpr (std::is_floating_point_v<T>)
      return IsMax ? -std::numeric_limits<T>::infinity()
                   : std::numeric_limits<T>::infinity();
    else
      return IsMax ? std::numeric_limits<T>::lowest()
                   : std::numeric_limits<T>::max();
  }
  static void add(Acc &acc, T x) {
    const bool better = IsMax ? x > acc : x < acc;
    acc = (better || x != x) ? x : acc;
  }
  static void addRun(Acc &acc, const T *p, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      add(acc, p[i]);
  }
  static void merge(Acc &acc, const Acc &other) { add(acc, other); }
  static T finish(const Acc &acc, int64_t) { return acc; }
};

template <typename T> struct ProdReducer {
  using Acc = T;
  static Acc init() { return T(1); }
  static void add(Acc &acc, T x) { acc *= x; }
  static void addRun(Acc &acc, const T *p, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      acc *= p[i];
  }
  static void merge(Acc &acc, const Acc &other) { acc *= other; }
  static T finish(const Acc &acc, int64_t) { return acc; }
};

/// log(sum(exp(x))) with a running maximum (one pass, no overflow).
template <typename T> struct LogSumExpReducer {
  struct Acc {
    T max;
    T sum;
  };
  static constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  static Acc init() { return {kNegInf, T(0)}; }
  static void add(Acc &acc, T x) { merge(acc, Acc{x, T(1)}); }
  static void addRun(Acc &acc, const T *p, int64_t n) {
    if (n <= 0)
      return;
    const T runMax = maxOf(p, n);
    if (!std::isfinite(runMax)) { // NaN, +inf or all -inf: the slow rules
      for (int64_t i = 0; i < n; ++i)
        add(acc, p[i]);
      return;
    }
    merge(acc, Acc{runMax, sumMapped(p, n, [runMax](T x) {
                     return expOf(T(x - runMax));
                   })});
  }
  /// Combines two (max, sum of exp(x - max)) pairs; NaN wins, -inf is empty.
  static void merge(Acc &acc, const Acc &other) {
    if (acc.max != acc.max || other.max == kNegInf)
      return;
    if (other.max != other.max || acc.max == kNegInf) {
      acc = other;
      return;
    }
    if (other.max > acc.max) {
      acc.sum = acc.sum * expOf(T(acc.max - other.max)) + other.sum;
      acc.max = other.max;
    } else {
      acc.sum += other.max == acc.max
                     ? other.sum
                     : other.sum * expOf(T(other.max - acc.max));
    }
  }
  static T finish(const Acc &acc, int64_t) {
    if (!std::isfinite(acc.max))
      return acc.max;
    return T(std::log(acc.sum)) + acc.max;
  }
};

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// The input as kept/reduced dim groups, ready for the two loop shapes.
struct ReductionLayout {
  // Kept dims (input strides) whose multi-index selects an output row.
  std::vector<int64_t> keptDims, keptStrides;
  // Element offsets of every combination of the non-innermost reduced dims.
  std::vector<int64_t> reducedOffsets;
  int64_t inner = 1;      ///< contiguous innermost run length
  bool innerKept = false; ///< innermost run is kept (vector mode)
  int64_t outerCount = 1; ///< product of keptDims
  int64_t count = 1;      ///< elements reduced into each output
};

Status planReduction(const char *op, const std::vector<int64_t> &shape,
                     std::vector<int64_t> axes, ReductionLayout &layout) {
  const int64_t rank = int64_t(shape.size());
  std::vector<bool> reduced(size_t(rank), axes.empty());
  for (int64_t axis : axes) {
    if (rank == 0 && (axis == 0 || axis == -1))
      continue;
    if (axis < 0 || axis >= rank)
      return kernelError(op, "axis out of range", std::to_string(axis),
                         "0 <= axis < " + std::to_string(rank));
    reduced[size_t(axis)] = true;
  }
  const std::vector<int64_t> strides = contiguousStrides(shape);
  // Collapse: drop size-1 dims, merge neighbours of the same kind.
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Group> groups;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = shape[size_t(d)];
    if (size == 1)
      continue;
    const bool isReduced = reduced[size_t(d)];
    if (!groups.empty() && groups.back().reduced == isReduced) {
      groups.back().size *= size;
      groups.back().stride = strides[size_t(d)];
    } else {
      groups.push_back({size, strides[size_t(d)], isReduced});
    }
  }
  layout = ReductionLayout{};
  if (!groups.empty()) {
    layout.inner = groups.back().size;
    layout.innerKept = !groups.back().reduced;
    groups.pop_back();
  }
  std::vector<int64_t> redDims, redStrides;
  for (const Group &g : groups) {
    if (g.reduced) {
      redDims.push_back(g.size);
      redStrides.push_back(g.stride);
    } else {
      layout.keptDims.push_back(g.size);
      layout.keptStrides.push_back(g.stride);
    }
  }
  layout.outerCount = productOf(layout.keptDims, 0, layout.keptDims.size());
  const int64_t numOffsets = productOf(redDims, 0, redDims.size());
  layout.reducedOffsets.assign(size_t(numOffsets), 0);
  std::vector<int64_t> index(redDims.size(), 0);
  for (int64_t i = 0, off = 0; i < numOffsets; ++i) {
    layout.reducedOffsets[size_t(i)] = off;
    for (size_t d = redDims.size(); d-- > 0;) {
      off += redStrides[d];
      if (++index[d] < redDims[d])
        break;
      off -= redDims[d] * redStrides[d];
      index[d] = 0;
    }
  }
  layout.count = numOffsets * (layout.innerKept ? 1 : layout.inner);
  return Status::ok();
}

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
  const int64_t parts =
      std::min<int64_t>(total / kElementGrain, kMaxChunks);
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

/// A Reduce* kernel: Reducer<T> for T in Types; attrs axes (sorted,
/// non-negative; empty = all), keepdims (shape comes from the output).
template <template <typename> class Reducer, typename Types>
Status reduceKernelImpl(const char *op, const KernelContext &ctx,
                        const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out,
                        const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 1, 1, 1));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, in[0], "input", out[0], "output"));
  ReductionLayout layout;
  ZRT_RETURN_IF_ERROR(
      planReduction(op, in[0].shape, attrs.getInts("axes"), layout));
  const int64_t expected =
      layout.outerCount * (layout.innerKept ? layout.inner : 1);
  if (out[0].numel() != expected)
    return kernelError(op, "output size does not match the reduction",
                       shapeString(out[0].shape),
                       std::to_string(expected) + " elements");
  if (!dispatchType(Types{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        runReduction<Reducer<T>>(ctx, layout, in[0].as<T>(), out[0].as<T>());
      }))
    return dtypeError(op, "input", in[0].dtype, Types{});
  return Status::ok();
}

template <typename T>
using SumReducer = SumLikeReducer<T, MapIdentity, FinishIdentity>;
template <typename T>
using MeanReducer = SumLikeReducer<T, MapIdentity, FinishMean>;
template <typename T>
using SumSquareReducer = SumLikeReducer<T, MapSquare, FinishIdentity>;
template <typename T>
using L1Reducer = SumLikeReducer<T, MapAbs, FinishIdentity>;
template <typename T>
using L2Reducer = SumLikeReducer<T, MapSquare, FinishSqrt>;
template <typename T>
using LogSumReducer = SumLikeReducer<T, MapIdentity, FinishLog>;
template <typename T> using MaxReducer = ExtremumReducer<T, true>;
template <typename T> using MinReducer = ExtremumReducer<T, false>;

#define ZRT_REDUCE_KERNEL(NAME, REDUCER, TYPES)                                \
  Status NAME##Kernel(                                                         \
      const KernelContext &ctx, const std::vector<TensorRef> &in,              \
      const std::vector<TensorRef> &out, const AttrMap &attrs) {               \
    return reduceKernelImpl<REDUCER, TYPES>(#NAME, ctx, in, out, attrs);       \
  }
ZRT_REDUCE_KERNEL(ReduceSum, SumReducer, NumericTypes)
ZRT_REDUCE_KERNEL(ReduceMean, MeanReducer, NumericTypes)
ZRT_REDUCE_KERNEL(ReduceMax, MaxReducer, NumericBoolTypes)
ZRT_REDUCE_KERNEL(ReduceMin, MinReducer, NumericBoolTypes)
ZRT_REDUCE_KERNEL(ReduceProd, ProdReducer, NumericTypes)
ZRT_REDUCE_KERNEL(ReduceSumSquare, SumSquareReducer, NumericTypes)
ZRT_REDUCE_KERNEL(ReduceL1, L1Reducer, NumericTypes)
ZRT_REDUCE_KERNEL(ReduceL2, L2Reducer, NumericTypes)
ZRT_REDUCE_KERNEL(ReduceLogSum, LogSumReducer, FloatTypes)
ZRT_REDUCE_KERNEL(ReduceLogSumExp, LogSumExpReducer, FloatTypes)
#undef ZRT_REDUCE_KERNEL

//===----------------------------------------------------------------------===//
// ArgMax / ArgMin
//===----------------------------------------------------------------------===//

/// attrs axis, keepdims (shape from the output), select_last_index; I64 out.
template <bool IsMax>
Status argExtremumKernel(const char *op, const KernelContext &ctx,
                         const std::vector<TensorRef> &in,
                         const std::vector<TensorRef> &out,
                         const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 1, 1, 1));
  if (out[0].dtype != DType::I64)
    return dtypeError(op, "output", out[0].dtype, TypeList<int64_t>{});
  AxisSplit split;
  ZRT_RETURN_IF_ERROR(
      splitAtAxis(op, in[0].shape, attrs.getInt("axis", 0), split));
  if (out[0].numel() != split.outer * split.inner)
    return kernelError(op, "output size does not match the reduction",
                       shapeString(out[0].shape),
                       std::to_string(split.outer * split.inner) + " elements");
  if (split.axis == 0 && out[0].numel() != 0)
    return kernelError(op, "empty reduction axis", "size 0", "size >= 1");
  const bool last = attrs.getInt("select_last_index", 0) != 0;
  if (!dispatchType(NumericTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *src = in[0].as<T>();
        int64_t *dst = out[0].as<int64_t>();
        // x replaces best when strictly better, or equal with last index.
        auto better = [last](T x, T best) {
          if (IsMax)
            return last ? x >= best : x > best;
          return last ? x <= best : x < best;
        };
        parallelOuterInner(ctx, split.outer, split.axis, split.inner,
                           [&](int64_t o, int64_t ib, int64_t ie) {
                             const T *base = src + o * split.axis * split.inner;
                             std::vector<T> best(base + ib, base + ie);
                             std::vector<int64_t> index(size_t(ie - ib), 0);
                             for (int64_t a = 1; a < split.axis; ++a) {
                               const T *row = base + a * split.inner;
                               for (int64_t i = ib; i < ie; ++i)
                                 if (better(row[i], best[size_t(i - ib)])) {
                                   best[size_t(i - ib)] = row[i];
                                   index[size_t(i - ib)] = a;
                                 }
                             }
                             std::copy(index.begin(), index.end(),
                                       dst + o * split.inner + ib);
                           });
      }))
    return dtypeError(op, "input", in[0].dtype, NumericTypes{});
  return Status::ok();
}

Status argMaxKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  return argExtremumKernel<true>("ArgMax", ctx, in, out, attrs);
}
Status argMinKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  return argExtremumKernel<false>("ArgMin", ctx, in, out, attrs);
}

//===----------------------------------------------------------------------===//
// CumSum
//===----------------------------------------------------------------------===//

/// attrs axis (non-negative), exclusive (0), reverse (0).
Status cumSumKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("CumSum", in, out, 1, 2, 1, 1));
  ZRT_RETURN_IF_ERROR(
      checkSameDType("CumSum", in[0], "input", out[0], "output"));
  ZRT_RETURN_IF_ERROR(checkShape("CumSum", "output", out[0], in[0].shape));
  AxisSplit split;
  ZRT_RETURN_IF_ERROR(
      splitAtAxis("CumSum", in[0].shape, attrs.getInt("axis", 0), split));
  const bool exclusive = attrs.getInt("exclusive", 0) != 0;
  const bool reverse = attrs.getInt("reverse", 0) != 0;
  if (!dispatchType(NumericTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *src = in[0].as<T>();
        T *dst = out[0].as<T>();
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
                  T &acc = running[size_t(i - ib)];
                  const T x = row[i]; // read before writing (in-place safe)
                  if (exclusive) {
                    outRow[i] = acc;
                    acc += x;
                  } else {
                    acc += x;
                    outRow[i] = acc;
                  }
                }
              }
            });
      }))
    return dtypeError("CumSum", "input", in[0].dtype, NumericTypes{});
  return Status::ok();
}

} // namespace

void registerReduceKernels(KernelTable &table) {
  table.add("ReduceSum", ReduceSumKernel);
  table.add("ReduceMean", ReduceMeanKernel);
  table.add("ReduceMax", ReduceMaxKernel);
  table.add("ReduceMin", ReduceMinKernel);
  table.add("ReduceProd", ReduceProdKernel);
  table.add("ReduceSumSquare", ReduceSumSquareKernel);
  table.add("ReduceL1", ReduceL1Kernel);
  table.add("ReduceL2", ReduceL2Kernel);
  table.add("ReduceLogSum", ReduceLogSumKernel);
  table.add("ReduceLogSumExp", ReduceLogSumExpKernel);
  table.add("ArgMax", argMaxKernel);
  table.add("ArgMin", argMinKernel);
  table.add("CumSum", cumSumKernel);
}

} // namespace cpu
} // namespace zrt
