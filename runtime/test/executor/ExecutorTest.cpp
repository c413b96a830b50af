//===- ExecutorTest.cpp - Streams, events, errors and liveness ------------===//
//
// Single-process executor tests on the CPU backend with the local communicator:
// results of small multi-stream programs against values computed in the test,
// cancellation of waiting streams when a kernel fails, the load-time deadlock
// check, and the measured peak of live bytes against a hand-derived figure.
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"

#include "zrt/Backend.h"
#include "zrt/Bindings.h"
#include "zrt/Executor.h"
#include "zrt/TensorFile.h"
#include "zrt/CpuBackend.h"
#include "zrt/Communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>

using namespace zrt;
using namespace zrt::test;
using ::testing::HasSubstr;

namespace {

std::vector<uint8_t> bytesOf(const std::vector<float> &v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<float> readFloats(const Executor &e, uint32_t buffer) {
  std::vector<float> out(size_t(e.buffer(buffer).numel()));
  Status s = e.readBuffer(buffer, out.data(), out.size() * 4);
  EXPECT_TRUE(s.isOk()) << s.message();
  return out;
}

std::string tempDir() {
  char pattern[] = "/tmp/zrt-executor-test-XXXXXX";
  const char *dir = mkdtemp(pattern);
  return dir ? dir : "/tmp";
}

/// comm stream: b = Copy(a); Record e0.  compute: Wait e0; d = Add(b, c).
Program twoStreamProgram() {
  Program p;
  p.path = "two-streams.zrt";
  p.version = kFormatVersion;
  p.arenas = {{"constants", 128, 128, 128}, {"activations", 128, 128, 128}};
  p.buffers = {{"a", DType::F32, {2, 4}, 0, 0},
               {"c", DType::F32, {2, 4}, 0, 64},
               {"b", DType::F32, {2, 4}, 1, 0},
               {"d", DType::F32, {2, 4}, 1, 64}};
  p.constants = {{0, bytesOf({1, 2, 3, 4, 5, 6, 7, 8})},
                 {1, bytesOf({10, 20, 30, 40, 50, 60, 70, 80})}};
  p.streams = {{"compute", StreamKind::Compute}, {"comm", StreamKind::Comm}};
  p.numEvents = 1;
  p.outputs = {{"d", 3}};
  p.instructions = {makeInstruction("Copy", 1, {0}, {2}, "copy"),
                    makeEventOp(OpKind::Record, 1, 0),
                    makeEventOp(OpKind::Wait, 0, 0),
                    makeInstruction("Add", 0, {2, 1}, {3}, "add")};
  return p;
}

TEST(Executor, RunsTwoStreamsSynchronisedByAnEvent) {
  auto backend = createCpuBackend(2);
  auto comm = createLocalCommunicator();
  Program p = twoStreamProgram();
  ASSERT_TRUE(validateProgram(p, &backend->kernels()).isOk());
  auto exec = Executor::create(p, *backend, *comm);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  for (int run = 0; run < 3; ++run) { // events are reset between runs
    Status s = (*exec)->run();
    ASSERT_TRUE(s.isOk()) << s.message();
    EXPECT_EQ(readFloats(**exec, 3),
              (std::vector<float>{11, 22, 33, 44, 55, 66, 77, 88}));
  }
}

/// y = x @ w with x: f32[9x20] input, w: f32[20x50] in the constants arena;
/// with `writtenB`, the product's B is instead v = Add(w, u), u: f32[20x50]
/// a second input: a buffer an instruction writes.
Program constantWeightProgram(bool writtenB, const std::vector<float> &w) {
  Program p;
  p.path = "constant-weight.zrt";
  p.version = kFormatVersion;
  p.arenas = {{"constants", 4000, 4000, 4000},
              {"activations", 12320, 12320, 12320}};
  p.buffers = {{"w", DType::F32, {20, 50}, 0, 0},
               {"x", DType::F32, {9, 20}, 1, 0},
               {"y", DType::F32, {9, 50}, 1, 720},
               {"u", DType::F32, {20, 50}, 1, 2520},
               {"v", DType::F32, {20, 50}, 1, 6520}};
  p.constants = {{0, bytesOf(w)}};
  p.streams = {{"compute", StreamKind::Compute}};
  p.inputs = {{"x", 1}};
  p.outputs = {{"y", 2}};
  if (writtenB) {
    p.inputs.push_back({"u", 3});
    p.instructions = {makeInstruction("Add", 0, {0, 3}, {4}, "v"),
                      makeInstruction("MatMul", 0, {1, 4}, {2}, "y")};
  } else {
    p.instructions = {makeInstruction("MatMul", 0, {1, 0}, {2}, "y")};
  }
  return p;
}

/// x @ w for x [9x20], w [20x50], in double.
std::vector<float> naiveProduct(const std::vector<float> &x,
                                const std::vector<float> &w) {
  std::vector<float> y(9 * 50);
  for (size_t i = 0; i < 9; ++i)
    for (size_t j = 0; j < 50; ++j) {
      double acc = 0;
      for (size_t p = 0; p < 20; ++p)
        acc += double(x[i * 20 + p]) * double(w[p * 50 + j]);
      y[i * 50 + j] = float(acc);
    }
  return y;
}

std::vector<float> rampFloats(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * float(int(i % 13) - 6);
  return v;
}

void expectClose(const std::vector<float> &actual,
                 const std::vector<float> &expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i],
                1e-4 * std::max(1.0f, std::fabs(expected[i])))
        << "at " << i;
}

