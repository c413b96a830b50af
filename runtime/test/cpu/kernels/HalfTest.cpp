//===- HalfTest.cpp - f16 and bf16 operands -------------------------------===//
//
// The 16-bit row conversions, products and elementwise kernels behind the
// CPU backend's trampolines (cpu/HalfWidening.cpp, MatMul.cpp's 16-bit
// products): each 16-bit result the f32 one rounded once.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include "cpu/CpuHalf.h"
#include "kernels/KernelSupport.h"
#include "cpu/kernels/PackedGemm.h"
#include "math/HalfMath.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace zrt::kerneltest;

//===----------------------------------------------------------------------===//
// f16 and bf16 operands (cpu/HalfWidening.cpp, MatMul.cpp's 16-bit products)
//===----------------------------------------------------------------------===//

namespace {

bool isHalfType(DType t) { return t == DType::F16 || t == DType::BF16; }

uint16_t narrowOne(DType t, float v) {
  return t == DType::F16 ? zrt::math::floatToHalf(v) : zrt::math::floatToBfloat16(v);
}
float widenOne(DType t, uint16_t h) {
  return t == DType::F16 ? zrt::math::halfToFloat(h) : zrt::math::bfloat16ToFloat(h);
}

/// `values` rounded to `t` (to nearest even): a tensor of 16-bit bits.
TensorRef halfInput(Tensors &t, DType dt, std::vector<int64_t> shape,
                    const std::vector<float> &values) {
  TensorRef r = t.raw(dt, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i)
    r.as<uint16_t>()[i] = narrowOne(dt, values[i]);
  return r;
}

/// A 16-bit tensor's values as f32 (exact).
std::vector<float> widened(const TensorRef &h) {
  std::vector<float> out;
  for (int64_t i = 0; i < h.numel(); ++i)
    out.push_back(widenOne(h.dtype, h.as<uint16_t>()[i]));
  return out;
}

/// The CPU backend's table: every computing kernel behind its 16-bit
/// trampoline (what zero-run runs).
const zrt::KernelTable &widenedKernels() {
  static const zrt::KernelTable table = [] {
    zrt::KernelTable t;
    zrt::registerCpuKernels(t);
    zrt::cpu::widenHalfKernels(t);
    return t;
  }();
  return table;
}

/// Runs `op` with every 16-bit operand of `in`/`out` through the backend's
/// table, and the f32 kernel on widened copies of the same inputs; expects
/// each 16-bit output to hold exactly the f32 result rounded once (and any
/// other output the same bits), at 1 and 3 threads.
void expectWidenedBits(const std::string &op, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out, const AttrMap &a = {}) {
  Tensors t;
  std::vector<TensorRef> win, wout;
  for (const TensorRef &x : in) {
    if (!isHalfType(x.dtype)) {
      win.push_back(x);
      continue;
    }
    win.push_back(t.input<float>(x.shape, widened(x)));
  }
  for (const TensorRef &y : out)
    wout.push_back(isHalfType(y.dtype) ? t.output<float>(y.shape) : t.raw(y.dtype, y.shape));
  ASSERT_OK(run(op, win, wout, a));
  for (int threads : {1, 3}) {
    SCOPED_TRACE(op + " at " + std::to_string(threads) + " threads");
    ASSERT_OK(widenedKernels().lookup(op)(contextWithThreads(threads), in, out, a));
    for (size_t o = 0; o < out.size(); ++o) {
      int64_t wrong = 0;
      for (int64_t i = 0; i < out[o].numel(); ++i) {
        bool same;
        if (isHalfType(out[o].dtype))
          same = out[o].as<uint16_t>()[i] == narrowOne(out[o].dtype, wout[o].as<float>()[i]);
        else
          same = std::memcmp(static_cast<char *>(out[o].data) + i * zrt::dtypeSize(out[o].dtype),
                             static_cast<char *>(wout[o].data) + i * zrt::dtypeSize(out[o].dtype),
                             zrt::dtypeSize(out[o].dtype)) == 0;
        if (!same && wrong++ < 3)
          ADD_FAILURE() << "output " << o << " element " << i;
      }
      EXPECT_EQ(wrong, 0);
    }
  }
}

} // namespace

