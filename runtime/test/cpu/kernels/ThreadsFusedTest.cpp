//===- ThreadsFusedTest.cpp - Thread counts and FusedElementwise ----------===//
//
// The same bits at any thread count, and FusedElementwise against its ops
// run one by one.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace zrt::kerneltest;

namespace {

//===----------------------------------------------------------------------===//
// Thread-count independence
//===----------------------------------------------------------------------===//

struct ThreadCase {
  std::string op;
  std::vector<std::vector<int64_t>> inputs;
  std::vector<int64_t> output;
  AttrMap attrs;
};

// Tests that every kernel whose work is split (products tiled, reductions cut
// into partial sums, elementwise chunks with vector tails) gives the same bits
// at 1, 2, 3 and 8 threads: the split is a function of the shapes only.
TEST(ThreadCount, SameBitsAtAnyThreadCount) {
  const std::vector<ThreadCase> cases = {
      {"MatMul", {{128, 768}, {768, 768}}, {128, 768}, {}},
      {"MatMul", {{1, 64, 256}, {256, 1000}}, {1, 64, 1000}, {}},
      {"MatMul", {{3, 37, 64}, {3, 64, 129}}, {3, 37, 129}, {}},
      {"MatMul", {{16, 64}, {64, 256}}, {16, 256}, {}},
      {"Gemm",
       {{96, 256}, {700, 256}},
       {96, 700},
       attrs({{"transB", ints({1})}})},
      // Row tiles (tall A), a 2 x 3 grid, wide column tiles with a short
      // last one and a bias, products cut under OpenBLAS's small-matrix size.
      {"MatMul", {{1024, 256}, {256, 768}}, {1024, 768}, {}},
      {"MatMul", {{2048, 32}, {32, 3072}}, {2048, 3072}, {}},
      {"Gemm",
       {{64, 128}, {5000, 128}, {5000}},
       {64, 5000},
       attrs({{"transB", ints({1})}})},
      {"MatMul", {{12, 128, 64}, {12, 64, 128}}, {12, 128, 128}, {}},
      {"ReduceSum",
       {{2, 300000}},
       {2, 1},
       attrs({{"axes", ints({1})}, {"keepdims", ints({1})}})},
      {"ReduceMean",
       {{5, 70001}},
       {5},
       attrs({{"axes", ints({1})}, {"keepdims", ints({0})}})},
      {"ReduceSum",
       {{300001}},
       {1},
       attrs({{"axes", ints({0})}, {"keepdims", ints({1})}})},
      {"Softmax", {{3, 40000}}, {3, 40000}, attrs({{"axis", ints({1})}})},
      {"Softmax", {{2, 50, 700}}, {2, 50, 700}, attrs({{"axis", ints({1})}})},
      {"LayerNormalization",
       {{64, 3000}, {3000}, {3000}},
       {64, 3000},
       attrs({{"axis", ints({1})}, {"epsilon", floats({1e-5})}})},
      {"Tanh", {{100003}}, {100003}, {}},
      {"Erf", {{100003}}, {100003}, {}},
      {"Exp", {{100003}}, {100003}, {}},
      {"Mul", {{333, 1001}, {1001}}, {333, 1001}, {}},
      {"Conv",
       {{2, 16, 40, 40}, {32, 8, 3, 3}, {32}},
       {2, 32, 40, 40},
       attrs({{"group", ints({2})},
              {"strides", ints({1, 1})},
              {"dilations", ints({1, 1})},
              {"pads", ints({1, 1, 1, 1})}})},
      {"Conv",
       {{1, 16, 301}, {24, 16, 3}},
       {1, 24, 151},
       attrs({{"strides", ints({2})},
              {"dilations", ints({1})},
              {"pads", ints({1, 1})}})},
      {"ConvTranspose",
       {{2, 16, 20, 20}, {16, 8, 4, 4}},
       {2, 8, 40, 40},
       attrs({{"strides", ints({2, 2})},
              {"dilations", ints({1, 1})},
              {"pads", ints({1, 1, 1, 1})}})},
      {"MaxPool",
       {{4, 16, 50, 50}},
       {4, 16, 25, 25},
       attrs({{"kernel_shape", ints({3, 3})},
              {"strides", ints({2, 2})},
              {"pads", ints({1, 1, 1, 1})}})},
      {"AveragePool",
       {{4, 16, 50, 50}},
       {4, 16, 25, 25},
       attrs({{"kernel_shape", ints({3, 3})},
              {"strides", ints({2, 2})},
              {"pads", ints({1, 1, 1, 1})},
              {"count_include_pad", ints({1})}})},
      {"Resize",
       {{2, 8, 30, 30}},
       {2, 8, 75, 75},
       attrs({{"mode", str("cubic")}, {"scales", floats({1, 1, 2.5, 2.5})}})},
      {"Resize",
       {{2, 8, 60, 60}},
       {2, 8, 24, 24},
       attrs({{"mode", str("linear")},
              {"antialias", ints({1})},
              {"scales", floats({1, 1, 0.4, 0.4})}})},
  };
  for (const ThreadCase &c : cases) {
    Tensors t;
    std::vector<TensorRef> in;
    unsigned seed = 100;
    for (const std::vector<int64_t> &shape : c.inputs)
      in.push_back(t.input<float>(
          shape, randomFloats(size_t(product(shape)), seed++, -3.0f, 3.0f)));
    std::vector<char> first;
    for (int threads : {1, 2, 3, 8}) {
      TensorRef y = t.output<float>(c.output);
      EXPECT_OK(run(c.op, in, {y}, c.attrs, contextWithThreads(threads)));
      std::vector<char> bytes(static_cast<const char *>(y.data),
                              static_cast<const char *>(y.data) + y.bytes());
      if (threads == 1)
        first = bytes;
      else
        EXPECT_TRUE(bytes == first)
            << c.op << " " << zrt::shapeString(c.inputs[0])
            << ": the output at " << threads
            << " threads differs from the 1-thread output";
    }
  }
}

//===----------------------------------------------------------------------===//
// FusedElementwise
//===----------------------------------------------------------------------===//

/// One op of a fused program: the single kernel it stands for, its opcode
/// and operand references (inputs, earlier results, -1-k: constant k).
struct FusedStep {
  const char *op;
  int64_t code, a, b;
};

/// Runs `steps` op by op through the single kernels (constants as [1]
/// tensors, results at `shape`) and as one FusedElementwise at 1 and 3
/// threads, and expects the same bytes.
void expectFusedMatchesUnfused(const std::vector<int64_t> &shape,
                               const std::vector<std::vector<int64_t>> &inShapes,
                               const std::vector<double> &constants,
                               const std::vector<FusedStep> &steps,
                               unsigned seed) {
  Tensors t;
  std::vector<TensorRef> inputs;
  for (const std::vector<int64_t> &s : inShapes)
    inputs.push_back(t.input<float>(
        s, randomFloats(size_t(product(s)), seed++, -3.0f, 3.0f)));
  std::vector<TensorRef> consts;
  for (double c : constants)
    consts.push_back(t.input<float>({1}, {float(c)}));
  std::vector<TensorRef> results;
  auto resolve = [&](int64_t ref) -> TensorRef {
    if (ref < 0)
      return consts[size_t(-ref - 1)];
    if (ref < int64_t(inputs.size()))
      return inputs[size_t(ref)];
    return results[size_t(ref) - inputs.size()];
  };
  std::vector<int64_t> program;
  for (const FusedStep &s : steps) {
    TensorRef y = t.output<float>(shape);
    const bool binary = s.code <= 4;
    std::vector<TensorRef> in{resolve(s.a)};
    if (binary)
      in.push_back(resolve(s.b));
    EXPECT_OK(run(s.op, in, {y}));
    results.push_back(y);
    program.insert(program.end(), {s.code, s.a, binary ? s.b : 0});
  }
  const TensorRef &expected = results.back();
  AttrMap a = attrs({{"ops", ints(program)}, {"constants", floats(constants)}});
  for (int threads : {1, 3}) {
    TensorRef y = t.output<float>(shape);
    EXPECT_OK(run("FusedElementwise", inputs, {y}, a,
                  contextWithThreads(threads)));
    EXPECT_EQ(std::memcmp(y.data, expected.data, size_t(y.bytes())), 0)
        << "FusedElementwise differs from the op-by-op kernels at " << threads
        << " threads, shape " << zrt::shapeString(shape);
  }
}

TEST(Fused, GeluTanhChainBitIdentical) {
  // GPT-2's gelu_new after a bias add with broadcasting: x [B,T,C] + b [C].
  // Inputs: 0 = x, 1 = b; results start at 2.
  const std::vector<FusedStep> gelu = {
      {"Add", 0, 0, 1},   // 2: h = x + b
      {"Mul", 2, 2, -1},  // 3: 0.5 h
      {"Pow", 4, 2, -2},  // 4: h^3
      {"Mul", 2, 4, -3},  // 5: 0.044715 h^3
      {"Add", 0, 2, 5},   // 6
      {"Mul", 2, 6, -4},  // 7: sqrt(2/pi) (...)
      {"Tanh", 12, 7, 0}, // 8
      {"Add", 0, 8, -5},  // 9: 1 + tanh
      {"Mul", 2, 3, 9},   // 10
  };
  const std::vector<double> c = {0.5, 3.0, 0.044714998453855515,
                                 0.7978845834732056, 1.0};
  for (const std::vector<int64_t> &shape :
       std::vector<std::vector<int64_t>>{{3, 7, 131}, {4, 64, 300}, {1, 1, 5}})
    expectFusedMatchesUnfused(shape, {shape, {shape.back()}}, c, gelu, 11);
}

TEST(Fused, EveryOpcodeWithBroadcasting) {
  // Inputs: 0 = x [5,9,67], 1 = mask [5,1,67], 2 = scale [1], 3 = row [9,1].
  const std::vector<int64_t> shape = {5, 9, 67};
  const std::vector<FusedStep> steps = {
      {"Mul", 2, 0, 2},         // 4
      {"Add", 0, 4, 1},         // 5
      {"Sub", 1, 5, 3},         // 6
      {"Div", 3, 6, -1},        // 7
      {"Erf", 13, 7, 0},        // 8
      {"Sigmoid", 14, 8, 0},    // 9
      {"Neg", 5, 9, 0},         // 10
      {"Abs", 6, 10, 0},        // 11
      {"Sqrt", 8, 11, 0},       // 12
      {"Log", 11, 12, 0},       // 13
      {"Exp", 10, 13, 0},       // 14
      {"Relu", 7, 7, 0},        // 15
      {"Reciprocal", 9, 14, 0}, // 16
      {"Pow", 4, 16, -2},       // 17: ^2
      {"Pow", 4, 17, -3},       // 18: ^0.5
      {"Pow", 4, 18, -4},       // 19: ^-1
      {"Pow", 4, 19, -5},       // 20: ^1
      {"Pow", 4, 20, -6},       // 21: ^2.5 (powf)
      {"Add", 0, 21, 15},       // 22
      {"Div", 3, -1, 22},       // 23: constant / value
      {"Sub", 1, 23, 0},        // 24
  };
  const std::vector<double> c = {1.5, 2.0, 0.5, -1.0, 1.0, 2.5};
  expectFusedMatchesUnfused(shape, {shape, {5, 1, 67}, {1}, {9, 1}}, c, steps,
                            21);
}

TEST(Fused, RejectsBadPrograms) {
  Tensors t;
  TensorRef x = t.input<float>({4}, {1, 2, 3, 4});
  TensorRef y = t.output<float>({4});
  // Opcode out of range, a forward reference, Pow by a non-constant, and an
  // undefined constant.
  for (const std::vector<int64_t> &ops : std::vector<std::vector<int64_t>>{
           {99, 0, 0}, {5, 1, 0}, {4, 0, 0}, {0, 0, -3}, {}}) {
    zrt::Status s = run("FusedElementwise", {x}, {y},
                        attrs({{"ops", ints(ops)}, {"constants", floats({2})}}));
    EXPECT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("FusedElementwise"), std::string::npos)
        << s.message();
  }
  TensorRef i = t.input<int64_t>({4}, {1, 2, 3, 4});
  EXPECT_FALSE(run("FusedElementwise", {i}, {y}, attrs({{"ops", ints({5, 0, 0})}}))
                   .isOk());
}

} // namespace
