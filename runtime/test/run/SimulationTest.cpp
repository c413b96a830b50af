//===- SimulationTest.cpp - zero-run --simulate's timeline and memory -----===//
//
// Hand-made programs whose timelines are worked out by hand here, on a
// machine description with round figures (1 GFLOP/s, 1 GB/s memory, no
// launch cost): two streams meeting at events, a collective waiting for the
// slowest rank and costed by the link model, a GPipe pipeline's bubble
// against (S-1)/(M+S-1), the peak of live bytes against the plan, the
// products' FLOPs from their shapes, and the machine description's errors.
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"

#include "run/MachineModel.h"
#include "run/Simulation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

using namespace zrt;
using namespace zrt::test;
using ::testing::HasSubstr;

namespace {

/// 1e9 FLOP/s, 1e9 B/s of memory, no launch cost; inside a node 1e9 B/s and
/// no latency; across nodes 1e8 B/s and 1 ms a message.
const char *const kRoundMachine = R"({
  "name": "round figures",
  "nodes": 1, "devices_per_node": 4,
  "device": {"peak_flops": {"f32": 1e9, "bf16": 2e9, "f16": 2e9},
             "memory_bandwidth": 1e9, "memory_bytes": 1e6, "kernel_launch_s": 0},
  "links": {"intra_node": {"bandwidth": 1e9, "latency": 0},
            "inter_node": {"bandwidth": 1e8, "latency": 1e-3},
            "host_device": {"bandwidth": 1e9, "latency": 0},
            "nvme": {"bandwidth": 1e8, "latency": 0}}
})";

MachineModel roundMachine() {
  Expected<MachineModel> m = parseMachineModel(kRoundMachine, "round.json");
  EXPECT_TRUE(m.isOk()) << m.status().message();
  return *m;
}

/// A program under construction: buffers in one arena each of `arenas`.
struct Builder {
  Program p;
  explicit Builder(int world = 1, int streams = 2) {
    p.path = "hand.zrt";
    p.version = kFormatVersion;
    p.worldSize = world;
    p.arenas = {{"activations", 1 << 30, 0, 0}};
    for (int s = 0; s < streams; ++s)
      p.streams.push_back({"s" + std::to_string(s),
                           s == 0 ? StreamKind::Compute : StreamKind::Comm});
  }
  /// A new f32 buffer of `numel` elements at `offset` of arena `arena`.
  uint32_t buffer(int64_t numel, uint64_t offset = 0, uint32_t arena = 0) {
    p.buffers.push_back({"b" + std::to_string(p.buffers.size()),
                         DType::F32,
                         {numel},
                         arena,
                         offset});
    return uint32_t(p.buffers.size() - 1);
  }
  /// Relu(in) -> out on `stream`: (in + out) bytes of memory traffic.
  void relu(uint32_t stream, uint32_t in, uint32_t out,
            std::vector<int> ranks = {}) {
    Instruction i = makeInstruction("Relu", stream, {in}, {out});
    i.ranks = std::move(ranks);
    p.instructions.push_back(i);
  }
  void event(OpKind kind, uint32_t stream, int e) {
    p.instructions.push_back(makeEventOp(kind, stream, e));
    p.numEvents = std::max<uint32_t>(p.numEvents, uint32_t(e + 1));
  }
  /// Send or Recv of `buffer` with stage `peer`, on the world ranks `ranks`.
  void pointToPoint(const char *op, uint32_t stream, uint32_t buffer, int peer,
                    int tag, std::vector<int> ranks) {
    Instruction i = std::string(op) == "Send"
                        ? makeInstruction(op, stream, {buffer}, {})
                        : makeInstruction(op, stream, {}, {buffer});
    i.attrs.set("peer", AttrValue{{peer}, {}, ""});
    i.attrs.set("tag", AttrValue{{tag}, {}, ""});
    i.ranks = std::move(ranks);
    p.instructions.push_back(i);
  }
};

Simulation simulate(const Program &p, const MachineModel &m, int nodes = 0) {
  SimulationOptions options;
  options.nodes = nodes;
  Expected<Simulation> sim = simulateProgram(p, m, options);
  EXPECT_TRUE(sim.isOk()) << sim.status().message();
  return sim.isOk() ? *sim : Simulation();
}

