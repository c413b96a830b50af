//===- MatMulTest.cpp - MatMul, Gemm and the packed products --------------===//
//
// MatMul and Gemm against a naive product (batches, broadcasting, transposes,
// alpha and beta, the tiled paths), and the products over a packed constant B
// (cpu/kernels/PackedGemm.h) at every ISA this CPU runs, bf16 pairs included.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include "cpu/kernels/PackedGemm.h"
#include "math/HalfMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace zrt::kerneltest;

namespace {

//===----------------------------------------------------------------------===//
// MatMul, Gemm
//===----------------------------------------------------------------------===//

/// Naive batched matmul of [..., m, k] x [..., k, n] with broadcast batches
/// (both operands at least 2-D), in double.
std::vector<double> naiveMatMul(const std::vector<float> &a,
                                const std::vector<int64_t> &as,
                                const std::vector<float> &b,
                                const std::vector<int64_t> &bs,
                                const std::vector<int64_t> &batch) {
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  std::vector<int64_t> ab(as.begin(), as.end() - 2),
      bb(bs.begin(), bs.end() - 2);
  std::vector<double> out;
  for (int64_t i = 0; i < product(batch); ++i) {
    const std::vector<int64_t> idx = unflatten(i, batch);
    const int64_t ao = broadcastFlat(idx, ab) * m * k;
    const int64_t bo = broadcastFlat(idx, bb) * k * n;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(a[size_t(ao + r * k + p)]) *
                 double(b[size_t(bo + p * n + c)]);
        out.push_back(acc);
      }
  }
  return out;
}

TEST(MatMul, BatchedBroadcastAndFolded) {
  struct Case {
    std::vector<int64_t> a, b, batch;
  };
  const Case cases[] = {
      {{3, 4}, {4, 5}, {}},
      {{2, 3, 4, 5}, {5, 6}, {2, 3}},    // folded into one sgemm
      {{2, 1, 4, 5}, {3, 5, 6}, {2, 3}}, // broadcast batch
      {{4, 5}, {3, 5, 2}, {3}},          // A broadcast
      {{64, 8, 16}, {64, 16, 8}, {64}},  // many small products (parallel)
      {{130, 70}, {70, 300}, {}},        // one product, tiled by rows
      {{20, 200}, {200, 600}, {}},       // one product, tiled by columns
      {{2, 100, 64}, {2, 64, 300}, {2}}, // fewer products than threads
  };
  for (const Case &c : cases) {
    for (bool threaded : {false, true}) {
      Tensors t;
      std::vector<float> av = randomFloats(size_t(product(c.a)), 7);
      std::vector<float> bv = randomFloats(size_t(product(c.b)), 8);
      std::vector<int64_t> os = c.batch;
      os.push_back(c.a[c.a.size() - 2]);
      os.push_back(c.b.back());
      TensorRef a = t.input<float>(c.a, av), b = t.input<float>(c.b, bv);
      TensorRef y = t.output<float>(os);
      EXPECT_OK(run("MatMul", {a, b}, {y}, {},
                    threaded ? threadedContext() : serialContext()));
      expectNear(values<float>(y), naiveMatMul(av, c.a, bv, c.b, c.batch),
                 1e-4);
    }
  }
}

TEST(MatMul, VectorsAndIntegers) {
  Tensors t;
  TensorRef v = t.input<float>({3}, {1, 2, 3});
  TensorRef m = t.input<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  TensorRef y = t.output<float>({2});
  EXPECT_OK(run("MatMul", {v, m}, {y}));
  expectNear(values<float>(y), {22, 28});
  TensorRef mt = t.input<float>({2, 3}, {1, 3, 5, 2, 4, 6});
  EXPECT_OK(run("MatMul", {mt, v}, {y}));
  expectNear(values<float>(y), {22, 28});
  TensorRef s = t.output<float>({});
  EXPECT_OK(run("MatMul", {v, v}, {s}));
  expectNear(values<float>(s), {14});
  TensorRef ia = t.input<int64_t>({2, 2}, {1, 2, 3, 4});
  TensorRef ib = t.input<int64_t>({2, 2}, {5, 6, 7, 8});
  TensorRef iy = t.output<int64_t>({2, 2});
  EXPECT_OK(run("MatMul", {ia, ib}, {iy}));
  EXPECT_EQ(values<int64_t>(iy), (std::vector<int64_t>{19, 22, 43, 50}));
  TensorRef da = t.input<double>({1, 2}, {0.5, 0.25});
  TensorRef db = t.input<double>({2, 1}, {4, 8});
  TensorRef dy = t.output<double>({1, 1});
  EXPECT_OK(run("MatMul", {da, db}, {dy}));
  expectNear(values<double>(dy), {4});
  TensorRef bad = t.output<float>({3});
  EXPECT_FALSE(run("MatMul", {v, m}, {bad}).isOk());
}

