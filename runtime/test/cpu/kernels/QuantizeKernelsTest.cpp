//===- QuantizeKernelsTest.cpp - Quantize and Dequantize ------------------===//
//
// The blockwise int8/int4 quantization of ZeRO++'s quantized collectives
// against a scalar double-precision re-derivation written here from
// docs/kernels.md ("Quantization"): the scales, every quantized value (read
// back from the packed bytes by a decoder of this file), the dequantized
// values, and the documented error bound |y - x| <= scale/2 + ulp(y)/2, on
// random data of several distributions, both bit widths, one and three
// chunks, blocks of 1, 7 and 2048 elements and chunks that are not a multiple
// of the block. Then adversarial blocks (zeros, an outlier, subnormals, the
// f32 range's ends, one-element blocks), int4 packing byte by byte against
// hand-packed bytes, non-finite inputs, bad attributes and operand sizes, and
// the same bits at 1 and 3 threads.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"
#include "zrt/Kernel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

namespace {

using ::testing::HasSubstr;
using zrt::AttrMap;
using zrt::AttrValue;
using zrt::DType;
using zrt::KernelContext;
using zrt::TensorRef;

using zrt::test::contextWithThreads;

zrt::Status run(const std::string &op, const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &out, const AttrMap &attrs,
                const KernelContext &ctx = contextWithThreads(1)) {
  return zrt::test::runKernel(op, in, out, attrs, ctx);
}

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    zrt::Status s_ = (expr);                                                   \
    ASSERT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (0)

/// The layout the attributes describe, computed here from the definition.
struct Config {
  int bits = 8;
  int64_t block = 1;
  int64_t chunks = 1;