// Tests that the vectorised row conversions give math/HalfMath.h's bits: every
// f16 and bf16 widened, and f32 values of every exponent and sign (random
// mantissas, the rounding ties and their neighbours, the overflow and
// subnormal edges, infinities and NaNs with payloads) rounded, to 16-bit
// bits and in place (roundHalfRow).
TEST(Half, RowConversionsGiveHalfMathsBits) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(zrt::dtypeName(dt));
    std::vector<uint16_t> all(65536);
    for (size_t i = 0; i < all.size(); ++i)
      all[i] = uint16_t(i);
    std::vector<float> wide(all.size());
    zrt::kernels::widenHalfRow(dt, all.data(), wide.data(), int64_t(all.size()));
    int64_t wrong = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      const float want = widenOne(dt, all[i]);
      if (std::memcmp(&want, &wide[i], 4) != 0 && wrong++ < 3)
        ADD_FAILURE() << "widening " << std::hex << i;
    }
    std::mt19937 rng(7);
    std::vector<uint32_t> bits;
    const uint32_t edges[] = {0u,       1u,       0xfffu,   0x1000u,  0x1001u,  0x1fffu,
                              0x2000u,  0x3000u,  0x7fffu,  0x8000u,  0x8001u,  0x17fffu,
                              0x18000u, 0x7fffffu, 0x7ff000u, 0x7fe000u};
    for (uint32_t sign : {0u, 0x80000000u})
      for (uint32_t e = 0; e < 256; ++e) {
        for (uint32_t m : edges)
          bits.push_back(sign | (e << 23) | m);
        for (int r = 0; r < 512; ++r)
          bits.push_back(sign | (e << 23) | (rng() & 0x7fffffu));
      }
    for (uint32_t b : {0x477ff000u, 0x477fefffu, 0x477fe000u, 0x38800000u, 0x387fffffu,
                       0x33000000u, 0x33000001u, 0x7f800001u, 0x7fc00000u, 0x7fbfffffu})
      bits.push_back(b);
    std::vector<float> in(bits.size());
    std::memcpy(in.data(), bits.data(), bits.size() * 4);
    std::vector<uint16_t> out(in.size());
    zrt::kernels::narrowHalfRow(dt, in.data(), out.data(), int64_t(in.size()));
    for (size_t i = 0; i < in.size(); ++i)
      if (out[i] != narrowOne(dt, in[i]) && wrong++ < 6)
        ADD_FAILURE() << "rounding 0x" << std::hex << bits[i] << ": 0x" << out[i]
                      << ", HalfMath 0x" << narrowOne(dt, in[i]);
    // Rounded in place: the widening of HalfMath's rounding.
    std::vector<float> inPlace = in;
    zrt::kernels::roundHalfRow(dt, inPlace.data(), int64_t(inPlace.size()));
    for (size_t i = 0; i < in.size(); ++i) {
      const float want = widenOne(dt, narrowOne(dt, in[i]));
      if (std::memcmp(&want, &inPlace[i], 4) != 0 && wrong++ < 9)
        ADD_FAILURE() << "rounding in place 0x" << std::hex << bits[i];
    }
    EXPECT_EQ(wrong, 0);
  }
}