/// The trace event of instruction `index` on `rank`.
TraceEvent traced(const Simulation &sim, int rank, size_t index) {
  for (const TraceEvent &e : sim.ranks[size_t(rank)].stats.trace)
    if (e.instruction == index)
      return e;
  ADD_FAILURE() << "instruction " << index << " not traced";
  return {};
}

constexpr double kTol = 1e-12;

// Tests that a Wait holds its stream until the Record on the other stream:
//   s0: A (1 ms); Record e0; B (1 ms); Wait e1; D (1 ms)
//   s1: Wait e0; C (2 ms); Record e1
// C runs [1, 3] beside B [1, 2], so D runs [3, 4]: the step is 4 ms.
TEST(Simulation, TwoStreamsMeetAtEvents) {
  Builder b(1, 2);
  // Relu of n floats moves 8n bytes: 125000 floats take 1 ms at 1 GB/s.
  const uint32_t x = b.buffer(125000), a = b.buffer(125000),
                 bb = b.buffer(125000), c = b.buffer(250000),
                 c2 = b.buffer(250000), d = b.buffer(125000);
  b.relu(0, x, a); // 0: A
  b.event(OpKind::Record, 0, 0);
  b.relu(0, a, bb); // 2: B
  b.event(OpKind::Wait, 1, 0);
  b.relu(1, c, c2); // 4: C, 2 ms
  b.event(OpKind::Record, 1, 1);
  b.event(OpKind::Wait, 0, 1);
  b.relu(0, bb, d); // 7: D
  const Simulation sim = simulate(b.p, roundMachine());
  EXPECT_NEAR(sim.stepSeconds, 4e-3, kTol);
  EXPECT_NEAR(traced(sim, 0, 4).startUs, 1000, 1e-6);
  EXPECT_NEAR(traced(sim, 0, 7).startUs, 3000, 1e-6);
  // The Wait on s0 is traced from when s0 reached it (2 ms) to C's end.
  EXPECT_NEAR(traced(sim, 0, 6).startUs, 2000, 1e-6);
  EXPECT_NEAR(traced(sim, 0, 6).durationUs, 1000, 1e-6);
  // Kernels cover [0, 4] without a gap: all compute, no bubble.
  EXPECT_NEAR(sim.ranks[0].computeSeconds, 4e-3, kTol);
  EXPECT_NEAR(sim.ranks[0].bubbleSeconds, 0, kTol);
}

// Tests that a collective starts when the slowest member reaches it and
// takes the ring's time: rank 0 computes 1 ms, rank 1 3 ms; an AllReduce of
// S = 1e6 bytes over 2 ranks of one node: 2 (n-1)/n S / B = 1 ms; so
// [3, 4] ms on both. Across 2 nodes (1e8 B/s, 1 ms a step): 2 (n-1) x 1 ms +
// 2 (n-1)/n S / 1e8 = 12 ms, [3, 15].
TEST(Simulation, CollectiveWaitsForTheSlowestRank) {
  Builder b(2, 2);
  const uint32_t x = b.buffer(125000), y = b.buffer(125000),
                 z = b.buffer(375000), w = b.buffer(375000),
                 g = b.buffer(250000), gs = b.buffer(250000);
  b.relu(0, x, y, {0}); // 0: 1 ms on rank 0
  b.relu(0, z, w, {1}); // 1: 3 ms on rank 1
  b.event(OpKind::Record, 0, 0);
  b.event(OpKind::Wait, 1, 0);
  b.p.instructions.push_back(makeInstruction("AllReduce", 1, {g}, {gs})); // 4
  const MachineModel m = roundMachine();
  const Simulation one = simulate(b.p, m);
  EXPECT_EQ(one.ranksPerNode, 4);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(traced(one, r, 4).startUs + traced(one, r, 4).durationUs, 4000,
                1e-6);
  }
  EXPECT_NEAR(one.stepSeconds, 4e-3, kTol);
  // Rank 0: 1 ms computing, 1 ms communicating, 2 ms waiting for rank 1.
  EXPECT_NEAR(one.ranks[0].computeSeconds, 1e-3, kTol);
  EXPECT_NEAR(one.ranks[0].exposedCommunicationSeconds, 1e-3, kTol);
  EXPECT_NEAR(one.ranks[0].bubbleSeconds, 2e-3, kTol);
  EXPECT_NEAR(one.ranks[1].bubbleSeconds, 0, kTol);
  const Simulation two = simulate(b.p, m, /*nodes=*/2);
  EXPECT_EQ(two.ranksPerNode, 1);
  EXPECT_NEAR(two.stepSeconds, 3e-3 + 2 * 1e-3 + 1e6 / 1e8, 1e-12);
  EXPECT_DOUBLE_EQ(two.bytesByLink[int(LinkClass::InterNode)], 1e6);
}

