//===- ZeroRunTest.cpp - zero-run end to end, under mpirun ----------------===//
//
// Runs the zero-run binary as a user would: zrt-testgen writes the example
// ZeRO-3 linear model, its weights and input; zero-run runs it on 1, 2 and 4
// ranks; the outputs must equal the expected values written by zrt-testgen and
// the --report-json figures must equal the shard arithmetic. Bad inputs must
// end every rank with a non-zero exit code and a message naming the problem,
// never a hang (ctest's timeout would catch one; the tests that could hang
// also bound their own time). Ranks that load different programs or weights,
// and a rank stopped with SIGSTOP, are run through a small shell script that
// mpirun starts on every rank.
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"

#include "run/MachineModel.h"

#include "zrt/TensorFile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace zrt;
using ::testing::HasSubstr;

namespace {

struct CommandResult {
  int exitCode = -1;
  std::string output; // stdout and stderr
};

CommandResult runCommand(const std::string &command) {
  CommandResult result;
  FILE *pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe)
    return result;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, pipe)) > 0)
    result.output.append(chunk, n);
  int status = pclose(pipe);
  result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return result;
}

/// Runs `command` with an Open MPI session directory of its own: concurrent
/// MPI jobs sharing one TMPDIR race to create the session directory there
/// ("mkdir ... ompi.HOST.UID: File exists"), whichever test runs beside.
CommandResult runMpiCommand(const std::string &command) {
  char pattern[] = "/tmp/zrt-ompi-XXXXXX";
  if (!mkdtemp(pattern))
    return runCommand(command);
  CommandResult r =
      runCommand(std::string("OMPI_MCA_orte_tmpdir_base=") + pattern + " " + command);
  std::filesystem::remove_all(pattern);
  return r;
}

/// zero-run with `args`, directly (np == 0) or under mpirun -np `np`.
CommandResult zeroRun(int np, const std::string &args) {
  std::string command;
  if (np > 0) {
    command = std::string(ZRT_MPIEXEC) + " " + ZRT_MPIEXEC_NUMPROC_FLAG + " " +
              std::to_string(np) + " " + ZRT_MPIEXEC_PREFLAGS + " ";
    if (np > 2)
      command += std::string(ZRT_MPIEXEC_OVERSUBSCRIBE) + " ";
  }
  return runMpiCommand(command + ZRT_ZERO_RUN + " " + args);
}

/// Runs `script` (a POSIX shell script, given `args`) on `np` ranks under
/// mpirun, within `limitSeconds`; `seconds` gets the wall time taken.
CommandResult runScriptOnRanks(int np, const std::string &script,
                               const std::string &args, int limitSeconds,
                               double *seconds) {
  std::string command = "timeout -s KILL " + std::to_string(limitSeconds) +
                        " " + ZRT_MPIEXEC + " " + ZRT_MPIEXEC_NUMPROC_FLAG +
                        " " + std::to_string(np) + " " + ZRT_MPIEXEC_PREFLAGS +
                        " sh " + script + " " + args;
  auto start = std::chrono::steady_clock::now();
  CommandResult r = runMpiCommand(command);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           start)
                 .count();
  return r;
}

/// The shell's world rank under mpirun (Open MPI, PMIx or MPICH).
const char *kRankVariable =
    "rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-0}}}\n";

std::vector<float> readTensor(const std::string &path, const std::string &name) {
  Expected<SafetensorsFile> file = SafetensorsFile::open(path);
  EXPECT_TRUE(file.isOk()) << (file.isOk() ? "" : file.status().message());
  if (!file.isOk())
    return {};
  const SafetensorsEntry *e = file->find(name);
  EXPECT_NE(e, nullptr) << name;
  if (!e)
    return {};
  std::vector<float> out(size_t(e->numel()));
  EXPECT_TRUE(file->read(*e, 0, e->bytes, out.data()).isOk());
  return out;
}

/// The MatMuls writeProgramBusyOnRank1() puts before the program.
constexpr int kBusyChain = 1000;

/// The 2-rank linear model with a chain of kBusyChain MatMuls on rank 1 only
/// before its part of the final AllReduce, written to `path`: 1000 products
/// of 2.1 GFLOP each keep rank 1 busy for seconds, even at ~250 GFLOP/s (200
/// once finished inside 2 s on an AVX-512 core).
Status writeProgramBusyOnRank1(const std::string &path) {
  test::LinearModel m = test::makeLinearModel(2);
  Program &p = m.program;
  constexpr int64_t n = 1024;
  uint32_t arena = uint32_t(p.arenas.size());
  p.arenas.push_back({"scratch", 3 * n * n * 4, 3 * n * n * 4, 3 * n * n * 4});
  uint32_t a = uint32_t(p.buffers.size());
  for (int i = 0; i < 3; ++i)
    p.buffers.push_back({"scratch." + std::to_string(i),
                         DType::F32,
                         {n, n},
                         arena,
                         uint64_t(i) * n * n * 4});
  for (int i = 0; i < kBusyChain; ++i) {
    Instruction mm =
        test::makeInstruction("MatMul", 0, {a, a + 1}, {a + 2}, "busy.rank1");
    mm.ranks = {1};
    p.instructions.insert(p.instructions.begin(), mm);
  }
  return test::writeFile(path, test::serializeProgram(p));
}

class ZeroRun : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    // Open MPI refuses to start as root (as in containers) unless told.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  void SetUp() override {
    char pattern[] = "/tmp/zrt-zero-run-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    if (!HasFailure()) // keep the files of a failed test for a look
      std::filesystem::remove_all(dir);
  }
  /// Writes the example for `world` ranks with zrt-testgen into dir/wN.
  std::string generate(int world) {
    std::string sub = dir + "/w" + std::to_string(world);
    runCommand("mkdir -p " + sub);
    CommandResult r = runCommand(std::string(ZRT_TESTGEN) + " " + sub +
                                 " --world " + std::to_string(world));
    EXPECT_EQ(r.exitCode, 0) << r.output;
    return sub;
  }
  std::string args(const std::string &sub, const std::string &extra = "") {
    return sub + "/model.zrt --weights " + sub + "/weights.safetensors --input x=" +
           sub + "/x.npy " + extra;
  }
  std::string dir;
};

void expectOutputsMatch(const std::string &sub) {
  for (const char *name : {"y", "y_sum"}) {
    std::vector<float> got = readTensor(sub + "/out.safetensors", name);
    std::vector<float> want = readTensor(sub + "/expected.safetensors", name);
    EXPECT_EQ(got, want) << name;
    EXPECT_EQ(got.size(), 20u);
  }
}

