//===- KernelTestSupport.h - The CPU kernel tests' helpers ------*- C++ -*-===//
//
// What the tests of the CPU kernels (zrt-kernel-tests: one gtest binary built
// from the *Test.cpp files of this folder, one kernel family each) share. They
// run every CPU kernel through the KernelTable (as the executor does) on small
// hand-derivable cases or against an independent naive computation:
// broadcasting, rank-0 and empty tensors, Bool outputs, integer dtypes, and the
// parallel paths (with a 4-thread parallelFor). Here: the tensors a test owns,
// attributes, running a kernel, comparisons, and the naive references used by
// more than one family (broadcast indexing, softmax, the packed products'
// defined elements). A test file says `using namespace zrt::kerneltest;`.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TEST_KERNELTESTSUPPORT_H
#define ZRT_TEST_KERNELTESTSUPPORT_H

#include "KernelHarness.h"
#include "zrt/Kernel.h"
#include "zrt/CpuBackend.h"

#include "cpu/kernels/PackedGemm.h"
#include "math/HalfMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace zrt {
namespace kerneltest {

using zrt::AttrMap;
using zrt::AttrValue;
using zrt::DType;
using zrt::KernelContext;
using zrt::TensorRef;

//===----------------------------------------------------------------------===//
// Harness
//===----------------------------------------------------------------------===//

template <typename T> DType dtypeOf();
template <> inline DType dtypeOf<float>() { return DType::F32; }
template <> inline DType dtypeOf<double>() { return DType::F64; }
template <> inline DType dtypeOf<int32_t>() { return DType::I32; }
template <> inline DType dtypeOf<int64_t>() { return DType::I64; }
template <> inline DType dtypeOf<bool>() { return DType::Bool; }
template <> inline DType dtypeOf<int8_t>() { return DType::I8; }
template <> inline DType dtypeOf<uint8_t>() { return DType::U8; }

inline const zrt::KernelTable &kernels() { return zrt::test::cpuKernels(); }

inline KernelContext serialContext() {
  KernelContext ctx;
  ctx.numThreads = 1;
  ctx.parallelFor = [](int64_t n,
                       const std::function<void(int64_t, int64_t)> &fn) {
    if (n > 0)
      fn(0, n);
  };
  return ctx;
}

using zrt::test::contextWithThreads;

/// Splits [0, n) into 4 contiguous pieces on 4 threads.
inline KernelContext threadedContext() { return contextWithThreads(4); }

/// Owns the storage of the tensors of one test.
class Tensors {
public:
  template <typename T>
  TensorRef input(std::vector<int64_t> shape, const std::vector<T> &values) {
    TensorRef t = output<T>(std::move(shape));
    EXPECT_EQ(size_t(t.numel()), values.size()) << "test bug: value count";
    for (size_t i = 0; i < values.size() && i < size_t(t.numel()); ++i)
      t.as<T>()[i] = values[i];
    return t;
  }
  /// A tensor filled with a garbage byte pattern.
  template <typename T> TensorRef output(std::vector<int64_t> shape) {
    return raw(dtypeOf<T>(), std::move(shape));
  }
  TensorRef raw(DType dtype, std::vector<int64_t> shape) {
    TensorRef t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    storage_.push_back(std::make_unique<std::vector<char>>(
        std::max<size_t>(t.bytes(), 1), char(0x5a)));
    t.data = storage_.back()->data();
    return t;
  }

private:
  std::vector<std::unique_ptr<std::vector<char>>> storage_;
};

template <typename T> std::vector<T> values(const TensorRef &t) {
  return std::vector<T>(t.as<T>(), t.as<T>() + t.numel());
}

inline std::vector<bool> bools(const TensorRef &t) {
  std::vector<bool> out;
  for (int64_t i = 0; i < t.numel(); ++i)
    out.push_back(t.as<uint8_t>()[i] != 0);
  return out;
}

inline AttrValue ints(std::vector<int64_t> v) {
  AttrValue a;
  a.ints = std::move(v);
  return a;
}
inline AttrValue floats(std::vector<double> v) {
  AttrValue a;
  a.floats = std::move(v);
  return a;
}
inline AttrValue str(std::string s) {
  AttrValue a;
  a.str = std::move(s);
  return a;
}

inline AttrMap attrs(std::vector<std::pair<std::string, AttrValue>> list) {
  AttrMap m;
  for (auto &kv : list)
    m.set(kv.first, kv.second);
  return m;
}

inline zrt::Status run(const std::string &op, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out, const AttrMap &a = {},
                       const KernelContext &ctx = serialContext()) {
  zrt::KernelFn fn = kernels().lookup(op);
  if (!fn)
    return zrt::Status::error("no kernel " + op);
  return fn(ctx, in, out, a);
}

#define EXPECT_OK(expr)                                                        \
  do {                                                                         \
    zrt::Status s_ = (expr);                                                   \
    EXPECT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (0)
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    zrt::Status s_ = (expr);                                                   \
    ASSERT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (0)

template <typename T>
void expectNear(const std::vector<T> &actual,
                const std::vector<double> &expected, double tol = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(double(actual[i]))) << "at " << i;
      continue;
    }
    if (std::isinf(expected[i])) {
      EXPECT_EQ(double(actual[i]), expected[i]) << "at " << i;
      continue;
    }
    EXPECT_NEAR(double(actual[i]), expected[i],
                tol * std::max(1.0, std::fabs(expected[i])))
        << "at " << i;
  }
}