// Tests the 16-bit sums of a reduction collective: an AllReduce of 500000
// bf16 elements (1e6 bytes) over 2 ranks of one node takes the link's
// 2 x 1/2 x 1e6 / 1e9 = 1 ms, plus 1/2 x 500000 x 2 ns = 0.5 ms with
// half_reduce_s 2 ns; the same in f32 (2e6 bytes) only its link time, 2 ms.
TEST(Simulation, HalfReductionSums) {
  std::string text = kRoundMachine;
  text.replace(text.rfind('}'), 1,
               ", \"collectives\": {\"half_reduce_s\": 2e-9}}");
  Expected<MachineModel> m = parseMachineModel(text, "sums.json");
  ASSERT_TRUE(m.isOk()) << m.status().message();
  for (DType dtype : {DType::BF16, DType::F32}) {
    Builder b(2, 1);
    b.buffer(500000);
    b.buffer(500000);
    b.p.buffers[0].dtype = b.p.buffers[1].dtype = dtype;
    b.p.instructions.push_back(makeInstruction("AllReduce", 0, {0}, {1}));
    const double link = dtype == DType::BF16 ? 1e-3 : 2e-3;
    const double sums = dtype == DType::BF16 ? 0.5e-3 : 0;
    EXPECT_NEAR(simulate(b.p, *m).stepSeconds, link + sums, kTol)
        << dtypeName(dtype);
  }
  Expected<MachineModel> back =
      parseMachineModel(machineModelJson(*m).dump(), "back.json");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back->halfReduceSeconds, 2e-9);
}

// Tests the bubble of a GPipe schedule with equal stage times: S = 2 stages,
// M = 4 micro-batches, forward and backward 1 ms each, messages of no bytes.
// Stage 0: F0..F3 [0, 4], then B3..B0 [6, 10] as stage 1's gradients come;
// stage 1: F0..F3 [1, 5], B3..B0 [5, 9]. The step is (M + S - 1) x 2 ms =
// 10 ms, each stage computes M x 2 ms, so each idles (S-1)/(M+S-1) of it.
TEST(Simulation, PipelineBubbleOfEqualStages) {
  constexpr int S = 2, M = 4;
  Builder b(S, 1);
  b.p.pipelineDp = 1;
  const uint32_t in = b.buffer(125000), out = b.buffer(125000); // 1 ms each
  const uint32_t msg = b.buffer(0);
  for (int m = 0; m < M; ++m) { // stage 0 forwards
    b.relu(0, in, out, {0});
    b.pointToPoint("Send", 0, msg, 1, m, {0});
  }
  for (int m = 0; m < M; ++m) { // stage 1: forwards, then backwards
    b.pointToPoint("Recv", 0, msg, 0, m, {1});
    b.relu(0, in, out, {1});
  }
  for (int m = M - 1; m >= 0; --m) {
    b.relu(0, in, out, {1});
    b.pointToPoint("Send", 0, msg, 0, 100 + m, {1});
  }
  for (int m = M - 1; m >= 0; --m) { // stage 0 backwards
    b.pointToPoint("Recv", 0, msg, 1, 100 + m, {0});
    b.relu(0, in, out, {0});
  }
  const Simulation sim = simulate(b.p, roundMachine());
  const double stage = 2e-3; // forward + backward of one micro-batch
  EXPECT_NEAR(sim.stepSeconds, (M + S - 1) * stage, kTol);
  for (int r = 0; r < S; ++r) {
    EXPECT_NEAR(sim.ranks[size_t(r)].computeSeconds, M * stage, kTol);
    EXPECT_NEAR(sim.ranks[size_t(r)].bubbleSeconds / sim.stepSeconds,
                double(S - 1) / double(M + S - 1), 1e-9);
  }
  const nlohmann::json report = describeSimulation(b.p, roundMachine(), sim);
  EXPECT_NEAR(report["bubble_s"].get<double>(), (S - 1) * stage, kTol);
}