// Tests that a 16-bit Gemm (f16 and bf16; both transposes, alpha, beta, every
// broadcast of C; B constant or written; A widened whole or a task's rows at
// a time for a long K) at every ISA gives exactly PackedGemm.h's defined
// element rounded once to 16 bits: for f16 the f32 element on the widened
// operands, for bf16 the pair kernels' (definedBf16Element).
TEST(Half, GemmIsTheDefinedElementRoundedOnce) {
  std::vector<PackedGemmCase> cases = packedGemmCases();
  // K long enough that A (64 x 70000 as f32) is over the 16 MiB widened whole.
  cases.push_back({64, 17, 70000, false, true, {17}, 1, 1});
  cases.push_back({40, 50, 110000, true, false, {0}, 1, 0});
  for (zrt::cpu::CpuIsa isa : runnableIsas()) {
    ScopedIsa scoped(isa);
    for (DType dt : {DType::F16, DType::BF16})
      for (const PackedGemmCase &c : cases)
        for (bool constantB : {true, false}) {
          if (c.k > 1000 && (constantB || isa != zrt::cpu::detectedCpuIsa()))
            continue; // the long-K cases once, B written, at the machine's ISA
          SCOPED_TRACE(std::string(zrt::cpu::cpuIsaName(isa)) + " " + zrt::dtypeName(dt) +
                       " " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                       std::to_string(c.k) + (constantB ? " constant B" : ""));
          Tensors t;
          const bool hasC = c.cShape != std::vector<int64_t>{0};
          TensorRef a = halfInput(t, dt, c.transA ? std::vector<int64_t>{c.k, c.m}
                                                  : std::vector<int64_t>{c.m, c.k},
                                  randomFloats(size_t(c.m * c.k), 61));
          TensorRef b = halfInput(t, dt, c.transB ? std::vector<int64_t>{c.n, c.k}
                                                  : std::vector<int64_t>{c.k, c.n},
                                  randomFloats(size_t(c.k * c.n), 62));
          std::vector<TensorRef> in = {a, b};
          if (hasC)
            in.push_back(halfInput(t, dt, c.cShape, randomFloats(size_t(product(c.cShape)), 63)));
          TensorRef y = t.raw(dt, {c.m, c.n});
          zrt::test::TestConstants constants;
          if (!constantB)
            constants.written = {b.data};
          ASSERT_OK(run("Gemm", in, {y},
                        attrs({{"transA", ints({c.transA})},
                               {"transB", ints({c.transB})},
                               {"alpha", floats({c.alpha})},
                               {"beta", floats({c.beta})}}),
                        zrt::test::contextWithConstants(3, &constants)));
          EXPECT_EQ(constants.preparations, constantB ? 1 : 0);
          const std::vector<float> av = widened(a), bv = widened(b);
          const std::vector<float> cv = hasC ? widened(in[2]) : std::vector<float>{};
          const int64_t cRows = c.cShape.size() >= 2 ? c.cShape[c.cShape.size() - 2] : 1;
          const int64_t cCols = c.cShape.empty() ? 1 : c.cShape.back();
          int64_t wrong = 0;
          for (int64_t i = 0; i < c.m; ++i)
            for (int64_t j = 0; j < c.n; ++j) {
              const float init =
                  hasC ? cv[size_t((cRows == 1 ? 0 : i) * cCols + (cCols == 1 ? 0 : j))] : 0.0f;
              const float want =
                  dt == DType::BF16
                      ? definedBf16Element(a.as<uint16_t>() + (c.transA ? i : i * c.k),
                                           c.transA ? c.m : 1,
                                           b.as<uint16_t>() + (c.transB ? j * c.k : j),
                                           c.transB ? 1 : c.n, c.k, float(c.alpha),
                                           hasC ? float(c.beta) : 0.0f, init)
                      : definedElement(isa, av.data() + (c.transA ? i : i * c.k),
                                       c.transA ? c.m : 1, bv.data() + (c.transB ? j * c.k : j),
                                       c.transB ? 1 : c.n, c.k, float(c.alpha),
                                       hasC ? float(c.beta) : 0.0f, init);
              if (y.as<uint16_t>()[i * c.n + j] != narrowOne(dt, want) && wrong++ < 3)
                ADD_FAILURE() << "element (" << i << ", " << j << ")";
            }
          EXPECT_EQ(wrong, 0);
        }
  }
}

