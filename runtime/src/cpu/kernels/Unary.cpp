//===- Unary.cpp - Elementwise one-input kernels --------------------------===//
//
// Math and activation functions (Neg ... Gelu), predicates (IsNaN, IsInf, Not),
// Clip, Cast, Identity and Dropout. Each math op is a small functor, built
// from the instruction's attributes when it has any, and run by one driver
// (unaryKernel) that dispatches on the input dtype and maps contiguous chunks
// of the flat tensor in parallel.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

namespace zrt {
namespace cpu {
namespace {

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// Cost classes: how many elements are worth one parallel chunk.
struct Cheap {
  static constexpr int64_t kGrain = kElementGrain;
};
struct Costly {
  static constexpr int64_t kGrain = kTranscendentalGrain;
};

/// The loop of unaryKernel, compiled per CPU flavour.
template <typename Op, typename T, typename TO>
ZRT_HOT_LOOP void unaryLoop(const Op &op, const T *in, TO *out, int64_t n) {
  mapElements(in, out, n, op);
}

/// Runs functor Op (over Op::Types; output dtype = what Op returns) on input
/// 0 into output 0, which must have the same element count.
template <typename Op>
Status unaryKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity(Op::kName, in, out, 1, 1, 1, 1));
  if (in[0].numel() != out[0].numel())
    return kernelError(Op::kName, "output size differs from input",
                       shapeString(out[0].shape), shapeString(in[0].shape));
  Op op = [&] {
    if constexpr (std::is_constructible_v<Op, const AttrMap &>)
      return Op(attrs);
    else
      return Op{};
  }();
  Status status;
  if (!dispatchType(typename Op::Types{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using TO = decltype(op(T{}));
        if (out[0].dtype != DTypeOf<TO>::value) {
          status = kernelError(Op::kName, "wrong output dtype",
                               dtypeName(out[0].dtype),
                               dtypeName(DTypeOf<TO>::value));
          return;
        }
        const T *src = in[0].as<T>();
        TO *dst = out[0].as<TO>();
        parallelRange(ctx, in[0].numel(), Op::kGrain,
                      [&](int64_t b, int64_t e) {
                        unaryLoop(op, src + b, dst + b, e - b);
                      });
      }))
    return dtypeError(Op::kName, "input", in[0].dtype, typename Op::Types{});
  return status;
}

//===----------------------------------------------------------------------===//
// Functors
//===----------------------------------------------------------------------===//

#define ZRT_UNARY_OP(NAME, COST, TYPES, EXPR)                                  \
  struct NAME##Op : COST {                                                     \
    static constexpr const char *kName = #NAME;                                \
    using Types = TYPES;                                                       \
    template <typename T> T operator()(T x) const { return EXPR; }             \
  };

ZRT_UNARY_OP(Neg, Cheap, NumericTypes, T(-x))
ZRT_UNARY_OP(Abs, Cheap, NumericTypes, x < T(0) ? T(-x) : x)
ZRT_UNARY_OP(Sign, Cheap, NumericTypes,
             x > T(0) ? T(1) : (x < T(0) ? T(-1) : x))