// Tests the peak of live bytes against the plan: a params arena holding a
// 400-byte global (live all along), and activations x -> h -> y where y
// takes x's bytes (offset 0) once x is dead: x + h live during the first
// Relu, h + y during the second: 2000 bytes; with the global, 2400.
TEST(Simulation, PeakBytesFollowTheMemoryPlan) {
  Builder b(1, 1);
  b.p.arenas[0].size = 2000; // the plan: y takes x's bytes
  b.p.arenas.push_back({"params", 400, 400, 400});
  const uint32_t x = b.buffer(250, 0), h = b.buffer(250, 1000),
                 y = b.buffer(250, 0);
  const uint32_t w = b.buffer(100, 0, 1);
  b.p.inputs = {{"x", x}};
  b.p.outputs = {{"y", y}};
  b.p.globals.push_back({"w", "w", DType::F32, {100}, w});
  b.relu(0, x, h);
  b.relu(0, h, y);
  const Simulation sim = simulate(b.p, roundMachine());
  ASSERT_EQ(sim.ranks[0].stats.peakLiveBytes.size(), 2u);
  EXPECT_EQ(sim.ranks[0].stats.peakLiveBytes[0], 2000u);
  EXPECT_EQ(sim.ranks[0].stats.peakLiveBytes[1], 400u);
  const nlohmann::json report = describeSimulation(b.p, roundMachine(), sim);
  const nlohmann::json &rank = report["ranks"][0];
  EXPECT_EQ(rank["peak_bytes"].get<uint64_t>(), 2400u);
  EXPECT_EQ(rank["arenas"]["activations"].get<uint64_t>(), 2000u);
  EXPECT_EQ(rank["arenas"]["params"].get<uint64_t>(), 400u);
  EXPECT_EQ(rank["device_planned_bytes"].get<uint64_t>(), 2400u);
  EXPECT_TRUE(rank["fits_device_memory"].get<bool>()); // 2400 <= 1e6
  // The params arena in host memory (the optimizer offloaded to "cpu"): not
  // the device's, unless the device's memory is the host's (a CPU).
  b.p.arenas[1].host = true;
  auto planned = [&](const MachineModel &m) {
    return describeSimulation(b.p, m, sim)["ranks"][0]["device_planned_bytes"]
        .get<uint64_t>();
  };
  EXPECT_EQ(planned(roundMachine()), 2000u);
  MachineModel cpu = roundMachine();
  cpu.device.hostIsDevice = true;
  EXPECT_EQ(planned(cpu), 2400u);
  b.p.arenas[0].size = 1000001; // planned beyond the device's 1e6 bytes
  EXPECT_FALSE(describeSimulation(b.p, roundMachine(),
                                  sim)["ranks"][0]["fits_device_memory"]
                   .get<bool>());
}

// Tests that an instruction taking no time starts before it finishes in the
// memory replay: h's last reader is a Send at 1 ms (buffered: no time), so h
// dies there and the second Relu's output does not add to it: x + h, then
// x + z, 2000 bytes, not 3000.
TEST(Simulation, PeakBytesReleaseASentBuffer) {
  Builder b(1, 1);
  const uint32_t x = b.buffer(250, 0), h = b.buffer(250, 1000),
                 z = b.buffer(250, 2000);
  b.p.inputs = {{"x", x}};
  b.relu(0, x, h);
  b.pointToPoint("Send", 0, h, 0, 1, {});
  b.relu(0, x, z);
  const Simulation sim = simulate(b.p, roundMachine());
  EXPECT_EQ(sim.ranks[0].stats.peakLiveBytes[0], 2000u);
}

