//===- ElementwiseMath.h - Per-element math of both backends ----*- C++ -*-===//
//
// The functors of the elementwise kernels (docs/kernels.md, "Elementwise"):
// one struct per op whose operator() computes one output element. They are
// written once and used by the CPU kernels (kernels/ElementwiseKernels.h,
// inlined into the same vectorised loops as before) and by the CUDA kernels
// (cuda/ElementwiseKernels.cu). Everything is inline and ZRT_HD; std:: math
// is usable in device code because nvcc compiles with
// --expt-relaxed-constexpr. f32 exp/log/tanh/erf/sigmoid are VecMath.h's
// (the same bits on both backends); other transcendental functions are the
// platform's (glibc on the CPU, CUDA's libdevice on the GPU) and may differ
// in the last bit between backends.
//
// Attributes are plain members here; reading them from an AttrMap and every
// operand check is host code (kernels/ElementwiseKernels.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_ELEMENTWISEMATH_H
#define ZRT_MATH_ELEMENTWISEMATH_H

#include "math/VecMath.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

// The functors are instantiated for unsigned element types too, where
// "x < 0" and "b == -1" are constant; nvcc's front end warns about that (the
// host compiler does not in templates).
#if defined(__CUDACC__)
#pragma nv_diagnostic push
#pragma nv_diag_suppress 186 // pointless comparison of unsigned with zero
#pragma nv_diag_suppress 514 // ... with a negative constant
#endif

namespace zrt {
namespace math {

//===----------------------------------------------------------------------===//
// Vectorisable transcendental functions
//===----------------------------------------------------------------------===//

/// e^x: math::exp for f32 (vectorises, within 1 ulp), std::exp otherwise.
template <typename T> ZRT_HD inline T expOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return math::exp(x);
  else
    return std::exp(x);
}

/// log x: math::log for f32, std::log otherwise.
template <typename T> ZRT_HD inline T logOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return math::log(x);
  else
    return std::log(x);
}

/// tanh: math::tanh for f32, std::tanh otherwise.
template <typename T> ZRT_HD inline T tanhOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return math::tanh(x);
  else
    return std::tanh(x);
}

/// erf: math::erf for f32, std::erf otherwise.
template <typename T> ZRT_HD inline T erfOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return math::erf(x);
  else
    return std::erf(x);
}

/// 1 / (1 + e^-x): math::sigmoid for f32, the formula otherwise.
template <typename T> ZRT_HD inline T sigmoidOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return math::sigmoid(x);
  else
    return T(1) / (T(1) + std::exp(-x));
}

