//===- KernelSupport.h - Shared helpers of both backends' kernels -*- C++ -*-===//
//
// Internal to the runtime's backends (cpu/, cuda/). It maps the program's
// dtypes to C++ element types and dispatches a generic lambda on them, formats
// kernel errors in the common "<Op>: <what> (got ..., expected ...)" shape,
// plans numpy-style broadcasting (collapsed dims plus per-input element
// strides) and walks such a plan row by row, splits shapes around an axis,
// splits flat ranges across the KernelContext's threads, and picks the
// vectorisable f32 exp, log, tanh, erf and sigmoid of math/VecMath.h for the
// transcendental-heavy kernels.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_KERNELSUPPORT_H
#define ZRT_KERNELS_KERNELSUPPORT_H

#include "math/ElementwiseMath.h"
#include "math/HalfMath.h"
#include "math/VecMath.h"
#include "zrt/Kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace zrt {
namespace kernels {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

// f16 and bf16 (math/HalfMath.h, shared with the CUDA kernels).
using math::BFloat16;
using math::bfloat16ToFloat;
using math::Float16;
using math::floatToBfloat16;
using math::floatToHalf;
using math::halfToFloat;

/// The DType of a C++ element type.
template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> {
  static constexpr DType value = DType::F32;
};
template <> struct DTypeOf<Float16> {
  static constexpr DType value = DType::F16;
};
template <> struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::BF16;
};
template <> struct DTypeOf<double> {
  static constexpr DType value = DType::F64;
};
template <> struct DTypeOf<int8_t> {
  static constexpr DType value = DType::I8;
};
template <> struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::U8;
};
template <> struct DTypeOf<int32_t> {
  static constexpr DType value = DType::I32;
};
template <> struct DTypeOf<int64_t> {
  static constexpr DType value = DType::I64;
};
template <> struct DTypeOf<bool> {
  static constexpr DType value = DType::Bool;
};

/// Converts any supported element type to double (half types via float).
/// Whether `t` is one of the 16-bit floating types (f16, bf16).
inline bool isHalf(DType t) { return t == DType::F16 || t == DType::BF16; }