// Tests the products' FLOPs from their shapes: MatMul [2,3,4] x [4,5] is
// 2 x (2*3*5) x 4 = 240; Gemm with transA of A [6,3] (K = 6) into [3,7]:
// 2 x 21 x 6 = 252, min(M, N, K) = 3. A product's time: 240 FLOPs at 1e9
// FLOP/s = 240 ns against 8 x (24 + 20 + 30) = 592 bytes at 1e9 B/s = 592 ns.
TEST(Simulation, ProductFlopsFromShapes) {
  Program p;
  p.arenas = {{"a", 1 << 20, 0, 0}};
  p.buffers = {
      {"a", DType::F32, {2, 3, 4}, 0, 0}, {"b", DType::F32, {4, 5}, 0, 0},
      {"c", DType::F32, {2, 3, 5}, 0, 0}, {"at", DType::F32, {6, 3}, 0, 0},
      {"bt", DType::F32, {6, 7}, 0, 0},   {"ct", DType::F32, {3, 7}, 0, 0}};
  Instruction mm = makeInstruction("MatMul", 0, {0, 1}, {2});
  double minDim = 0;
  EXPECT_EQ(productFlops(p, mm, minDim), 240u);
  EXPECT_EQ(minDim, 3); // M = 3, N = 5, K = 4
  Instruction gemm = makeInstruction("Gemm", 0, {3, 4}, {5});
  gemm.attrs.set("transA", AttrValue{{1}, {}, ""});
  EXPECT_EQ(productFlops(p, gemm, minDim), 252u);
  EXPECT_EQ(minDim, 3);
  const InstructionCost cost = kernelCost(p, mm, roundMachine());
  EXPECT_NEAR(cost.seconds, 4.0 * (24 + 20 + 30) / 1e9, 1e-15);
  EXPECT_NEAR(cost.peakSeconds, 240 / 1e9, 1e-15);
}

// Tests the kernel kinds' rates: a Relu of 1000 + 1000 f32 bytes streams at
// the memory bandwidth (8000 bytes at 1e9 B/s = 8 us); with "Relu": 2e8 B/s
// in kernel_rates, 40 us; a MatMul keeps its FLOPs' time when that is
// longer. A FusedElementwise of Mul, Sigmoid, Add (opcodes 2, 14, 0) over
// 1000 output elements at 1 ns per arithmetic op and 10 ns per
// transcendental one: 1000 x (1 + 10 + 1) ns = 12 us, over its bytes' 8 us
// (two inputs of the output's size would be 12 us: made a broadcast row
// here, so the ops' time is the longer).
TEST(Simulation, KernelRatesAndFusedOps) {
  std::string text = kRoundMachine;
  text.replace(text.find("\"kernel_launch_s\": 0"), 20,
               "\"kernel_launch_s\": 0, \"kernel_rates\": {\"Relu\": 2e8}, "
               "\"fused_elementwise\": {\"arithmetic_s\": 1e-9, "
               "\"transcendental_s\": 1e-8}");
  Expected<MachineModel> m = parseMachineModel(text, "rates.json");
  ASSERT_TRUE(m.isOk()) << m.status().message();
  Program p;
  p.arenas = {{"a", 1 << 20, 0, 0}};
  p.buffers = {{"x", DType::F32, {1000}, 0, 0},
               {"y", DType::F32, {1000}, 0, 0},
               {"row", DType::F32, {1}, 0, 0}};
  Instruction relu = makeInstruction("Relu", 0, {0}, {1});
  EXPECT_NEAR(kernelCost(p, relu, roundMachine()).seconds, 8e-6, 1e-15);
  EXPECT_NEAR(kernelCost(p, relu, *m).seconds, 4e-5, 1e-15);
  Instruction fused = makeInstruction("FusedElementwise", 0, {0, 2}, {1});
  fused.attrs.set("ops", AttrValue{{2, 0, 1, 14, 2, 0, 0, 3, 0}, {}, ""});
  EXPECT_NEAR(kernelCost(p, fused, roundMachine()).seconds, 8004e-9, 1e-15);
  EXPECT_NEAR(kernelCost(p, fused, *m).seconds, 1.2e-5, 1e-15);
  // Read back as written; a rate that is not a positive number is refused.
  Expected<MachineModel> back =
      parseMachineModel(machineModelJson(*m).dump(), "back.json");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back->device.kernelRates.at("Relu"), 2e8);
  EXPECT_EQ(back->device.fusedTranscendentalSeconds, 1e-8);
  std::string bad = text;
  bad.replace(bad.find("2e8"), 3, "0");
  Expected<MachineModel> refused = parseMachineModel(bad, "bad.json");
  ASSERT_FALSE(refused.isOk());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("bad.json: key \"device.kernel_rates.Relu\""));
}

