//===- CalibrationTest.cpp - zero-run --calibrate's measurement -----------===//
//
// The link fit against timings made by the simulator's own collective
// formulas (it must give back the latency and bandwidth they were made
// with), the machine description's writer against its reader, and a quick
// calibration of this machine with the CPU backend's kernels in one process:
// every figure positive and within what a CPU core can physically do.
//
//===----------------------------------------------------------------------===//

#include "run/Calibration.h"
#include "run/MachineModel.h"

#include "zrt/Communicator.h"
#include "zrt/CpuBackend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

using namespace zrt;
using ::testing::HasSubstr;

namespace {

/// Timings of all-reduces and all-gathers over `n` ranks of one node of
/// `machine`, at sizes from 1 KB to 32 MB, as collectiveSeconds gives them.
std::vector<CollectiveTiming> formulaTimings(const MachineModel &machine,
                                             int n) {
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(r);
  std::vector<CollectiveTiming> out;
  for (OpKind kind : {OpKind::AllReduce, OpKind::AllGather})
    for (double bytes : {1024.0, 16384.0, 262144.0, 4194304.0, 33554432.0})
      out.push_back(
          {kind, n, bytes, collectiveSeconds(machine, kind, ranks, n, bytes)});
  return out;
}

// Tests that the fit gives back the intra-node link the timings were made
// with, for ring and recursive doubling, over 2 and 4 ranks.
TEST(Calibration, FitRecoversTheFormulasLink) {
  for (CollectiveAlgorithm algorithm :
       {CollectiveAlgorithm::Ring, CollectiveAlgorithm::RecursiveDoubling})
    for (int n : {2, 4}) {
      MachineModel machine;
      machine.devicesPerNode = n;
      machine.links[int(LinkClass::IntraNode)] = {5e9, 3e-6, algorithm};
      Expected<LinkModel> fit = fitLink(formulaTimings(machine, n), algorithm);
      ASSERT_TRUE(fit.isOk()) << fit.status().message();
      EXPECT_NEAR(fit->latency, 3e-6, 3e-6 * 1e-9) << n;
      EXPECT_NEAR(fit->bandwidth, 5e9, 5e9 * 1e-9) << n;
      EXPECT_EQ(fit->algorithm, algorithm);
    }
}

// Tests that timings no latency explains (faster per byte when small) give
// no negative latency, and that one size alone cannot be fitted.
TEST(Calibration, FitKeepsFiguresPhysical) {
  std::vector<CollectiveTiming> superlinear = {
      {OpKind::AllReduce, 2, 1e3, 1e-8}, {OpKind::AllReduce, 2, 1e6, 1e-3}};
  Expected<LinkModel> fit = fitLink(superlinear, CollectiveAlgorithm::Ring);
  ASSERT_TRUE(fit.isOk()) << fit.status().message();
  EXPECT_EQ(fit->latency, 0);
  EXPECT_GT(fit->bandwidth, 0);
  Expected<LinkModel> one = fitLink(
      {{OpKind::AllReduce, 2, 1e3, 1e-6}, {OpKind::AllGather, 2, 1e3, 1e-6}},
      CollectiveAlgorithm::Ring);
  ASSERT_FALSE(one.isOk());
  EXPECT_THAT(one.status().message(), HasSubstr("fewer than two sizes"));
}

// Tests that the writer's description reads back as the same machine, and
// that a "measurements" section is accepted (and not read).
TEST(Calibration, DescriptionReadsBack) {
  Expected<MachineModel> shipped =
      loadMachineModel(ZRT_MACHINES_DIR "/cpu-2core.json");
  ASSERT_TRUE(shipped.isOk()) << shipped.status().message();
  nlohmann::json doc = machineModelJson(*shipped);
  doc["measurements"] = {{"launch", {{"seconds", 1e-6}}}};
  Expected<MachineModel> back = parseMachineModel(doc.dump(), "back.json");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back->name, shipped->name);
  EXPECT_EQ(back->devicesPerNode, 2);
  EXPECT_EQ(back->device.peakBF16, shipped->device.peakBF16);
  EXPECT_EQ(back->device.memoryBytes, shipped->device.memoryBytes);
  ASSERT_EQ(back->device.matmulEfficiency.size(), 4u);
  EXPECT_EQ(back->device.matmulEfficiency[2].efficiency, 0.5);
  for (int c = 0; c < kNumLinkClasses; ++c) {
    EXPECT_EQ(back->links[c].bandwidth, shipped->links[c].bandwidth) << c;
    EXPECT_EQ(back->links[c].latency, shipped->links[c].latency) << c;
  }
}

