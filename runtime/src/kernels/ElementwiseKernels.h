//===- ElementwiseKernels.h - Unary and binary kernels, any backend -*- C++
//-*-===//
//
// The host code of the elementwise kernels (docs/kernels.md, "Elementwise,
// unary" and "Elementwise, binary"): operand checks, attributes, dtype
// dispatch and broadcast planning, written once as templates over a Loops
// policy (cpu/kernels/CpuLoops.h) and registered by both backends:
// registerUnaryKernels / registerBinaryKernels with CpuLoops,
// cuda::registerCudaElementwiseKernels with cuda::CudaLoops. So the two
// backends accept and reject exactly the same operands with the same
// messages. The per-element math is math/ElementwiseMath.h.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_ELEMENTWISEKERNELS_H
#define ZRT_KERNELS_ELEMENTWISEKERNELS_H

#include "kernels/KernelSupport.h"
#include "math/ElementwiseMath.h"

namespace zrt {
namespace kernels {
namespace elementwise {

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// A unary op: its name, dtypes, cost (transcendental or not) and functor,
/// built from the instruction's attributes.
template <typename Fn, typename TypesT, bool Costly> struct UnaryDesc {
  using Types = TypesT;
  static constexpr int64_t kGrain =
      Costly ? kTranscendentalGrain : kElementGrain;
  static Fn make(const AttrMap &) { return Fn{}; }
};

/// Runs functor `op` (over Desc::Types; output dtype = what it returns) on
/// input 0 into output 0, which must have the same element count.
template <typename Desc, typename Loops, typename Fn>
Status runUnary(const char *name, const KernelContext &ctx,
                const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &out, const Fn &op) {
  ZRT_RETURN_IF_ERROR(checkArity(name, in, out, 1, 1, 1, 1));
  if (in[0].numel() != out[0].numel())
    return kernelError(name, "output size differs from input",
                       shapeString(out[0].shape), shapeString(in[0].shape));
  Status status;
  if (!dispatchType(typename Desc::Types{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using TO = decltype(op(T{}));
        if (out[0].dtype != DTypeOf<TO>::value) {
          status =
              kernelError(name, "wrong output dtype", dtypeName(out[0].dtype),
                          dtypeName(DTypeOf<TO>::value));
          return;
        }
        status = Loops::map(ctx, Desc::kGrain, op, in[0].as<T>(),
                            out[0].as<TO>(), in[0].numel());
      }))
    return dtypeError(name, "input", in[0].dtype, typename Desc::Types{});
  return status;
}

#define ZRT_UNARY_DESC(NAME, TYPES, COSTLY)                                    \
  struct NAME##Op : UnaryDesc<math::NAME##Fn, TYPES, COSTLY> {                 \
    static constexpr const char *kName = #NAME;                                \
  };
ZRT_UNARY_DESC(Neg, NumericTypes, false)
ZRT_UNARY_DESC(Abs, NumericTypes, false)
ZRT_UNARY_DESC(Sign, NumericTypes, false)
ZRT_UNARY_DESC(Relu, NumericTypes, false)
ZRT_UNARY_DESC(Sqrt, FloatTypes, false)
ZRT_UNARY_DESC(Reciprocal, FloatTypes, false)
ZRT_UNARY_DESC(Floor, FloatTypes, false)
ZRT_UNARY_DESC(Ceil, FloatTypes, false)
ZRT_UNARY_DESC(Round, FloatTypes, false)
ZRT_UNARY_DESC(Exp, FloatTypes, true)
ZRT_UNARY_DESC(Log, FloatTypes, true)
ZRT_UNARY_DESC(Tanh, FloatTypes, true)
ZRT_UNARY_DESC(Erf, FloatTypes, true)
ZRT_UNARY_DESC(Sigmoid, FloatTypes, true)
ZRT_UNARY_DESC(Sin, FloatTypes, true)
ZRT_UNARY_DESC(Cos, FloatTypes, true)
ZRT_UNARY_DESC(Tan, FloatTypes, true)
ZRT_UNARY_DESC(Asin, FloatTypes, true)
ZRT_UNARY_DESC(Acos, FloatTypes, true)
ZRT_UNARY_DESC(Atan, FloatTypes, true)
ZRT_UNARY_DESC(Sinh, FloatTypes, true)
ZRT_UNARY_DESC(Cosh, FloatTypes, true)
ZRT_UNARY_DESC(Asinh, FloatTypes, true)
ZRT_UNARY_DESC(Acosh, FloatTypes, true)
ZRT_UNARY_DESC(Atanh, FloatTypes, true)
ZRT_UNARY_DESC(Softplus, FloatTypes, true)
ZRT_UNARY_DESC(Softsign, FloatTypes, false)
ZRT_UNARY_DESC(HardSwish, FloatTypes, false)
ZRT_UNARY_DESC(IsNaN, FloatTypes, false)
#undef ZRT_UNARY_DESC

struct IsInfOp : UnaryDesc<math::IsInfFn, FloatTypes, false> {
  static constexpr const char *kName = "IsInf";
  static math::IsInfFn make(const AttrMap &attrs) {
    return {attrs.getInt("detect_positive", 1) != 0,
            attrs.getInt("detect_negative", 1) != 0};
  }
};
struct LeakyReluOp : UnaryDesc<math::LeakyReluFn, FloatTypes, false> {
  static constexpr const char *kName = "LeakyRelu";
  static math::LeakyReluFn make(const AttrMap &attrs) {
    return {attrs.getFloat("alpha", 0.01)};
  }
};
struct EluOp : UnaryDesc<math::EluFn, FloatTypes, true> {
  static constexpr const char *kName = "Elu";
  static math::EluFn make(const AttrMap &attrs) {
    return {attrs.getFloat("alpha", 1.0)};
  }
};
struct CeluOp : UnaryDesc<math::CeluFn, FloatTypes, true> {
  static constexpr const char *kName = "Celu";
  static math::CeluFn make(const AttrMap &attrs) {
    return {attrs.getFloat("alpha", 1.0)};
  }
};
struct SeluOp : UnaryDesc<math::SeluFn, FloatTypes, true> {
  static constexpr const char *kName = "Selu";
  static math::SeluFn make(const AttrMap &attrs) {
    return {attrs.getFloat("alpha", 1.67326319217681884765625),
            attrs.getFloat("gamma", 1.05070102214813232421875)};
  }
};
struct ThresholdedReluOp
    : UnaryDesc<math::ThresholdedReluFn, FloatTypes, false> {
  static constexpr const char *kName = "ThresholdedRelu";
  static math::ThresholdedReluFn make(const AttrMap &attrs) {
    return {attrs.getFloat("alpha", 1.0)};
  }
};
struct HardSigmoidOp : UnaryDesc<math::HardSigmoidFn, FloatTypes, false> {
  static constexpr const char *kName = "HardSigmoid";
  static math::HardSigmoidFn make(const AttrMap &attrs) {
    return {attrs.getFloat("alpha", 0.2), attrs.getFloat("beta", 0.5)};
  }
};

/// The kernel of a unary op descriptor.
template <typename Desc, typename Loops>
Status unaryKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs) {
  return runUnary<Desc, Loops>(Desc::kName, ctx, in, out, Desc::make(attrs));
}

/// Gelu: attr approximate ("none" | "tanh").
template <typename Loops>
Status geluKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  using Desc = UnaryDesc<void, FloatTypes, true>;
  const std::string approximate = attrs.getString("approximate", "none");
  if (approximate == "tanh")
    return runUnary<Desc, Loops>("Gelu", ctx, in, out, math::GeluTanhFn{});
  if (approximate == "none" || approximate.empty())
    return runUnary<Desc, Loops>("Gelu", ctx, in, out, math::GeluFn{});
  return kernelError("Gelu", "bad attribute approximate", approximate,
                     "none or tanh");
}