// Tests that a batched 16-bit MatMul (attention's products, B with a batch,
// and A's batch folded into M) gives the defined element rounded once (f16:
// the f32 MatMul of the widened operands; bf16: definedBf16Element), and
// that micro-batch rows alone give the whole product's bits.
TEST(Half, BatchedMatMulIsTheDefinedProductRoundedOnce) {
  for (DType dt : {DType::F16, DType::BF16})
    for (bool bBatched : {true, false}) {
      SCOPED_TRACE(std::string(zrt::dtypeName(dt)) + (bBatched ? " batched B" : ""));
      Tensors t;
      TensorRef a = halfInput(t, dt, {3, 37, 29}, randomFloats(3 * 37 * 29, 71));
      TensorRef b = bBatched ? halfInput(t, dt, {3, 29, 53}, randomFloats(3 * 29 * 53, 72))
                             : halfInput(t, dt, {29, 53}, randomFloats(29 * 53, 72));
      TensorRef y = t.raw(dt, {3, 37, 53});
      if (dt == DType::F16) {
        expectWidenedBits("MatMul", {a, b}, {y});
      } else {
        for (int threads : {1, 3}) {
          ASSERT_OK(widenedKernels().lookup("MatMul")(contextWithThreads(threads), {a, b}, {y},
                                                      {}));
          int64_t wrong = 0;
          for (int64_t bi = 0; bi < 3; ++bi)
            for (int64_t i = 0; i < 37; ++i)
              for (int64_t j = 0; j < 53; ++j) {
                const float want = definedBf16Element(
                    a.as<uint16_t>() + (bi * 37 + i) * 29, 1,
                    b.as<uint16_t>() + (bBatched ? bi * 29 * 53 : 0) + j, 53, 29, 1.0f, 0.0f,
                    0.0f);
                if (y.as<uint16_t>()[(bi * 37 + i) * 53 + j] !=
                        zrt::math::floatToBfloat16(want) &&
                    wrong++ < 3)
                  ADD_FAILURE() << "element (" << bi << ", " << i << ", " << j << ") at "
                                << threads << " threads";
              }
          EXPECT_EQ(wrong, 0);
        }
      }
      // Rows 5..14 of the second matrix alone.
      TensorRef part = t.raw(dt, {10, 29});
      std::memcpy(part.data, a.as<uint16_t>() + (37 + 5) * 29, 10 * 29 * 2);
      TensorRef bPart = bBatched ? t.raw(dt, {29, 53}) : b;
      if (bBatched)
        std::memcpy(bPart.data, b.as<uint16_t>() + 29 * 53, 29 * 53 * 2);
      TensorRef yPart = t.raw(dt, {10, 53});
      ASSERT_OK(run("MatMul", {part, bPart}, {yPart}, {}, contextWithThreads(2)));
      EXPECT_EQ(std::memcmp(yPart.data, y.as<uint16_t>() + (37 + 5) * 53, 10 * 53 * 2), 0);
    }
}