TEST(Gemm, TransposesAlphaBetaAndBroadcastC) {
  Tensors t;
  // A^T is [[1,2,3],[4,5,6]] (2x3); B^T is [[1,0],[0,1],[1,1]] (3x2).
  TensorRef a = t.input<float>({3, 2}, {1, 4, 2, 5, 3, 6});
  TensorRef b = t.input<float>({2, 3}, {1, 0, 1, 0, 1, 1});
  TensorRef cRow = t.input<float>({2}, {10, 20});
  TensorRef cCol = t.input<float>({2, 1}, {1, 2});
  TensorRef y = t.output<float>({2, 2});
  // A^T B^T = [[4, 5], [10, 11]].
  EXPECT_OK(run("Gemm", {a, b}, {y},
                attrs({{"transA", ints({1})}, {"transB", ints({1})}})));
  expectNear(values<float>(y), {4, 5, 10, 11});
  EXPECT_OK(run("Gemm", {a, b, cRow}, {y},
                attrs({{"transA", ints({1})},
                       {"transB", ints({1})},
                       {"alpha", floats({2})},
                       {"beta", floats({0.5})}})));
  expectNear(values<float>(y), {13, 20, 25, 32});
  EXPECT_OK(run("Gemm", {a, b, cCol}, {y},
                attrs({{"transA", ints({1})}, {"transB", ints({1})}})));
  expectNear(values<float>(y), {5, 6, 12, 13});
  TensorRef ia = t.input<int32_t>({2, 2}, {1, 2, 3, 4});
  TensorRef ic = t.input<int32_t>({}, {100});
  TensorRef iy = t.output<int32_t>({2, 2});
  EXPECT_OK(run("Gemm", {ia, ia, ic}, {iy}, attrs({{"transB", ints({1})}})));
  EXPECT_EQ(values<int32_t>(iy), (std::vector<int32_t>{105, 111, 111, 125}));
}

TEST(Gemm, TiledTransposedMatchesNaive) {
  const int64_t m = 90, n = 260, k = 70;
  const std::vector<float> av = randomFloats(size_t(m * k), 41);
  const std::vector<float> bv = randomFloats(size_t(k * n), 42);
  const std::vector<float> cv = randomFloats(size_t(n), 43);
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      SCOPED_TRACE(std::to_string(transA) + std::to_string(transB));
      Tensors t;
      TensorRef a = t.input<float>(
          transA ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, av);
      TensorRef b = t.input<float>(
          transB ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, bv);
      TensorRef c = t.input<float>({n}, cv);
      TensorRef y = t.output<float>({m, n});
      EXPECT_OK(run("Gemm", {a, b, c}, {y},
                    attrs({{"transA", ints({transA})},
                           {"transB", ints({transB})},
                           {"alpha", floats({0.5})},
                           {"beta", floats({2})}}),
                    threadedContext()));
      std::vector<double> expected;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += double(av[size_t(transA ? p * m + i : i * k + p)]) *
                   double(bv[size_t(transB ? j * k + p : p * n + j)]);
          expected.push_back(0.5 * acc + 2 * double(cv[size_t(j)]));
        }
      expectNear(values<float>(y), expected, 1e-5);
    }
}