/// Clip: attributes min and max (floats, each optional = unbounded); for
/// integer tensors the bounds are rounded toward the inside of the range.
template <typename Loops>
Status clipKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Clip", in, out, 1, 1, 1, 1));
  ZRT_RETURN_IF_ERROR(checkSameDType("Clip", in[0], "input", out[0], "output"));
  const bool hasMin = attrs.has("min"), hasMax = attrs.has("max");
  const double lo = attrs.getFloat("min", double(attrs.getInt("min", 0)));
  const double hi = attrs.getFloat("max", double(attrs.getInt("max", 0)));
  Status status;
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
        status = Loops::map(ctx, kElementGrain, math::ClipFn<T>{low, high},
                            in[0].as<T>(), out[0].as<T>(), in[0].numel());
      }))
    return dtypeError("Clip", "input", in[0].dtype, NumericTypes{});
  return status;
}

/// One element converted between any two element types: float to integer
/// truncates toward zero (saturating), to Bool is "nonzero", from Bool 0/1.
template <typename To, typename From> ZRT_HD inline To convertElement(From v) {
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

/// Element i of Cast.
template <typename To, typename From> struct CastFn {
  const From *src;
  To *dst;
  ZRT_HD void operator()(int64_t i) const {
    dst[i] = convertElement<To>(src[i]);
  }
};

/// Cast: the target dtype is the output's dtype; any dtype to any dtype.
template <typename Loops>
Status castKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Cast", in, out, 1, 1, 1, 1));
  if (in[0].numel() != out[0].numel())
    return kernelError("Cast", "output size differs from input",
                       shapeString(out[0].shape), shapeString(in[0].shape));
  if (in[0].dtype == out[0].dtype)
    return Loops::copy(out[0].data, in[0].data, out[0].bytes());
  if constexpr (Loops::kHostData) {
    // f32 <-> f16 / bf16 in vector registers (the same bits as CastFn).
    const auto isHalf = [](DType t) { return t == DType::F16 || t == DType::BF16; };
    const int64_t n = in[0].numel();
    if (in[0].dtype == DType::F32 && isHalf(out[0].dtype)) {
      parallelRange(ctx, n, kElementGrain, [&](int64_t b, int64_t e) {
        narrowHalfRow(out[0].dtype, in[0].as<float>() + b, out[0].as<uint16_t>() + b, e - b);
      });
      return Status::ok();
    }
    if (isHalf(in[0].dtype) && out[0].dtype == DType::F32) {
      parallelRange(ctx, n, kElementGrain, [&](int64_t b, int64_t e) {
        widenHalfRow(in[0].dtype, in[0].as<uint16_t>() + b, out[0].as<float>() + b, e - b);
      });
      return Status::ok();
    }
  }
  Status status;
  bool toKnown = true;
  const bool fromKnown =
      dispatchType(AllTypes{}, in[0].dtype, [&](auto fromTag) {
        using From = typename decltype(fromTag)::type;
        toKnown = dispatchType(AllTypes{}, out[0].dtype, [&](auto toTag) {
          using To = typename decltype(toTag)::type;
          status = Loops::forEach(
              ctx, in[0].numel(), kElementGrain,
              CastFn<To, From>{in[0].as<From>(), out[0].as<To>()});
        });
      });
  if (!fromKnown)
    return dtypeError("Cast", "input", in[0].dtype, AllTypes{});
  if (!toKnown)
    return dtypeError("Cast", "output", out[0].dtype, AllTypes{});
  return status;
}