// Tests that a weight no instruction writes is prepared once (packed) and kept across runs, counted in preparedOperandBytes;
// that writing it from outside (writeBuffer, or through hostAddress) drops
// the prepared form, so the next run sees the new values; and that a B an
// instruction writes is never prepared, its new values used in every run.
TEST(Executor, PreparesOnlyConstantOperandsAndDropsThemOnWrites) {
  const bool packs = true; // every ISA packs (cpu/kernels/PackedGemm.h)
  auto backend = createCpuBackend(2);
  auto comm = createLocalCommunicator();
  const std::vector<float> w = rampFloats(20 * 50, 0.25f);
  const std::vector<float> x = rampFloats(9 * 20, 0.5f);
  {
    Program p = constantWeightProgram(false, w);
    auto exec = Executor::create(p, *backend, *comm);
    ASSERT_TRUE(exec.isOk()) << exec.status().message();
    Executor &e = **exec;
    ASSERT_TRUE(e.writeBuffer(1, x.data(), x.size() * 4).isOk());
    ASSERT_TRUE(e.run().isOk());
    expectClose(readFloats(e, 2), naiveProduct(x, w));
    EXPECT_EQ(e.stats().preparedOperandBytes, packs ? 20u * 96 * 4 : 0u);
    ASSERT_TRUE(e.run().isOk());
    expectClose(readFloats(e, 2), naiveProduct(x, w));
    // New weights through writeBuffer, then through hostAddress.
    const std::vector<float> w2 = rampFloats(20 * 50, -0.5f);
    ASSERT_TRUE(e.writeBuffer(0, w2.data(), w2.size() * 4).isOk());
    ASSERT_TRUE(e.run().isOk());
    expectClose(readFloats(e, 2), naiveProduct(x, w2));
    const std::vector<float> w3 = rampFloats(20 * 50, 2.0f);
    std::memcpy(e.hostAddress(0), w3.data(), w3.size() * 4);
    ASSERT_TRUE(e.run().isOk());
    expectClose(readFloats(e, 2), naiveProduct(x, w3));
  }
  Program p = constantWeightProgram(true, w);
  auto exec = Executor::create(p, *backend, *comm);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  Executor &e = **exec;
  ASSERT_TRUE(e.writeBuffer(1, x.data(), x.size() * 4).isOk());
  for (float scale : {0.0f, 1.0f, -3.0f}) {
    const std::vector<float> u = rampFloats(20 * 50, scale);
    ASSERT_TRUE(e.writeBuffer(3, u.data(), u.size() * 4).isOk());
    ASSERT_TRUE(e.run().isOk());
    std::vector<float> v(w.size());
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = w[i] + u[i];
    expectClose(readFloats(e, 2), naiveProduct(x, v));
    EXPECT_EQ(e.stats().preparedOperandBytes, 0u);
  }
}