/// A double converted to a numeric element type (f32, f64, integers, bool):
/// floats round, integers truncate toward zero and saturate (NaN -> 0), bool
/// is "nonzero". cpu::fromDouble adds the half types.
template <typename T> ZRT_HD inline T fromDoubleNum(double v) {
  if constexpr (std::is_same_v<T, bool>)
    return v != 0.0;
  else if constexpr (std::is_integral_v<T>) {
    // Saturate instead of the undefined out-of-range conversion; NaN -> 0.
    if (!(v == v))
      return T(0);
    if (v <= double(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= double(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else
    return static_cast<T>(v);
}

//===----------------------------------------------------------------------===//
// Unary functors
//===----------------------------------------------------------------------===//

#define ZRT_UNARY_FUNCTOR(NAME, EXPR)                                          \
  struct NAME##Fn {                                                            \
    template <typename T> ZRT_HD T operator()(T x) const { return EXPR; }      \
  };

ZRT_UNARY_FUNCTOR(Neg, T(-x))
ZRT_UNARY_FUNCTOR(Abs, x < T(0) ? T(-x) : x)
ZRT_UNARY_FUNCTOR(Sign, x > T(0) ? T(1) : (x < T(0) ? T(-1) : x))
ZRT_UNARY_FUNCTOR(Relu, x > T(0) ? x : T(0))
ZRT_UNARY_FUNCTOR(Sqrt, std::sqrt(x))
ZRT_UNARY_FUNCTOR(Reciprocal, T(1) / x)
ZRT_UNARY_FUNCTOR(Floor, std::floor(x))
ZRT_UNARY_FUNCTOR(Ceil, std::ceil(x))
// nearbyint rounds half to even in the default rounding mode.
ZRT_UNARY_FUNCTOR(Round, std::nearbyint(x))
ZRT_UNARY_FUNCTOR(Exp, expOf(x))
ZRT_UNARY_FUNCTOR(Log, logOf(x))
ZRT_UNARY_FUNCTOR(Tanh, tanhOf(x))
ZRT_UNARY_FUNCTOR(Erf, erfOf(x))
ZRT_UNARY_FUNCTOR(Sigmoid, sigmoidOf(x))
ZRT_UNARY_FUNCTOR(Sin, std::sin(x))
ZRT_UNARY_FUNCTOR(Cos, std::cos(x))
ZRT_UNARY_FUNCTOR(Tan, std::tan(x))
ZRT_UNARY_FUNCTOR(Asin, std::asin(x))
ZRT_UNARY_FUNCTOR(Acos, std::acos(x))
ZRT_UNARY_FUNCTOR(Atan, std::atan(x))
ZRT_UNARY_FUNCTOR(Sinh, std::sinh(x))
ZRT_UNARY_FUNCTOR(Cosh, std::cosh(x))
ZRT_UNARY_FUNCTOR(Asinh, std::asinh(x))
ZRT_UNARY_FUNCTOR(Acosh, std::acosh(x))
ZRT_UNARY_FUNCTOR(Atanh, std::atanh(x))
// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
ZRT_UNARY_FUNCTOR(Softplus,
                  (x > T(0) ? x : T(0)) + std::log1p(expOf(T(-std::fabs(x)))))
ZRT_UNARY_FUNCTOR(Softsign, x / (T(1) + std::fabs(x)))
ZRT_UNARY_FUNCTOR(HardSwish,
                  x *std::min(T(1), std::max(T(0), x / T(6) + T(0.5))))
/// Gelu: 0.5 x (1 + erf(x / sqrt 2)).
ZRT_UNARY_FUNCTOR(Gelu,
                  T(0.5) * x * (T(1) + erfOf(T(x * T(0.7071067811865476)))))
#undef ZRT_UNARY_FUNCTOR

/// Gelu with approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
/// x^3))).
struct GeluTanhFn {
  template <typename T> ZRT_HD T operator()(T x) const {
    const T inner = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + tanhOf(inner));
  }
};

struct IsNaNFn {
  template <typename T> ZRT_HD bool operator()(T x) const { return x != x; }
};

struct IsInfFn {
  bool positive = true, negative = true;
  template <typename T> ZRT_HD bool operator()(T x) const {
    return (positive && x == std::numeric_limits<T>::infinity()) ||
           (negative && x == -std::numeric_limits<T>::infinity());
  }
};

struct LeakyReluFn {
  double alpha = 0.01;
  template <typename T> ZRT_HD T operator()(T x) const {
    return x < T(0) ? T(alpha) * x : x;
  }
};

struct EluFn {
  double alpha = 1.0;
  template <typename T> ZRT_HD T operator()(T x) const {
    return x < T(0) ? T(alpha) * (expOf(x) - T(1)) : x;
  }
};

struct CeluFn {
  double alpha = 1.0;
  template <typename T> ZRT_HD T operator()(T x) const {
    const T a = T(alpha);
    return x < T(0) ? a * (expOf(T(x / a)) - T(1)) : x;
  }
};

struct SeluFn {
  double alpha = 1.67326319217681884765625;
  double gamma = 1.05070102214813232421875;
  template <typename T> ZRT_HD T operator()(T x) const {
    return T(gamma) * (x > T(0) ? x : T(alpha) * (expOf(x) - T(1)));
  }
};

struct ThresholdedReluFn {
  double alpha = 1.0;
  template <typename T> ZRT_HD T operator()(T x) const {
    return x > T(alpha) ? x : T(0);
  }
};

struct HardSigmoidFn {
  double alpha = 0.2, beta = 0.5;
  template <typename T> ZRT_HD T operator()(T x) const {
    return std::min(T(1), std::max(T(0), T(alpha) * x + T(beta)));
  }
};

/// Clip to [low, high] as numpy.clip (min(max(x, low), high)); NaN stays.
template <typename T> struct ClipFn {
  T low, high;
  ZRT_HD T operator()(T x) const {
    T y = x < low ? low : x;
    return y > high ? high : y;
  }
};

/// Not on Bool bytes (any nonzero byte is true).
struct NotFn {
  ZRT_HD uint8_t operator()(uint8_t x) const { return uint8_t(x == 0); }
};

/// x * s (Mean's final scaling).
template <typename T> struct ScaleFn {
  T s;
  ZRT_HD T operator()(T x) const { return x * s; }
};

// Pow by a common scalar exponent (the fast path of Pow).
struct SquareFn {
  template <typename T> ZRT_HD T operator()(T v) const { return v * v; }
};
struct CubeFn {
  template <typename T> ZRT_HD T operator()(T v) const { return v * v * v; }
};
struct IdentityFn {
  template <typename T> ZRT_HD T operator()(T v) const { return v; }
};

//===----------------------------------------------------------------------===//
// TrainingDropout
//===----------------------------------------------------------------------===//

/// splitmix64's finaliser: a bijective 64-bit mix.
ZRT_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The key of one TrainingDropout instruction from (seed, stream, step).
ZRT_HD inline uint64_t dropoutKey(int64_t seed, int64_t stream, int64_t step) {
  return mix64(mix64(uint64_t(seed)) ^
               mix64(uint64_t(stream) + 0x632BE59BD9B4E019ull) ^
               mix64(uint64_t(step) + 0x8CB92BA72F3D8DD7ull));
}

/// Whether element i is kept: the top 24 bits of mix64(key + i * golden) are
/// at least ratio * 2^24 (= threshold).
ZRT_HD inline bool dropoutKeep(uint64_t key, uint64_t threshold, int64_t i) {
  return (mix64(key + uint64_t(i) * 0x9E3779B97F4A7C15ull) >> 40) >= threshold;
}

/// Element i of TrainingDropout: y = keep ? x * scale : 0 (and the mask).
template <typename T> struct TrainingDropoutFn {
  const T *src;
  T *dst;
  bool *mask; ///< may be null
  uint64_t key, threshold;
  T scale;
  ZRT_HD void operator()(int64_t i) const {
    const bool keep = dropoutKeep(key, threshold, i);
    dst[i] = keep ? src[i] * scale : T(0);
    if (mask)
      mask[i] = keep;
  }
};

//===----------------------------------------------------------------------===//
// Binary functors
//===----------------------------------------------------------------------===//

struct AddFn {
  template <typename T> ZRT_HD T operator()(T a, T b) const { return a + b; }
};
struct SubFn {
  template <typename T> ZRT_HD T operator()(T a, T b) const { return a - b; }
};
struct MulFn {
  template <typename T> ZRT_HD T operator()(T a, T b) const { return a * b; }
};
struct DivFn {
  template <typename T> ZRT_HD T operator()(T a, T b) const {
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
struct MaxFn {
  template <typename T> ZRT_HD T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinFn {
  template <typename T> ZRT_HD T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};
/// Mod with fmod=0: the result takes the divisor's sign (Python/numpy mod).
struct FloorModFn {
  template <typename T> ZRT_HD T operator()(T a, T b) const {
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
struct TruncModFn {
  template <typename T> ZRT_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return (b == 0 || b == -1) ? T(0) : T(a % b);
    else
      return std::fmod(a, b);
  }
};
struct PReluFn {
  template <typename T> ZRT_HD T operator()(T x, T slope) const {
    return x < T(0) ? T(slope * x) : x;
  }
};

struct EqualFn {
  template <typename T> ZRT_HD bool operator()(T a, T b) const {
    return a == b;
  }
};
struct LessFn {
  template <typename T> ZRT_HD bool operator()(T a, T b) const { return a < b; }
};
struct LessOrEqualFn {
  template <typename T> ZRT_HD bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct GreaterFn {
  template <typename T> ZRT_HD bool operator()(T a, T b) const { return a > b; }
};
struct GreaterOrEqualFn {
  template <typename T> ZRT_HD bool operator()(T a, T b) const {
    return a >= b;
  }
};

// Logical ops read Bool bytes as uint8_t so that any nonzero byte is true.
struct AndFn {
  ZRT_HD uint8_t operator()(uint8_t a, uint8_t b) const {
    return uint8_t((a != 0) & (b != 0));
  }
};
struct OrFn {
  ZRT_HD uint8_t operator()(uint8_t a, uint8_t b) const {
    return uint8_t((a != 0) | (b != 0));
  }
};
struct XorFn {
  ZRT_HD uint8_t operator()(uint8_t a, uint8_t b) const {
    return uint8_t((a != 0) != (b != 0));
  }
};

/// The first operand (a broadcast copy through the binary driver).
struct FirstFn {
  template <typename T> ZRT_HD T operator()(T a, T) const { return a; }
};

/// Integer power by squaring (exact, wrapping like numpy); negative
/// exponents go through double and truncate.
template <typename T, typename E> ZRT_HD inline T intPow(T base, E exponent) {
  if (exponent < 0)
    return fromDoubleNum<T>(std::pow(double(base), double(exponent)));
  using U = std::make_unsigned_t<T>;
  U result = 1, factor = U(base);
  for (auto e = std::make_unsigned_t<E>(exponent); e; e >>= 1) {
    if (e & 1)
      result *= factor;
    factor *= factor;
  }
  return T(result);
}

struct PowFn {
  template <typename T, typename E> ZRT_HD T operator()(T x, E y) const {
    if constexpr (std::is_floating_point_v<T>)
      return T(std::pow(x, T(y)));
    else if constexpr (std::is_integral_v<E>)
      return intPow(x, y);
    else
      return fromDoubleNum<T>(std::pow(double(x), double(y)));
  }
};

} // namespace math
} // namespace zrt

#if defined(__CUDACC__)
#pragma nv_diagnostic pop
#endif

#endif // ZRT_MATH_ELEMENTWISEMATH_H