inline std::vector<float> randomFloats(size_t n, unsigned seed,
                                       float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

inline int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Flat index -> multi-index, and multi-index -> flat index under a
/// broadcast (numpy) reading of `shape` right-aligned to the index.
inline std::vector<int64_t> unflatten(int64_t flat,
                                      const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
inline int64_t broadcastFlat(const std::vector<int64_t> &idx,
                             const std::vector<int64_t> &shape) {
  int64_t flat = 0;
  const size_t offset = idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + (shape[d] == 1 ? 0 : idx[offset + d]);
  return flat;
}

//===----------------------------------------------------------------------===//
// References shared by several families
//===----------------------------------------------------------------------===//

/// Softmax (with `log`, LogSoftmax) of a [shape] tensor over `axis`, in double:
/// the reference of the Normalization, UnusualShapes and Loss tests.
inline std::vector<double> naiveSoftmax(const std::vector<float> &x,
                                        const std::vector<int64_t> &shape,
                                        int64_t axis, bool log) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d)
    inner *= shape[d];
  const int64_t len = shape[size_t(axis)];
  std::vector<double> out(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double max = -INFINITY, sum = 0;
      for (int64_t a = 0; a < len; ++a)
        max = std::max(max, double(x[size_t((o * len + a) * inner + i)]));
      for (int64_t a = 0; a < len; ++a)
        sum += std::exp(double(x[size_t((o * len + a) * inner + i)]) - max);
      for (int64_t a = 0; a < len; ++a) {
        const size_t k = size_t((o * len + a) * inner + i);
        const double z = double(x[k]) - max;
        out[k] = log ? z - std::log(sum) : std::exp(z) / sum;
      }
    }
  return out;
}

// Products over a packed constant B (cpu/kernels/PackedGemm.h), also run by the
// Half tests at 16 bits.

/// One Gemm case: shapes, transposes, C's shape, alpha, beta.
struct PackedGemmCase {
  int64_t m, n, k;
  bool transA, transB;
  std::vector<int64_t> cShape; ///< {0}: no C
  double alpha, beta;
};

inline std::vector<PackedGemmCase> packedGemmCases() {
  // Edges: M not a multiple of the 8-row block nor of the 256-row task, N
  // not a multiple of the 48-column panel (and under one panel), K of 1.
  return {
      {1, 16, 1, false, false, {0}, 1, 0},
      {7, 47, 5, false, true, {47}, 1, 1},
      {8, 48, 70, true, false, {1, 48}, 0.5, 2},
      {9, 49, 70, false, false, {9, 1}, 1, 1},
      {37, 100, 33, true, true, {37, 100}, -1.5, 0.25},
      {300, 130, 70, false, true, {}, 1, 1},
      {130, 291, 64, false, false, {291}, 1, 1},
      {513, 97, 20, false, true, {513, 97}, 2, -1},
      // N a multiple of 16 and B small and not transposed: read unpacked
      // (PackedGemm.h, unpackedGemmBlock) unless constant.
      {33, 64, 50, false, false, {64}, 1, 1},
      {21, 160, 9, true, false, {21, 160}, 0.5, -1},
  };
}

