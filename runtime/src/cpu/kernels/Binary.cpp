//===- Binary.cpp - Broadcasting binary, comparison and logical kernels ---===//
//
// Every kernel here is one functor run by a single broadcasting driver
// (runBinary), which walks the collapsed broadcast plan row by row and picks a
// contiguous, scalar-left or scalar-right inner loop per row. Covers the
// arithmetic ops (Add Sub Mul Div Pow Mod PRelu, variadic Max Min Sum Mean),
// comparisons producing Bool, the logical ops on Bool, and the three-way
// broadcasting Where.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

namespace zrt {
namespace cpu {
namespace {

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

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

/// out = fn(a, b) with a and b broadcast to out's shape.
template <typename TA, typename TB, typename TO, typename Fn>
Status runBinary(const KernelContext &ctx, const char *op, const TensorRef &a,
                 const TensorRef &b, const TensorRef &out, const Fn &fn) {
  BroadcastPlan plan;
  ZRT_RETURN_IF_ERROR(planBroadcast(op, out.shape, {&a.shape, &b.shape}, plan));
  const TA *pa = a.as<TA>();
  const TB *pb = b.as<TB>();
  TO *po = out.as<TO>();
  const int64_t sa = plan.innerStride(0), sb = plan.innerStride(1);
  parallelRange(
      ctx, plan.numel, kElementGrain, [&](int64_t begin, int64_t end) {
        forEachBroadcastRow(
            plan, begin, end, [&](int64_t o, const int64_t *inOff, int64_t n) {
              binaryRow(fn, pa + inOff[0], sa, pb + inOff[1], sb, po + o, n);
            });
      });
  return Status::ok();
}

/// Runs `fn` on two operands of one dtype from `Types`; the output dtype is
/// what `fn` returns for it (the same type, or bool for predicates).
template <typename Types, typename Fn>
Status binarySameType(const KernelContext &ctx, const char *op,
                      const TensorRef &a, const TensorRef &b,
                      const TensorRef &out, const Fn &fn) {
  ZRT_RETURN_IF_ERROR(checkSameDType(op, a, "input A", b, "input B"));
  Status status;
  if (!dispatchType(Types{}, a.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using TO = decltype(fn(T{}, T{}));
        if (out.dtype != DTypeOf<TO>::value)
          status = kernelError(op, "wrong output dtype", dtypeName(out.dtype),
                               dtypeName(DTypeOf<TO>::value));
        else
          status = runBinary<T, T, TO>(ctx, op, a, b, out, fn);
      }))
    return dtypeError(op, "input A", a.dtype, Types{});
  return status;
}

//===----------------------------------------------------------------------===//
// Functors
//===----------------------------------------------------------------------===//

struct AddOp {
  static constexpr const char *kName = "Add";
  template <typename T> T operator()(T a, T b) const { return a + b; }
};
struct SubOp {
  static constexpr const char *kName = "Sub";
  template <typename T> T operator()(T a, T b) const { return a - b; }
};
struct MulOp {
  static constexpr const char *kName = "Mul";
  template <typename T> T operator()(T a, T b) const { return a * b; }
};
struct DivOp {
  static constexpr const char *kName = "Div";
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // C truncation; x/0 gives 0 and MIN/-1 wraps instead of trapping.
      if (b == 0)
        return 0;
      if (b == -1)
        return T(0 - std::make_unsigned_t<T>(a));
      return T(a / b);
    } else {
      return a / b;
    }
  }
};
/// numpy maximum/minimum: NaN in either operand gives NaN.
struct MaxOp {
  template <typename T> T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinOp {
  template <typename T> T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};
/// Mod with fmod=0: the result takes the divisor's sign (Python/numpy mod).
struct FloorModOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0 || b == -1)
        return 0;
      T r = T(a % b);
      return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
    } else {
      T r = std::fmod(a, b);
      return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
  }
};
/// Mod with fmod=1: the result takes the dividend's sign (C fmod).
struct TruncModOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return (b == 0 || b == -1) ? T(0) : T(a % b);
    else
      return std::fmod(a, b);
  }
};
struct PReluOp {
  static constexpr const char *kName = "PRelu";
  template <typename T> T operator()(T x, T slope) const {
    return x < T(0) ? T(slope * x) : x;
  }
};

struct EqualOp {
  static constexpr const char *kName = "Equal";
  template <typename T> bool operator()(T a, T b) const { return a == b; }
};
struct LessOp {
  static constexpr const char *kName = "Less";
  template <typename T> bool operator()(T a, T b) const { return a < b; }
};
struct LessOrEqualOp {
  static constexpr const char *kName = "LessOrEqual";
  template <typename T> bool operator()(T a, T b) const { return a <= b; }
};
struct GreaterOp {
  static constexpr const char *kName = "Greater";
  template <typename T> bool operator()(T a, T b) const { return a > b; }
};
struct GreaterOrEqualOp {
  static constexpr const char *kName = "GreaterOrEqual";
  template <typename T> bool operator()(T a, T b) const { return a >= b; }
};