  int qmax() const { return bits == 8 ? 127 : 7; }
  int64_t blocksPerChunk(int64_t m) const { return (m + block - 1) / block; }
  int64_t bytesPerChunk(int64_t m) const { return bits == 8 ? m : (m + 1) / 2; }
  AttrMap attrs() const {
    AttrMap a;
    a.set("bits", AttrValue{{bits}, {}, ""});
    a.set("block", AttrValue{{block}, {}, ""});
    a.set("chunks", AttrValue{{chunks}, {}, ""});
    return a;
  }
};

/// What Quantize and Dequantize wrote.
struct Quantized {
  std::vector<int8_t> data;
  std::vector<float> scales;
  std::vector<float> y; ///< Dequantize(data, scales)
};

/// Runs Quantize then Dequantize on `x`; outputs start as a garbage pattern.
Quantized roundTrip(const std::vector<float> &x, const Config &cfg,
                    const KernelContext &ctx = contextWithThreads(1)) {
  const int64_t n = int64_t(x.size()), m = n / cfg.chunks;
  Quantized r;
  r.data.assign(size_t(cfg.chunks * cfg.bytesPerChunk(m)), int8_t(0x5a));
  r.scales.assign(size_t(cfg.chunks * cfg.blocksPerChunk(m)), -1.0f);
  r.y.assign(x.size(), -1.0f);
  TensorRef in{const_cast<float *>(x.data()), DType::F32, {n}};
  TensorRef data{r.data.data(), DType::I8, {int64_t(r.data.size())}};
  TensorRef scales{r.scales.data(), DType::F32, {int64_t(r.scales.size())}};
  TensorRef y{r.y.data(), DType::F32, {n}};
  zrt::Status s = run("Quantize", {in}, {data, scales}, cfg.attrs(), ctx);
  EXPECT_TRUE(s.isOk()) << s.message();
  s = run("Dequantize", {data, scales}, {y}, cfg.attrs(), ctx);
  EXPECT_TRUE(s.isOk()) << s.message();
  return r;
}

/// Element i of chunk c, decoded from the packed bytes: a signed byte, or a
/// two's-complement nibble (even elements low, odd elements high).
int decoded(const Quantized &r, const Config &cfg, int64_t m, int64_t c,
            int64_t i) {
  if (cfg.bits == 8)
    return r.data[size_t(c * m + i)];
  const uint8_t byte =
      uint8_t(r.data[size_t(c * cfg.bytesPerChunk(m) + i / 2)]);
  const int nibble = i % 2 ? byte >> 4 : byte & 15;
  return nibble >= 8 ? nibble - 16 : nibble;
}

/// Half an ulp of the f32 `y` (the rounding of q * scale to f32).
double halfUlp(float y) {
  const float a = std::fabs(y);
  if (a == FLT_MAX)
    return std::ldexp(1.0, 103);
  return (double(std::nextafter(a, INFINITY)) - double(a)) / 2;
}

/// The documented bound on |y - x|: scale/2 + ulp(y)/2, plus qmax * 2^-150
/// where the scale is subnormal or zero (blocks with max|x| < qmax * 2^-126).
double errorBound(float scale, float y, int qmax) {
  double bound = double(scale) / 2 + halfUlp(y);
  if (scale < FLT_MIN)
    bound += qmax * std::ldexp(1.0, -150);
  return bound;
}

/// Checks everything Quantize and Dequantize wrote for `x` against the
/// definition: per block the scale f32(max|x| / qmax), per element
/// q = clamp(nearbyint(x / scale), -qmax, qmax) (0 for a zero scale) and
/// y = f32(q * scale) (saturated at the largest f32), within the error
/// bound of x; an odd int4 chunk's last high nibble is 0.
void checkAgainstDefinition(const std::vector<float> &x, const Config &cfg,
                            const Quantized &r, const std::string &what) {
  const int64_t m = int64_t(x.size()) / cfg.chunks;
  const int64_t B = cfg.blocksPerChunk(m);
  const int qmax = cfg.qmax();
  for (int64_t c = 0; c < cfg.chunks; ++c) {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t begin = b * cfg.block, end = std::min(m, begin + cfg.block);
      double maxAbs = 0;
      for (int64_t i = begin; i < end; ++i)
        maxAbs = std::max(maxAbs, std::fabs(double(x[size_t(c * m + i)])));
      const float scale = float(maxAbs / qmax);
      ASSERT_EQ(r.scales[size_t(c * B + b)], scale)
          << what << ": scale of chunk " << c << " block " << b;
      for (int64_t i = begin; i < end; ++i) {
        const size_t k = size_t(c * m + i);
        const double ratio =
            scale == 0 ? 0.0 : std::nearbyint(double(x[k]) / double(scale));
        const int q =
            int(std::min<double>(qmax, std::max<double>(-qmax, ratio)));
        ASSERT_EQ(decoded(r, cfg, m, c, i), q)
            << what << ": q of element " << k;
        float y = float(double(q) * double(scale));
        if (std::isinf(y))
          y = std::copysign(FLT_MAX, y);
        ASSERT_EQ(r.y[k], y) << what << ": y of element " << k;
        ASSERT_LE(std::fabs(double(r.y[k]) - double(x[k])),
                  errorBound(scale, r.y[k], qmax))
            << what << ": element " << k << " = " << x[k] << ", scale "
            << scale;
      }
    }
    if (cfg.bits == 4 && m % 2 == 1)
      ASSERT_EQ(
          uint8_t(r.data[size_t((c + 1) * cfg.bytesPerChunk(m) - 1)]) >> 4, 0)
          << what << ": padding nibble of chunk " << c;
  }
}

/// Random data: uniform, gradient-like normal, magnitudes spread over 60
/// decades, heavy-tailed (Cauchy), and sparse (mostly exact zeros).
std::vector<float> randomData(int distribution, size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::uniform_real_distribution<double> decades(-30.0, 30.0);
  std::cauchy_distribution<float> cauchy(0.0f, 1.0f);
  std::bernoulli_distribution rare(0.1);
  std::vector<float> v(n);
  for (float &x : v) {
    switch (distribution) {
    case 0:
      x = uniform(gen);
      break;
    case 1:
      x = normal(gen);
      break;
    case 2:
      x = float(std::copysign(std::pow(10.0, decades(gen)), uniform(gen)));
      break;
    case 3:
      x = cauchy(gen);
      break;
    default:
      x = rare(gen) ? uniform(gen) : 0.0f;
      break;
    }
  }
  return v;
}