TEST(Executor, RunsTheLinearModelOnOneRank) {
  std::string dir = tempDir();
  ASSERT_TRUE(writeLinearModel(dir, 1).isOk());
  auto backend = createCpuBackend(1);
  auto comm = createLocalCommunicator();
  Expected<Program> p = loadProgram(dir + "/model.zrt", &backend->kernels());
  ASSERT_TRUE(p.isOk()) << p.status().message();
  ExecutorOptions options;
  options.trackMemory = true;
  options.trace = true;
  auto exec = Executor::create(*p, *backend, *comm, options);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  Expected<SafetensorsFile> weights =
      SafetensorsFile::open(dir + "/weights.safetensors");
  ASSERT_TRUE(weights.isOk()) << weights.status().message();
  WeightsStats stats;
  ASSERT_TRUE(loadGlobals(**exec, *weights, 0, &stats).isOk());
  EXPECT_EQ(stats.bytesRead, (30u + 5u) * 4u);
  EXPECT_EQ(stats.residentBytes, (30u + 5u) * 4u);
  Status s = bindInputs(**exec, {{"x", dir + "/x.npy"}});
  ASSERT_TRUE(s.isOk()) << s.message();
  s = (*exec)->run();
  ASSERT_TRUE(s.isOk()) << s.message();

  LinearModel m = makeLinearModel(1);
  EXPECT_EQ(readFloats(**exec, 6), m.y);
  EXPECT_EQ(readFloats(**exec, 7), m.y); // all-reduce over one rank
  const RunStats &run = (*exec)->stats();
  EXPECT_EQ(run.trace.size(), 8u);
  ASSERT_EQ(run.peakLiveBytes.size(), 2u);
  for (size_t a = 0; a < 2; ++a) {
    EXPECT_GT(run.peakLiveBytes[a], 0u);
    EXPECT_LE(run.peakLiveBytes[a], p->arenas[a].size);
  }
  // params: the w shard (120 bytes) and b (20) at offset 128 stay live.
  EXPECT_EQ(run.peakLiveBytes[0], 140u);
  EXPECT_EQ(run.highWaterBytes[0], 148u);

  Status w = writeOutputs(**exec, dir + "/out.safetensors");
  ASSERT_TRUE(w.isOk()) << w.message();
  Expected<SafetensorsFile> out = SafetensorsFile::open(dir + "/out.safetensors");
  ASSERT_TRUE(out.isOk());
  ASSERT_EQ(out->entries().size(), 2u);
  EXPECT_EQ(out->entries()[0].name, "y");
  EXPECT_EQ(out->entries()[1].shape, (std::vector<int64_t>{4, 5}));
  if (!HasFailure())
    std::filesystem::remove_all(dir);
}

TEST(Executor, KernelErrorReleasesWaitingStreams) {
  // compute: a MatMul with mismatched shapes fails before Record e0; the comm
  // stream is already waiting for e0 and must be released, not left hanging.
  Program p = twoStreamProgram();
  p.buffers.push_back({"bad", DType::F32, {3, 3}, 1, 0});
  p.instructions = {makeInstruction("MatMul", 0, {0, 4}, {3}, "mm"),
                    makeEventOp(OpKind::Record, 0, 0),
                    makeEventOp(OpKind::Wait, 1, 0),
                    makeInstruction("Copy", 1, {0}, {2}, "never")};
  auto backend = createCpuBackend(1);
  auto comm = createLocalCommunicator();
  int errors = 0;
  ExecutorOptions options;
  options.onError = [&](const Status &) { ++errors; };
  auto exec = Executor::create(p, *backend, *comm, options);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  for (int run = 0; run < 2; ++run) {
    Status s = (*exec)->run();
    ASSERT_FALSE(s.isOk());
    EXPECT_THAT(s.message(), HasSubstr("two-streams.zrt: instruction 0 (MatMul at "
                                       "\"mm\") on stream 0 \"compute\": "));
    EXPECT_THAT(s.message(), HasSubstr("MatMul"));
    EXPECT_EQ(errors, run + 1);
  }
  EXPECT_EQ(readFloats(**exec, 2), std::vector<float>(8, 0.0f))
      << "the waiting stream must not have run past its Wait";
}