// A product large enough to be cut into a 2 x 2 grid of tiles: Gemm's C
// (every unidirectional broadcast, and C passed as Y itself) is copied into Y
// tile by tile before each tile's product.
TEST(Gemm, TiledBiasBroadcasts) {
  const int64_t m = 1200, n = 1300, k = 8;
  const std::vector<float> av = randomFloats(size_t(m * k), 44);
  const std::vector<float> bv = randomFloats(size_t(k * n), 45);
  const std::vector<float> cv = randomFloats(size_t(m * n), 46);
  std::vector<double> ab(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += double(av[size_t(i * k + p)]) * double(bv[size_t(p * n + j)]);
      ab[size_t(i * n + j)] = acc;
    }
  const std::vector<std::vector<int64_t>> cShapes = {
      {}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1, n}};
  for (const std::vector<int64_t> &cShape : cShapes)
    for (bool inPlace : {false, true}) {
      if (inPlace && cShape != std::vector<int64_t>{m, n})
        continue;
      SCOPED_TRACE(zrt::shapeString(cShape) + (inPlace ? " in place" : ""));
      const int64_t cRows = cShape.size() >= 2 ? cShape[cShape.size() - 2] : 1;
      const int64_t cCols = cShape.empty() ? 1 : cShape.back();
      Tensors t;
      TensorRef a = t.input<float>({m, k}, av);
      TensorRef b = t.input<float>({k, n}, bv);
      TensorRef c = t.input<float>(
          cShape, std::vector<float>(cv.begin(), cv.begin() + cRows * cCols));
      TensorRef y = inPlace ? c : t.output<float>({m, n});
      EXPECT_OK(run("Gemm", {a, b, c}, {y}, attrs({{"beta", floats({0.5})}}),
                    threadedContext()));
      std::vector<double> expected(size_t(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          expected[size_t(i * n + j)] =
              ab[size_t(i * n + j)] +
              0.5 * double(cv[size_t((cRows == 1 ? 0 : i) * cCols +
                                     (cCols == 1 ? 0 : j))]);
      expectNear(values<float>(y), expected, 1e-5);
    }
}

//===----------------------------------------------------------------------===//
// Products over a packed constant B (cpu/kernels/PackedGemm.h)
//===----------------------------------------------------------------------===//

/// Runs Gemm case `c` on `ctx`; returns Y. With `bWritten`, B is marked
/// there as an operand the program writes (not constant: packed per call).
std::vector<float> runPackedGemmCase(const PackedGemmCase &c,
                                     const KernelContext &ctx,
                                     std::vector<double> *expected = nullptr,
                                     zrt::test::TestConstants *bWritten = nullptr) {
  const std::vector<float> av = randomFloats(size_t(c.m * c.k), 51);
  const std::vector<float> bv = randomFloats(size_t(c.k * c.n), 52);
  const bool hasC = c.cShape != std::vector<int64_t>{0};
  const std::vector<float> cv = randomFloats(size_t(product(c.cShape)), 53);
  Tensors t;
  TensorRef a = t.input<float>(c.transA ? std::vector<int64_t>{c.k, c.m}
                                        : std::vector<int64_t>{c.m, c.k},
                               av);
  TensorRef b = t.input<float>(c.transB ? std::vector<int64_t>{c.n, c.k}
                                        : std::vector<int64_t>{c.k, c.n},
                               bv);
  if (bWritten)
    bWritten->written = {b.data};
  std::vector<TensorRef> in = {a, b};
  if (hasC)
    in.push_back(t.input<float>(c.cShape, cv));
  TensorRef y = t.output<float>({c.m, c.n});
  EXPECT_OK(run("Gemm", in, {y},
                attrs({{"transA", ints({c.transA})},
                       {"transB", ints({c.transB})},
                       {"alpha", floats({c.alpha})},
                       {"beta", floats({c.beta})}}),
                ctx));
  if (expected) {
    const int64_t cRows =
        c.cShape.size() >= 2 ? c.cShape[c.cShape.size() - 2] : 1;
    const int64_t cCols = c.cShape.empty() ? 1 : c.cShape.back();
    expected->clear();
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < c.k; ++p)
          acc += double(av[size_t(c.transA ? p * c.m + i : i * c.k + p)]) *
                 double(bv[size_t(c.transB ? j * c.k + p : p * c.n + j)]);
        const double init =
            hasC ? double(cv[size_t((cRows == 1 ? 0 : i) * cCols +
                                    (cCols == 1 ? 0 : j))])
                 : 0.0;
        expected->push_back(c.alpha * acc + (hasC ? c.beta * init : 0.0));
      }
  }
  return values<float>(y);
}