nlohmann::json readJson(const std::string &path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

TEST_F(ZeroRun, RunsWithoutALauncher) {
  std::string sub = generate(1);
  CommandResult r = zeroRun(0, args(sub, "--output " + sub + "/out.safetensors"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectOutputsMatch(sub);
}

TEST_F(ZeroRun, RunsTheShardedModelOnTwoRanksWithReports) {
  std::string sub = generate(2);
  CommandResult r = zeroRun(
      2, args(sub, "--output " + sub + "/out.safetensors --report --report-json " +
                       sub + "/report.json --trace " + sub + "/trace.json --threads 1"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectOutputsMatch(sub);
  EXPECT_THAT(r.output, HasSubstr("zero-run report: " + sub + "/model.zrt, 2 rank(s)"));
  EXPECT_THAT(r.output, HasSubstr("[rank 1] bytes sent: AllGather 60 B (1 calls)"));

  nlohmann::json report = readJson(sub + "/report.json");
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["world_size"], 2);
  EXPECT_EQ(report["backend"], "cpu");
  EXPECT_EQ(report["communicator"], "mpi");
  EXPECT_EQ(report["threads_per_rank"], 1);
  EXPECT_GT(report["wall_time_s"].get<double>(), 0.0);
  ASSERT_EQ(report["ranks"].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const nlohmann::json &rank = report["ranks"][r];
    EXPECT_EQ(rank["rank"], r);
    // w: 30 elements, 15 per rank, all real; b: 5 elements, replicated.
    EXPECT_EQ(rank["param_bytes_resident"], (15 + 5) * 4);
    EXPECT_EQ(rank["weights_bytes_read"], (15 + 5) * 4);
    EXPECT_EQ(rank["bytes_sent"]["AllGather"], 15 * 4);
    EXPECT_EQ(rank["bytes_sent"]["AllReduce"], 2 * 1 * 80 / 2);
    EXPECT_EQ(rank["bytes_sent"]["ReduceScatter"], 0);
    EXPECT_EQ(rank["collective_calls"]["AllReduce"], 1);
    EXPECT_EQ(rank["bytes_sent_total"], 60 + 80);
    EXPECT_EQ(rank["bytes_sent_by_group"],
              nlohmann::json({{"world", 60 + 80}}));
    EXPECT_GT(rank["peak_rss_bytes"].get<uint64_t>(), 0u);
    ASSERT_EQ(rank["arenas"].size(), 2u);
    for (const nlohmann::json &a : rank["arenas"]) {
      EXPECT_GT(a["peak_live_bytes"].get<uint64_t>(), 0u);
      EXPECT_LE(a["peak_live_bytes"].get<uint64_t>(), a["planned_bytes"].get<uint64_t>());
      EXPECT_LE(a["high_water_bytes"].get<uint64_t>(), a["planned_bytes"].get<uint64_t>());
    }
    EXPECT_EQ(rank["arenas"][0]["name"], "params");
    // Both params buffers stay live: the 60-byte shard and b (20 bytes).
    EXPECT_EQ(rank["arenas"][0]["peak_live_bytes"], 60 + 20);
  }
  EXPECT_EQ(report["param_bytes_resident_total"], 2 * 80);

  nlohmann::json trace = readJson(sub + "/trace.json");
  ASSERT_FALSE(trace.is_discarded());
  int complete = 0, threadNames = 0;
  std::set<int> pids;
  for (const nlohmann::json &e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      pids.insert(e["pid"].get<int>());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      if (e["name"] == "MatMul") {
        EXPECT_EQ(e["tid"], 0);
        EXPECT_EQ(e["args"]["loc"], "linear/MatMul");
      }
    }
    if (e["ph"] == "M" && e["name"] == "thread_name")
      ++threadNames;
  }
  EXPECT_EQ(complete, 2 * 8);
  EXPECT_EQ(threadNames, 2 * 2);
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
}

TEST_F(ZeroRun, RunsTheShardedModelOnFourRanks) {
  std::string sub = generate(4);
  CommandResult r = zeroRun(4, args(sub, "--output " + sub +
                                             "/out.safetensors --report-json " +
                                             sub + "/report.json"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectOutputsMatch(sub);
  nlohmann::json report = readJson(sub + "/report.json");
  ASSERT_EQ(report["ranks"].size(), 4u);
  // 30 elements padded to 32: 8 per rank; rank 3 holds 6 real ones and 2 zeros.
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(report["ranks"][r]["param_bytes_resident"], (8 + 5) * 4);
    EXPECT_EQ(report["ranks"][r]["weights_bytes_read"], ((r == 3 ? 6 : 8) + 5) * 4);
    EXPECT_EQ(report["ranks"][r]["bytes_sent"]["AllGather"], 3 * 8 * 4);
  }
  EXPECT_EQ(report["weights_bytes_read_total"], (30 + 4 * 5) * 4);
}

TEST_F(ZeroRun, RejectsTheWrongNumberOfRanksOnEveryRank) {
  std::string sub = generate(2);
  CommandResult alone = zeroRun(0, args(sub));
  EXPECT_EQ(alone.exitCode, 1);
  EXPECT_THAT(alone.output,
              HasSubstr("zero-run: error: " + sub + "/model.zrt: the program was "
                        "compiled for 2 rank(s) but zero-run runs on 1; start it "
                        "with mpirun -np 2"));
  CommandResult four = zeroRun(4, args(sub));
  EXPECT_NE(four.exitCode, 0);
  for (int r = 0; r < 4; ++r)
    EXPECT_THAT(four.output, HasSubstr("[rank " + std::to_string(r) +
                                       "] zero-run: error: " + sub +
                                       "/model.zrt: the program was compiled for 2"));
}

TEST_F(ZeroRun, RejectsMissingAndMisshapenInputs) {
  std::string sub = generate(2);
  std::string base = sub + "/model.zrt --weights " + sub + "/weights.safetensors";
  CommandResult missing = zeroRun(2, base);
  EXPECT_NE(missing.exitCode, 0);
  for (int r = 0; r < 2; ++r)
    EXPECT_THAT(missing.output,
                HasSubstr("[rank " + std::to_string(r) +
                          "] zero-run: error: input \"x\" (f32[4x6]) is not given; "
                          "pass --input x=FILE.npy"));

  std::vector<float> seven(28, 1.0f);
  ASSERT_TRUE(writeNpy(sub + "/x7.npy", DType::F32, {4, 7}, seven.data()).isOk());
  CommandResult shape = zeroRun(2, base + " --input x=" + sub + "/x7.npy");
  EXPECT_NE(shape.exitCode, 0);
  EXPECT_THAT(shape.output, HasSubstr(sub + "/x7.npy: input \"x\" is f32[4x7], the "
                                      "program expects f32[4x6]"));

  std::vector<double> f64(24, 1.0);
  ASSERT_TRUE(writeNpy(sub + "/x64.npy", DType::F64, {4, 6}, f64.data()).isOk());
  CommandResult dtype = zeroRun(2, base + " --input x=" + sub + "/x64.npy");
  EXPECT_NE(dtype.exitCode, 0);
  EXPECT_THAT(dtype.output, HasSubstr("input \"x\" is f64[4x6], the program "
                                      "expects f32[4x6]"));

  CommandResult unknown = zeroRun(2, base + " --input z=" + sub + "/x.npy");
  EXPECT_NE(unknown.exitCode, 0);
  EXPECT_THAT(unknown.output, HasSubstr("the program has no input \"z\" (its inputs: x)"));

  // Inputs from a safetensors file by name.
  test::LinearModel m = test::makeLinearModel(2);
  ASSERT_TRUE(writeSafetensors(sub + "/inputs.safetensors",
                               {{"x", DType::F32, {4, 6}, m.x.data()}})
                  .isOk());
  CommandResult st = zeroRun(2, base + " --input " + sub +
                                    "/inputs.safetensors --output " + sub +
                                    "/out.safetensors");
  EXPECT_EQ(st.exitCode, 0) << st.output;
  expectOutputsMatch(sub);
}

TEST_F(ZeroRun, RejectsMissingAndMismatchedWeights) {
  std::string sub = generate(2);
  test::LinearModel m = test::makeLinearModel(2);
  ASSERT_TRUE(writeSafetensors(sub + "/no-b.safetensors",
                               {{"w", DType::F32, {6, 5}, m.w.data()}})
                  .isOk());
  std::string rest = " --input x=" + sub + "/x.npy";
  CommandResult missing =
      zeroRun(2, sub + "/model.zrt --weights " + sub + "/no-b.safetensors" + rest);
  EXPECT_NE(missing.exitCode, 0);
  EXPECT_THAT(missing.output,
              HasSubstr(sub + "/no-b.safetensors: weight \"b\" is missing from the "
                              "weights file (1 tensors); expected f32[5]"));

  ASSERT_TRUE(writeSafetensors(sub + "/b6.safetensors",
                               {{"w", DType::F32, {6, 5}, m.w.data()},
                                {"b", DType::F32, {6}, m.w.data()}})
                  .isOk());
  CommandResult shape =
      zeroRun(2, sub + "/model.zrt --weights " + sub + "/b6.safetensors" + rest);
  EXPECT_NE(shape.exitCode, 0);
  EXPECT_THAT(shape.output, HasSubstr("weight \"b\" has shape [6], the program "
                                      "expects [5]"));

  CommandResult none = zeroRun(2, sub + "/model.zrt" + rest);
  EXPECT_NE(none.exitCode, 0);
  EXPECT_THAT(none.output, HasSubstr("the program has 2 weight tensor(s); pass "
                                     "--weights FILE.safetensors"));
}

TEST_F(ZeroRun, RejectsDamagedPrograms) {
  std::string sub = generate(2);
  std::ifstream in(sub + "/model.zrt", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(sub + "/cut.zrt", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CommandResult cut = zeroRun(2, "" + sub + "/cut.zrt --input x=" + sub + "/x.npy");
  EXPECT_NE(cut.exitCode, 0);
  EXPECT_THAT(cut.output, HasSubstr("[rank 1] zero-run: error: " + sub +
                                    "/cut.zrt: corrupted or truncated program file"));

  test::LinearModel m = test::makeLinearModel(2);
  m.program.version = 7;
  ASSERT_TRUE(test::writeFile(sub + "/v7.zrt", test::serializeProgram(m.program)).isOk());
  CommandResult version = zeroRun(0, sub + "/v7.zrt");
  EXPECT_EQ(version.exitCode, 1);
  EXPECT_THAT(version.output, HasSubstr(sub + "/v7.zrt: program format version 7, "
                                        "this zero-run reads version 2; recompile "
                                        "with the matching zero-opt"));
}

TEST_F(ZeroRun, AbortsAllRanksOnAKernelError) {
  // MatMul of x [4x6] with a [5x6] view of the gathered weight fails at run
  // time on every rank; the job must end, not hang, and name the instruction.
  std::string sub = generate(2);
  test::LinearModel m = test::makeLinearModel(2);
  m.program.buffers[3].shape = {5, 6};
  ASSERT_TRUE(test::writeFile(sub + "/bad.zrt", test::serializeProgram(m.program)).isOk());
  CommandResult r = zeroRun(2, sub + "/bad.zrt --weights " + sub +
                                   "/weights.safetensors --input x=" + sub + "/x.npy");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.output, HasSubstr("/bad.zrt: instruction 3 (MatMul at "
                                  "\"linear/MatMul\") on stream 0 \"compute\" of rank"));

  // Only rank 1 fails; rank 0 is left inside the AllReduce and must be ended
  // by rank 1's abort.
  m = test::makeLinearModel(2);
  Instruction bad = test::makeInstruction("MatMul", 0, {4, 4}, {5}, "only.rank1");
  bad.ranks = {1};
  m.program.instructions.insert(m.program.instructions.begin() + 3, bad);
  ASSERT_TRUE(test::writeFile(sub + "/bad1.zrt", test::serializeProgram(m.program)).isOk());
  r = zeroRun(2, sub + "/bad1.zrt --weights " + sub + "/weights.safetensors --input x=" +
                     sub + "/x.npy");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.output, HasSubstr("[rank 1] zero-run: error: " + sub +
                                  "/bad1.zrt: instruction 3 (MatMul at "
                                  "\"only.rank1\") on stream 0 \"compute\" of rank 1: "));
}

/// Writes `other` next to the generated model and runs both ranks, rank 1 on
/// `other`.zrt, with the generated weights and input plus `extra` options.
CommandResult runRank1OnOtherProgram(const std::string &sub, const Program &other,
                                     const std::string &extra, double *seconds) {
  EXPECT_TRUE(test::writeFile(sub + "/other.zrt", test::serializeProgram(other)).isOk());
  std::string script = sub + "/per-rank-program.sh";
  std::ofstream(script) << kRankVariable
                        << "program=" << sub << "/model.zrt\n"
                        << "[ \"$rank\" = 1 ] && program=" << sub << "/other.zrt\n"
                        << "exec " << ZRT_ZERO_RUN << " \"$program\" \"$@\"\n";
  return runScriptOnRanks(2, script,
                          "--weights " + sub + "/weights.safetensors --input x=" + sub +
                              "/x.npy --timeout 0" + extra,
                          60, seconds);
}

TEST_F(ZeroRun, RejectsRanksRunningDifferentPrograms) {
  // Rank 1 runs a program with one more collective than rank 0's, for the
  // same world size: without the start-up check, rank 0 would finish while
  // rank 1 waited forever in its extra AllReduce.
  std::string sub = generate(2);
  test::LinearModel m = test::makeLinearModel(2);
  m.program.instructions.push_back(
      test::makeInstruction("AllReduce", 1, {6}, {7}, "sum.again"));
  double seconds = 0;
  CommandResult r = runRank1OnOtherProgram(sub, m.program, "", &seconds);
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_LT(seconds, 20.0);
  EXPECT_THAT(r.output, HasSubstr("[rank 1] zero-run: error: rank 1 loaded a "
                                  "different program than rank 0 (" +
                                  sub + "/other.zrt: hash "));
  EXPECT_THAT(r.output, HasSubstr("every rank must run the same .zrt and weights"));
  EXPECT_THAT(r.output, HasSubstr("[rank 0] zero-run: error: stopped because "
                                  "rank(s) 1 failed"));
}

// Tests --check-collectives: the same two programs, compared collective by
// collective before anything runs: the message names the first collective
// that differs, on which rank, and what each rank would run.
TEST_F(ZeroRun, CheckCollectivesNamesTheFirstDifference) {
  std::string sub = generate(2);
  test::LinearModel m = test::makeLinearModel(2);
  size_t before = 0;
  for (const Instruction &in : m.program.instructions)
    before += isCollective(in.kind) ? 1 : 0;
  m.program.instructions.push_back(
      test::makeInstruction("AllReduce", 1, {6}, {7}, "sum.again"));
  const uint64_t bytes = m.program.buffers[6].bytes();
  double seconds = 0;
  CommandResult r = runRank1OnOtherProgram(sub, m.program, " --check-collectives", &seconds);
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("[rank 0] zero-run: error: --check-collectives: collective #" +
                        std::to_string(before + 1) + " of " + sub +
                        "/model.zrt differs between ranks: rank 0 runs none (its "
                        "program ends), rank 1 runs AllReduce of " +
                        std::to_string(bytes) + " bytes in group -1 (instruction " +
                        std::to_string(m.program.instructions.size() - 1) +
                        ", sum.again)"))
      << r.output;
  EXPECT_THAT(r.output, HasSubstr("[rank 1] zero-run: error: stopped because rank(s) 0 failed"));
}

TEST_F(ZeroRun, RejectsRanksReadingDifferentWeightsLayouts) {
  // The same tensors in another order: every tensor is found and matches,
  // but at other offsets, so the ranks would not read the same file.
  std::string sub = generate(2);
  test::LinearModel m = test::makeLinearModel(2);
  ASSERT_TRUE(writeSafetensors(sub + "/reordered.safetensors",
                               {{"w", DType::F32, {6, 5}, m.w.data()},
                                {"b", DType::F32, {5}, m.b.data()}})
                  .isOk());
  std::string script = sub + "/per-rank-weights.sh";
  std::ofstream(script) << kRankVariable
                        << "weights=" << sub << "/weights.safetensors\n"
                        << "[ \"$rank\" = 1 ] && weights=" << sub
                        << "/reordered.safetensors\n"
                        << "exec " << ZRT_ZERO_RUN << " " << sub
                        << "/model.zrt --weights \"$weights\" \"$@\"\n";
  double seconds = 0;
  CommandResult r =
      runScriptOnRanks(2, script, "--input x=" + sub + "/x.npy", 60, &seconds);
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_LT(seconds, 20.0);
  EXPECT_THAT(r.output, HasSubstr("[rank 1] zero-run: error: rank 1 reads a "
                                  "different weights layout than rank 0 (" +
                                  sub + "/reordered.safetensors: hash "));
}

TEST_F(ZeroRun, EndsTheJobWhenARankIsStopped) {
  // Rank 1 starts a long chain of MatMuls (on rank 1 only) before its part
  // of the final AllReduce and is stopped with SIGSTOP 2 s after it starts;
  // rank 0 waits in the AllReduce until its watchdog ends the job after 3 s.
  // With --overlap on, rank 1's gather runs beside its MatMuls (taking turns,
  // it would wait for them, and rank 0 would be stuck in the gather instead).
  std::string sub = generate(2);
  ASSERT_TRUE(writeProgramBusyOnRank1(sub + "/slow1.zrt").isOk());
  std::string script = sub + "/stop-rank1.sh";
  std::ofstream(script) << kRankVariable
                        << "if [ \"$rank\" = 1 ]; then (sleep 2; kill -STOP $$) "
                           ">/dev/null 2>&1 & fi\n"
                        << "exec " << ZRT_ZERO_RUN << " \"$@\"\n";
  double seconds = 0;
  CommandResult r = runScriptOnRanks(
      2, script, sub + "/slow1.zrt --weights " + sub +
                     "/weights.safetensors --input x=" + sub +
                     "/x.npy --threads 1 --timeout 3 --overlap on",
      40, &seconds);
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_LT(seconds, 20.0) << r.output;
  EXPECT_THAT(
      r.output,
      HasSubstr("[rank 0] zero-run: error: rank 0: collective AllReduce "
                "(instruction " +
                std::to_string(kBusyChain + 7) +
                ", \"sum.y\") did not complete within 3 s; a rank may "
                "have stopped or be running a different program"));
}

TEST_F(ZeroRun, NamesTheNodesWhenMpirunEndsTheJob) {
  // Rank 1 is killed (as on a lost node) while rank 0 waits for it in the
  // final AllReduce: mpirun ends rank 0 with SIGTERM, and rank 0 says so,
  // naming its node and the job's placement (both ranks on this host).
  std::string sub = generate(2);
  ASSERT_TRUE(writeProgramBusyOnRank1(sub + "/slow1.zrt").isOk());
  std::string script = sub + "/kill-rank1.sh";
  std::ofstream(script)
      << kRankVariable
      << "if [ \"$rank\" = 1 ]; then (sleep 2; kill -KILL $$) "
         ">/dev/null 2>&1 & fi\n"
      << "exec " << ZRT_ZERO_RUN << " \"$@\"\n";
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  double seconds = 0;
  CommandResult r =
      runScriptOnRanks(2, script,
                       sub + "/slow1.zrt --weights " + sub +
                           "/weights.safetensors --input x=" + sub +
                           "/x.npy --threads 1 --timeout 30 --overlap on",
                       40, &seconds);
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_LT(seconds, 20.0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("[rank 0] zero-run: ended by SIGTERM (mpirun ends the "
                        "job) on node " +
                        std::string(host) + "; the job's ranks: " + host +
                        ": ranks 0-1\n"));
}

TEST_F(ZeroRun, ExplainsADirectoryGivenAsTheProgram) {
  CommandResult r = zeroRun(0, dir);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("zero-run: error: " + dir +
                                  ": is a directory, not a .zrt program"));
  std::string sub = generate(2);
  r = zeroRun(2, dir + " --input x=" + sub + "/x.npy");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.output, HasSubstr("[rank 1] zero-run: error: " + dir +
                                  ": is a directory, not a .zrt program"));
}

TEST_F(ZeroRun, AsksForTheNameOfANpyInput) {
  std::string sub = generate(1);
  CommandResult r = zeroRun(0, sub + "/model.zrt --weights " + sub +
                                   "/weights.safetensors --input " + sub + "/x.npy");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.output, HasSubstr("--input " + sub + "/x.npy: .npy inputs need "
                                  "NAME=FILE.npy (the program input's name); "
                                  "pass --input NAME=" + sub + "/x.npy"));
  // Also when the file is a .npy under another name.
  std::filesystem::copy_file(sub + "/x.npy", sub + "/x.bin");
  r = zeroRun(0, sub + "/model.zrt --weights " + sub +
                     "/weights.safetensors --input " + sub + "/x.bin");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("--input " + sub + "/x.bin: .npy inputs need "
                                  "NAME=FILE.npy"));
}