template <typename T> ZRT_HD inline double toDouble(T v) {
  if constexpr (std::is_same_v<T, Float16>)
    return halfToFloat(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return bfloat16ToFloat(v.bits);
  else
    return static_cast<double>(v);
}

/// Converts a double to element type T: floats round, integers truncate
/// toward zero, Bool is "nonzero".
template <typename T> ZRT_HD inline T fromDouble(double v) {
  if constexpr (std::is_same_v<T, Float16>)
    return Float16{floatToHalf(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16{floatToBfloat16(static_cast<float>(v))};
  else
    return math::fromDoubleNum<T>(v);
}

template <typename T> struct TypeTag { using type = T; };
template <typename... Ts> struct TypeList {};

using FloatTypes = TypeList<float, double>;
using IntTypes = TypeList<int32_t, int64_t>;
using NumericTypes = TypeList<float, double, int32_t, int64_t, int8_t, uint8_t>;
using NumericBoolTypes =
    TypeList<float, double, int32_t, int64_t, int8_t, uint8_t, bool>;
using AllTypes = TypeList<float, Float16, BFloat16, double, int8_t, uint8_t,
                          int32_t, int64_t, bool>;
using IndexTypes = TypeList<int64_t, int32_t>;

/// Calls `fn(TypeTag<T>{})` for the element type T of `dtype` if T is in the
/// list; returns false (without calling) otherwise.
template <typename Fn, typename... Ts>
bool dispatchType(TypeList<Ts...>, DType dtype, Fn &&fn) {
  return ((dtype == DTypeOf<Ts>::value ? (fn(TypeTag<Ts>{}), true) : false) ||
          ...);
}

/// "f32, f64, i32 or i64".
template <typename... Ts> std::string typeListNames(TypeList<Ts...>) {
  std::vector<std::string> names = {dtypeName(DTypeOf<Ts>::value)...};
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i)
      out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

/// Unsigned integer type of the same size as an element; data movement
/// kernels are written once per element size, not per dtype.
template <size_t Size> struct BitsOfSize;
template <> struct BitsOfSize<1> { using type = uint8_t; };
template <> struct BitsOfSize<2> { using type = uint16_t; };
template <> struct BitsOfSize<4> { using type = uint32_t; };
template <> struct BitsOfSize<8> { using type = uint64_t; };

/// Calls `fn(TypeTag<U>{})` with U the unsigned type of `elementSize` bytes.
template <typename Fn> bool dispatchBySize(size_t elementSize, Fn &&fn) {
  switch (elementSize) {
  case 1:
    fn(TypeTag<uint8_t>{});
    return true;
  case 2:
    fn(TypeTag<uint16_t>{});
    return true;
  case 4:
    fn(TypeTag<uint32_t>{});
    return true;
  case 8:
    fn(TypeTag<uint64_t>{});
    return true;
  default:
    return false;
  }
}

/// `n` f16 or bf16 elements (`t`; their bits) widened to f32: exact, the
/// values of math::halfToFloat / bfloat16ToFloat, in vector registers.
void widenHalfRow(DType t, const uint16_t *src, float *dst, int64_t n);

/// `n` f32 elements rounded to f16 or bf16 (`t`) bits: to nearest even, NaN
/// stays NaN, the bits of math::floatToHalf / floatToBfloat16, in vector
/// registers.
void narrowHalfRow(DType t, const float *src, uint16_t *dst, int64_t n);

/// `n` f32 elements rounded in place to the nearest f16 or bf16 (`t`) value:
/// the f32 values widenHalfRow gives of narrowHalfRow's bits, in one pass.
void roundHalfRow(DType t, float *x, int64_t n);

/// The bytes of `value` converted to `dtype`, in the low bytes of the result.
uint64_t encodeScalar(DType dtype, double value);
/// Same for an integer value (exact for i64).
uint64_t encodeScalarInt(DType dtype, int64_t value);

/// Writes `count` copies of the element `bits` (of `elementSize` bytes).
void fillElements(void *dst, size_t elementSize, uint64_t bits, int64_t count);

//===----------------------------------------------------------------------===//
// Errors and operands
//===----------------------------------------------------------------------===//

/// "<op>: <what> (got <got>, expected <expected>)".
Status kernelError(const std::string &op, const std::string &what,
                   const std::string &got, const std::string &expected);

/// "<op>: unsupported dtype of <operand> (got f16, expected f32 or f64)".
template <typename... Ts>
Status dtypeError(const std::string &op, const std::string &operand, DType got,
                  TypeList<Ts...> expected) {
  return kernelError(op, "unsupported dtype of " + operand, dtypeName(got),
                     typeListNames(expected));
}

/// Checks the operand counts: minIn <= inputs <= maxIn, likewise outputs.
Status checkArity(const char *op, const std::vector<TensorRef> &inputs,
                  const std::vector<TensorRef> &outputs, size_t minIn,
                  size_t maxIn, size_t minOut, size_t maxOut);

/// Checks that two operands have the same dtype.
Status checkSameDType(const char *op, const TensorRef &a, const char *aName,
                      const TensorRef &b, const char *bName);

/// Checks that `t` has exactly `shape`.
Status checkShape(const char *op, const char *operand, const TensorRef &t,
                  const std::vector<int64_t> &shape);

/// The window attributes of a convolution or pool over k spatial dims, as the
/// compiler normalises them: `strides` and `dilations` (k entries, default 1)
/// and `pads` (every begin, then every end; default 0). Sizes are checked by
/// the caller.
inline void readWindowAttrs(const AttrMap &attrs, size_t k,
                            std::vector<int64_t> &strides,
                            std::vector<int64_t> &dilations,
                            std::vector<int64_t> &pads) {
  strides = attrs.getInts("strides");
  dilations = attrs.getInts("dilations");
  pads = attrs.getInts("pads");
  if (strides.empty())
    strides.assign(k, 1);
  if (dilations.empty())
    dilations.assign(k, 1);
  if (pads.empty())
    pads.assign(2 * k, 0);
}

/// Whether operand `i` is present: optional trailing operands may be left out
/// of the list, and a left-out operand in the middle has a null data pointer.
inline bool hasOperand(const std::vector<TensorRef> &operands, size_t i) {
  return i < operands.size() &&
         (operands[i].data != nullptr || operands[i].numel() == 0);
}

/// Row-major strides, in elements.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape);

/// product(shape[begin, end)).
int64_t productOf(const std::vector<int64_t> &shape, size_t begin, size_t end);

/// A shape viewed as [outer, axis, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1;
  int64_t axis = 1;
  int64_t inner = 1;
};

/// Splits `shape` at `axis`; fails (kernel error) when axis is not in
/// [0, rank). A rank-0 shape with axis 0 is treated as [1].
Status splitAtAxis(const char *op, const std::vector<int64_t> &shape,
                   int64_t axis, AxisSplit &split);

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

/// Inputs broadcast (numpy rules) to an output shape, with dims of size 1
/// dropped and adjacent dims merged while every input stays affine in them.
/// The innermost stride of each input is 0 (broadcast) or 1 (contiguous).
struct BroadcastPlan {
  std::vector<int64_t> dims;                 ///< collapsed output dims, >= 1
  std::vector<std::vector<int64_t>> strides; ///< [input][dim], elements
  int64_t numel = 0;

  int64_t innerStride(size_t input) const { return strides[input].back(); }
};

/// Plans broadcasting `inputShapes` to `outShape`; fails if an input does not
/// broadcast to it (unidirectionally: the output shape is authoritative).
Status
planBroadcast(const char *op, const std::vector<int64_t> &outShape,
              const std::vector<const std::vector<int64_t> *> &inputShapes,
              BroadcastPlan &plan);

/// Calls `rowFn(outOffset, inOffsets, length)` for each run of output elements
/// in [begin, end) that lies within one innermost row; `inOffsets[i]` is the
/// element offset of input i at `outOffset`, and input i advances by
/// `plan.innerStride(i)` per element along the run.
template <typename RowFn>
void forEachBroadcastRow(const BroadcastPlan &plan, int64_t begin, int64_t end,
                         RowFn &&rowFn) {
  if (begin >= end)
    return;
  const size_t rank = plan.dims.size();
  const size_t numInputs = plan.strides.size();
  std::vector<int64_t> index(rank), offsets(numInputs, 0);
  int64_t rest = begin;
  for (size_t d = rank; d-- > 0;) {
    index[d] = rest % plan.dims[d];
    rest /= plan.dims[d];
  }
  for (size_t i = 0; i < numInputs; ++i)
    for (size_t d = 0; d < rank; ++d)
      offsets[i] += index[d] * plan.strides[i][d];
  const int64_t inner = plan.dims.back();
  int64_t pos = begin;
  while (pos < end) {
    const int64_t len = std::min(end - pos, inner - index[rank - 1]);
    rowFn(pos, offsets.data(), len);
    pos += len;
    index[rank - 1] += len;
    for (size_t i = 0; i < numInputs; ++i)
      offsets[i] += len * plan.strides[i][rank - 1];
    if (index[rank - 1] < inner)
      continue;
    index[rank - 1] = 0;
    for (size_t i = 0; i < numInputs; ++i)
      offsets[i] -= inner * plan.strides[i][rank - 1];
    for (size_t d = rank - 1; d-- > 0;) {
      ++index[d];
      for (size_t i = 0; i < numInputs; ++i)
        offsets[i] += plan.strides[i][d];
      if (index[d] < plan.dims[d])
        break;
      index[d] = 0;
      for (size_t i = 0; i < numInputs; ++i)
        offsets[i] -= plan.dims[d] * plan.strides[i][d];
    }
  }
}

/// Writes `in` broadcast to `out`'s shape (same element size); used by Expand
/// and wherever a smaller operand must be materialised at full size.
Status broadcastCopy(const KernelContext &ctx, const char *op,
                     const TensorRef &in, const TensorRef &out);

/// The checks and the (one-input) plan of broadcastCopy, shared with the
/// CUDA backend's version.
Status planBroadcastCopy(const char *op, const TensorRef &in,
                         const TensorRef &out, BroadcastPlan &plan);

//===----------------------------------------------------------------------===//
// Parallelism
//===----------------------------------------------------------------------===//

/// Elements of cheap elementwise work worth one parallel chunk.
constexpr int64_t kElementGrain = 32768;
/// Elements of transcendental work (exp, erf, ...) worth one parallel chunk.
constexpr int64_t kTranscendentalGrain = 4096;

/// How many tasks a parallel loop aims for, whatever the thread count. Every
/// split of work below is a function of the shapes and these constants only,
/// never of KernelContext::numThreads, so a kernel's bits are the same on any
/// machine and at any --threads (a chunk boundary can move a vector tail or a
/// partial sum; it must not move with the pool's size).
constexpr int64_t kParallelTasks = 16;
/// Most chunks one parallelRange is cut into.
constexpr int64_t kMaxChunks = 4 * kParallelTasks;

/// Runs `fn(begin, end)` over contiguous pieces of [0, n), each at least
/// `grain` items, on ctx's threads. The pieces depend on n and grain only:
/// each is one call of fn, whichever thread runs it (with one thread, in
/// order on the caller).
template <typename Fn>
void parallelRange(const KernelContext &ctx, int64_t n, int64_t grain,
                   Fn &&fn) {
  if (n <= 0)
    return;
  const int64_t chunks =
      std::min<int64_t>(n / std::max<int64_t>(grain, 1), kMaxChunks);
  if (chunks <= 1) {
    fn(int64_t(0), n);
    return;
  }
  auto runChunks = [&](int64_t chunkBegin, int64_t chunkEnd) {
    for (int64_t c = chunkBegin; c < chunkEnd; ++c)
      fn(c * n / chunks, (c + 1) * n / chunks);
  };
  if (ctx.numThreads <= 1 || !ctx.parallelFor)
    runChunks(0, chunks);
  else
    ctx.parallelFor(chunks, runChunks);
}

/// Grain in rows for row-wise kernels whose rows cost `rowCost` elements.
inline int64_t rowGrain(int64_t rowCost, int64_t elementGrain) {
  return std::max<int64_t>(1, elementGrain / std::max<int64_t>(rowCost, 1));
}

/// Calls `fn(row, offset)` for rows [begin, end) of a row-major `dims` (a row
/// is one index of every dim but the last), where offset = sum over those
/// dims of index * strides[d]; offsets are updated incrementally.
template <typename Fn>
void forEachRow(const std::vector<int64_t> &dims,
                const std::vector<int64_t> &strides, int64_t begin, int64_t end,
                Fn &&fn) {
  if (begin >= end)
    return;
  const size_t outerRank = dims.empty() ? 0 : dims.size() - 1;
  std::vector<int64_t> index(outerRank);
  int64_t offset = 0, rest = begin;
  for (size_t d = outerRank; d-- > 0;) {
    index[d] = rest % dims[d];
    rest /= dims[d];
    offset += index[d] * strides[d];
  }
  for (int64_t row = begin; row < end; ++row) {
    fn(row, offset);
    for (size_t d = outerRank; d-- > 0;) {
      offset += strides[d];
      if (++index[d] < dims[d])
        break;
      offset -= dims[d] * strides[d];
      index[d] = 0;
    }
  }
}

/// For [outer, axis, inner] work (softmax over a middle axis, cumsum, arg
/// max, ...): calls `fn(o, innerBegin, innerEnd)` covering every outer index
/// and the whole inner range, in parallel. The inner range is split into
/// blocks only when there are few outer indices (a rule on the shape alone).
template <typename Fn>
void parallelOuterInner(const KernelContext &ctx, int64_t outer,
                        int64_t axisLen, int64_t inner, Fn &&fn) {
  if (outer <= 0 || inner <= 0)
    return;
  constexpr int64_t kMinInnerBlock = 64;
  int64_t blocks = 1;
  if (outer < 2 * kParallelTasks && inner >= 2 * kMinInnerBlock)
    blocks = std::min((kMaxChunks + outer - 1) / outer, inner / kMinInnerBlock);
  const int64_t blockSize = (inner + blocks - 1) / blocks;
  blocks = (inner + blockSize - 1) / blockSize;
  parallelRange(
      ctx, outer * blocks,
      rowGrain(std::max<int64_t>(axisLen, 1) * blockSize, kElementGrain),
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t innerBegin = (t % blocks) * blockSize;
          fn(t / blocks, innerBegin, std::min(inner, innerBegin + blockSize));
        }
      });
}