TEST(Quantize, MatchesTheDefinitionWithinTheErrorBound) {
  for (int distribution = 0; distribution < 5; ++distribution)
    for (int bits : {8, 4})
      for (int64_t block : {1, 7, 2048})
        for (int64_t chunks : {1, 3})
          for (int64_t m : {5001, 13}) {
            Config cfg{bits, block, chunks};
            std::vector<float> x = randomData(
                distribution, size_t(m * chunks),
                unsigned(distribution * 1000 + bits * 100 + block + chunks));
            std::string what = "distribution " + std::to_string(distribution) +
                               ", bits " + std::to_string(bits) + ", block " +
                               std::to_string(block) + ", chunks " +
                               std::to_string(chunks) + ", m " +
                               std::to_string(m);
            Quantized r = roundTrip(x, cfg);
            checkAgainstDefinition(x, cfg, r, what);
            if (::testing::Test::HasFatalFailure())
              return;
          }
}

TEST(Quantize, AllZeroBlocksComeBackAsExactZeros) {
  for (int bits : {8, 4}) {
    std::vector<float> x(20, 0.0f);
    x[3] = -0.0f;
    x[15] = 2.5f; // the second block only
    Config cfg{bits, 10, 1};
    Quantized r = roundTrip(x, cfg);
    EXPECT_EQ(r.scales[0], 0.0f);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(decoded(r, cfg, 20, 0, i), 0);
      EXPECT_EQ(r.y[size_t(i)], 0.0f) << i;
    }
    checkAgainstDefinition(x, cfg, r, "zeros");
  }
}

TEST(Quantize, AnOutlierTakesTheScaleAndSmallValuesGoToZero) {
  for (int bits : {8, 4}) {
    Config cfg{bits, 16, 1};
    std::vector<float> x(16, 1e-3f);
    for (size_t i = 0; i < x.size(); i += 2)
      x[i] = -1e-3f;
    const float outlier = 1e30f;
    x[9] = outlier;
    Quantized r = roundTrip(x, cfg);
    const float scale = float(double(outlier) / cfg.qmax());
    EXPECT_EQ(r.scales[0], scale);
    for (int i = 0; i < 16; ++i)
      if (i != 9)
        EXPECT_EQ(r.y[size_t(i)], 0.0f) << i;
    EXPECT_EQ(decoded(r, cfg, 16, 0, 9), cfg.qmax());
    EXPECT_LE(std::fabs(double(r.y[9]) - double(outlier)),
              errorBound(scale, r.y[9], cfg.qmax()));
    checkAgainstDefinition(x, cfg, r, "outlier");
  }
}

TEST(Quantize, SubnormalBlocksStayWithinTheirBound) {
  const float tiny = std::ldexp(1.0f, -149); // the smallest subnormal
  for (int bits : {8, 4}) {
    Config cfg{bits, 8, 1};
    // Block 0: subnormals up to 431 * 2^-149, whose scale is subnormal;
    // block 1: below qmax * 2^-150, whose scale rounds to 0 (all q are 0);
    // block 2: a normal maximum with subnormals beside it.
    std::vector<float> x = {
        431 * tiny, -300 * tiny, 17 * tiny, tiny,      -tiny,   0.0f,
        200 * tiny, -431 * tiny, 3 * tiny,  -2 * tiny, tiny,    0.0f,
        -3 * tiny,  2 * tiny,    -tiny,     3 * tiny,  1e-30f,  -5 * tiny,
        FLT_MIN,    -FLT_MIN,    77 * tiny, 0.0f,      -1e-31f, tiny};
    Quantized r = roundTrip(x, cfg);
    EXPECT_GT(r.scales[0], 0.0f);
    EXPECT_LT(r.scales[0], FLT_MIN);
    EXPECT_EQ(r.scales[1], 0.0f);
    for (int i = 8; i < 16; ++i)
      EXPECT_EQ(r.y[size_t(i)], 0.0f) << i;
    checkAgainstDefinition(x, cfg, r, "subnormals");
  }
}