// Tests that Gemm over a packed constant B matches a double-precision
// product at every edge of the blocking (rows, panels, K), with transposes,
// alpha, beta and every broadcast of C, and that B is packed once and reused.
TEST(PackedGemm, MatchesNaiveAtEdges) {
  for (const PackedGemmCase &c : packedGemmCases()) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                 std::to_string(c.k) + " transA " + std::to_string(c.transA) +
                 " transB " + std::to_string(c.transB) + " C " +
                 zrt::shapeString(c.cShape));
    zrt::test::TestConstants constants;
    std::vector<double> expected;
    const std::vector<float> y = runPackedGemmCase(
        c, zrt::test::contextWithConstants(2, &constants), &expected);
    expectNear(y, expected, 3e-5);
    EXPECT_EQ(constants.preparations, 1);
  }
}

// Tests that the packed path gives the same bits at 1, 2, 3 and 8 threads
// (every element of C is the same FMA sequence whichever task computes it),
// for Gemm and for MatMul with A's batch folded into M.
TEST(PackedGemm, SameBitsAtAnyThreadCount) {
  for (const PackedGemmCase &c : packedGemmCases()) {
    std::vector<float> first;
    for (int threads : {1, 2, 3, 8}) {
      zrt::test::TestConstants constants;
      const std::vector<float> y = runPackedGemmCase(
          c, zrt::test::contextWithConstants(threads, &constants));
      if (threads == 1)
        first = y;
      else
        EXPECT_TRUE(y == first)
            << c.m << "x" << c.n << "x" << c.k << ": the output at " << threads
            << " threads differs from the 1-thread output";
    }
  }
  const std::vector<float> av = randomFloats(3 * 45 * 70, 54);
  const std::vector<float> bv = randomFloats(70 * 200, 55);
  std::vector<float> first;
  for (int threads : {1, 2, 3, 8}) {
    Tensors t;
    zrt::test::TestConstants constants;
    TensorRef a = t.input<float>({3, 45, 70}, av);
    TensorRef b = t.input<float>({70, 200}, bv);
    TensorRef y = t.output<float>({3, 45, 200});
    EXPECT_OK(run("MatMul", {a, b}, {y}, {},
                  zrt::test::contextWithConstants(threads, &constants)));
    EXPECT_EQ(constants.preparations, 1);
    if (threads == 1)
      first = values<float>(y);
    else
      EXPECT_TRUE(values<float>(y) == first)
          << "MatMul [3x45x70] x [70x200] at " << threads << " threads";
  }
}

// Tests that a B the context does not call constant is never packed (a
// ZeRO-3 gather's output, a trained weight), and that a constant B is packed
// on its first use only: a later call with the same B reuses its panels.
TEST(PackedGemm, PacksConstantOperandsOnceAndOthersNever) {
  const int64_t m = 64, n = 200, k = 70;
  const std::vector<float> av = randomFloats(size_t(m * k), 56);
  const std::vector<float> bv = randomFloats(size_t(n * k), 57);
  std::vector<double> expected;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += double(av[size_t(i * k + p)]) * double(bv[size_t(j * k + p)]);
      expected.push_back(acc);
    }
  for (bool written : {true, false}) {
    SCOPED_TRACE(written ? "B written by the program" : "B constant");
    Tensors t;
    zrt::test::TestConstants constants;
    TensorRef a = t.input<float>({m, k}, av);
    TensorRef b = t.input<float>({n, k}, bv);
    if (written)
      constants.written = {b.data};
    const KernelContext ctx = zrt::test::contextWithConstants(2, &constants);
    std::vector<float> first;
    for (int call = 0; call < 3; ++call) {
      TensorRef y = t.output<float>({m, n});
      EXPECT_OK(run("Gemm", {a, b}, {y}, attrs({{"transB", ints({1})}}), ctx));
      expectNear(values<float>(y), expected, 3e-5);
      if (call == 0)
        first = values<float>(y);
      else
        EXPECT_TRUE(values<float>(y) == first) << "call " << call;
    }
    EXPECT_EQ(constants.preparations, !written && 1);
  }
}