// Tests the bandwidth by size, points (8000 bytes, 4e9 B/s) and (512000,
// 1e9): below the first, 4e9; at 64000 bytes, 3 of the 6 doublings from
// 8000 to 512000, halfway: 2.5e9; beyond the last, the memory bandwidth
// (1e9). A Relu of 1000 + 1000 f32 elements (8000 bytes) takes 8000 / 4e9 s.
TEST(Simulation, BandwidthBySize) {
  std::string text = kRoundMachine;
  text.replace(text.find("\"kernel_launch_s\": 0"), 20,
               "\"kernel_launch_s\": 0, \"bandwidth_by_size\": "
               "[{\"bytes\": 8000, \"bandwidth\": 4e9}, "
               "{\"bytes\": 512000, \"bandwidth\": 1e9}]");
  Expected<MachineModel> m = parseMachineModel(text, "sizes.json");
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_DOUBLE_EQ(m->streamBandwidth(4000), 4e9);
  EXPECT_DOUBLE_EQ(m->streamBandwidth(64000), 2.5e9); // log2: 3 of 6 steps
  EXPECT_DOUBLE_EQ(m->streamBandwidth(1e7), 1e9);
  Program p;
  p.arenas = {{"a", 1 << 20, 0, 0}};
  p.buffers = {{"x", DType::F32, {1000}, 0, 0},
               {"y", DType::F32, {1000}, 0, 0}};
  EXPECT_NEAR(kernelCost(p, makeInstruction("Relu", 0, {0}, {1}), *m).seconds,
              8000 / 4e9, 1e-15);
  Expected<MachineModel> back =
      parseMachineModel(machineModelJson(*m).dump(), "back.json");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  ASSERT_EQ(back->device.bandwidthBySize.size(), 2u);
  EXPECT_EQ(back->device.bandwidthBySize[1].bytes, 512000);
  std::string bad = text;
  bad.replace(bad.find("512000"), 6, "4000");
  Expected<MachineModel> refused = parseMachineModel(bad, "bad.json");
  ASSERT_FALSE(refused.isOk());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("key \"device.bandwidth_by_size[1].bytes\""));
}

// Tests 16-bit kernels on a device that widens them (half_widening_s 1 ns):
// a bf16 Relu of 1000 elements streams its f32 copies (8000 bytes at 1e9 B/s
// = 8 us) and widens or rounds 2000 elements (2 us): 10 us; a bf16 Transpose
// moves its own 4000 bytes (4 us); a bf16 Gemm uses the bf16 curve
// (efficiency 0.5 at every size: 2 x 8 x 8 x 8 FLOPs at 2e9 FLOP/s / 0.5 =
// 1.024 us, against its 384 bytes' 0.384 us).
TEST(Simulation, HalfOperandsWidened) {
  std::string text = kRoundMachine;
  text.replace(text.find("\"kernel_launch_s\": 0"), 20,
               "\"kernel_launch_s\": 0, \"half_widening_s\": 1e-9, "
               "\"matmul_efficiency_bf16\": [{\"min_dim\": 1, "
               "\"efficiency\": 0.5}]");
  Expected<MachineModel> m = parseMachineModel(text, "half.json");
  ASSERT_TRUE(m.isOk()) << m.status().message();
  Program p;
  p.arenas = {{"a", 1 << 20, 0, 0}};
  p.buffers = {{"x", DType::BF16, {1000}, 0, 0},
               {"y", DType::BF16, {1000}, 0, 0},
               {"a", DType::BF16, {8, 8}, 0, 0},
               {"b", DType::BF16, {8, 8}, 0, 0},
               {"c", DType::BF16, {8, 8}, 0, 0}};
  EXPECT_NEAR(kernelCost(p, makeInstruction("Relu", 0, {0}, {1}), *m).seconds,
              1e-5, 1e-15);
  EXPECT_NEAR(
      kernelCost(p, makeInstruction("Transpose", 0, {0}, {1}), *m).seconds,
      4e-6, 1e-15);
  EXPECT_NEAR(
      kernelCost(p, makeInstruction("Gemm", 0, {2, 3}, {4}), *m).seconds,
      2.0 * 512 / 2e9 / 0.5, 1e-15);
  EXPECT_NEAR(
      kernelCost(p, makeInstruction("Relu", 0, {0}, {1}), roundMachine())
          .seconds,
      4e-6, 1e-15); // no widening: its own 4000 bytes
}