//===----------------------------------------------------------------------===//
// Vectorisable math
//===----------------------------------------------------------------------===//

using math::bitsToFloat;
using math::floatToBits;

// The vectorisable f32 exp, log, tanh, erf and sigmoid (math/ElementwiseMath.h,
// shared with the CUDA kernels).
using math::erfOf;
using math::expOf;
using math::logOf;
using math::sigmoidOf;
using math::tanhOf;

/// Marks a function holding a hot loop to be compiled for AVX-512F, AVX2 and
/// the baseline ISA, with the dynamic loader picking one per CPU (GCC
/// target_clones on x86-64 Linux; a no-op elsewhere). Only the ISA differs
/// (not -march), so the helpers it calls are inlined into every clone.
/// Results may differ between clones in the last bit where the compiler
/// contracts a*b+c into an FMA.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&         \
    defined(__linux__)
#define ZRT_HOT_LOOP                                                           \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ZRT_HOT_LOOP
#endif

/// out[i] = fn(in[i]) for i < n. `out` and `in` are the same array or
/// disjoint; both cases vectorise.
template <typename TI, typename TO, typename Fn>
inline void mapElements(const TI *in, TO *out, int64_t n, Fn &&fn) {
  if constexpr (std::is_same_v<TI, TO>) {
    if (in == out) {
      for (int64_t i = 0; i < n; ++i)
        out[i] = fn(out[i]);
      return;
    }
  }
  const TI *__restrict src = in;
  TO *__restrict dst = out;
  for (int64_t i = 0; i < n; ++i)
    dst[i] = fn(src[i]);
}