/// bf16 bits of random values whose exponents run down to the subnormals:
/// (1 - tiny) of them in [-2, 2], the rest under 2^-100 in magnitude, so
/// products underflow and sums come out tiny (DAZ and FTZ decide them).
std::vector<uint16_t> randomBf16(size_t n, unsigned seed, double tiny) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::uniform_real_distribution<double> pick(0.0, 1.0);
  std::vector<uint16_t> v(n);
  for (uint16_t &h : v) {
    if (pick(gen) < tiny)
      h = uint16_t((gen() & 0x8000u) | ((gen() % 28u) << 7) | (gen() & 0x7fu));
    else
      h = zrt::math::floatToBfloat16(dist(gen));
  }
  return v;
}

// Tests that at every ISA the CPU runs (AVX512_BF16's VDPBF16PS, AVX-512F,
// AVX2, portable), the bf16 pair kernels (PackedGemm.h) give exactly the
// defined f32 element: both transposes, odd and even K (the last pair read
// in place or packed), alpha, beta, M and N off every block edge, and
// operands with tiny and subnormal values where DAZ and FTZ decide the bits.
TEST(PackedGemm, Bf16PairsGiveTheDefinedBitsAtEveryIsa) {
  struct Case {
    int64_t m, n, k;
    bool transA, transB;
    float alpha, beta;
    double tiny;
  };
  std::vector<Case> cases = {
      {1, 16, 1, false, false, 1, 0, 0},       {7, 47, 5, false, true, 1, 1, 0.3},
      {8, 48, 70, true, false, 0.5f, 2, 0.5},  {9, 49, 71, false, false, 1, 1, 0.4},
      {37, 100, 33, true, true, -1.5f, 0.25f, 0.2}, {300, 130, 64, false, true, 1, 0, 0},
      {13, 97, 2, true, false, 1, -1, 0.9},    {21, 160, 9, false, false, 1e-30f, 1e-8f, 0.6},
  };
  // And random ones: any shape, transposes, alpha and beta, share of tiny
  // values.
  std::mt19937 shapes(91);
  for (int r = 0; r < 16; ++r)
    cases.push_back({int64_t(1 + shapes() % 40), int64_t(1 + shapes() % 120),
                     int64_t(1 + shapes() % 90), shapes() % 2 == 1, shapes() % 2 == 1,
                     shapes() % 3 == 0 ? 1.0f : float(int(shapes() % 7) - 3) / 2.0f,
                     shapes() % 3 == 0 ? 0.0f : float(int(shapes() % 5) - 2) / 4.0f,
                     double(shapes() % 4) / 4.0});
  for (zrt::cpu::CpuIsa isa : runnableIsas()) {
    ScopedIsa scoped(isa);
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(zrt::cpu::cpuIsaName(isa)) + " " + std::to_string(c.m) + "x" +
                   std::to_string(c.n) + "x" + std::to_string(c.k) +
                   (c.transA ? " A^T" : "") + (c.transB ? " B^T" : ""));
      const std::vector<uint16_t> a = randomBf16(size_t(c.m * c.k), 81, c.tiny);
      const std::vector<uint16_t> b = randomBf16(size_t(c.k * c.n), 82, c.tiny);
      std::vector<float> init(size_t(c.m * c.n));
      for (size_t i = 0; i < init.size(); ++i)
        init[i] = bf16Daz(randomBf16(1, unsigned(83 + i), c.tiny)[0]);
      const int64_t lda = c.transA ? c.m : c.k, ldb = c.transB ? c.k : c.n;
      std::vector<uint32_t> packed(zrt::cpu::pairPackedWords(c.k, c.n));
      zrt::cpu::packBf16PairsB(b.data(), ldb, c.transB, c.k, c.n, 0,
                               zrt::cpu::packedPanels(c.n), packed.data());
      std::vector<uint32_t> aPairs(size_t(zrt::cpu::pairRows(c.k) * c.m));
      zrt::cpu::Bf16PairA pa{a.data(), lda, 2, c.k / 2, c.k % 2 == 1};
      if (c.transA) {
        zrt::cpu::packBf16PairsTransA(a.data(), lda, c.k, 0, c.m, aPairs.data());
        pa = {reinterpret_cast<const uint16_t *>(aPairs.data()), 2, 2 * c.m,
              zrt::cpu::pairRows(c.k), false};
      }
      std::vector<float> y = init;
      const int64_t panelWords = zrt::cpu::pairPanelRows(c.k) * zrt::cpu::kPanelCols;
      for (int64_t p = 0; p < zrt::cpu::packedPanels(c.n); ++p) {
        const int64_t j0 = p * zrt::cpu::kPanelCols;
        zrt::cpu::bf16PairGemmBlock(0, c.m, std::min(zrt::cpu::kPanelCols, c.n - j0),
                                    c.alpha, pa, packed.data() + p * panelWords, c.beta,
                                    y.data() + j0, c.n);
      }
      int64_t wrong = 0, tinyOnes = 0;
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          const float want = definedBf16Element(
              a.data() + (c.transA ? i : i * lda), c.transA ? lda : 1,
              b.data() + (c.transB ? j * ldb : j), c.transB ? 1 : ldb, c.k, c.alpha, c.beta,
              init[size_t(i * c.n + j)]);
          const float got = y[size_t(i * c.n + j)];
          tinyOnes += std::fabs(want) < 1e-30f;
          if (std::memcmp(&want, &got, 4) != 0 && wrong++ < 3)
            ADD_FAILURE() << "element (" << i << ", " << j << "): " << got << " want "
                          << want;
        }
      EXPECT_EQ(wrong, 0);
      if (c.tiny > 0.5)
        EXPECT_GT(tinyOnes, 0) << "the case has no tiny element to check";
    }
  }
}

