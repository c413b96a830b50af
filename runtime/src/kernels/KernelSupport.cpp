//===- KernelSupport.cpp - Shared helpers of the CPU kernels --------------===//
//
// Out-of-line parts of KernelSupport.h: half-precision conversions, scalar
// encoding for fills, the common error messages, shape helpers and the
// broadcasting planner.
//
//===----------------------------------------------------------------------===//

#include "kernels/KernelSupport.h"

namespace zrt {
namespace kernels {

//===----------------------------------------------------------------------===//
// Scalars and fills
//===----------------------------------------------------------------------===//

namespace {
template <typename Convert> uint64_t encodeWith(DType dtype, Convert convert) {
  uint64_t bits = 0;
  dispatchType(AllTypes{}, dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = convert(tag);
    std::memcpy(&bits, &v, sizeof(T));
  });
  return bits;
}
} // namespace

//===----------------------------------------------------------------------===//
// f16 and bf16 rows
//===----------------------------------------------------------------------===//

namespace {

// Branch-free forms of math/HalfMath.h's conversions (the same bits for
// every input: runtime/test/cpu/kernels/HalfTest.cpp checks every f16 and
// bf16 and every f32 exponent), written so that the loops vectorise.

ZRT_HOT_LOOP void widenBf16(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = uint32_t(src[i]) << 16;
    std::memcpy(dst + i, &bits, 4);
  }
}

ZRT_HOT_LOOP void narrowBf16(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x;
    std::memcpy(&x, src + i, 4);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uint32_t quiet = (x >> 16) | 0x40u;
    dst[i] = uint16_t((x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
  }
}

// narrowBf16 then widenBf16 in one pass: the rounded bits in the upper half.
ZRT_HOT_LOOP void roundBf16(float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    const uint32_t quiet = (b | 0x400000u) & 0xffff0000u;
    const uint32_t r = (b & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
    std::memcpy(x + i, &r, 4);
  }
}

// f16 -> f32: exponent and mantissa moved into place and scaled by 2^112
// (exact: subnormal halves become normal floats), inf/NaN set apart.
ZRT_HOT_LOOP void widenF16(const uint16_t *src, float *dst, int64_t n) {
  const float scale = 0x1p112f;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = src[i];
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t magnitude = (h & 0x7fffu) << 13;
    float f;
    std::memcpy(&f, &magnitude, 4);
    f *= scale;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits = magnitude >= (0x7c00u << 13) ? (magnitude | 0x7f800000u) : bits;
    bits |= sign;
    std::memcpy(dst + i, &bits, 4);
  }
}

// f32 -> f16 to nearest even: subnormal results by an f32 addition that
// aligns the mantissa (rounds to nearest even), normal ones by integer
// rounding of the mantissa (a carry into the exponent is right), overflow
// to inf, NaN to the quiet NaN 0x7e00, the sign kept.
ZRT_HOT_LOOP void narrowF16(const float *src, uint16_t *dst, int64_t n) {
  const uint32_t denormMagic = ((127 - 15) + (23 - 10) + 1) << 23;
  float magic;
  std::memcpy(&magic, &denormMagic, 4);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x;
    std::memcpy(&x, src + i, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t a = x & 0x7fffffffu;
    float af;
    std::memcpy(&af, &a, 4);
    const float sum = af + magic;
    uint32_t sumBits;
    std::memcpy(&sumBits, &sum, 4);
    const uint32_t subnormal = sumBits - denormMagic;
    const uint32_t normal =
        (a + (uint32_t(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    const uint32_t special = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
    const uint32_t h = a >= 0x477ff000u ? special
                       : a < 0x38800000u ? subnormal
                                         : normal;
    dst[i] = uint16_t(sign | h);
  }
}

} // namespace

void widenHalfRow(DType t, const uint16_t *src, float *dst, int64_t n) {
  if (t == DType::BF16)
    widenBf16(src, dst, n);
  else
    widenF16(src, dst, n);
}

void narrowHalfRow(DType t, const float *src, uint16_t *dst, int64_t n) {
  if (t == DType::BF16)
    narrowBf16(src, dst, n);
  else
    narrowF16(src, dst, n);
}

void roundHalfRow(DType t, float *x, int64_t n) {
  if (t == DType::BF16) {
    roundBf16(x, n);
    return;
  }
  constexpr int64_t kStep = 1024;
  uint16_t bits[kStep];
  for (int64_t b = 0; b < n; b += kStep) {
    const int64_t len = std::min(kStep, n - b);
    narrowF16(x + b, bits, len);
    widenF16(bits, x + b, len);
  }
}

uint64_t encodeScalar(DType dtype, double value) {
  return encodeWith(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return fromDouble<T>(value);
  });
}

uint64_t encodeScalarInt(DType dtype, int64_t value) {
  return encodeWith(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>)
      return value != 0;
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(value);
    else
      return fromDouble<T>(double(value));
  });
}