// Tests the efficiency curve (linear in log2 of min(M, N, K), clamped) and
// the two-level AllReduce over 2 nodes of 2 ranks: an intra-node
// reduce-scatter (n-1)/n S / B_in, an inter-node all-reduce of S/2,
// 2 (m-1) L + 2 (m-1)/m (S/2) / B_out, and an intra-node all-gather.
TEST(Simulation, EfficiencyCurveAndTwoLevelCollective) {
  Expected<MachineModel> m = parseMachineModel(R"({
    "devices_per_node": 2,
    "device": {"peak_flops": {"f32": 1, "bf16": 1, "f16": 1}, "memory_bandwidth": 1,
               "memory_bytes": 1, "kernel_launch_s": 0,
               "matmul_efficiency": [{"min_dim": 1, "efficiency": 0.5},
                                     {"min_dim": 16, "efficiency": 1}]},
    "links": {"intra_node": {"bandwidth": 1e9, "latency": 0},
              "inter_node": {"bandwidth": 1e8, "latency": 1e-3},
              "host_device": {"bandwidth": 1, "latency": 0},
              "nvme": {"bandwidth": 1, "latency": 0}}})",
                                               "two.json");
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_DOUBLE_EQ(m->matmulEfficiency(4), 0.75); // halfway in log2
  EXPECT_DOUBLE_EQ(m->matmulEfficiency(0.5), 0.5);
  EXPECT_DOUBLE_EQ(m->matmulEfficiency(1024), 1);
  const double S = 1e6;
  const double expected =
      0.5 * S / 1e9 + (2 * 1e-3 + 2 * 0.5 * (S / 2) / 1e8) + 0.5 * S / 1e9;
  EXPECT_NEAR(collectiveSeconds(*m, OpKind::AllReduce, {0, 1, 2, 3}, 2, S),
              expected, 1e-15);
  m->twoLevel = false; // flat ring of 4 over the inter-node link
  EXPECT_NEAR(collectiveSeconds(*m, OpKind::AllReduce, {0, 1, 2, 3}, 2, S),
              2 * 3 * 1e-3 + 2 * 0.75 * S / 1e8, 1e-15);
}

// Tests ZeRO-Offload's swaps: a SwapIn of 1e6 bytes of a swap-file arena
// takes the NVMe link's 1e6 / 1e8 = 10 ms, counted as offload I/O, while a
// 1 ms Relu on the other stream overlaps it (compute first, the I/O beyond).
TEST(Simulation, SwapsUseTheNvmeLink) {
  Builder b(1, 2);
  b.p.arenas.push_back({"offload", 1 << 20, 0, 0, 0, "/nvme"});
  const uint32_t state = b.buffer(250000, 0, 1);
  const uint32_t x = b.buffer(125000), y = b.buffer(125000);
  b.p.instructions.push_back(makeInstruction("SwapIn", 1, {state}, {}));
  b.relu(0, x, y);
  const Simulation sim = simulate(b.p, roundMachine());
  EXPECT_NEAR(sim.stepSeconds, 1e6 / 1e8, kTol);
  EXPECT_NEAR(sim.ranks[0].computeSeconds, 1e-3, kTol);
  EXPECT_NEAR(sim.ranks[0].offloadIoSeconds, 1e6 / 1e8 - 1e-3, kTol);
  EXPECT_DOUBLE_EQ(sim.bytesByLink[int(LinkClass::Nvme)], 1e6);
}

// Tests that a bad machine description fails naming the file and the key.
TEST(Simulation, BadMachineDescriptionNamesFileAndKey) {
  auto error = [](const std::string &text) {
    Expected<MachineModel> m = parseMachineModel(text, "bad.json");
    EXPECT_FALSE(m.isOk());
    return m.isOk() ? std::string() : m.status().message();
  };
  std::string good = kRoundMachine;
  std::string negative = good;
  negative.replace(negative.find("\"bf16\": 2e9"), 11, "\"bf16\": -1");
  EXPECT_THAT(error(negative),
              HasSubstr("bad.json: key \"device.peak_flops.bf16\""));
  std::string missing = good;
  missing.replace(missing.find("\"devices_per_node\": 4"), 21,
                  "\"devices_per_nod\": 4");
  EXPECT_THAT(error(missing),
              HasSubstr("bad.json: key \"devices_per_nod\": unknown key"));
  std::string algorithm = good;
  algorithm.replace(algorithm.find("\"latency\": 0}"), 13,
                    "\"latency\": 0, \"algorithm\": \"tree\"}");
  EXPECT_THAT(error(algorithm),
              HasSubstr("key \"links.intra_node.algorithm\""));
  EXPECT_THAT(error("{"), HasSubstr("bad.json: not valid JSON"));
  Expected<MachineModel> absent = loadMachineModel("/nonexistent/machine.json");
  ASSERT_FALSE(absent.isOk());
  EXPECT_THAT(absent.status().message(),
              HasSubstr("/nonexistent/machine.json"));
}