ZRT_UNARY_OP(Relu, Cheap, NumericTypes, x > T(0) ? x : T(0))
ZRT_UNARY_OP(Sqrt, Cheap, FloatTypes, std::sqrt(x))
ZRT_UNARY_OP(Reciprocal, Cheap, FloatTypes, T(1) / x)
ZRT_UNARY_OP(Floor, Cheap, FloatTypes, std::floor(x))
ZRT_UNARY_OP(Ceil, Cheap, FloatTypes, std::ceil(x))
// nearbyint rounds half to even in the default rounding mode.
ZRT_UNARY_OP(Round, Cheap, FloatTypes, std::nearbyint(x))
ZRT_UNARY_OP(Exp, Costly, FloatTypes, expOf(x))
ZRT_UNARY_OP(Log, Costly, FloatTypes, logOf(x))
ZRT_UNARY_OP(Tanh, Costly, FloatTypes, tanhOf(x))
ZRT_UNARY_OP(Erf, Costly, FloatTypes, erfOf(x))
ZRT_UNARY_OP(Sigmoid, Costly, FloatTypes, sigmoidOf(x))
ZRT_UNARY_OP(Sin, Costly, FloatTypes, std::sin(x))
ZRT_UNARY_OP(Cos, Costly, FloatTypes, std::cos(x))
ZRT_UNARY_OP(Tan, Costly, FloatTypes, std::tan(x))
ZRT_UNARY_OP(Asin, Costly, FloatTypes, std::asin(x))
ZRT_UNARY_OP(Acos, Costly, FloatTypes, std::acos(x))
ZRT_UNARY_OP(Atan, Costly, FloatTypes, std::atan(x))
ZRT_UNARY_OP(Sinh, Costly, FloatTypes, std::sinh(x))
ZRT_UNARY_OP(Cosh, Costly, FloatTypes, std::cosh(x))
ZRT_UNARY_OP(Asinh, Costly, FloatTypes, std::asinh(x))
ZRT_UNARY_OP(Acosh, Costly, FloatTypes, std::acosh(x))
ZRT_UNARY_OP(Atanh, Costly, FloatTypes, std::atanh(x))
// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
ZRT_UNARY_OP(Softplus, Costly, FloatTypes,
             (x > T(0) ? x : T(0)) + std::log1p(expOf(T(-std::fabs(x)))))
ZRT_UNARY_OP(Softsign, Cheap, FloatTypes, x / (T(1) + std::fabs(x)))
ZRT_UNARY_OP(HardSwish, Cheap, FloatTypes,
             x *std::min(T(1), std::max(T(0), x / T(6) + T(0.5))))
#undef ZRT_UNARY_OP

struct IsNaNOp : Cheap {
  static constexpr const char *kName = "IsNaN";
  using Types = FloatTypes;
  template <typename T> bool operator()(T x) const { return x != x; }
};

struct IsInfOp : Cheap {
  static constexpr const char *kName = "IsInf";
  using Types = FloatTypes;
  explicit IsInfOp(const AttrMap &attrs)
      : positive(attrs.getInt("detect_positive", 1) != 0),
        negative(attrs.getInt("detect_negative", 1) != 0) {}
  template <typename T> bool operator()(T x) const {
    return (positive && x == std::numeric_limits<T>::infinity()) ||
           (negative && x == -std::numeric_limits<T>::infinity());
  }
  bool positive, negative;
};

struct LeakyReluOp : Cheap {
  static constexpr const char *kName = "LeakyRelu";
  using Types = FloatTypes;
  explicit LeakyReluOp(const AttrMap &attrs)
      : alpha(attrs.getFloat("alpha", 0.01)) {}
  template <typename T> T operator()(T x) const {
    return x < T(0) ? T(alpha) * x : x;
  }
  double alpha;
};

struct EluOp : Costly {
  static constexpr const char *kName = "Elu";
  using Types = FloatTypes;
  explicit EluOp(const AttrMap &attrs) : alpha(attrs.getFloat("alpha", 1.0)) {}
  template <typename T> T operator()(T x) const {
    return x < T(0) ? T(alpha) * (expOf(x) - T(1)) : x;
  }
  double alpha;
};

struct CeluOp : Costly {
  static constexpr const char *kName = "Celu";
  using Types = FloatTypes;
  explicit CeluOp(const AttrMap &attrs) : alpha(attrs.getFloat("alpha", 1.0)) {}
  template <typename T> T operator()(T x) const {
    const T a = T(alpha);
    return x < T(0) ? a * (expOf(T(x / a)) - T(1)) : x;
  }
  double alpha;
};

struct SeluOp : Costly {
  static constexpr const char *kName = "Selu";
  using Types = FloatTypes;
  explicit SeluOp(const AttrMap &attrs)
      : alpha(attrs.getFloat("alpha", 1.67326319217681884765625)),
        gamma(attrs.getFloat("gamma", 1.05070102214813232421875)) {}
  template <typename T> T operator()(T x) const {
    return T(gamma) * (x > T(0) ? x : T(alpha) * (expOf(x) - T(1)));
  }
  double alpha, gamma;
};