// Logical ops read Bool bytes as uint8_t so that any nonzero byte is true.
struct AndOp {
  uint8_t operator()(uint8_t a, uint8_t b) const {
    return uint8_t((a != 0) & (b != 0));
  }
};
struct OrOp {
  uint8_t operator()(uint8_t a, uint8_t b) const {
    return uint8_t((a != 0) | (b != 0));
  }
};
struct XorOp {
  uint8_t operator()(uint8_t a, uint8_t b) const {
    return uint8_t((a != 0) != (b != 0));
  }
};

/// Integer power by squaring (exact, wrapping like numpy); negative
/// exponents go through double and truncate.
template <typename T, typename E> inline T intPow(T base, E exponent) {
  if (exponent < 0)
    return fromDouble<T>(std::pow(double(base), double(exponent)));
  using U = std::make_unsigned_t<T>;
  U result = 1, factor = U(base);
  for (auto e = std::make_unsigned_t<E>(exponent); e; e >>= 1) {
    if (e & 1)
      result *= factor;
    factor *= factor;
  }
  return T(result);
}

struct PowOp {
  template <typename T, typename E> T operator()(T x, E y) const {
    if constexpr (std::is_floating_point_v<T>)
      return T(std::pow(x, T(y)));
    else if constexpr (std::is_integral_v<E>)
      return intPow(x, y);
    else
      return fromDouble<T>(std::pow(double(x), double(y)));
  }
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// A two-input kernel: Op's functor over one dtype from Types.
template <typename Op, typename Types>
Status binaryKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity(Op::kName, in, out, 2, 2, 1, 1));
  return binarySameType<Types>(ctx, Op::kName, in[0], in[1], out[0], Op{});
}

/// Max, Min, Sum: any number (>= 1) of inputs, folded pairwise into the
/// output, which has the broadcast shape of all of them.
template <typename Op>
Status variadicKernel(const char *op, const KernelContext &ctx,
                      const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out) {
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, size_t(-1), 1, 1));
  for (size_t i = 0; i < in.size(); ++i)
    ZRT_RETURN_IF_ERROR(checkSameDType(op, out[0], "the output", in[i],
                                       ("input " + std::to_string(i)).c_str()));
  if (in.size() == 1)
    return broadcastCopy(ctx, op, in[0], out[0]);
  ZRT_RETURN_IF_ERROR(
      binarySameType<NumericTypes>(ctx, op, in[0], in[1], out[0], Op{}));
  for (size_t i = 2; i < in.size(); ++i)
    ZRT_RETURN_IF_ERROR(
        binarySameType<NumericTypes>(ctx, op, out[0], in[i], out[0], Op{}));
  return Status::ok();
}

Status maxKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &) {
  return variadicKernel<MaxOp>("Max", ctx, in, out);
}
Status minKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &) {
  return variadicKernel<MinOp>("Min", ctx, in, out);
}
Status sumKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &) {
  return variadicKernel<AddOp>("Sum", ctx, in, out);
}

Status meanKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &) {
  if (!in.empty() && !dispatchType(FloatTypes{}, in[0].dtype, [](auto) {}))
    return dtypeError("Mean", "input 0", in[0].dtype, FloatTypes{});
  ZRT_RETURN_IF_ERROR(variadicKernel<AddOp>("Mean", ctx, in, out));
  const double scale = 1.0 / double(in.size());
  dispatchType(FloatTypes{}, out[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *p = out[0].as<T>();
    const T s = T(scale);
    parallelRange(
        ctx, out[0].numel(), kElementGrain, [&](int64_t b, int64_t e) {
          mapElements(p + b, p + b, e - b, [s](T x) { return x * s; });
        });
  });
  return Status::ok();
}

Status modKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Mod", in, out, 2, 2, 1, 1));
  const int64_t fmod = attrs.getInt("fmod", 0);
  if (fmod == 0)
    return binarySameType<NumericTypes>(ctx, "Mod", in[0], in[1], out[0],
                                        FloorModOp{});
  if (fmod == 1)
    return binarySameType<NumericTypes>(ctx, "Mod", in[0], in[1], out[0],
                                        TruncModOp{});
  return kernelError("Mod", "bad attribute fmod", std::to_string(fmod),
                     "0 or 1");
}

template <typename Op>
Status logicalKernel(const char *op, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out,
                     const KernelContext &ctx) {
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 2, 2, 1, 1));
  for (size_t i = 0; i < 3; ++i) {
    const TensorRef &t = i < 2 ? in[i] : out[0];
    if (t.dtype != DType::Bool)
      return dtypeError(op, i < 2 ? "input " + std::to_string(i) : "output",
                        t.dtype, TypeList<bool>{});
  }
  return runBinary<uint8_t, uint8_t, uint8_t>(ctx, op, in[0], in[1], out[0],
                                              Op{});
}