TEST(Quantize, ValuesAtTheBlockMaximumAndTheEndsOfTheF32Range) {
  for (int bits : {8, 4}) {
    Config cfg{bits, 4, 1};
    const float big = 3.75e12f;
    std::vector<float> x = {big,     -big,     0.5f * big, -1.0f,
                            FLT_MAX, -FLT_MAX, 1.0f,       -3e38f};
    Quantized r = roundTrip(x, cfg);
    EXPECT_EQ(decoded(r, cfg, 8, 0, 0), cfg.qmax());
    EXPECT_EQ(decoded(r, cfg, 8, 0, 1), -cfg.qmax());
    EXPECT_EQ(decoded(r, cfg, 8, 0, 4), cfg.qmax());
    EXPECT_EQ(decoded(r, cfg, 8, 0, 5), -cfg.qmax());
    // 127 * f32(FLT_MAX / 127) is above FLT_MAX: the result saturates.
    EXPECT_EQ(r.y[4], FLT_MAX);
    EXPECT_EQ(r.y[5], -FLT_MAX);
    for (float y : r.y)
      EXPECT_TRUE(std::isfinite(y));
    checkAgainstDefinition(x, cfg, r, "range ends");
  }
}

TEST(Quantize, OneElementBlocks) {
  // Block 1: every element is its own block's maximum; and a chunk whose
  // last block has one element (m = 2 * block + 1).
  for (int bits : {8, 4}) {
    std::vector<float> x = {0.3f, -2.0f, 0.0f, 1e-20f, -7.5f};
    Config one{bits, 1, 1};
    Quantized r = roundTrip(x, one);
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(r.scales[i], float(std::fabs(double(x[i])) / one.qmax()));
      EXPECT_EQ(decoded(r, one, 5, 0, int64_t(i)),
                x[i] == 0 ? 0 : (x[i] > 0 ? one.qmax() : -one.qmax()));
    }
    checkAgainstDefinition(x, one, r, "block 1");
    Config tail{bits, 2, 1};
    r = roundTrip(x, tail);
    EXPECT_EQ(r.scales.size(), 3u);
    EXPECT_EQ(r.scales[2], float(7.5 / tail.qmax()));
    checkAgainstDefinition(x, tail, r, "one-element tail");
  }
}

