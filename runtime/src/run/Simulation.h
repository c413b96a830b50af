//===- Simulation.h - A program's simulated step on a machine ---*- C++ -*-===//
//
// Runs no kernel and starts no communicator: every rank of the program's
// world is simulated in this process with the executor's semantics (each
// stream runs its instructions in program order; a Wait waits for its
// Record; a collective starts when every member of its group has reached it;
// a Recv completes when its Send's bytes have arrived), each instruction
// taking the time the machine description (run/MachineModel.h) gives it.
// The result is one step's timeline per rank (the executor's TraceEvents and
// memory samples, so zero-run writes it as it writes a real --trace), the
// step's breakdown, and each rank's peak live bytes per arena measured on the
// simulated timeline as a real run measures them (executor/LiveBytes.h).
// docs/simulate.md documents the model and the report.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_RUN_SIMULATION_H
#define ZRT_RUN_SIMULATION_H

#include "run/MachineModel.h"

#include "zrt/Executor.h"
#include "zrt/Program.h"
#include "zrt/Status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace zrt {

/// How to lay the program's ranks on the machine.
struct SimulationOptions {
  /// Nodes the world is spread over (world / nodes ranks on each, at most
  /// devices_per_node); 0: rank r on node r / devices_per_node.
  int nodes = 0;
};

/// What one instruction costs on the machine, alone.
struct InstructionCost {
  double seconds = 0;
  uint64_t flops = 0;     ///< a product's floating-point operations
  double peakSeconds = 0; ///< flops at the peak of their element type
  /// Moves offloaded bytes (SwapIn/SwapOut, kernels bound by host arenas).
  bool offloadIo = false;
  /// Bytes over the host-device link (host-arena operands) and the NVMe link
  /// (SwapIn/SwapOut).
  double hostBytes = 0, nvmeBytes = 0;
};

/// The cost of kernel instruction `inst` of `program`: max(flops / (peak x
/// efficiency), device bytes / memory bandwidth, host bytes / host-device
/// bandwidth) + launch; SwapIn/SwapOut: their bytes over the NVMe link.
InstructionCost kernelCost(const Program &program, const Instruction &inst,
                           const MachineModel &machine);

/// A product kernel's (MatMul, Gemm) FLOPs from its operand shapes (2 per
/// multiply-add) and its smallest dimension min(M, N, K); other kernels:
/// Instruction::flops and the side of the cube of that many multiply-adds.
uint64_t productFlops(const Program &program, const Instruction &inst,
                      double &minDim);

/// One rank's simulated step.
struct RankSimulation {
  int rank = 0;
  int node = 0;
  /// The executor's figures for the step: wallSeconds (when this rank's
  /// last stream finished), trace, memoryTimeline, peakLiveBytes.
  RunStats stats;
  /// The step's breakdown over [0, step]: compute (kernels running), then
  /// communication not hidden by compute, then offload I/O not hidden by
  /// either, and the rest (waiting for other ranks: the bubble). The four
  /// add up to the step.
  double computeSeconds = 0, exposedCommunicationSeconds = 0,
         offloadIoSeconds = 0, bubbleSeconds = 0;
  uint64_t flops = 0;
  double peakSeconds = 0; ///< the products' time at peak
};

/// The whole world's simulated step.
struct Simulation {
  double stepSeconds = 0; ///< the slowest rank's end
  int nodes = 1;
  int ranksPerNode = 1;
  std::vector<RankSimulation> ranks;
  /// Bytes of the collectives' buffers (as collectiveSeconds counts them)
  /// and point-to-point messages, by link class (the one a group spanning
  /// several nodes crosses: inter_node), summed over instances.
  double bytesByLink[kNumLinkClasses] = {0, 0, 0, 0};
};

/// Simulates one run of `program` (a training program: one optimizer step;
/// a forward program: one forward pass) on `machine`.
Expected<Simulation> simulateProgram(const Program &program,
                                     const MachineModel &machine,
                                     const SimulationOptions &options = {});

/// The "simulation" object of the report (docs/simulate.md).
nlohmann::json describeSimulation(const Program &program,
                                  const MachineModel &machine,
                                  const Simulation &simulation);

} // namespace zrt

#endif // ZRT_RUN_SIMULATION_H