TEST(Executor, RejectsDeadlockingPrograms) {
  Program p = twoStreamProgram();
  p.numEvents = 2;
  p.instructions[2].event = 1; // compute waits for e1, which nobody records
  auto backend = createCpuBackend(1);
  auto comm = createLocalCommunicator();
  auto exec = Executor::create(p, *backend, *comm);
  ASSERT_FALSE(exec.isOk());
  EXPECT_THAT(exec.status().message(),
              HasSubstr("waits for event 1 which no instruction records"));
}

TEST(Executor, RejectsAWorldSizeItDoesNotRunOn) {
  Program p = makeLinearModel(2).program;
  auto backend = createCpuBackend(1);
  auto comm = createLocalCommunicator();
  auto exec = Executor::create(p, *backend, *comm);
  ASSERT_FALSE(exec.isOk());
  EXPECT_EQ(exec.status().message(),
            "linear.zrt: the program was compiled for 2 ranks but runs on 1");
}

TEST(Executor, HandlesEmptyConstantsAndTensors) {
  // A 0-element constant has no data (a null pointer), which must never reach
  // memcpy; an empty tensor flows through a kernel and out again.
  Program p;
  p.path = "empty.zrt";
  p.version = kFormatVersion;
  p.arenas = {{"a", 64, 64, 0}};
  p.buffers = {{"c", DType::F32, {0}, 0, 0}, {"y", DType::F32, {0}, 0, 0}};
  p.constants = {{0, {}}};
  p.streams = {{"compute", StreamKind::Compute}};
  p.outputs = {{"y", 1}};
  p.instructions = {makeInstruction("Identity", 0, {0}, {1})};
  auto backend = createCpuBackend(1);
  auto comm = createLocalCommunicator();
  ASSERT_TRUE(validateProgram(p, &backend->kernels()).isOk());
  auto exec = Executor::create(p, *backend, *comm);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  EXPECT_TRUE((*exec)->run().isOk());
  EXPECT_TRUE((*exec)->readBuffer(1, nullptr, 0).isOk());
}

TEST(Executor, MeasuresLiveBytesAsAUnionOfRanges) {
  // x@0 (input) -> a@64 = Copy(x); o@0 = Add(a, a viewed as 4x4).
  // When Add starts, a, its view and o are live: 128 bytes, not 192, and x is
  // dead (its last reader finished), so reusing its bytes for o is fine.
  Program p;
  p.path = "live.zrt";
  p.version = kFormatVersion;
  p.arenas = {{"activations", 128, 192, 128}};
  p.buffers = {{"x", DType::F32, {16}, 0, 0},
               {"a", DType::F32, {16}, 0, 64},
               {"a.view", DType::F32, {16}, 0, 64},
               {"o", DType::F32, {16}, 0, 0}};
  p.streams = {{"compute", StreamKind::Compute}};
  p.inputs = {{"x", 0}};
  p.outputs = {{"o", 3}};
  p.instructions = {makeInstruction("Copy", 0, {0}, {1}),
                    makeInstruction("Add", 0, {1, 2}, {3})};
  auto backend = createCpuBackend(1);
  auto comm = createLocalCommunicator();
  ExecutorOptions options;
  options.trackMemory = true;
  auto exec = Executor::create(p, *backend, *comm, options);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i)
    x[i] = float(i);
  ASSERT_TRUE((*exec)->writeBuffer(0, x.data(), 64).isOk());
  ASSERT_TRUE((*exec)->run().isOk());
  EXPECT_EQ((*exec)->stats().peakLiveBytes, std::vector<uint64_t>{128});
  std::vector<float> o = readFloats(**exec, 3);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(o[i], 2.0f * float(i));
}

TEST(Executor, BoundsChecksBufferAccess) {
  auto backend = createCpuBackend(1);
  auto comm = createLocalCommunicator();
  Program p = twoStreamProgram();
  auto exec = Executor::create(p, *backend, *comm);
  ASSERT_TRUE(exec.isOk());
  float v[9] = {};
  Status s = (*exec)->writeBuffer(0, v, sizeof v);
  ASSERT_FALSE(s.isOk());
  EXPECT_THAT(s.message(), HasSubstr("bytes [0, 36) are outside buffer 0 \"a\""));
  EXPECT_FALSE((*exec)->readBuffer(17, v, 4).isOk());
}

} // namespace
