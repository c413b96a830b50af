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

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