/// Copies input 0 to output 0 (same byte size), skipping a copy onto itself.
template <typename Loops>
Status copyWhole(const char *op, const TensorRef &in, const TensorRef &out) {
  if (in.bytes() != out.bytes())
    return kernelError(op, "output size differs from input",
                       shapeString(out.shape) + " " + dtypeName(out.dtype),
                       shapeString(in.shape) + " " + dtypeName(in.dtype));
  return Loops::copy(out.data, in.data, out.bytes());
}

template <typename Loops>
Status identityKernel(const KernelContext &, const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Identity", in, out, 1, 1, 1, 1));
  return copyWhole<Loops>("Identity", in[0], out[0]);
}

/// Dropout at inference: output 0 is the input, optional output 1 (the mask)
/// is all true. Extra inputs (ratio, training_mode) are ignored.
template <typename Loops>
Status dropoutKernel(const KernelContext &, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Dropout", in, out, 1, 3, 1, 2));
  ZRT_RETURN_IF_ERROR(copyWhole<Loops>("Dropout", in[0], out[0]));
  if (hasOperand(out, 1)) {
    if (out[1].dtype != DType::Bool)
      return dtypeError("Dropout", "mask output", out[1].dtype,
                        TypeList<bool>{});
    return Loops::fill(out[1].data, 1, out[1].bytes());
  }
  return Status::ok();
}