/// out[i] = fn(a[i], b[i]) for i < n. `out` is disjoint from `a` and `b` or
/// the same array as one of them.
template <typename TA, typename TB, typename TO, typename Fn>
inline void zipElements(const TA *a, const TB *b, TO *out, int64_t n, Fn &&fn) {
  if (static_cast<const void *>(out) == static_cast<const void *>(a) ||
      static_cast<const void *>(out) == static_cast<const void *>(b)) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = fn(a[i], b[i]);
    return;
  }
  const TA *__restrict x = a;
  const TB *__restrict y = b;
  TO *__restrict dst = out;
  for (int64_t i = 0; i < n; ++i)
    dst[i] = fn(x[i], y[i]);
}

/// Sum of fn(in[i]) over n contiguous values with 8 partial sums (faster,
/// and more accurate than one running sum).
template <typename T, typename Fn>
inline T sumMapped(const T *in, int64_t n, Fn &&fn) {
  constexpr int kBlock = 8;
  T partial[kBlock] = {};
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    for (int j = 0; j < kBlock; ++j)
      partial[j] += T(fn(in[i + j]));
  T total = T(0);
  for (; i < n; ++i)
    total += T(fn(in[i]));
  for (int j = 0; j < kBlock; ++j)
    total += partial[j];
  return total;
}