// Tests a quick calibration in one process with the CPU kernels: every
// figure positive and below what the cores could do (4 GHz, 64 f32 FLOP per
// cycle; 1 TB/s of memory), the efficiency curve in (0, 1] at the ladder's
// dimensions, no link timed (one rank) and said so, the NVMe's temporary
// folder removed, and the description loading as a machine.
TEST(Calibration, QuickCalibrationOfThisMachine) {
  std::string dir = std::filesystem::temp_directory_path().string() +
                    "/zrt-calibration-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::unique_ptr<Backend> backend = createCpuBackend(1);
  std::unique_ptr<Communicator> comm = createLocalCommunicator();
  CalibrationOptions options;
  options.quick = true;
  options.scratchDir = dir;
  options.isa = cpuKernelIsa();
  Expected<Calibration> cal = calibrateMachine(*backend, *comm, options);
  ASSERT_TRUE(cal.isOk()) << cal.status().message();
  const DeviceModel &d = cal->machine.device;
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  for (double peak : {d.peakF32, d.peakBF16, d.peakF16}) {
    EXPECT_GT(peak, 1e8);
    EXPECT_LT(peak, cores * 4e9 * 64 * 2); // bf16: twice f32's products
  }
  EXPECT_LT(d.peakF32, cores * 4e9 * 64);
  EXPECT_GT(d.memoryBandwidth, 1e8);
  EXPECT_LT(d.memoryBandwidth, 1e12);
  EXPECT_GT(d.launchSeconds, 0);
  EXPECT_LT(d.launchSeconds, 1e-2);
  ASSERT_EQ(d.matmulEfficiency.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.matmulEfficiency[i].minDim, double(16 << (2 * i)));
    EXPECT_GT(d.matmulEfficiency[i].efficiency, 0);
    EXPECT_LE(d.matmulEfficiency[i].efficiency, 1);
  }
  EXPECT_EQ(cal->machine.nodes, 1);
  EXPECT_EQ(cal->machine.devicesPerNode, 1);
  EXPECT_THAT(cal->note, HasSubstr("intra_node: not measured"));
  EXPECT_EQ(cal->measurements["products"].size(), 9u);
  ASSERT_EQ(d.matmulEfficiencyBF16.size(), 3u);
  ASSERT_EQ(d.matmulEfficiencyF16.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    for (const EfficiencyPoint &p :
         {d.matmulEfficiencyBF16[i], d.matmulEfficiencyF16[i]}) {
      EXPECT_EQ(p.minDim, double(16 << (2 * i)));
      EXPECT_GT(p.efficiency, 0);
      EXPECT_LE(p.efficiency, 1);
    }
  EXPECT_GE(d.halfWideningSeconds, 0); // 0 where bf16 costs nothing more
  // The bandwidth by size: points faster than memory, closed by the memory
  // figure (3 vectors of 2M f32 with --quick).
  if (!d.bandwidthBySize.empty()) {
    EXPECT_EQ(d.bandwidthBySize.back().bytes, 12.0 * (2 << 20));
    EXPECT_EQ(d.bandwidthBySize.back().bandwidth, d.memoryBandwidth);
    for (size_t i = 0; i + 1 < d.bandwidthBySize.size(); ++i) {
      EXPECT_GT(d.bandwidthBySize[i].bandwidth, d.memoryBandwidth);
      EXPECT_LT(d.bandwidthBySize[i].bytes, d.bandwidthBySize[i + 1].bytes);
    }
  }
  EXPECT_LT(d.halfWideningSeconds, 1e-6);
  // The kernel kinds: each rate between 1 MB/s and the 1 TB/s bound, the
  // optimizer's update and the transpose timed; FusedElementwise's costs
  // per element and op between 1 ps and 1 us.
  for (const char *op : {"AdamW", "Transpose", "Softmax",
                         "SoftmaxCrossEntropyLoss", "Sigmoid", "Cast"}) {
    ASSERT_TRUE(d.kernelRates.count(op)) << op;
    EXPECT_GT(d.kernelRates.at(op), 1e6) << op;
    EXPECT_LT(d.kernelRates.at(op), 1e12) << op;
  }
  for (double s : {d.fusedArithmeticSeconds, d.fusedTranscendentalSeconds}) {
    EXPECT_GT(s, 1e-12);
    EXPECT_LT(s, 1e-6);
  }
  for (int c = 0; c < kNumLinkClasses; ++c)
    EXPECT_GT(cal->machine.links[c].bandwidth, 0) << c;
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
  nlohmann::json doc = describeCalibration(*cal, "today");
  EXPECT_EQ(doc["sources"][0], "measured by zero-run --calibrate on today");
  Expected<MachineModel> back = parseMachineModel(doc.dump(), "cal.json");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back->device.peakF32, d.peakF32);
  EXPECT_EQ(back->device.kernelRates, d.kernelRates);
  EXPECT_TRUE(back->device.hostIsDevice); // a CPU's memory is the host's
  EXPECT_EQ(back->halfReduceSeconds, 0);  // one rank: no collective timed
}

} // namespace