/// TrainingDropout(x[, step]) -> y, mask: ONNX Dropout in training mode.
/// Element i is kept when the top 24 bits of mix64(key + i * golden) are at
/// least ratio * 2^24, key = mix of (seed, stream, step): a counter-based
/// draw, the same for any thread count, split and backend; kept elements are
/// scaled by 1 / (1 - ratio) (PyTorch's inverted dropout).
template <typename Loops>
Status trainingDropoutKernel(const KernelContext &ctx,
                             const std::vector<TensorRef> &in,
                             const std::vector<TensorRef> &out,
                             const AttrMap &attrs) {
  const char *op = "TrainingDropout";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 2, 1, 2));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, in[0], "input", out[0], "output"));
  if (in[0].numel() != out[0].numel())
    return kernelError(op, "output size differs from input",
                       shapeString(out[0].shape), shapeString(in[0].shape));
  const double ratio = attrs.getFloat("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1))
    return kernelError(op, "bad attribute ratio", std::to_string(ratio),
                       "in [0, 1)");
  int64_t step = 0;
  if (hasOperand(in, 1)) {
    if (in[1].dtype != DType::I64 || in[1].numel() != 1)
      return kernelError(op, "wrong step operand",
                         std::string(dtypeName(in[1].dtype)) + "[" +
                             shapeString(in[1].shape) + "]",
                         "an i64 scalar");
    ZRT_RETURN_IF_ERROR(Loops::read(in[1].as<int64_t>(), step));
  }
  bool *mask = nullptr;
  if (hasOperand(out, 1)) {
    if (out[1].dtype != DType::Bool || out[1].numel() != in[0].numel())
      return kernelError(op, "wrong mask output",
                         std::string(dtypeName(out[1].dtype)) + "[" +
                             shapeString(out[1].shape) + "]",
                         "bool, the input's shape");
    mask = out[1].as<bool>();
  }
  const uint64_t key = math::dropoutKey(attrs.getInt("seed", 0),
                                        attrs.getInt("stream", 0), step);
  const uint64_t threshold = uint64_t(std::llround(ratio * double(1 << 24)));
  Status status;
  if (!dispatchType(FloatTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const math::TrainingDropoutFn<T> body{
            in[0].as<T>(), out[0].as<T>(), mask,
            key,           threshold,      T(1.0 / (1.0 - ratio))};
        status = Loops::forEach(ctx, in[0].numel(), kElementGrain, body);
      }))
    return dtypeError(op, "input", in[0].dtype, FloatTypes{});
  return status;
}

/// Not: reads Bool bytes as uint8_t so that any nonzero byte is true.
template <typename Loops>
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
  return Loops::map(ctx, kElementGrain, math::NotFn{}, in[0].as<uint8_t>(),
                    out[0].as<uint8_t>(), in[0].numel());
}

/// Registers every unary kernel with the loops of one backend.
template <typename Loops> void addUnaryKernels(KernelTable &table) {
#define ZRT_ADD(NAME) table.add(#NAME, unaryKernel<NAME##Op, Loops>);
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
  table.add("Gelu", geluKernel<Loops>);
  table.add("Not", notKernel<Loops>);
  table.add("Clip", clipKernel<Loops>);
  table.add("Cast", castKernel<Loops>);
  table.add("Identity", identityKernel<Loops>);
  table.add("Dropout", dropoutKernel<Loops>);
  table.add("TrainingDropout", trainingDropoutKernel<Loops>);
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

/// out = fn(a, b) with a and b broadcast to out's shape.
template <typename TA, typename TB, typename TO, typename Loops, typename Fn>
Status runBinary(const KernelContext &ctx, const char *op, const TensorRef &a,
                 const TensorRef &b, const TensorRef &out, const Fn &fn) {
  BroadcastPlan plan;
  ZRT_RETURN_IF_ERROR(planBroadcast(op, out.shape, {&a.shape, &b.shape}, plan));
  return Loops::broadcast2(ctx, plan, fn, a.as<TA>(), b.as<TB>(), out.as<TO>());
}

/// Runs `fn` on two operands of one dtype from `Types`; the output dtype is
/// what `fn` returns for it (the same type, or bool for predicates).
template <typename Types, typename Loops, typename Fn>
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
          status = runBinary<T, T, TO, Loops>(ctx, op, a, b, out, fn);
      }))
    return dtypeError(op, "input A", a.dtype, Types{});
  return status;
}