/// Sums of d and d^2 over d = in[i] - shift, i < n, accumulated in 8 (f32)
/// or 4 (f64) lanes; the basis of one-pass mean/variance.
template <typename T>
inline void shiftedMoments(const T *in, int64_t n, T shift, T &sum,
                           T &squares) {
  sum = T(0);
  squares = T(0);
  int64_t i = 0;
#if defined(__GNUC__)
  if constexpr (std::is_floating_point_v<T>) {
    constexpr int64_t kLanes = 32 / sizeof(T);
    typedef T Vector __attribute__((vector_size(32)));
    Vector lanesSum = {}, lanesSquares = {}, x;
    for (; i + kLanes <= n; i += kLanes) {
      std::memcpy(&x, in + i, sizeof(Vector));
      x -= shift;
      lanesSum += x;
      lanesSquares += x * x;
    }
    for (int64_t j = 0; j < kLanes; ++j) {
      sum += lanesSum[j];
      squares += lanesSquares[j];
    }
  }
#endif
  for (; i < n; ++i) {
    const T d = in[i] - shift;
    sum += d;
    squares += d * d;
  }
}

/// Maximum of n > 0 contiguous values (NaN-propagating is not guaranteed).
/// Floats use GCC/Clang vector extensions: a plain max loop does not
/// vectorise without -ffast-math.
template <typename T> inline T maxOf(const T *in, int64_t n) {
  T best = in[0];
  int64_t i = 1;
#if defined(__GNUC__)
  if constexpr (std::is_floating_point_v<T>) {
    constexpr int64_t kLanes = 32 / sizeof(T);
    typedef T Vector __attribute__((vector_size(32)));
    if (n >= kLanes) {
      Vector lanes, x;
      std::memcpy(&lanes, in, sizeof(Vector));
      for (i = kLanes; i + kLanes <= n; i += kLanes) {
        std::memcpy(&x, in + i, sizeof(Vector));
        lanes = x > lanes ? x : lanes;
      }
      for (int64_t j = 0; j < kLanes; ++j)
        best = lanes[j] > best ? lanes[j] : best;
    }
  }
#endif
  for (; i < n; ++i)
    best = in[i] > best ? in[i] : best;
  return best;
}

} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_KERNELSUPPORT_H