// Tests the trampolines of the elementwise kernels on 16-bit operands: whole
// shapes, a row broadcast (bias), a scalar, in place, shapes sliced and not
// (a row longer than a slice), a mixed-dtype output (Equal), Where, sums over
// kept rows and over the innermost dim, and ScatterND's add (rows touched twice sum in f32; rows untouched keep their
// bits, a NaN payload too): each the f32 kernel on widened operands rounded
// once, at 1 and 3 threads.
// A 16-bit FusedElementwise (round_to) gives the bits of its ops run one by
// one as 16-bit kernels: GELU's tail x * 0.5 * (1 + tanh(x * c + x^3 * d)) and
// a bias add, on rows longer than a slice, with a broadcast row and a scalar,
// at 1 and 3 threads. Without round_to the f32 chain would differ (checked,
// so that the comparison can fail).
TEST(Half, FusedElementwiseRoundsEachOpLikeTheKernelsOneByOne) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(zrt::dtypeName(dt));
    Tensors t;
    const int64_t rows = 7, cols = 70001;
    const size_t n = size_t(rows * cols);
    TensorRef x = halfInput(t, dt, {rows, cols}, randomFloats(n, 91));
    TensorRef bias = halfInput(t, dt, {1, cols}, randomFloats(size_t(cols), 92));
    TensorRef c = halfInput(t, dt, {}, {0.7978845608f});
    TensorRef d = halfInput(t, dt, {}, {0.0356774081f});
    TensorRef half = halfInput(t, dt, {}, {0.5f});
    TensorRef one = halfInput(t, dt, {}, {1.0f});
    // One by one: h = x + bias; u = h*c; v = h*h; w = v*h; p = w*d; q = u + p;
    // r = tanh(q); s = r + 1; m = h * 0.5; y = m * s.
    const zrt::KernelTable &k = widenedKernels();
    auto step = [&](const char *op, std::vector<TensorRef> in) {
      TensorRef o = t.raw(dt, {rows, cols});
      EXPECT_OK(k.lookup(op)(contextWithThreads(2), in, {o}, {}));
      return o;
    };
    TensorRef h = step("Add", {x, bias});
    TensorRef u = step("Mul", {h, c});
    TensorRef v = step("Mul", {h, h});
    TensorRef w = step("Mul", {v, h});
    TensorRef p = step("Mul", {w, d});
    TensorRef q = step("Add", {u, p});
    TensorRef r = step("Tanh", {q});
    TensorRef s1 = step("Add", {r, one});
    TensorRef m = step("Mul", {h, half});
    TensorRef want = step("Mul", {m, s1});
    // The same program fused: inputs x, bias, c, d, 0.5, 1 (refs 0-5), op k
    // at ref 6 + k.
    const std::vector<int64_t> program = {0, 0, 1,  2, 6, 2,  2, 6, 6,  2, 8, 6, 2, 9, 3,
                                          0, 7, 10, 12, 11, 0, 0, 12, 5, 2, 6, 4, 2, 14, 13};
    for (bool round : {true, false}) {
      AttrMap a = round ? attrs({{"ops", ints(program)},
                                 {"round_to", str(dt == DType::BF16 ? "bf16" : "f16")}})
                        : attrs({{"ops", ints(program)}});
      for (int threads : {1, 3}) {
        TensorRef y = t.raw(dt, {rows, cols});
        ASSERT_OK(k.lookup("FusedElementwise")(contextWithThreads(threads),
                                               {x, bias, c, d, half, one}, {y}, a));
        int64_t differ = 0;
        for (size_t i = 0; i < n; ++i)
          differ += y.as<uint16_t>()[i] != want.as<uint16_t>()[i];
        if (round)
          EXPECT_EQ(differ, 0) << threads << " threads";
        else
          EXPECT_GT(differ, 0) << "the f32 chain should round differently somewhere";
      }
    }
  }
}