/// Every ISA this CPU runs, lowest first.
inline std::vector<zrt::cpu::CpuIsa> runnableIsas() {
  std::vector<zrt::cpu::CpuIsa> isas;
  for (zrt::cpu::CpuIsa isa : {zrt::cpu::CpuIsa::Generic, zrt::cpu::CpuIsa::Avx2,
                               zrt::cpu::CpuIsa::Avx512, zrt::cpu::CpuIsa::Avx512Bf16})
    if (isa <= zrt::cpu::detectedCpuIsa())
      isas.push_back(isa);
  return isas;
}

/// Runs the kernels at `isa` while alive; the environment's ISA after.
struct ScopedIsa {
  explicit ScopedIsa(zrt::cpu::CpuIsa isa) { zrt::cpu::setCpuIsa(isa); }
  ~ScopedIsa() { zrt::cpu::setCpuIsa(zrt::cpu::detectedCpuIsa()); }
};

/// Element (i, j) of alpha * op(A) op(B) + beta * C as PackedGemm.h defines
/// it for `isa`, written out one element at a time: a sequential sum over k
/// of fused multiply-adds (std::fma) on the FMA ISAs, of rounded products
/// then adds (through a volatile, so no compiler may fuse them) on generic.
inline float definedElement(zrt::cpu::CpuIsa isa, const float *aRow,
                            int64_t aStep, const float *bCol, int64_t bStep,
                            int64_t k, float alpha, float beta, float c) {
  const bool fused = isa != zrt::cpu::CpuIsa::Generic;
  float acc = 0.0f;
  for (int64_t p = 0; p < k; ++p) {
    if (fused) {
      acc = std::fma(aRow[p * aStep], bCol[p * bStep], acc);
    } else {
      volatile float prod = aRow[p * aStep] * bCol[p * bStep];
      acc = acc + prod;
    }
  }
  float v = alpha == 1.0f ? acc : acc * alpha;
  if (beta != 0.0f) {
    if (fused) {
      v = std::fma(beta, c, v);
    } else {
      volatile float prod = beta * c;
      v = prod + v;
    }
  }
  return v;
}

/// x rounded to f32 (to nearest even) with an unbounded exponent, then a
/// zero of its sign when under the least normal f32 (x86's flush to zero,
/// tininess after rounding), infinity past the largest.
inline float roundFtz(double x) {
  if (x == 0.0 || !std::isfinite(x))
    return float(x);
  int e;
  const double m = std::frexp(x, &e); // x = m * 2^e, 0.5 <= |m| < 1
  const double r = std::ldexp(std::nearbyint(std::ldexp(m, 24)), e - 24);
  if (std::fabs(r) < double(std::numeric_limits<float>::min()))
    return std::copysign(0.0f, float(x));
  return float(r);
}

/// A bf16's value, a subnormal read as a zero of its sign.
inline float bf16Daz(uint16_t h) {
  if ((h & 0x7f80u) == 0)
    h &= 0x8000u;
  return zrt::math::bfloat16ToFloat(h);
}

/// Element (i, j) of alpha * op(A) op(B) + beta * C for bf16 A and B as
/// PackedGemm.h's pair kernels define it (every ISA alike), one element at a
/// time: over pairs q, A[2q+1] B[2q+1] then A[2q] B[2q] (0 past K), each
/// added to the sum exactly in double and rounded once by roundFtz, inputs
/// read with bf16Daz. `c` is C's initial value in f32.
inline float definedBf16Element(const uint16_t *aRow, int64_t aStep,
                                const uint16_t *bCol, int64_t bStep, int64_t k,
                                float alpha, float beta, float c) {
  float acc = 0.0f;
  for (int64_t q = 0; q < (k + 1) / 2; ++q)
    for (int64_t kk : {2 * q + 1, 2 * q}) {
      const float x = kk < k ? bf16Daz(aRow[kk * aStep]) : 0.0f;
      const float y = kk < k ? bf16Daz(bCol[kk * bStep]) : 0.0f;
      acc = roundFtz(double(x) * double(y) + double(acc));
    }
  const auto daz = [](float v) {
    return std::fabs(v) < std::numeric_limits<float>::min() ? std::copysign(0.0f, v) : v;
  };
  float v = alpha == 1.0f ? acc : roundFtz(double(acc) * double(daz(alpha)));
  if (beta != 0.0f)
    v = roundFtz(std::fma(double(daz(beta)), double(daz(c)), double(v)));
  return v;
}

} // namespace kerneltest
} // namespace zrt

#endif // ZRT_TEST_KERNELTESTSUPPORT_H