/// A two-input kernel: functor Fn over one dtype from Types.
template <typename Fn, typename Types, typename Loops>
Status binaryKernel(const char *op, const KernelContext &ctx,
                    const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out) {
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 2, 2, 1, 1));
  return binarySameType<Types, Loops>(ctx, op, in[0], in[1], out[0], Fn{});
}

/// Max, Min, Sum: any number (>= 1) of inputs, folded pairwise into the
/// output, which has the broadcast shape of all of them.
template <typename Fn, typename Loops>
Status variadicKernel(const char *op, const KernelContext &ctx,
                      const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out) {
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, size_t(-1), 1, 1));
  for (size_t i = 0; i < in.size(); ++i)
    ZRT_RETURN_IF_ERROR(checkSameDType(op, out[0], "the output", in[i],
                                       ("input " + std::to_string(i)).c_str()));
  if (in.size() == 1)
    return Loops::broadcastCopy(ctx, op, in[0], out[0]);
  ZRT_RETURN_IF_ERROR((binarySameType<NumericTypes, Loops>(
      ctx, op, in[0], in[1], out[0], Fn{})));
  for (size_t i = 2; i < in.size(); ++i)
    ZRT_RETURN_IF_ERROR((binarySameType<NumericTypes, Loops>(
        ctx, op, out[0], in[i], out[0], Fn{})));
  return Status::ok();
}

template <typename Loops>
Status meanKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &) {
  if (!in.empty() && !dispatchType(FloatTypes{}, in[0].dtype, [](auto) {}))
    return dtypeError("Mean", "input 0", in[0].dtype, FloatTypes{});
  ZRT_RETURN_IF_ERROR(
      (variadicKernel<math::AddFn, Loops>("Mean", ctx, in, out)));
  const double scale = 1.0 / double(in.size());
  Status status;
  dispatchType(FloatTypes{}, out[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *p = out[0].as<T>();
    status = Loops::map(ctx, kElementGrain, math::ScaleFn<T>{T(scale)}, p, p,
                        out[0].numel());
  });
  return status;
}

template <typename Loops>
Status modKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Mod", in, out, 2, 2, 1, 1));
  const int64_t fmod = attrs.getInt("fmod", 0);
  if (fmod == 0)
    return binarySameType<NumericTypes, Loops>(ctx, "Mod", in[0], in[1], out[0],
                                               math::FloorModFn{});
  if (fmod == 1)
    return binarySameType<NumericTypes, Loops>(ctx, "Mod", in[0], in[1], out[0],
                                               math::TruncModFn{});
  return kernelError("Mod", "bad attribute fmod", std::to_string(fmod),
                     "0 or 1");
}

template <typename Fn, typename Loops>
Status logicalKernel(const char *op, const KernelContext &ctx,
                     const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out) {
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 2, 2, 1, 1));
  for (size_t i = 0; i < 3; ++i) {
    const TensorRef &t = i < 2 ? in[i] : out[0];
    if (t.dtype != DType::Bool)
      return dtypeError(op, i < 2 ? "input " + std::to_string(i) : "output",
                        t.dtype, TypeList<bool>{});
  }
  return runBinary<uint8_t, uint8_t, uint8_t, Loops>(ctx, op, in[0], in[1],
                                                     out[0], Fn{});
}