// Tests that the shipped descriptions load and carry the datasheets' dense
// peaks and memory figures.
TEST(Simulation, ShippedMachinesLoad) {
  Expected<MachineModel> a100 =
      loadMachineModel(ZRT_MACHINES_DIR "/a100-80gb-sxm-8x.json");
  ASSERT_TRUE(a100.isOk()) << a100.status().message();
  EXPECT_DOUBLE_EQ(a100->device.peakBF16, 312e12);
  EXPECT_DOUBLE_EQ(a100->device.peakF32, 19.5e12);
  EXPECT_DOUBLE_EQ(a100->device.memoryBandwidth, 2039e9);
  Expected<MachineModel> h100 =
      loadMachineModel(ZRT_MACHINES_DIR "/h100-sxm-8x.json");
  ASSERT_TRUE(h100.isOk()) << h100.status().message();
  EXPECT_DOUBLE_EQ(h100->device.peakBF16, 989e12);
  EXPECT_DOUBLE_EQ(h100->device.memoryBandwidth, 3.35e12);
  Expected<MachineModel> cpu =
      loadMachineModel(ZRT_MACHINES_DIR "/cpu-2core.json");
  ASSERT_TRUE(cpu.isOk()) << cpu.status().message();
  EXPECT_EQ(cpu->devicesPerNode, 2);
}

// Tests the placement of ranks on nodes: rank r on node r / devices_per_node,
// or world / K per node with --nodes K; a world the machine cannot hold, or
// one that K does not divide, is refused naming the way out.
TEST(Simulation, RanksAreLaidNodeByNode) {
  Builder b(8, 1);
  const uint32_t x = b.buffer(4), y = b.buffer(4);
  b.relu(0, x, y);
  const MachineModel m = roundMachine(); // 1 node of 4 devices
  SimulationOptions options;
  Expected<Simulation> tooMany = simulateProgram(b.p, m, options);
  ASSERT_FALSE(tooMany.isOk());
  EXPECT_THAT(tooMany.status().message(), HasSubstr("pass --nodes K"));
  options.nodes = 3;
  Expected<Simulation> uneven = simulateProgram(b.p, m, options);
  ASSERT_FALSE(uneven.isOk());
  EXPECT_THAT(uneven.status().message(),
              HasSubstr("do not spread evenly over 3 nodes"));
  options.nodes = 1; // 8 ranks on a node of 4 devices
  EXPECT_FALSE(simulateProgram(b.p, m, options).isOk());
  options.nodes = 4;
  Expected<Simulation> four = simulateProgram(b.p, m, options);
  ASSERT_TRUE(four.isOk()) << four.status().message();
  EXPECT_EQ(four->ranksPerNode, 2);
  EXPECT_EQ(four->ranks[5].node, 2);
}

// Tests that a program that cannot finish is reported, not looped on: a
// collective that only one of its two members reaches.
TEST(Simulation, DeadlockIsReported) {
  Builder b(2, 1);
  const uint32_t g = b.buffer(4), gs = b.buffer(4);
  Instruction i = makeInstruction("AllReduce", 0, {g}, {gs});
  b.p.groups.push_back({"pair", {0, 1}, 0});
  i.group = 0;
  b.p.instructions.push_back(i);
  Instruction only = makeInstruction("AllReduce", 0, {g}, {gs});
  b.p.instructions.push_back(only);
  b.p.instructions.back().ranks = {0}; // a world collective rank 1 never runs
  SimulationOptions options;
  Expected<Simulation> sim = simulateProgram(b.p, roundMachine(), options);
  // The world collective's members are those that run it: rank 0 alone, so
  // it completes at once; a program can only stall on events, groups or
  // messages. A Recv without a Send does stall:
  ASSERT_TRUE(sim.isOk()) << sim.status().message();
  Builder c(2, 1);
  const uint32_t msg = c.buffer(4);
  c.pointToPoint("Recv", 0, msg, 1, 7, {0});
  Expected<Simulation> stalled = simulateProgram(c.p, roundMachine(), options);
  ASSERT_FALSE(stalled.isOk());
  EXPECT_THAT(stalled.status().message(), HasSubstr("rank 0"));
  EXPECT_THAT(stalled.status().message(), HasSubstr("forever"));
}

} // namespace