TEST(Quantize, PacksInt4NibblesLowFirst) {
  // Two chunks of 5 (odd) elements, one block each, scale 7 / 7 = 1 so q is
  // x rounded half to even: -3.5 -> -4, 2.5 -> 2, 0.5 -> 0.
  std::vector<float> x = {7, -7, 3.2f, -1, 2, -3.5f, 0.5f, 1.5f, 2.5f, -7};
  Config cfg{4, 5, 2};
  Quantized r = roundTrip(x, cfg);
  // Chunk 0: q = 7 -7 | 3 -1 | 2 (pad 0); chunk 1: q = -4 0 | 2 2 | -7 (pad).
  const std::vector<uint8_t> want = {0x97, 0xF3, 0x02, 0x0C, 0x22, 0x09};
  ASSERT_EQ(r.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(uint8_t(r.data[i]), want[i]) << "byte " << i;
  EXPECT_EQ(r.scales, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(r.y, (std::vector<float>{7, -7, 3, -1, 2, -4, 0, 2, 2, -7}));

  // Blocks of 3 in a chunk of 7: byte 1 holds the last element of block 0
  // and the first of block 1. Scales 1, 1 and 3/7 (q = 7).
  std::vector<float> odd = {1, -2, 7, -7, 2.5f, 0.4f, 3};
  Config oddCfg{4, 3, 1};
  r = roundTrip(odd, oddCfg);
  const std::vector<uint8_t> wantOdd = {0xE1, 0x97, 0x02, 0x07};
  ASSERT_EQ(r.data.size(), wantOdd.size());
  for (size_t i = 0; i < wantOdd.size(); ++i)
    EXPECT_EQ(uint8_t(r.data[i]), wantOdd[i]) << "byte " << i;
  EXPECT_EQ(r.scales, (std::vector<float>{1.0f, 1.0f, float(3.0 / 7)}));
}

TEST(Quantize, RejectsNonFiniteValuesNamingTheFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int threads : {1, 3})
    for (auto [bad, name] :
         {std::make_pair(nan, "nan"), std::make_pair(inf, "inf"),
          std::make_pair(-inf, "-inf")}) {
      // 3 chunks of 1000 in blocks of 100: element 1234 is chunk 1, block 2;
      // a later one in chunk 2 must not be the one reported.
      std::vector<float> x = randomData(0, 3000, 7);
      x[1234] = bad;
      x[2999] = nan;
      std::vector<int8_t> data(3000);
      std::vector<float> scales(30);
      zrt::Status s = run(
          "Quantize", {{x.data(), DType::F32, {3000}}},
          {{data.data(), DType::I8, {3000}}, {scales.data(), DType::F32, {30}}},
          Config{8, 100, 3}.attrs(), contextWithThreads(threads));
      ASSERT_FALSE(s.isOk());
      EXPECT_EQ(s.message(),
                std::string("Quantize: element 1234 (chunk 1, block 2) is ") +
                    name +
                    "; quantized collectives need finite values: find the "
                    "overflow or turn quantization off (zero_quantized_weights "
                    "/ zero_quantized_gradients)");
    }
}

TEST(Quantize, RejectsBadAttributesAndOperandSizes) {
  std::vector<float> x(10, 1.0f), y(10);
  std::vector<int8_t> data(10);
  std::vector<float> scales(4);
  auto quantize = [&](const AttrMap &a, int64_t bytes, int64_t floats) {
    return run("Quantize", {{x.data(), DType::F32, {10}}},
               {{data.data(), DType::I8, {bytes}},
                {scales.data(), DType::F32, {floats}}},
               a)
        .message();
  };
  EXPECT_EQ(quantize(Config{5, 4, 1}.attrs(), 10, 3),
            "Quantize: unsupported attribute bits (got 5, expected 8 or 4)");
  AttrMap noBlock;
  noBlock.set("bits", AttrValue{{8}, {}, ""});
  EXPECT_EQ(quantize(noBlock, 10, 3),
            "Quantize: bad attribute block (got none, expected a positive "
            "number of elements per scale)");
  EXPECT_EQ(quantize(Config{8, 0, 1}.attrs(), 10, 3),
            "Quantize: bad attribute block (got 0, expected a positive number "
            "of elements per scale)");
  EXPECT_EQ(quantize(Config{8, 4, 3}.attrs(), 10, 3),
            "Quantize: the element count is not a multiple of chunks (got 10 "
            "elements, expected a multiple of chunks = 3)");
  // int4, 2 chunks of 5: 3 bytes and 2 blocks of 4 each.
  EXPECT_EQ(quantize(Config{4, 4, 2}.attrs(), 10, 4),
            "Quantize: wrong size of data (got 10 bytes, expected 6 bytes for "
            "2 chunk(s) of 5 elements at 4 bits)");
  EXPECT_EQ(quantize(Config{4, 4, 2}.attrs(), 6, 3),
            "Quantize: wrong size of scales (got 3 floats, expected 4 floats "
            "for 2 chunk(s) of 5 elements in blocks of 4)");
  EXPECT_EQ(quantize(Config{4, 4, 2}.attrs(), 6, 4), ""); // the right sizes
  zrt::Status wrongType =
      run("Dequantize",
          {{scales.data(), DType::F32, {4}}, {scales.data(), DType::F32, {4}}},
          {{y.data(), DType::F32, {10}}}, Config{8, 4, 1}.attrs());
  EXPECT_THAT(wrongType.message(),
              HasSubstr("Dequantize: unsupported dtype of data (got f32"));
  zrt::Status wrongSize =
      run("Dequantize",
          {{data.data(), DType::I8, {10}}, {scales.data(), DType::F32, {4}}},
          {{y.data(), DType::F32, {10}}}, Config{8, 4, 1}.attrs());
  EXPECT_EQ(wrongSize.message(),
            "Dequantize: wrong size of scales (got 4 floats, expected 3 "
            "floats for 1 chunk(s) of 10 elements in blocks of 4)");
}

TEST(Quantize, SameBitsAtOneAndThreeThreads) {
  for (int bits : {8, 4})
    for (int64_t block : {7, 2048}) {
      Config cfg{bits, block, 3};
      std::vector<float> x = randomData(3, 3 * 100003, unsigned(bits + block));
      Quantized one = roundTrip(x, cfg, contextWithThreads(1));
      Quantized three = roundTrip(x, cfg, contextWithThreads(3));
      EXPECT_EQ(one.data, three.data) << bits << " bits, block " << block;
      EXPECT_EQ(one.scales, three.scales);
      EXPECT_EQ(std::memcmp(one.y.data(), three.y.data(), one.y.size() * 4), 0);
      checkAgainstDefinition(x, cfg, three, "3 threads");
    }
}

} // namespace