void fillElements(void *dst, size_t elementSize, uint64_t bits, int64_t count) {
  dispatchBySize(elementSize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    U v;
    std::memcpy(&v, &bits, sizeof(U));
    std::fill(static_cast<U *>(dst), static_cast<U *>(dst) + count, v);
  });
}

//===----------------------------------------------------------------------===//
// Errors and shapes
//===----------------------------------------------------------------------===//

Status kernelError(const std::string &op, const std::string &what,
                   const std::string &got, const std::string &expected) {
  return Status::error(op + ": " + what + " (got " + got + ", expected " +
                       expected + ")");
}

static std::string rangeString(size_t lo, size_t hi) {
  if (lo == hi)
    return std::to_string(lo);
  if (hi == size_t(-1))
    return "at least " + std::to_string(lo);
  return std::to_string(lo) + " to " + std::to_string(hi);
}

Status checkArity(const char *op, const std::vector<TensorRef> &inputs,
                  const std::vector<TensorRef> &outputs, size_t minIn,
                  size_t maxIn, size_t minOut, size_t maxOut) {
  if (inputs.size() < minIn || inputs.size() > maxIn)
    return kernelError(op, "wrong number of inputs",
                       std::to_string(inputs.size()),
                       rangeString(minIn, maxIn));
  if (outputs.size() < minOut || outputs.size() > maxOut)
    return kernelError(op, "wrong number of outputs",
                       std::to_string(outputs.size()),
                       rangeString(minOut, maxOut));
  return Status::ok();
}

Status checkSameDType(const char *op, const TensorRef &a, const char *aName,
                      const TensorRef &b, const char *bName) {
  if (a.dtype == b.dtype)
    return Status::ok();
  return kernelError(
      op, std::string("dtype of ") + bName + " differs from " + aName,
      dtypeName(b.dtype), dtypeName(a.dtype));
}

Status checkShape(const char *op, const char *operand, const TensorRef &t,
                  const std::vector<int64_t> &shape) {
  if (t.shape == shape)
    return Status::ok();
  return kernelError(op, std::string("wrong shape of ") + operand,
                     shapeString(t.shape), shapeString(shape));
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

int64_t productOf(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end && d < shape.size(); ++d)
    n *= shape[d];
  return n;
}

