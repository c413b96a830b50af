//===- MachineModel.h - A machine description for --simulate ----*- C++ -*-===//
//
// What zero-run --simulate knows of a machine (docs/simulate.md): how many
// nodes and devices, each device's peak rates by element type, memory
// bandwidth and capacity, kernel launch cost and matrix-product efficiency by
// shape, and per link class (inside a node, across nodes, host <-> device,
// NVMe) a bandwidth, a latency and the collective algorithm. The costs of a
// kernel and of a collective are functions of this description alone, so the
// simulator's timeline and the unit tests share them.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_RUN_MACHINEMODEL_H
#define ZRT_RUN_MACHINEMODEL_H

#include "zrt/Program.h"
#include "zrt/Status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zrt {

/// The classes of link a transfer can take.
enum class LinkClass : uint8_t { IntraNode = 0, InterNode, HostDevice, Nvme };
constexpr int kNumLinkClasses = 4;

/// "intra_node", "inter_node", "host_device", "nvme".
const char *linkClassName(LinkClass c);

/// How a collective moves its bytes over one link class.
enum class CollectiveAlgorithm : uint8_t { Ring = 0, RecursiveDoubling };

/// One link class: what one rank can send one way, and the cost of a message.
struct LinkModel {
  double bandwidth = 0; ///< bytes/s one way, per rank
  double latency = 0;   ///< seconds per message (per algorithm step)
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
};

/// A point of the matrix-product efficiency curve: products whose smallest
/// dimension min(M, N, K) is `minDim` reach `efficiency` of the peak.
struct EfficiencyPoint {
  double minDim = 1;
  double efficiency = 1;
};

/// A point of the streaming bandwidth by size: a kernel whose operands
/// (inputs and outputs) take `bytes` streams them at `bandwidth`.
struct BandwidthPoint {
  double bytes = 1;
  double bandwidth = 1;
};

/// One device (a GPU, or a CPU core that a rank runs on).
struct DeviceModel {
  double peakF32 = 0, peakBF16 = 0, peakF16 = 0; ///< FLOP/s, dense
  double memoryBandwidth = 0;                    ///< bytes/s
  /// Where operands small enough to stay in a cache stream faster:
  /// increasing in bytes, interpolated linearly in log2(bytes), clamped;
  /// beyond the last point (and with none), memoryBandwidth.
  std::vector<BandwidthPoint> bandwidthBySize;
  uint64_t memoryBytes = 0; ///< capacity
  double launchSeconds = 0; ///< per kernel
  /// Increasing in minDim; interpolated linearly in log2(minDim), clamped at
  /// both ends. Empty: efficiency 1.
  std::vector<EfficiencyPoint> matmulEfficiency;
  /// The curves of bf16 and f16 products, where they differ (empty: f32's).
  std::vector<EfficiencyPoint> matmulEfficiencyBF16, matmulEfficiencyF16;
  /// Kernels slower than streaming their operands at memoryBandwidth (an
  /// optimizer's update, a transpose, softmax, a transcendental function):
  /// operand bytes (inputs and outputs) per second, by op name ("AdamW").
  /// Kernels not named here stream at memoryBandwidth.
  std::map<std::string, double> kernelRates;
  /// FusedElementwise: seconds per output element for each op of its
  /// expression, arithmetic (Add ... Relu, Reciprocal, Cast) and
  /// transcendental (Pow, Sqrt, Exp, Log, Tanh, Erf, Sigmoid). Zero: the
  /// kernel streams its bytes at memoryBandwidth like any other.
  double fusedArithmeticSeconds = 0, fusedTranscendentalSeconds = 0;
  /// A device that computes 16-bit (bf16, f16) operands in f32 through
  /// copies (the CPU backend's trampolines, cpu/HalfWidening.cpp): seconds
  /// per element of each 16-bit operand widened or rounded back. Such a
  /// kernel streams its operands' f32 bytes at its rate, plus this. Zero:
  /// 16-bit kernels stream their own bytes (a GPU's).
  double halfWideningSeconds = 0;
  /// The device's memory is the host's (a CPU): a host arena (the optimizer
  /// offloaded to "cpu") takes the same memory as the others.
  bool hostIsDevice = false;
};

/// A cluster of identical nodes.
struct MachineModel {
  std::string path; ///< the file it was read from, for messages
  std::string name;
  int nodes = 1;
  int devicesPerNode = 1;
  DeviceModel device;
  LinkModel links[kNumLinkClasses];
  /// A collective whose group spans several nodes with several ranks on each:
  /// true: inside nodes, then across, then inside again (hierarchical);
  /// false: one flat algorithm over the inter-node link.
  bool twoLevel = true;
  /// Seconds per element a reduction collective (ReduceScatter, AllReduce)
  /// of a 16-bit buffer adds on each member, times (n - 1) / n: a
  /// communicator that sums bf16 / f16 element by element in f32 (an MPI
  /// reduction operator). Zero: such sums run at the link's speed.
  double halfReduceSeconds = 0;

  const LinkModel &link(LinkClass c) const { return links[int(c)]; }
  /// The peak FLOP/s of products in element type `dtype` (f32's for types
  /// other than f16 and bf16).
  double peakFlops(DType dtype) const;
  /// The bandwidth a kernel streams `bytes` of operands at (bandwidthBySize,
  /// memoryBandwidth beyond it).
  double streamBandwidth(double bytes) const;
  /// The efficiency of a product in `dtype` whose smallest dimension is
  /// `minDim`.
  double matmulEfficiency(double minDim, DType dtype = DType::F32) const;
};

/// Reads and checks the machine description at `path`. Every error names the
/// file and the key ("M.json: key \"device.peak_flops.bf16\": ...").
Expected<MachineModel> loadMachineModel(const std::string &path);

/// Like loadMachineModel, from the JSON text `text`; `path` names it.
Expected<MachineModel> parseMachineModel(const std::string &text,
                                         const std::string &path);

/// The description of `machine` in the schema parseMachineModel reads
/// (without `sources` and `note`, which the model does not keep): parsing
/// it gives `machine` back.
nlohmann::json machineModelJson(const MachineModel &machine);

/// The seconds a collective of `kind` over `ranks` (world ranks, each on node
/// rank / ranksPerNode) takes once every member has reached it. `bytes` is
/// the size of the whole buffer the collective produces or reduces (an
/// AllGather's output, a ReduceScatter's input, an AllReduce's buffer, a
/// Broadcast's and an AllToAll's buffer). docs/simulate.md gives the formulas.
double collectiveSeconds(const MachineModel &machine, OpKind kind,
                         const std::vector<int> &ranks, int ranksPerNode,
                         double bytes);

/// The seconds `bytes` take over one link class (latency + bytes / bandwidth).
double transferSeconds(const LinkModel &link, double bytes);

} // namespace zrt

#endif // ZRT_RUN_MACHINEMODEL_H