/// out = x^e for the common scalar exponents; false (and ok) for the others.
template <typename T, typename Loops>
bool powByScalar(const KernelContext &ctx, const TensorRef &x, double e,
                 const TensorRef &out, Status &status) {
  const T *src = x.as<T>();
  T *dst = out.as<T>();
  auto apply = [&](auto fn) {
    status = Loops::map(ctx, kElementGrain, fn, src, dst, x.numel());
    return true;
  };
  if (e == 2.0)
    return apply(math::SquareFn{});
  if (e == 3.0)
    return apply(math::CubeFn{});
  if (e == 1.0)
    return apply(math::IdentityFn{});
  if (e == 0.5)
    return apply(math::SqrtFn{});
  if (e == -1.0)
    return apply(math::ReciprocalFn{});
  return false;
}

/// Pow(X, Y): output has X's dtype; Y may be any numeric dtype. A scalar
/// exponent of 2, 3, 1, 0.5 or -1 takes a multiply/sqrt/divide loop.
template <typename Loops>
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
            if (y.numel() == 1 && x.shape == out[0].shape) {
              E exponent{};
              status = Loops::read(y.as<E>(), exponent);
              if (!status.isOk() ||
                  powByScalar<T, Loops>(ctx, x, toDouble(exponent), out[0],
                                        status))
                return;
            }
          }
          status = runBinary<T, E, T, Loops>(ctx, "Pow", x, y, out[0],
                                             math::PowFn{});
        });
      });
  if (!baseKnown)
    return dtypeError("Pow", "input X", x.dtype, NumericTypes{});
  if (!exponentKnown)
    return dtypeError("Pow", "input Y", y.dtype, NumericTypes{});
  return status;
}

/// Where(cond, X, Y): three-way broadcast, dtype-agnostic (by element size).
template <typename Loops>
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
  Status status;
  dispatchBySize(dtypeSize(out[0].dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    status = Loops::where(ctx, plan, in[0].as<uint8_t>(), in[1].as<U>(),
                          in[2].as<U>(), out[0].as<U>());
  });
  return status;
}

/// Registers every binary kernel with the loops of one backend.
template <typename Loops> void addBinaryKernels(KernelTable &table) {
#define ZRT_SAME(NAME, FN, TYPES)                                              \
  table.add(NAME,                                                              \
            [](const KernelContext &ctx, const std::vector<TensorRef> &in,     \
               const std::vector<TensorRef> &out, const AttrMap &) {           \
              return binaryKernel<math::FN, TYPES, Loops>(NAME, ctx, in, out); \
            });
  ZRT_SAME("Add", AddFn, NumericTypes)
  ZRT_SAME("Sub", SubFn, NumericTypes)
  ZRT_SAME("Mul", MulFn, NumericTypes)
  ZRT_SAME("Div", DivFn, NumericTypes)
  ZRT_SAME("PRelu", PReluFn, NumericTypes)
  ZRT_SAME("Equal", EqualFn, NumericBoolTypes)
  ZRT_SAME("Less", LessFn, NumericTypes)
  ZRT_SAME("LessOrEqual", LessOrEqualFn, NumericTypes)
  ZRT_SAME("Greater", GreaterFn, NumericTypes)
  ZRT_SAME("GreaterOrEqual", GreaterOrEqualFn, NumericTypes)
#undef ZRT_SAME
#define ZRT_WITH(NAME, DRIVER, FN)                                             \
  table.add(NAME,                                                              \
            [](const KernelContext &ctx, const std::vector<TensorRef> &in,     \
               const std::vector<TensorRef> &out, const AttrMap &) {           \
              return DRIVER<math::FN, Loops>(NAME, ctx, in, out);              \
            });
  ZRT_WITH("Max", variadicKernel, MaxFn)
  ZRT_WITH("Min", variadicKernel, MinFn)
  ZRT_WITH("Sum", variadicKernel, AddFn)
  ZRT_WITH("And", logicalKernel, AndFn)
  ZRT_WITH("Or", logicalKernel, OrFn)
  ZRT_WITH("Xor", logicalKernel, XorFn)
#undef ZRT_WITH
  table.add("Mean", meanKernel<Loops>);
  table.add("Mod", modKernel<Loops>);
  table.add("Pow", powKernel<Loops>);
  table.add("Where", whereKernel<Loops>);
}

} // namespace elementwise
} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_ELEMENTWISEKERNELS_H