Status splitAtAxis(const char *op, const std::vector<int64_t> &shape,
                   int64_t axis, AxisSplit &split) {
  const int64_t rank = int64_t(shape.size());
  if (rank == 0 && axis == 0) {
    split = AxisSplit{};
    return Status::ok();
  }
  if (axis < 0 || axis >= rank)
    return kernelError(op, "axis out of range", std::to_string(axis),
                       "0 <= axis < " + std::to_string(rank));
  split.outer = productOf(shape, 0, size_t(axis));
  split.axis = shape[size_t(axis)];
  split.inner = productOf(shape, size_t(axis) + 1, shape.size());
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

Status
planBroadcast(const char *op, const std::vector<int64_t> &outShape,
              const std::vector<const std::vector<int64_t> *> &inputShapes,
              BroadcastPlan &plan) {
  const size_t rank = outShape.size();
  const size_t numInputs = inputShapes.size();
  // Per-input strides aligned to the output's dims (0 where broadcast).
  std::vector<std::vector<int64_t>> aligned(numInputs,
                                            std::vector<int64_t>(rank, 0));
  for (size_t i = 0; i < numInputs; ++i) {
    const std::vector<int64_t> &shape = *inputShapes[i];
    const std::vector<int64_t> strides = contiguousStrides(shape);
    // Extra leading dims are allowed only when they are 1.
    const size_t extra = shape.size() > rank ? shape.size() - rank : 0;
    for (size_t d = 0; d < extra; ++d)
      if (shape[d] != 1)
        return kernelError(op,
                           "operand " + std::to_string(i) +
                               " does not broadcast to the output",
                           shapeString(shape),
                           "a shape broadcastable to " + shapeString(outShape));
    for (size_t k = extra; k < shape.size(); ++k) {
      const size_t d = rank - (shape.size() - k);
      if (shape[k] == outShape[d])
        aligned[i][d] = shape[k] == 1 ? 0 : strides[k];
      else if (shape[k] != 1)
        return kernelError(op,
                           "operand " + std::to_string(i) +
                               " does not broadcast to the output",
                           shapeString(shape),
                           "a shape broadcastable to " + shapeString(outShape));
    }
  }
  plan.dims.clear();
  plan.strides.assign(numInputs, {});
  plan.numel = productOf(outShape, 0, rank);
  for (size_t d = 0; d < rank; ++d) {
    if (outShape[d] == 1)
      continue;
    bool merge = !plan.dims.empty();
    for (size_t i = 0; merge && i < numInputs; ++i)
      merge = plan.strides[i].back() == aligned[i][d] * outShape[d];
    if (merge) {
      plan.dims.back() *= outShape[d];
      for (size_t i = 0; i < numInputs; ++i)
        plan.strides[i].back() = aligned[i][d];
      continue;
    }
    plan.dims.push_back(outShape[d]);
    for (size_t i = 0; i < numInputs; ++i)
      plan.strides[i].push_back(aligned[i][d]);
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    for (size_t i = 0; i < numInputs; ++i)
      plan.strides[i].push_back(0);
  }
  return Status::ok();
}

Status planBroadcastCopy(const char *op, const TensorRef &in,
                         const TensorRef &out, BroadcastPlan &plan) {
  if (dtypeSize(in.dtype) != dtypeSize(out.dtype))
    return kernelError(op, "input and output dtypes differ",
                       dtypeName(in.dtype), dtypeName(out.dtype));
  return planBroadcast(op, out.shape, {&in.shape}, plan);
}

Status broadcastCopy(const KernelContext &ctx, const char *op,
                     const TensorRef &in, const TensorRef &out) {
  const size_t elementSize = dtypeSize(out.dtype);
  BroadcastPlan plan;
  ZRT_RETURN_IF_ERROR(planBroadcastCopy(op, in, out, plan));
  dispatchBySize(elementSize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U *src = in.as<U>();
    U *dst = out.as<U>();
    const int64_t stride = plan.innerStride(0);
    parallelRange(ctx, plan.numel, kElementGrain, [&](int64_t b, int64_t e) {
      forEachBroadcastRow(
          plan, b, e, [&](int64_t o, const int64_t *inOff, int64_t n) {
            if (stride == 0)
              std::fill(dst + o, dst + o + n, src[inOff[0]]);
            else
              std::memcpy(dst + o, src + inOff[0], size_t(n) * sizeof(U));
          });
    });
  });
  return Status::ok();
}

} // namespace kernels
} // namespace zrt