struct ThresholdedReluOp : Cheap {
  static constexpr const char *kName = "ThresholdedRelu";
  using Types = FloatTypes;
  explicit ThresholdedReluOp(const AttrMap &attrs)
      : alpha(attrs.getFloat("alpha", 1.0)) {}
  template <typename T> T operator()(T x) const {
    return x > T(alpha) ? x : T(0);
  }
  double alpha;
};

struct HardSigmoidOp : Cheap {
  static constexpr const char *kName = "HardSigmoid";
  using Types = FloatTypes;
  explicit HardSigmoidOp(const AttrMap &attrs)
      : alpha(attrs.getFloat("alpha", 0.2)), beta(attrs.getFloat("beta", 0.5)) {
  }
  template <typename T> T operator()(T x) const {
    return std::min(T(1), std::max(T(0), T(alpha) * x + T(beta)));
  }
  double alpha, beta;
};

/// Gelu: 0.5 x (1 + erf(x / sqrt 2)).
struct GeluOp : Costly {
  static constexpr const char *kName = "Gelu";
  using Types = FloatTypes;
  template <typename T> T operator()(T x) const {
    return T(0.5) * x * (T(1) + erfOf(T(x * T(0.7071067811865476))));
  }
};

/// Gelu with approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
/// x^3))).
struct GeluTanhOp : Costly {
  static constexpr const char *kName = "Gelu";
  using Types = FloatTypes;
  template <typename T> T operator()(T x) const {
    const T inner = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + tanhOf(inner));
  }
};

/// Gelu: attr approximate ("none" | "tanh").
Status geluKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const std::string approximate = attrs.getString("approximate", "none");
  if (approximate == "tanh")
    return unaryKernel<GeluTanhOp>(ctx, in, out, attrs);
  if (approximate == "none" || approximate.empty())
    return unaryKernel<GeluOp>(ctx, in, out, attrs);
  return kernelError("Gelu", "bad attribute approximate", approximate,
                     "none or tanh");
}

//===----------------------------------------------------------------------===//
// Clip, Cast, Identity, Dropout
//===----------------------------------------------------------------------===//

/// Clip: attributes min and max (floats, each optional = unbounded); for
/// integer tensors the bounds are rounded toward the inside of the range.
Status clipKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Clip", in, out, 1, 1, 1, 1));
  ZRT_RETURN_IF_ERROR(checkSameDType("Clip", in[0], "input", out[0], "output"));
  const bool hasMin = attrs.has("min"), hasMax = attrs.has("max");
  const double lo = attrs.getFloat("min", double(attrs.getInt("min", 0)));
  const double hi = attrs.getFloat("max", double(attrs.getInt("max", 0)));
  if (!dispatchType(NumericTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T low = std::numeric_limits<T>::lowest();
        T high = std::numeric_limits<T>::max();
        if constexpr (std::is_floating_point_v<T>) {
          low = -std::numeric_limits<T>::infinity();
          high = std::numeric_limits<T>::infinity();
        }
        if (hasMin)
          low = fromDouble<T>(std::is_integral_v<T> ? std::ceil(lo) : lo);
        if (hasMax)
          high = fromDouble<T>(std::is_integral_v<T> ? std::floor(hi) : hi);
        const T *src = in[0].as<T>();
        T *dst = out[0].as<T>();
        parallelRange(ctx, in[0].numel(), kElementGrain,
                      [&](int64_t b, int64_t e) {
                        mapElements(src + b, dst + b, e - b, [&](T x) {
                          // min(max(x, low), high) as numpy.clip; NaN stays.
                          T y = x < low ? low : x;
                          return y > high ? high : y;
                        });
                      });
      }))
    return dtypeError("Clip", "input", in[0].dtype, NumericTypes{});
  return Status::ok();
}

/// One element converted between any two element types: float to integer
/// truncates toward zero (saturating), to Bool is "nonzero", from Bool 0/1.
template <typename To, typename From> inline To convertElement(From v) {
  if constexpr (std::is_same_v<To, From>)
    return v;
  else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_integral_v<From>)
      return v != 0;
    else
      return toDouble(v) != 0.0;
  } else if constexpr (std::is_integral_v<To> && std::is_integral_v<From>)
    return static_cast<To>(v); // integer to integer wraps, as in C
  else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, double>)
    return static_cast<float>(v);
  else
    return fromDouble<To>(toDouble(v));
}