// Tests that at every ISA the CPU runs, Gemm (both transposes, alpha, beta,
// broadcast C), with B constant (packed once) or written by the program
// (packed per call), gives exactly the bits of PackedGemm.h's definition,
// element by element: so an element depends on its row of A and column of
// B only, and the two FMA ISAs agree bit for bit.
TEST(PackedGemm, EveryIsaGivesTheDefinedBits) {
  for (zrt::cpu::CpuIsa isa : runnableIsas()) {
    ScopedIsa scoped(isa);
    for (const PackedGemmCase &c : packedGemmCases()) {
      for (bool constantB : {true, false}) {
        SCOPED_TRACE(std::string(zrt::cpu::cpuIsaName(isa)) + " " +
                     std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                     std::to_string(c.k) + (constantB ? " constant B" : ""));
        // runPackedGemmCase's operands.
        const std::vector<float> av = randomFloats(size_t(c.m * c.k), 51);
        const std::vector<float> bv = randomFloats(size_t(c.k * c.n), 52);
        const bool hasC = c.cShape != std::vector<int64_t>{0};
        const std::vector<float> cv =
            randomFloats(size_t(product(c.cShape)), 53);
        zrt::test::TestConstants constants;
        const std::vector<float> got = runPackedGemmCase(
            c, zrt::test::contextWithConstants(3, &constants), nullptr,
            constantB ? nullptr : &constants);
        EXPECT_EQ(constants.preparations, constantB ? 1 : 0);
        const int64_t cRows =
            c.cShape.size() >= 2 ? c.cShape[c.cShape.size() - 2] : 1;
        const int64_t cCols = c.cShape.empty() ? 1 : c.cShape.back();
        int64_t wrong = 0;
        for (int64_t i = 0; i < c.m; ++i)
          for (int64_t j = 0; j < c.n; ++j) {
            const float init =
                hasC ? cv[size_t((cRows == 1 ? 0 : i) * cCols +
                                 (cCols == 1 ? 0 : j))]
                     : 0.0f;
            const float want = definedElement(
                isa, av.data() + (c.transA ? i : i * c.k), c.transA ? c.m : 1,
                bv.data() + (c.transB ? j * c.k : j), c.transB ? 1 : c.n, c.k,
                float(c.alpha), hasC ? float(c.beta) : 0.0f, init);
            if (std::memcmp(&want, &got[size_t(i * c.n + j)], 4) != 0 &&
                wrong++ < 3)
              ADD_FAILURE() << "element (" << i << ", " << j << "): "
                            << got[size_t(i * c.n + j)] << ", defined "
                            << want;
          }
        EXPECT_EQ(wrong, 0);
      }
    }
  }
}