Status andKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &) {
  return logicalKernel<AndOp>("And", in, out, ctx);
}
Status orKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &out, const AttrMap &) {
  return logicalKernel<OrOp>("Or", in, out, ctx);
}
Status xorKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &) {
  return logicalKernel<XorOp>("Xor", in, out, ctx);
}

/// out = x^e for the common scalar exponents; false for the others.
template <typename T>
bool powByScalar(const KernelContext &ctx, const TensorRef &x, double e,
                 const TensorRef &out) {
  const T *src = x.as<T>();
  T *dst = out.as<T>();
  auto apply = [&](auto fn) {
    parallelRange(ctx, x.numel(), kElementGrain, [&](int64_t b, int64_t end) {
      mapElements(src + b, dst + b, end - b, fn);
    });
    return true;
  };
  if (e == 2.0)
    return apply([](T v) { return v * v; });
  if (e == 3.0)
    return apply([](T v) { return v * v * v; });
  if (e == 1.0)
    return apply([](T v) { return v; });
  if (e == 0.5)
    return apply([](T v) { return std::sqrt(v); });
  if (e == -1.0)
    return apply([](T v) { return T(1) / v; });
  return false;
}

/// Pow(X, Y): output has X's dtype; Y may be any numeric dtype. A scalar
/// exponent of 2, 3, 1, 0.5 or -1 takes a multiply/sqrt/divide loop.
Status powKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Pow", in, out, 2, 2, 1, 1));
  const TensorRef &x = in[0], &y = in[1];
  ZRT_RETURN_IF_ERROR(checkSameDType("Pow", x, "input X", out[0], "output"));
  Status status;
  bool exponentKnown = true;
  const bool baseKnown =
      dispatchType(NumericTypes{}, x.dtype, [&](auto baseTag) {
        using T = typename decltype(baseTag)::type;
        exponentKnown = dispatchType(NumericTypes{}, y.dtype, [&](auto expTag) {
          using E = typename decltype(expTag)::type;
          if constexpr (std::is_floating_point_v<T>) {
            if (y.numel() == 1 && x.shape == out[0].shape &&
                powByScalar<T>(ctx, x, toDouble(*y.as<E>()), out[0]))
              return;
          }
          status = runBinary<T, E, T>(ctx, "Pow", x, y, out[0], PowOp{});
        });
      });
  if (!baseKnown)
    return dtypeError("Pow", "input X", x.dtype, NumericTypes{});
  if (!exponentKnown)
    return dtypeError("Pow", "input Y", y.dtype, NumericTypes{});
  return status;
}

/// Where(cond, X, Y): three-way broadcast, dtype-agnostic (by element size).
Status whereKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Where", in, out, 3, 3, 1, 1));
  if (in[0].dtype != DType::Bool)
    return dtypeError("Where", "condition", in[0].dtype, TypeList<bool>{});
  ZRT_RETURN_IF_ERROR(
      checkSameDType("Where", in[1], "input X", in[2], "input Y"));
  ZRT_RETURN_IF_ERROR(
      checkSameDType("Where", in[1], "input X", out[0], "output"));
  BroadcastPlan plan;
  ZRT_RETURN_IF_ERROR(planBroadcast(
      "Where", out[0].shape, {&in[0].shape, &in[1].shape, &in[2].shape}, plan));
  const int64_t sc = plan.innerStride(0), sx = plan.innerStride(1),
                sy = plan.innerStride(2);
  dispatchBySize(dtypeSize(out[0].dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const uint8_t *cond = in[0].as<uint8_t>();
    const U *px = in[1].as<U>(), *py = in[2].as<U>();
    U *po = out[0].as<U>();
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
  });
  return Status::ok();
}

} // namespace

void registerBinaryKernels(KernelTable &table) {
  table.add("Add", binaryKernel<AddOp, NumericTypes>);
  table.add("Sub", binaryKernel<SubOp, NumericTypes>);
  table.add("Mul", binaryKernel<MulOp, NumericTypes>);
  table.add("Div", binaryKernel<DivOp, NumericTypes>);
  table.add("PRelu", binaryKernel<PReluOp, NumericTypes>);
  table.add("Equal", binaryKernel<EqualOp, NumericBoolTypes>);
  table.add("Less", binaryKernel<LessOp, NumericTypes>);
  table.add("LessOrEqual", binaryKernel<LessOrEqualOp, NumericTypes>);
  table.add("Greater", binaryKernel<GreaterOp, NumericTypes>);
  table.add("GreaterOrEqual", binaryKernel<GreaterOrEqualOp, NumericTypes>);
  table.add("Max", maxKernel);
  table.add("Min", minKernel);
  table.add("Sum", sumKernel);
  table.add("Mean", meanKernel);
  table.add("Mod", modKernel);
  table.add("Pow", powKernel);
  table.add("And", andKernel);
  table.add("Or", orKernel);
  table.add("Xor", xorKernel);
  table.add("Where", whereKernel);
}

} // namespace cpu
} // namespace zrt