/// Cast: the target dtype is the output's dtype; any dtype to any dtype.
Status castKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Cast", in, out, 1, 1, 1, 1));
  if (in[0].numel() != out[0].numel())
    return kernelError("Cast", "output size differs from input",
                       shapeString(out[0].shape), shapeString(in[0].shape));
  if (in[0].dtype == out[0].dtype) {
    if (out[0].data != in[0].data && out[0].bytes() != 0)
      std::memcpy(out[0].data, in[0].data, out[0].bytes());
    return Status::ok();
  }
  bool toKnown = true;
  const bool fromKnown =
      dispatchType(AllTypes{}, in[0].dtype, [&](auto fromTag) {
        using From = typename decltype(fromTag)::type;
        toKnown = dispatchType(AllTypes{}, out[0].dtype, [&](auto toTag) {
          using To = typename decltype(toTag)::type;
          const From *src = in[0].as<From>();
          To *dst = out[0].as<To>();
          parallelRange(ctx, in[0].numel(), kElementGrain,
                        [&](int64_t b, int64_t e) {
                          for (int64_t i = b; i < e; ++i)
                            dst[i] = convertElement<To>(src[i]);
                        });
        });
      });
  if (!fromKnown)
    return dtypeError("Cast", "input", in[0].dtype, AllTypes{});
  if (!toKnown)
    return dtypeError("Cast", "output", out[0].dtype, AllTypes{});
  return Status::ok();
}

/// Copies input 0 to output 0 (same byte size), skipping a copy onto itself.
Status copyWhole(const char *op, const TensorRef &in, const TensorRef &out) {
  if (in.bytes() != out.bytes())
    return kernelError(op, "output size differs from input",
                       shapeString(out.shape) + " " + dtypeName(out.dtype),
                       shapeString(in.shape) + " " + dtypeName(in.dtype));
  if (in.data != out.data && out.bytes() != 0)
    std::memcpy(out.data, in.data, out.bytes());
  return Status::ok();
}

Status identityKernel(const KernelContext &, const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Identity", in, out, 1, 1, 1, 1));
  return copyWhole("Identity", in[0], out[0]);
}

/// Dropout at inference: output 0 is the input, optional output 1 (the mask)
/// is all true. Extra inputs (ratio, training_mode) are ignored.
Status dropoutKernel(const KernelContext &, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Dropout", in, out, 1, 3, 1, 2));
  ZRT_RETURN_IF_ERROR(copyWhole("Dropout", in[0], out[0]));
  if (hasOperand(out, 1)) {
    if (out[1].dtype != DType::Bool)
      return dtypeError("Dropout", "mask output", out[1].dtype,
                        TypeList<bool>{});
    std::memset(out[1].data, 1, out[1].bytes());
  }
  return Status::ok();
}

/// splitmix64's finaliser: a bijective 64-bit mix.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// TrainingDropout(x[, step]) -> y, mask: ONNX Dropout in training mode.
/// Element i is kept when the top 24 bits of mix64(key + i * golden) are at
/// least ratio * 2^24, key = mix of (seed, stream, step): a counter-based
/// draw, the same for any thread count and split; kept elements are scaled
/// by 1 / (1 - ratio) (PyTorch's inverted dropout).
Status trainingDropoutKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                             const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = "TrainingDropout";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 2, 1, 2));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, in[0], "input", out[0], "output"));
  if (in[0].numel() != out[0].numel())
    return kernelError(op, "output size differs from input", shapeString(out[0].shape),
                       shapeString(in[0].shape));
  const double ratio = attrs.getFloat("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1))
    return kernelError(op, "bad attribute ratio", std::to_string(ratio), "in [0, 1)");
  int64_t step = 0;
  if (hasOperand(in, 1)) {
    if (in[1].dtype != DType::I64 || in[1].numel() != 1)
      return kernelError(op, "wrong step operand",
                         std::string(dtypeName(in[1].dtype)) + "[" + shapeString(in[1].shape) + "]",
                         "an i64 scalar");
    step = in[1].as<int64_t>()[0];
  }
  bool *mask = nullptr;
  if (hasOperand(out, 1)) {
    if (out[1].dtype != DType::Bool || out[1].numel() != in[0].numel())
      return kernelError(op, "wrong mask output",
                         std::string(dtypeName(out[1].dtype)) + "[" + shapeString(out[1].shape) + "]",
                         "bool, the input's shape");
    mask = out[1].as<bool>();
  }
  const uint64_t key = mix64(mix64(uint64_t(attrs.getInt("seed", 0))) ^
                             mix64(uint64_t(attrs.getInt("stream", 0)) + 0x632BE59BD9B4E019ull) ^
                             mix64(uint64_t(step) + 0x8CB92BA72F3D8DD7ull));
  const uint64_t threshold = uint64_t(std::llround(ratio * double(1 << 24)));
  if (!dispatchType(FloatTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T scale = T(1.0 / (1.0 - ratio));
        const T *src = in[0].as<T>();
        T *dst = out[0].as<T>();
        parallelRange(ctx, in[0].numel(), kElementGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            bool keep = (mix64(key + uint64_t(i) * 0x9E3779B97F4A7C15ull) >> 40) >= threshold;
            dst[i] = keep ? src[i] * scale : T(0);
            if (mask)
              mask[i] = keep;
          }
        });
      }))
    return dtypeError(op, "input", in[0].dtype, FloatTypes{});
  return Status::ok();
}