// A FusedElementwise that mixes types (op_types, its Casts opcode 15) gives
// the bits of its ops run one by one as kernels of each op's type: GPT-2's
// GELU as mixed precision writes it (its Pow in f32 between two Casts), on a
// 16-bit x, with an f32 bias (a broadcast row, read as f32), into a 16-bit
// and (a second program ending in a widening Cast and an f32 Exp) an f32
// output; at 1 and 3 threads, rows longer than a block. With every op left
// in f32 the bits would differ (checked, so the comparison can fail).
TEST(Half, FusedElementwiseMixedTypesRoundLikeTheKernelsOneByOne) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(zrt::dtypeName(dt));
    Tensors t;
    const int64_t rows = 5, cols = 3001;
    const size_t n = size_t(rows * cols);
    TensorRef x = halfInput(t, dt, {rows, cols}, randomFloats(n, 93));
    TensorRef bias = t.input<float>({cols}, randomFloats(size_t(cols), 94));
    TensorRef half = halfInput(t, dt, {}, {0.5f});
    TensorRef three = t.input<float>({}, {3.0f});
    TensorRef c = t.input<float>({}, {0.044715f});
    TensorRef k0 = halfInput(t, dt, {}, {0.7978845608f});
    TensorRef one = halfInput(t, dt, {}, {1.0f});
    const zrt::KernelTable &k = widenedKernels();
    auto step = [&](const char *op, std::vector<TensorRef> in, DType to) {
      TensorRef o = t.raw(to, {rows, cols});
      EXPECT_OK(k.lookup(op)(contextWithThreads(2), in, {o}, {}));
      return o;
    };
    const DType f32 = DType::F32;
    // w = f32(x) + bias; p = w^3; q = p * c; h = half(q); a = x + h;
    // m = a * k0; r = tanh(m); s = r + 1; u = x * 0.5; y = u * s;
    // then z = exp(f32(y)).
    TensorRef w0 = step("Cast", {x}, f32);
    TensorRef w = step("Add", {w0, bias}, f32);
    TensorRef p = step("Pow", {w, three}, f32);
    TensorRef q = step("Mul", {p, c}, f32);
    TensorRef h = step("Cast", {q}, dt);
    TensorRef a = step("Add", {x, h}, dt);
    TensorRef m = step("Mul", {a, k0}, dt);
    TensorRef r = step("Tanh", {m}, dt);
    TensorRef s1 = step("Add", {r, one}, dt);
    TensorRef u = step("Mul", {x, half}, dt);
    TensorRef want = step("Mul", {u, s1}, dt);
    TensorRef wantZ = step("Exp", {step("Cast", {want}, f32)}, f32);
    // Inputs x, bias (refs 0, 1); constants 3, c, k0, 1, 0.5 (-1 .. -5);
    // op j at ref 2 + j.
    const std::vector<int64_t> program = {15, 0, 0,  0, 2, 1,   4, 3, -1,  2, 4, -2,
                                          15, 5, 0,  0, 0, 6,   2, 7, -3,  12, 8, 0,
                                          0, 9, -4,  2, 0, -5,  2, 11, 10};
    const int64_t q16 = dt == DType::BF16 ? 2 : 1;
    const std::vector<int64_t> types = {0, 0, 0, 0, q16, q16, q16, q16, q16, q16, q16};
    std::vector<int64_t> programZ = program;
    for (int64_t v : {15, 12, 0, 10, 13, 0})
      programZ.push_back(v);
    std::vector<int64_t> typesZ = types;
    typesZ.push_back(0);
    typesZ.push_back(0);
    const std::vector<double> constants = {3.0, double(0.044715f),
                                           double(widened(k0)[0]), 1.0, 0.5};
    for (bool typed : {true, false}) {
      for (int threads : {1, 3}) {
        SCOPED_TRACE(std::to_string(threads) + " threads");
        auto run = [&](const std::vector<int64_t> &ops, const std::vector<int64_t> &ty,
                       DType outType) {
          AttrMap at = attrs({{"ops", ints(ops)}});
          at.set("constants", AttrValue{{}, constants, ""});
          if (typed)
            at.set("op_types", ints(ty));
          TensorRef y = t.raw(outType, {rows, cols});
          EXPECT_OK(k.lookup("FusedElementwise")(contextWithThreads(threads), {x, bias},
                                                 {y}, at));
          return y;
        };
        TensorRef y = run(program, types, dt);
        TensorRef z = run(programZ, typesZ, f32);
        int64_t differ = 0, differZ = 0;
        for (size_t i = 0; i < n; ++i) {
          differ += y.as<uint16_t>()[i] != want.as<uint16_t>()[i];
          differZ += z.as<uint32_t>()[i] != wantZ.as<uint32_t>()[i];
        }
        if (typed) {
          EXPECT_EQ(differ, 0);
          EXPECT_EQ(differZ, 0);
        } else {
          EXPECT_GT(differ, 0) << "the f32 chain should round differently somewhere";
        }
      }
    }
  }
}