// Tests, at every ISA, the property pipeline micro-batching and ZeRO rest on:
// any run of consecutive rows of A (a micro-batch) multiplied alone gives
// exactly those rows of the whole product, for MatMul with a batch folded
// into M and batched MatMul (B with a batch: attention).
TEST(PackedGemm, RowsAloneGiveTheWholeProductsBits) {
  std::mt19937 rng(77);
  for (zrt::cpu::CpuIsa isa : runnableIsas()) {
    ScopedIsa scoped(isa);
    for (int trial = 0; trial < 12; ++trial) {
      const int64_t batch = 1 + int64_t(rng() % 4);
      const int64_t m = 1 + int64_t(rng() % 70), k = 1 + int64_t(rng() % 90);
      const int64_t n = 1 + int64_t(rng() % 130);
      const bool bBatched = trial % 2 == 1;
      SCOPED_TRACE(std::string(zrt::cpu::cpuIsaName(isa)) + " [" +
                   std::to_string(batch) + "x" + std::to_string(m) + "x" +
                   std::to_string(k) + "] x [" +
                   (bBatched ? std::to_string(batch) + "x" : std::string()) +
                   std::to_string(k) + "x" + std::to_string(n) + "]");
      const std::vector<float> av =
          randomFloats(size_t(batch * m * k), 60 + uint32_t(trial));
      const std::vector<float> bv = randomFloats(
          size_t((bBatched ? batch : 1) * k * n), 80 + uint32_t(trial));
      const std::vector<int64_t> bShape =
          bBatched ? std::vector<int64_t>{batch, k, n}
                   : std::vector<int64_t>{k, n};
      auto product3 = [&](int64_t r0, int64_t r1, int threads) {
        // Rows [r0, r1) of every batch entry's A.
        std::vector<float> part;
        for (int64_t e = 0; e < batch; ++e)
          part.insert(part.end(), av.begin() + (e * m + r0) * k,
                      av.begin() + (e * m + r1) * k);
        Tensors t;
        TensorRef a = t.input<float>({batch, r1 - r0, k}, part);
        TensorRef b = t.input<float>(bShape, bv);
        TensorRef y = t.output<float>({batch, r1 - r0, n});
        EXPECT_OK(run("MatMul", {a, b}, {y}, {}, zrt::test::contextWithThreads(threads)));
        return values<float>(y);
      };
      const std::vector<float> whole = product3(0, m, 2);
      const int64_t r0 = int64_t(rng() % uint32_t(m));
      const int64_t r1 = r0 + 1 + int64_t(rng() % uint32_t(m - r0));
      const std::vector<float> part = product3(r0, r1, 1 + trial % 3);
      bool same = true;
      for (int64_t e = 0; e < batch; ++e)
        for (int64_t i = r0; i < r1; ++i)
          same = same &&
                 std::memcmp(&part[size_t((e * (r1 - r0) + i - r0) * n)],
                             &whole[size_t((e * m + i) * n)],
                             size_t(n) * 4) == 0;
      EXPECT_TRUE(same) << "rows [" << r0 << ", " << r1
                        << ") alone differ from the whole product's";
    }
  }
}

} // namespace