/// Not: reads Bool bytes as uint8_t so that any nonzero byte is true.
Status notKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Not", in, out, 1, 1, 1, 1));
  for (const TensorRef *t : {&in[0], &out[0]})
    if (t->dtype != DType::Bool)
      return dtypeError("Not", t == &in[0] ? "input" : "output", t->dtype,
                        TypeList<bool>{});
  if (in[0].numel() != out[0].numel())
    return kernelError("Not", "output size differs from input",
                       shapeString(out[0].shape), shapeString(in[0].shape));
  const uint8_t *src = in[0].as<uint8_t>();
  uint8_t *dst = out[0].as<uint8_t>();
  parallelRange(ctx, in[0].numel(), kElementGrain, [&](int64_t b, int64_t e) {
    mapElements(src + b, dst + b, e - b,
                [](uint8_t x) { return uint8_t(x == 0); });
  });
  return Status::ok();
}

} // namespace

void registerUnaryKernels(KernelTable &table) {
#define ZRT_ADD(NAME) table.add(#NAME, unaryKernel<NAME##Op>);
  ZRT_ADD(Neg)
  ZRT_ADD(Abs)
  ZRT_ADD(Sign)
  ZRT_ADD(Relu)
  ZRT_ADD(Sqrt)
  ZRT_ADD(Reciprocal)
  ZRT_ADD(Floor)
  ZRT_ADD(Ceil)
  ZRT_ADD(Round)
  ZRT_ADD(Exp)
  ZRT_ADD(Log)
  ZRT_ADD(Tanh)
  ZRT_ADD(Erf)
  ZRT_ADD(Sigmoid)
  ZRT_ADD(Sin)
  ZRT_ADD(Cos)
  ZRT_ADD(Tan)
  ZRT_ADD(Asin)
  ZRT_ADD(Acos)
  ZRT_ADD(Atan)
  ZRT_ADD(Sinh)
  ZRT_ADD(Cosh)
  ZRT_ADD(Asinh)
  ZRT_ADD(Acosh)
  ZRT_ADD(Atanh)
  ZRT_ADD(Softplus)
  ZRT_ADD(Softsign)
  ZRT_ADD(HardSwish)
  ZRT_ADD(IsNaN)
  ZRT_ADD(IsInf)
  ZRT_ADD(LeakyRelu)
  ZRT_ADD(Elu)
  ZRT_ADD(Celu)
  ZRT_ADD(Selu)
  ZRT_ADD(ThresholdedRelu)
  ZRT_ADD(HardSigmoid)
#undef ZRT_ADD
  table.add("Gelu", geluKernel);
  table.add("Not", notKernel);
  table.add("Clip", clipKernel);
  table.add("Cast", castKernel);
  table.add("Identity", identityKernel);
  table.add("Dropout", dropoutKernel);
  table.add("TrainingDropout", trainingDropoutKernel);
}

} // namespace cpu
} // namespace zrt