TEST(Half, ElementwiseTrampolinesRoundTheF32ResultOnce) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(zrt::dtypeName(dt));
    Tensors t;
    for (int64_t rows : {3, 40}) {
      for (int64_t cols : {1000, 70001}) {
        const size_t n = size_t(rows * cols);
        TensorRef x = halfInput(t, dt, {rows, cols}, randomFloats(n, 81));
        TensorRef z = halfInput(t, dt, {rows, cols}, randomFloats(n, 82));
        TensorRef bias = halfInput(t, dt, {1, cols}, randomFloats(size_t(cols), 83));
        TensorRef s = halfInput(t, dt, {1, 1, 1}, {0.7071f});
        expectWidenedBits("Add", {x, z}, {t.raw(dt, {rows, cols})});
        expectWidenedBits("Add", {x, bias}, {t.raw(dt, {rows, cols})});
        expectWidenedBits("Mul", {s, x}, {t.raw(dt, {rows, cols})});
        expectWidenedBits("Tanh", {x}, {t.raw(dt, {rows, cols})});
        expectWidenedBits("Equal", {x, x}, {t.raw(DType::Bool, {rows, cols})});
        TensorRef cond = t.raw(DType::Bool, {rows, cols});
        for (size_t i = 0; i < n; ++i)
          cond.as<uint8_t>()[i] = uint8_t(i % 3 == 0);
        expectWidenedBits("Where", {cond, x, z}, {t.raw(dt, {rows, cols})});
      }
    }
    // In place: output 0 is input 0.
    TensorRef x = halfInput(t, dt, {5, 20000}, randomFloats(100000, 84));
    TensorRef y = halfInput(t, dt, {5, 20000}, randomFloats(100000, 85));
    std::vector<float> want = widened(x);
    const std::vector<float> yv = widened(y);
    for (size_t i = 0; i < want.size(); ++i)
      want[i] *= yv[i];
    ASSERT_OK(widenedKernels().lookup("Mul")(contextWithThreads(2), {x, y}, {x}, {}));
    for (size_t i = 0; i < want.size(); i += 997)
      EXPECT_EQ(x.as<uint16_t>()[i], narrowOne(dt, want[i]));
    // ScatterND add: rows 1 and 4 twice, row 2 once, row 0 holds a NaN payload.
    TensorRef table = halfInput(t, dt, {6, 70}, randomFloats(420, 86));
    TensorRef idx = t.input<int64_t>({5, 1}, {4, 1, 2, 4, 1});
    TensorRef upd = halfInput(t, dt, {5, 70}, randomFloats(350, 87));
    TensorRef out = t.raw(dt, {6, 70});
    const AttrMap add = attrs({{"reduction", str("add")}});
    expectWidenedBits("ScatterND", {table, idx, upd}, {out}, add);
    // Reductions over leading (and middle) dims keeping the innermost: rows
    // widened a tile at a time (reduceHalfKeptRows); over the innermost dim:
    // the trampoline's widened copy. The same bits either way.
    struct ReduceCase {
      std::vector<int64_t> shape, axes, outShape;
    };
    for (const ReduceCase &c : std::vector<ReduceCase>{{{1024, 3000}, {0}, {3000}},
                                                       {{3, 7, 130}, {0, 1}, {130}},
                                                       {{4, 6, 5, 70}, {0, 2}, {6, 70}},
                                                       {{9, 300}, {1}, {9}}})
      for (const char *op : {"ReduceSum", "ReduceMean", "ReduceSumSquare"}) {
        SCOPED_TRACE(std::string(op) + " " + std::to_string(c.shape.size()) + "-d");
        int64_t n = 1;
        for (int64_t d : c.shape)
          n *= d;
        TensorRef in = halfInput(t, dt, c.shape, randomFloats(size_t(n), 88));
        expectWidenedBits(op, {in}, {t.raw(dt, c.outShape)},
                          attrs({{"axes", ints(c.axes)}, {"keepdims", ints({0})}}));
      }
    table.as<uint16_t>()[3] = dt == DType::F16 ? 0x7d01 : 0x7f81; // signalling
    ASSERT_OK(widenedKernels().lookup("ScatterND")(contextWithThreads(2), {table, idx, upd},
                                                   {out}, add));
    EXPECT_EQ(out.as<uint16_t>()[3], table.as<uint16_t>()[3]);
  }
}