// Tests that outputs are written whole or not at all and never over what the
// run reads: /dev/null is written through and stays a character device, a
// symlink keeps its link, a write that fails (/dev/full) leaves nothing
// under the final name and no temporary, and an output naming an input is
// refused before anything runs.
TEST_F(ZeroRun, WritesOutputsWholeAndNeverOverInputs) {
  std::string sub = generate(2);
  CommandResult r = zeroRun(2, args(sub, "--output /dev/null --trace /dev/null"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null was replaced";

  runCommand("echo old > " + sub + "/real.safetensors && ln -s real.safetensors " +
             sub + "/link.safetensors");
  r = zeroRun(1, args(generate(1), "--output " + sub + "/link.safetensors"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  ASSERT_EQ(lstat((sub + "/link.safetensors").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the symlink was replaced";
  EXPECT_EQ(readTensor(sub + "/real.safetensors", "y").size(), 20u);

  if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
    r = zeroRun(2, args(sub, "--output /dev/full"));
    EXPECT_NE(r.exitCode, 0);
    EXPECT_THAT(r.output, HasSubstr("/dev/full: write failed"));
  }

  // The weights, the program and an input are never overwritten.
  const std::string weights = sub + "/weights.safetensors";
  const std::string before = runCommand("md5sum < " + weights).output;
  for (const std::string &target :
       {weights, sub + "/model.zrt", sub + "/x.npy"}) {
    r = zeroRun(2, args(sub, "--output " + target));
    EXPECT_EQ(r.exitCode, 2) << target;
    EXPECT_THAT(r.output, HasSubstr("writing it would destroy an input"));
  }
  r = zeroRun(1, args(generate(1), "--output " + sub + "/o.json --trace " + sub +
                                       "/o.json"));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.output, HasSubstr("give each output its own file"));
  EXPECT_EQ(runCommand("md5sum < " + weights).output, before);
  // No temporaries left behind by any of the runs above.
  EXPECT_EQ(runCommand("ls -A " + sub + " | grep -c '\\.tmp$'").output, "0\n");
}

// Tests a rank killed while writing the outputs (SIGKILL after the bytes are
// written, before they are renamed into place, by the runtime's fault
// injection): every rank exits non-zero, and nothing exists under the final
// name.
TEST_F(ZeroRun, LeavesNoTruncatedOutputWhenKilledWhileWriting) {
  std::string sub = generate(2);
  setenv("ZRT_FAULT_KILL_BEFORE_RENAME", "out.safetensors", 1);
  // Local ranks inherit mpirun's environment.
  CommandResult r =
      zeroRun(2, args(sub, "--output " + sub + "/out.safetensors --timeout 20"));
  unsetenv("ZRT_FAULT_KILL_BEFORE_RENAME");
  EXPECT_NE(r.exitCode, 0) << r.output;
  struct stat st {};
  EXPECT_NE(stat((sub + "/out.safetensors").c_str(), &st), 0)
      << "an output exists under the final name";
  // The same run without the fault writes it.
  r = zeroRun(2, args(sub, "--output " + sub + "/out.safetensors"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(readTensor(sub + "/out.safetensors", "y").size(), 20u);
}

// Tests steady-state runs: --warmup untimed and --repeat timed runs of the
// loaded program on 2 ranks (inputs bound again before each: the memory plan
// may reuse their bytes), outputs still equal to the expected ones, and the
// report listing each timed run with its min and median.
TEST_F(ZeroRun, RepeatsTheRunForSteadyStateTimings) {
  std::string sub = generate(2);
  CommandResult r = zeroRun(
      2, args(sub, "--output " + sub + "/out.safetensors --repeat 3 --warmup 2 "
                   "--report --report-json " + sub + "/report.json"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectOutputsMatch(sub);
  EXPECT_THAT(r.output, HasSubstr("3 timed runs: min "));
  nlohmann::json report = readJson(sub + "/report.json");
  for (const nlohmann::json &rank : report["ranks"]) {
    ASSERT_EQ(rank["iteration_wall_s"].size(), 3u) << rank.dump();
    std::vector<double> t = rank["iteration_wall_s"].get<std::vector<double>>();
    std::sort(t.begin(), t.end());
    EXPECT_EQ(rank["wall_time_min_s"].get<double>(), t[0]);
    EXPECT_EQ(rank["wall_time_median_s"].get<double>(), t[1]);
    // Per stream: busy (kernels, collectives) + waiting + idle = the run.
    ASSERT_EQ(rank["streams"].size(), 2u) << rank.dump();
    for (const nlohmann::json &stream : rank["streams"]) {
      const double busy = stream["busy_s"], waiting = stream["waiting_s"],
                   idle = stream["idle_s"];
      EXPECT_GT(busy, 0.0) << stream.dump();
      EXPECT_GE(waiting, 0.0);
      EXPECT_NEAR(busy + waiting + idle,
                  std::max(rank["wall_time_s"].get<double>(), busy + waiting),
                  1e-9);
    }
  }
  r = zeroRun(0, args(sub, "--repeat 0"));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.output, HasSubstr("--repeat 0: expected a count >= 1"));
  r = zeroRun(0, args(sub, "--warmup -1"));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.output, HasSubstr("--warmup -1: expected a count >= 0"));
}

TEST_F(ZeroRun, ReportsBytesSentPerProcessGroup) {
  // On 4 ranks: an AllGather of 4 floats within node pairs (group_size 2)
  // and an AllReduce of 4 floats over the world.
  Program p;
  p.version = kFormatVersion;
  p.worldSize = 4;
  p.arenas = {{"activations", 3 * 64, 0, 0}};
  p.buffers = {{"x", DType::F32, {4}, 0, 0},
               {"gathered", DType::F32, {8}, 0, 64},
               {"sum", DType::F32, {4}, 0, 128}};
  std::vector<float> ones(4, 1.0f);
  p.constants = {
      {0, std::vector<uint8_t>(reinterpret_cast<uint8_t *>(ones.data()),
                               reinterpret_cast<uint8_t *>(ones.data()) + 16)}};
  p.streams = {{"comm", StreamKind::Comm}};
  p.groups = {{"nodes", {0, 1, 2, 3}, 2}};
  Instruction gather =
      test::makeInstruction("AllGather", 0, {0}, {1}, "gather");
  gather.group = 0;
  p.instructions = {gather,
                    test::makeInstruction("AllReduce", 0, {0}, {2}, "sum")};
  ASSERT_TRUE(
      test::writeFile(dir + "/groups.zrt", test::serializeProgram(p)).isOk());
  CommandResult r = zeroRun(4, dir + "/groups.zrt --report --report-json " +
                                   dir + "/report.json --threads 1");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  nlohmann::json report = readJson(dir + "/report.json");
  ASSERT_EQ(report["ranks"].size(), 4u);
  // (g-1) * 16 bytes within a pair; a ring all-reduce 2 * (4-1)/4 * 16.
  for (const nlohmann::json &rank : report["ranks"]) {
    EXPECT_EQ(rank["bytes_sent_by_group"],
              nlohmann::json({{"nodes", 16}, {"world", 24}}));
    EXPECT_EQ(rank["bytes_sent"]["AllGather"], 16);
    EXPECT_EQ(rank["bytes_sent"]["AllReduce"], 24);
    EXPECT_EQ(rank["bytes_sent_total"], 16 + 24);
  }
  EXPECT_THAT(r.output,
              HasSubstr("[rank 3] bytes sent by group: nodes 16 B world 24 B"));
}

// Tests zero-run --simulate end to end: a 2-rank program simulated in one
// process without mpirun (a run of it there would refuse: it was compiled for
// 2 ranks), a report whose "simulation" object has the contract's keys and
// whose peaks equal the sums of a real run's peak_live_bytes (the linear
// model's buffers live the same whatever the interleaving), a trace with one
// process per rank; a bad machine description and an option a simulation
// does not read are refused naming what is wrong.
TEST_F(ZeroRun, SimulatesEveryRankWithoutALauncher) {
  std::string sub = generate(2);
  CommandResult real =
      zeroRun(2, args(sub, "--report-json " + sub + "/real.json --threads 1"));
  ASSERT_EQ(real.exitCode, 0) << real.output;
  const std::string machine = std::string(ZRT_MACHINES_DIR) + "/cpu-2core.json";
  CommandResult sim =
      zeroRun(0, sub + "/model.zrt --simulate " + machine + " --report-json " +
                     sub + "/sim.json --trace " + sub + "/sim-trace.json");
  ASSERT_EQ(sim.exitCode, 0) << sim.output;
  nlohmann::json report = readJson(sub + "/sim.json");
  ASSERT_FALSE(report.is_discarded());
  const nlohmann::json &s = report["simulation"];
  for (const char *key : {"step_s", "compute_s", "exposed_communication_s",
                          "bubble_s", "offload_io_s", "mfu", "ranks"})
    EXPECT_TRUE(s.contains(key)) << key;
  EXPECT_GT(s["step_s"].get<double>(), 0.0);
  EXPECT_NEAR(s["compute_s"].get<double>() +
                  s["exposed_communication_s"].get<double>() +
                  s["bubble_s"].get<double>() + s["offload_io_s"].get<double>(),
              s["step_s"].get<double>(), 1e-12);
  nlohmann::json measured = readJson(sub + "/real.json");
  ASSERT_EQ(s["ranks"].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const nlohmann::json &rank = s["ranks"][r];
    EXPECT_EQ(rank["rank"], r);
    uint64_t sum = 0;
    for (const nlohmann::json &a : measured["ranks"][r]["arenas"]) {
      sum += a["peak_live_bytes"].get<uint64_t>();
      EXPECT_EQ(rank["arenas"][a["name"].get<std::string>()],
                a["peak_live_bytes"]);
    }
    EXPECT_EQ(rank["peak_bytes"].get<uint64_t>(), sum);
  }
  nlohmann::json trace = readJson(sub + "/sim-trace.json");
  std::set<int> processes;
  for (const nlohmann::json &e : trace["traceEvents"])
    if (e["name"] == "process_name")
      processes.insert(e["pid"].get<int>());
  EXPECT_EQ(processes, (std::set<int>{0, 1}));

  {
    std::ofstream bad(sub + "/bad.json");
    std::ifstream good(machine);
    std::string text((std::istreambuf_iterator<char>(good)),
                     std::istreambuf_iterator<char>());
    text.replace(text.find("\"devices_per_node\": 2"), 21,
                 "\"devices_per_node\": 0");
    bad << text;
  }
  CommandResult badMachine =
      zeroRun(0, sub + "/model.zrt --simulate " + sub + "/bad.json");
  EXPECT_EQ(badMachine.exitCode, 1);
  EXPECT_THAT(
      badMachine.output,
      HasSubstr(
          sub +
          "/bad.json: key \"devices_per_node\": expected a positive integer"));
  CommandResult extra = zeroRun(0, args(sub, "--simulate " + machine));
  EXPECT_EQ(extra.exitCode, 2);
  EXPECT_THAT(extra.output, HasSubstr("--weights: not used by --simulate"));
}

// Tests zero-run --calibrate end to end, alone and on 2 ranks under mpirun
// (--quick): the description loads as a machine, every figure is positive
// and physical (below 4 GHz x 64 f32 FLOP per cycle per core, 1 TB/s), the
// 2-rank one has timed its intra-node link and says 2 ranks per node, and
// --simulate runs the 2-rank example on it; bad arguments are refused with
// exit status 2 naming the option, and no partial file is left.
TEST_F(ZeroRun, CalibratesThisMachine) {
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  for (int np : {0, 2}) {
    const std::string out = dir + "/machine-np" + std::to_string(np) + ".json";
    CommandResult r =
        zeroRun(np, "--calibrate " + out + " --quick --threads 1");
    ASSERT_EQ(r.exitCode, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("zero-run --calibrate: " + out));
    Expected<MachineModel> m = loadMachineModel(out);
    ASSERT_TRUE(m.isOk()) << m.status().message();
    const DeviceModel &d = m->device;
    EXPECT_GT(d.peakF32, 1e8);
    EXPECT_LT(d.peakF32, cores * 4e9 * 64);
    EXPECT_GT(d.memoryBandwidth, 1e8);
    EXPECT_LT(d.memoryBandwidth, 1e12);
    EXPECT_GT(d.launchSeconds, 0);
    for (int c = 0; c < kNumLinkClasses; ++c) {
      EXPECT_GT(m->links[c].bandwidth, 0) << c;
      EXPECT_LT(m->links[c].bandwidth, 1e12) << c;
      EXPECT_LT(m->links[c].latency, 1) << c;
    }
    EXPECT_EQ(m->nodes, 1);
    EXPECT_EQ(m->devicesPerNode, np == 2 ? 2 : 1);
    nlohmann::json doc = readJson(out);
    EXPECT_THAT(doc["sources"][0].get<std::string>(),
                HasSubstr("measured by zero-run --calibrate on "));
    // 2 ranks: all-reduces and all-gathers at 3 sizes, a bf16 reduce-scatter
    // (the 16-bit sums, collectives.half_reduce_s, not negative).
    EXPECT_EQ(doc["measurements"]["collectives"].size(), np == 2 ? 7u : 0u);
    EXPECT_GE(m->halfReduceSeconds, 0);
    EXPECT_EQ(doc["collectives"].contains("half_reduce_s"),
              np == 2 && m->halfReduceSeconds > 0);
    EXPECT_THAT(doc["note"].get<std::string>(),
                np == 2 ? HasSubstr("inter_node: not measured (one node")
                        : HasSubstr("intra_node: not measured"));
  }
  std::string sub = generate(2);
  CommandResult sim =
      zeroRun(0, sub + "/model.zrt --simulate " + dir +
                     "/machine-np2.json --report-json " + sub + "/sim.json");
  ASSERT_EQ(sim.exitCode, 0) << sim.output;
  EXPECT_GT(readJson(sub + "/sim.json")["simulation"]["step_s"].get<double>(),
            0.0);

  CommandResult noOut = zeroRun(0, "--calibrate");
  EXPECT_EQ(noOut.exitCode, 2);
  EXPECT_THAT(noOut.output, HasSubstr("--calibrate: expected a value"));
  CommandResult extra =
      zeroRun(0, "--calibrate " + dir + "/x.json --weights w.safetensors");
  EXPECT_EQ(extra.exitCode, 2);
  EXPECT_THAT(extra.output, HasSubstr("--weights: not used by --calibrate"));
  CommandResult threads =
      zeroRun(0, "--calibrate " + dir + "/x.json --threads 0");
  EXPECT_EQ(threads.exitCode, 2);
  EXPECT_THAT(threads.output, HasSubstr("--threads 0: expected a positive"));
  CommandResult help = zeroRun(0, "--help");
  EXPECT_THAT(help.output, HasSubstr("zero-run --calibrate OUT.json"));
  CommandResult program =
      zeroRun(0, "model.zrt --calibrate " + dir + "/x.json");
  EXPECT_EQ(program.exitCode, 2);
  EXPECT_THAT(program.output, HasSubstr("model.zrt: not used by --calibrate"));
  CommandResult noDir = zeroRun(0, "--calibrate /nonexistent/x.json --quick");
  EXPECT_EQ(noDir.exitCode, 1);
  EXPECT_THAT(noDir.output, HasSubstr("/nonexistent"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.json"));
}

TEST_F(ZeroRun, ReportsUsageErrors) {
  CommandResult none = zeroRun(0, "");
  EXPECT_EQ(none.exitCode, 2);
  EXPECT_THAT(none.output, HasSubstr("zero-run: error: no program given (zero-run "
                                     "--help for usage)"));
  CommandResult bad = zeroRun(0, "model.zrt --frobnicate");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_THAT(bad.output, HasSubstr("unknown option --frobnicate"));
  CommandResult threads = zeroRun(0, "model.zrt --threads 0");
  EXPECT_EQ(threads.exitCode, 2);
  CommandResult timeout = zeroRun(0, "model.zrt --timeout -1");
  EXPECT_EQ(timeout.exitCode, 2);
  EXPECT_THAT(timeout.output, HasSubstr("--timeout -1: expected seconds (0 "
                                        "waits forever)"));
  CommandResult help = zeroRun(0, "--help");
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_THAT(help.output, HasSubstr("usage: [mpirun -np N] zero-run MODEL.zrt"));
}

//===----------------------------------------------------------------------===//
// Training programs
//===----------------------------------------------------------------------===//

/// Inputs of a training run: x, y f32[steps, B, D], smooth and deterministic.
struct TrainingArrays {
  int64_t steps = 0, B = 0, D = 0;
  std::vector<float> x, y;
  float &at(std::vector<float> &v, int64_t s, int64_t i, int64_t j) {
    return v[size_t((s * B + i) * D + j)];
  }
};

TrainingArrays makeTrainingArrays(int64_t steps, int64_t B, int64_t D) {
  TrainingArrays a;
  a.steps = steps;
  a.B = B;
  a.D = D;
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < D; ++j) {
        a.x.push_back(float(std::sin(1.0 + 0.7 * s + 1.3 * i + 0.37 * j)));
        a.y.push_back(float(0.5 * std::cos(0.4 + 0.9 * s + 0.6 * i + 0.21 * j)));
      }
  return a;
}

/// Writes steps [first, first + count) of `a` to a safetensors data file.
void writeTrainingArrays(const std::string &path, const TrainingArrays &a,
                         int64_t first, int64_t count) {
  const size_t offset = size_t(first * a.B * a.D);
  ASSERT_TRUE(writeSafetensors(path, {{"x", DType::F32, {count, a.B, a.D},
                                       a.x.data() + offset},
                                      {"y", DType::F32, {count, a.B, a.D},
                                       a.y.data() + offset}})
                  .isOk());
}

std::vector<float> initialWeights(int64_t D) {
  std::vector<float> w;
  for (int64_t j = 0; j < D; ++j)
    w.push_back(float(0.8 * std::sin(0.5 + 1.7 * j)));
  return w;
}

/// The run computed independently, in double: DeepSpeed's WarmupDecayLR (as
/// the model's LrSchedule attributes say), the squared-error loss and its
/// gradient over all B rows, clip_grad_norm_'s scale, and AdamW.
struct TrainingTrajectory {
  std::vector<double> loss, gradNorm, lr;
  std::vector<double> w, m, v;
};

TrainingTrajectory expectedTraining(const test::TrainingModel &model,
                                    const TrainingArrays &a, int64_t steps) {
  TrainingTrajectory r;
  const int64_t B = a.B, D = a.D;
  std::vector<float> w0 = initialWeights(D);
  r.w.assign(w0.begin(), w0.end());
  r.m.assign(size_t(D), 0.0);
  r.v.assign(size_t(D), 0.0);
  const double minLr = 0.01, maxLr = 0.1, beta1 = 0.9, beta2 = 0.999,
               eps = 1e-8, wd = 0.01;
  const int64_t warmup = 3, total = 8;
  for (int64_t t = 1; t <= steps; ++t) {
    const int64_t s = t - 1, k = t - 2;
    double loss = 0;
    std::vector<double> grad(size_t(D), 0.0);
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < D; ++j) {
        const double x = a.x[size_t((s * B + i) * D + j)];
        const double d = r.w[size_t(j)] * x - a.y[size_t((s * B + i) * D + j)];
        loss += d * d / double(B);
        grad[size_t(j)] += 2.0 / double(B) * d * x;
      }
    double norm = 0;
    for (double g : grad)
      norm += g * g;
    norm = std::sqrt(norm);
    const double scale = std::min(model.maxNorm / (norm + 1e-6), 1.0);
    double gamma = k < 0        ? 0.0
                   : k < warmup ? double(k) / double(warmup)
                                : std::max(0.0, double(total - k) /
                                                    double(total - warmup));
    const double lr = double(float(minLr + (maxLr - minLr) * gamma));
    for (int64_t j = 0; j < D; ++j) {
      double &w = r.w[size_t(j)], &m = r.m[size_t(j)], &v = r.v[size_t(j)];
      const double g = grad[size_t(j)] * scale;
      w *= 1 - lr * wd;
      m = beta1 * m + (1 - beta1) * g;
      v = beta2 * v + (1 - beta2) * g * g;
      w -= lr / (1 - std::pow(beta1, double(t))) * m /
           (std::sqrt(v) / std::sqrt(1 - std::pow(beta2, double(t))) + eps);
    }
    r.loss.push_back(loss);
    r.gradNorm.push_back(norm);
    r.lr.push_back(lr);
  }
  return r;
}

void expectNearRel(double got, double want, double rel, const std::string &what) {
  EXPECT_NEAR(got, want, rel * std::max(1.0, std::fabs(want))) << what;
}

std::vector<uint8_t> fileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

bool exists(const std::string &path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

class ZeroRunTraining : public ZeroRun {
protected:
  /// Writes train.zrt (for `world` ranks, b rows per rank, D weights),
  /// weights.safetensors (w only: the optimizer state and the step counter
  /// start at zero) and data.safetensors (`steps` steps of B = b * world
  /// rows) into dir/<name>.
  std::string setUpTraining(const std::string &name, int world, int64_t b,
                            int64_t D, int64_t steps) {
    std::string sub = dir + "/" + name;
    std::filesystem::create_directories(sub);
    model = test::makeTrainingModel(world, b, D);
    EXPECT_TRUE(test::writeFile(sub + "/train.zrt",
                                test::serializeProgram(model.program))
                    .isOk());
    std::vector<float> w = initialWeights(D);
    EXPECT_TRUE(writeSafetensors(sub + "/weights.safetensors",
                                 {{"w", DType::F32, {D}, w.data()}})
                    .isOk());
    arrays = makeTrainingArrays(steps, b * world, D);
    writeTrainingArrays(sub + "/data.safetensors", arrays, 0, steps);
    return sub;
  }
  std::string trainArgs(const std::string &sub, const std::string &extra) {
    return sub + "/train.zrt --weights " + sub + "/weights.safetensors " + extra;
  }
  test::TrainingModel model;
  TrainingArrays arrays;
};

/// Checks the --log-json entries and --save/--save-optimizer files of a run
/// of `steps` steps against the independent computation.
void expectTrainedAsComputed(const std::string &sub,
                             const test::TrainingModel &model,
                             const TrainingArrays &arrays, int64_t steps) {
  TrainingTrajectory want = expectedTraining(model, arrays, steps);
  nlohmann::json log = readJson(sub + "/log.json");
  ASSERT_TRUE(log.is_array()) << log.dump();
  ASSERT_EQ(log.size(), size_t(steps));
  for (int64_t t = 1; t <= steps; ++t) {
    const nlohmann::json &e = log[size_t(t - 1)];
    const std::string at = "step " + std::to_string(t);
    EXPECT_EQ(e["step"], t);
    expectNearRel(e["loss"].get<double>(), want.loss[size_t(t - 1)], 1e-4, at);
    expectNearRel(e["grad_norm"].get<double>(), want.gradNorm[size_t(t - 1)],
                  1e-4, at);
    EXPECT_EQ(e["lr"].get<double>(), want.lr[size_t(t - 1)]) << at;
    EXPECT_GT(e["time_s"].get<double>(), 0.0);
    EXPECT_GT(e["samples_per_s"].get<double>(), 0.0);
  }
  std::vector<float> w = readTensor(sub + "/w.safetensors", "w");
  ASSERT_EQ(w.size(), want.w.size());
  for (size_t j = 0; j < w.size(); ++j)
    expectNearRel(w[j], want.w[j], 1e-4, "w[" + std::to_string(j) + "]");
  Expected<SafetensorsFile> opt = SafetensorsFile::open(sub + "/opt.safetensors");
  ASSERT_TRUE(opt.isOk()) << opt.status().message();
  std::vector<float> m = readTensor(sub + "/opt.safetensors", "w.exp_avg");
  std::vector<float> v = readTensor(sub + "/opt.safetensors", "w.exp_avg_sq");
  ASSERT_EQ(m.size(), want.m.size());
  for (size_t j = 0; j < m.size(); ++j) {
    expectNearRel(m[j], want.m[j], 1e-4, "exp_avg");
    EXPECT_NEAR(v[j], want.v[j], 1e-4 * want.v[j] + 1e-12) << "exp_avg_sq";
  }
  const SafetensorsEntry *step = opt->find("step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->dtype, DType::I64);
  EXPECT_TRUE(step->shape.empty());
  int64_t counter = 0;
  ASSERT_TRUE(opt->read(*step, 0, 8, &counter).isOk());
  EXPECT_EQ(counter, steps);
  EXPECT_EQ(opt->find("w"), nullptr); // parameters go to --save only
}

// Tests a tiny training program (one weight vector, AdamW in place, a step
// counter, a warmup-decay schedule, gradient clipping) over 6 steps of
// --data: the logged losses, gradient norms and learning rates and the saved
// weights and optimizer state equal an independent computation, lines are
// logged every --log-every steps and at the last.
TEST_F(ZeroRunTraining, TrainsFromDataAndSavesWhatItLearned) {
  std::string sub = setUpTraining("w1", 1, 2, 4, 6);
  CommandResult r = zeroRun(
      0, trainArgs(sub, "--data " + sub + "/data.safetensors --log-every 4 "
                        "--log-json " + sub + "/log.json --save " + sub +
                        "/w.safetensors --save-optimizer " + sub +
                        "/opt.safetensors --output " + sub + "/out.safetensors"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectTrainedAsComputed(sub, model, arrays, 6);
  EXPECT_THAT(r.output, HasSubstr("step 4/6  loss "));
  EXPECT_THAT(r.output, HasSubstr("step 6/6  loss "));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("step 5/6")));
  EXPECT_THAT(r.output, ::testing::ContainsRegex(
                            "step 6/6  loss [0-9.]+  grad_norm [0-9.]+  lr "
                            "[0-9.]+e-0[0-9]  time [0-9.]+ ms  samples/s [0-9.]+"));
  // --output: the last step's outputs.
  nlohmann::json log = readJson(sub + "/log.json");
  EXPECT_EQ(double(readTensor(sub + "/out.safetensors", "loss").at(0)),
            log[5]["loss"].get<double>());
}

// Tests --data as a directory (files in name order, steps concatenated) and
// --steps: the same bits as one file, and fewer steps when asked.
TEST_F(ZeroRunTraining, ReadsADirectoryInNameOrderAndStopsAtSteps) {
  std::string sub = setUpTraining("dir", 1, 2, 4, 6);
  std::filesystem::create_directories(sub + "/parts");
  writeTrainingArrays(sub + "/parts/b.safetensors", arrays, 2, 4);
  writeTrainingArrays(sub + "/parts/a.safetensors", arrays, 0, 2);
  std::ofstream(sub + "/parts/notes.txt") << "not data\n";
  CommandResult one = zeroRun(
      0, trainArgs(sub, "--data " + sub + "/data.safetensors --save " + sub +
                        "/w-one.safetensors --log-json " + sub + "/one.json"));
  ASSERT_EQ(one.exitCode, 0) << one.output;
  CommandResult parts = zeroRun(
      0, trainArgs(sub, "--data " + sub + "/parts --save " + sub +
                        "/w-parts.safetensors --log-json " + sub + "/parts.json"));
  ASSERT_EQ(parts.exitCode, 0) << parts.output;
  EXPECT_EQ(fileBytes(sub + "/w-one.safetensors"),
            fileBytes(sub + "/w-parts.safetensors"));
  nlohmann::json a = readJson(sub + "/one.json"), b = readJson(sub + "/parts.json");
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(a[i]["loss"], b[i]["loss"]) << i;

  CommandResult three = zeroRun(
      0, trainArgs(sub, "--data " + sub + "/parts --steps 3 --log-json " + sub +
                        "/three.json"));
  ASSERT_EQ(three.exitCode, 0) << three.output;
  EXPECT_THAT(three.output, HasSubstr("step 3/3  loss"));
  nlohmann::json c = readJson(sub + "/three.json");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2]["loss"], a[2]["loss"]);
}

// Tests data parallelism on two ranks: each reads its rows of every step,
// the gradient is all-reduced by the program, and the logged loss is the
// mean over the ranks; the result is the same computation over all B rows.
TEST_F(ZeroRunTraining, TrainsOnTwoRanksWithTheMeanLoss) {
  std::string sub = setUpTraining("w2", 2, 2, 4, 5);
  CommandResult r = zeroRun(
      2, trainArgs(sub, "--data " + sub + "/data.safetensors --log-json " +
                        sub + "/log.json --save " + sub +
                        "/w.safetensors --save-optimizer " + sub +
                        "/opt.safetensors --threads 1"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectTrainedAsComputed(sub, model, arrays, 5);
  // Logged once (rank 0), not once per rank.
  size_t lines = 0;
  for (size_t at = r.output.find("step 5/5"); at != std::string::npos;
       at = r.output.find("step 5/5", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << r.output;
}

// Tests that the thread count changes nothing: a model large enough for the
// kernels to split their work gives the same log-json losses and the same
// saved bytes at --threads 1 and 3.
TEST_F(ZeroRunTraining, GivesTheSameBitsAtAnyThreadCount) {
  std::string sub = setUpTraining("threads", 1, 2, 100003, 3);
  std::vector<nlohmann::json> logs;
  std::vector<std::vector<uint8_t>> saved, state;
  for (int threads : {1, 3}) {
    std::string t = std::to_string(threads);
    CommandResult r = zeroRun(
        0, trainArgs(sub, "--data " + sub + "/data.safetensors --threads " + t +
                          " --log-json " + sub + "/log" + t + ".json --save " +
                          sub + "/w" + t + ".safetensors --save-optimizer " +
                          sub + "/opt" + t + ".safetensors"));
    ASSERT_EQ(r.exitCode, 0) << r.output;
    logs.push_back(readJson(sub + "/log" + t + ".json"));
    saved.push_back(fileBytes(sub + "/w" + t + ".safetensors"));
    state.push_back(fileBytes(sub + "/opt" + t + ".safetensors"));
  }
  ASSERT_EQ(logs[0].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(logs[0][i]["loss"], logs[1][i]["loss"]) << i;
    EXPECT_EQ(logs[0][i]["grad_norm"], logs[1][i]["grad_norm"]) << i;
  }
  EXPECT_GT(saved[0].size(), 400000u);
  EXPECT_TRUE(saved[0] == saved[1]) << "--save differs between 1 and 3 threads";
  EXPECT_TRUE(state[0] == state[1])
      << "--save-optimizer differs between 1 and 3 threads";
}

// Tests that bad data stops the run before its first step, naming the file
// and the input, and leaves no --save file.
TEST_F(ZeroRunTraining, RejectsBadDataBeforeTheFirstStep) {
  std::string sub = setUpTraining("bad", 1, 2, 4, 4);
  const std::vector<float> &x = arrays.x;
  const std::string save = " --save " + sub + "/w.safetensors";
  auto check = [&](const std::string &data, const std::string &extra,
                   const std::string &message) {
    CommandResult r = zeroRun(0, trainArgs(sub, "--data " + data + save + extra));
    EXPECT_NE(r.exitCode, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(message));
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("step 1/")));
    EXPECT_FALSE(exists(sub + "/w.safetensors")) << message;
  };
  ASSERT_TRUE(writeSafetensors(sub + "/no-y.safetensors",
                               {{"x", DType::F32, {4, 2, 4}, x.data()}})
                  .isOk());
  check(sub + "/no-y.safetensors", "",
        sub + "/no-y.safetensors: the data has no array \"y\" for the program "
              "input of that name; expected F32 [steps, 2, 4]");
  std::vector<double> x64(x.begin(), x.end());
  ASSERT_TRUE(writeSafetensors(sub + "/f64.safetensors",
                               {{"x", DType::F64, {4, 2, 4}, x64.data()},
                                {"y", DType::F32, {4, 2, 4}, x.data()}})
                  .isOk());
  check(sub + "/f64.safetensors", "",
        sub + "/f64.safetensors: data array \"x\" has dtype F64, the program "
              "input expects F32");
  ASSERT_TRUE(writeSafetensors(sub + "/shape.safetensors",
                               {{"x", DType::F32, {8, 1, 4}, x.data()},
                                {"y", DType::F32, {4, 2, 4}, x.data()}})
                  .isOk());
  check(sub + "/shape.safetensors", "",
        sub + "/shape.safetensors: data array \"x\" has shape [8, 1, 4], "
              "expected [steps, 2, 4] (the program input is f32[2x4] per "
              "rank, 1 rank(s))");
  ASSERT_TRUE(writeSafetensors(sub + "/steps.safetensors",
                               {{"x", DType::F32, {4, 2, 4}, x.data()},
                                {"y", DType::F32, {3, 2, 4}, x.data()}})
                  .isOk());
  check(sub + "/steps.safetensors", "",
        sub + "/steps.safetensors: data arrays have different step counts: "
              "\"x\" has 4, \"y\" has 3");
  check(sub + "/data.safetensors", " --steps 10",
        "--steps 10 asks for more steps than --data " + sub +
            "/data.safetensors holds (4)");
  std::filesystem::create_directories(sub + "/empty");
  check(sub + "/empty", "", "the directory holds no *.safetensors files");
  check(sub + "/missing", "", "--data " + sub + "/missing: no such file or directory");
}

// Tests a loss that is not finite: the run stops at that step, names it, and
// writes none of --save, --save-optimizer, --log-json and --output.
TEST_F(ZeroRunTraining, StopsAtANanLossAndSavesNothing) {
  std::string sub = setUpTraining("nan", 1, 2, 4, 5);
  arrays.at(arrays.x, 2, 1, 3) = std::nanf("");
  writeTrainingArrays(sub + "/data.safetensors", arrays, 0, 5);
  const std::vector<std::string> outputs = {"w", "opt", "out"};
  CommandResult r = zeroRun(
      0, trainArgs(sub, "--data " + sub + "/data.safetensors --save " + sub +
                        "/w --save-optimizer " + sub + "/opt --log-json " +
                        sub + "/log --output " + sub + "/out"));
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("zero-run: step 3: loss is nan (output "
                                  "\"loss\" of " + sub + "/train.zrt)"));
  EXPECT_THAT(r.output, HasSubstr("step 2/5  loss"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("step 3/5")));
  for (const std::string &o : outputs)
    EXPECT_FALSE(exists(sub + "/" + o)) << o;
  // --log-json keeps the steps before the failure, and only those.
  std::ifstream logFile(sub + "/log");
  std::stringstream logText;
  logText << logFile.rdbuf();
  EXPECT_THAT(logText.str(), HasSubstr("\"step\": 2"));
  EXPECT_THAT(logText.str(), ::testing::Not(HasSubstr("\"step\": 3")));

  // On two ranks, a NaN on one rank's rows makes the mean NaN on both.
  sub = setUpTraining("nan2", 2, 2, 4, 4);
  arrays.at(arrays.y, 1, 3, 0) = std::nanf(""); // step 2, rank 1's rows
  writeTrainingArrays(sub + "/data.safetensors", arrays, 0, 4);
  r = zeroRun(2, trainArgs(sub, "--data " + sub + "/data.safetensors --save " +
                                    sub + "/w"));
  EXPECT_NE(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("step 2: loss is nan"));
  EXPECT_THAT(r.output, HasSubstr("mean over 2 ranks"));
  EXPECT_FALSE(exists(sub + "/w"));
}

// Tests one step from --input, and the options a training program refuses
// or a forward program does not take.
TEST_F(ZeroRunTraining, RunsOneStepFromInputAndChecksTheOptions) {
  std::string sub = setUpTraining("input", 1, 2, 4, 1);
  ASSERT_TRUE(writeNpy(sub + "/x.npy", DType::F32, {2, 4}, arrays.x.data()).isOk());
  ASSERT_TRUE(writeNpy(sub + "/y.npy", DType::F32, {2, 4}, arrays.y.data()).isOk());
  const std::string inputs = "--input x=" + sub + "/x.npy --input y=" + sub + "/y.npy";
  CommandResult r = zeroRun(0, trainArgs(sub, inputs + " --log-json " + sub +
                                                  "/log.json"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("step 1/1  loss"));
  TrainingTrajectory want = expectedTraining(model, arrays, 1);
  nlohmann::json log = readJson(sub + "/log.json");
  ASSERT_EQ(log.size(), 1u);
  expectNearRel(log[0]["loss"].get<double>(), want.loss[0], 1e-5, "loss");

  r = zeroRun(0, trainArgs(sub, inputs + " --steps 2"));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--steps 2 with --input: --input gives the "
                                  "inputs of one step"));
  r = zeroRun(0, trainArgs(sub, inputs + " --repeat 3"));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--repeat: " + sub + "/train.zrt is a training "
                                  "program, where every run is an optimizer step"));
  r = zeroRun(0, trainArgs(sub, inputs + " --data " + sub + "/data.safetensors"));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("--data, --tokens and --input each give the program's inputs"));
  r = zeroRun(0, trainArgs(sub, inputs + " --tokens " + sub + "/data.safetensors"));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("--data, --tokens and --input each give the program's inputs"));
  r = zeroRun(0, trainArgs(sub, "--tokens " + sub + "/data.safetensors --steps 2 "
                                "--tokens-dtype u8"));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tokens-dtype u8: expected u16 or u32"));
  r = zeroRun(0, trainArgs(sub, "--tokens " + sub + "/data.safetensors --steps 2"));
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("program input \"x\" is f32 of rank 2; --tokens fills "
                                  "integer inputs of shape [batch, sequence]"));
  r = zeroRun(0, trainArgs(sub, ""));
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("is a training program with inputs (x, y); pass "
                                  "--data PATH"));
  // The weights file needs only the parameters: no optimizer state.
  r = zeroRun(0, sub + "/train.zrt " + inputs);
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the program has 1 weight tensor(s); pass --weights"));

  std::string lin = generate(1);
  r = zeroRun(0, args(lin, "--data " + sub + "/data.safetensors --save " + sub +
                               "/w.safetensors"));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--data, --save: only for training programs, and " +
                                  lin + "/model.zrt has no training table"));
}

// Tests that --save refuses sharded parameters up front.
} // namespace
