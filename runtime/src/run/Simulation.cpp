//===- Simulation.cpp - A program's simulated step on a machine -----------===//
//-===//
//
// A discrete-event simulation without a clock: each (rank, stream) keeps the
// time it is free and a cursor into its instructions, and the loop advances
// every cursor as far as its dependencies allow (an event not yet recorded, a
// collective some member has not reached, a message not yet sent) until none
// can move. Since an instruction's times depend only on its stream and on the
// instructions it waits for, never on the order the loop visits streams in,
// the result is the same whatever that order. A stream that cannot finish is
// a deadlock, reported naming the instruction.
//
// Memory: each rank's instructions start and finish at simulated times; a
// LiveBytesTracker (the one a real run's --report-json uses) replays those
// boundaries in time order, so the peaks are the executor's figure for the
// simulated interleaving.
//
// Cost: SPMD ranks mostly run the same instructions at the same times, so the
// figures (breakdown, trace, memory replay) are made once per class of ranks
// whose executed instructions and times are equal bit for bit; within a class
// ranks differ at most in the order equal-time boundaries replay in (the
// order the loop executed them), and a rank whose order differs only in
// groups of starts gets the first rank's timeline with those groups' samples
// spliced in (a second tracker replays them in its order alongside). Every
// shortcut keeps the figures the rank-by-rank computation gives exactly
// (scripts/compare-simulations.sh compares two builds' outputs).
//
//===----------------------------------------------------------------------===//

#include "run/Simulation.h"

#include "executor/LiveBytes.h"
#include "math/FusedMath.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>

namespace zrt {

namespace {

int64_t dim(const std::vector<int64_t> &shape, int fromEnd) {
  const int n = int(shape.size());
  return fromEnd <= n ? shape[size_t(n - fromEnd)] : 1;
}

} // namespace

uint64_t productFlops(const Program &p, const Instruction &inst,
                      double &minDim) {
  minDim = 1;
  if ((inst.op == "MatMul" || inst.op == "Gemm") && inst.inputs.size() >= 2 &&
      !inst.outputs.empty()) {
    const BufferDesc &a = p.buffers[inst.inputs[0]];
    const BufferDesc &b = p.buffers[inst.inputs[1]];
    const BufferDesc &out = p.buffers[inst.outputs[0]];
    if (a.shape.empty() || b.shape.empty())
      return 0;
    int64_t m = 0, k = 0;
    if (inst.op == "Gemm" && a.shape.size() == 2) {
      const bool transA = inst.attrs.getInt("transA", 0) != 0;
      k = transA ? a.shape[0] : a.shape[1];
      m = transA ? a.shape[1] : a.shape[0];
    } else {
      k = a.shape.back(); // numpy matmul: [..., M, K] x [..., K, N]
      m = dim(a.shape, 2);
    }
    const int64_t n = b.shape.size() >= 2 ? dim(out.shape, 1) : 1;
    minDim = double(std::max<int64_t>(1, std::min({m, n, k})));
    return uint64_t(2 * out.numel() * k);
  }
  if (inst.flops > 0)
    minDim = std::max(1.0, std::cbrt(double(inst.flops) / 2));
  return inst.flops;
}

namespace {

/// The operand bytes per second `op` streams `bytes` at: its calibrated
/// rate, or the bandwidth for that many bytes.
double kernelRate(const MachineModel &machine, const std::string &op,
                  double bytes) {
  auto it = machine.device.kernelRates.find(op);
  return it != machine.device.kernelRates.end() && it->second > 0
             ? it->second
             : machine.streamBandwidth(bytes);
}

/// A FusedElementwise's compute: per output element, each op of its `ops`
/// attribute (opcode, a, b triples) at the description's arithmetic or
/// transcendental cost. Zero for other kernels.
double fusedSeconds(const Program &p, const Instruction &inst,
                    const MachineModel &machine) {
  if (inst.op != "FusedElementwise" || inst.outputs.empty())
    return 0;
  const std::vector<int64_t> code = inst.attrs.getInts("ops");
  double perElement = 0;
  for (size_t k = 0; k + 2 < code.size(); k += 3) {
    const int64_t op = code[k];
    const bool transcendental =
        op == math::kFusedPow || op == math::kFusedSqrt ||
        op == math::kFusedExp || op == math::kFusedLog ||
        op == math::kFusedTanh || op == math::kFusedErf ||
        op == math::kFusedSigmoid;
    perElement += transcendental ? machine.device.fusedTranscendentalSeconds
                                 : machine.device.fusedArithmeticSeconds;
  }
  return perElement * double(p.buffers[inst.outputs[0]].numel());
}

/// Kernels that take 16-bit operands themselves on a device that widens
/// the others (cpu/HalfWidening.cpp's nativeKernels: they move or convert
/// elements, or compute products and fused expressions a block at a time).
bool takesHalfOperands(const std::string &op) {
  static const std::set<std::string> names = {"Cast",
                                              "Copy",
                                              "LocalShard",
                                              "Expand",
                                              "Transpose",
                                              "Concat",
                                              "Split",
                                              "Slice",
                                              "Tile",
                                              "Gather",
                                              "GatherElements",
                                              "GatherND",
                                              "Where",
                                              "Pad",
                                              "Fill",
                                              "Trilu",
                                              "MatMul",
                                              "Gemm",
                                              "ScatterND",
                                              "FusedElementwise",
                                              "ScatterElements",
                                              "SwapIn",
                                              "SwapOut"};
  return names.count(op) != 0;
}

} // namespace

InstructionCost kernelCost(const Program &p, const Instruction &inst,
                           const MachineModel &machine) {
  InstructionCost cost;
  double deviceBytes = 0, hostBytes = 0, widened = 0;
  const bool widens =
      machine.device.halfWideningSeconds > 0 && !takesHalfOperands(inst.op);
  // FusedElementwise widens and rounds its 16-bit operands a block at a
  // time: the widening's cost, its own bytes.
  const bool fusedWidens =
      machine.device.halfWideningSeconds > 0 && inst.op == "FusedElementwise";
  for (const std::vector<uint32_t> *list : {&inst.inputs, &inst.outputs})
    for (uint32_t b : *list) {
      const BufferDesc &d = p.buffers[b];
      const ArenaDesc &arena = p.arenas[d.arena];
      const bool half = d.dtype == DType::BF16 || d.dtype == DType::F16;
      // A widened operand streams as its f32 copy.
      const double bytes =
          widens && half ? 4.0 * double(d.numel()) : double(d.bytes());
      if ((widens || fusedWidens) && half)
        widened += double(d.numel());
      // Host arenas (offload device cpu) are read over the bus; a swap
      // file's pages are in memory once SwapIn has read them.
      (arena.host ? hostBytes : deviceBytes) += bytes;
    }
  if (inst.op == "SwapIn" || inst.op == "SwapOut") {
    cost.offloadIo = true;
    cost.nvmeBytes = deviceBytes + hostBytes;
    cost.seconds =
        transferSeconds(machine.link(LinkClass::Nvme), deviceBytes + hostBytes);
    return cost;
  }
  double minDim = 1;
  cost.flops = productFlops(p, inst, minDim);
  double computeSeconds = 0;
  if (cost.flops > 0) {
    const DType dtype = p.buffers[inst.inputs[0]].dtype;
    cost.peakSeconds = double(cost.flops) / machine.peakFlops(dtype);
    computeSeconds = cost.peakSeconds / machine.matmulEfficiency(minDim, dtype);
  }
  // Every operand streams through the kernel at its rate; a host arena's
  // also crosses the host link (on a CPU, host memory is the device's).
  const double memorySeconds =
      (deviceBytes + hostBytes) /
      kernelRate(machine, inst.op, deviceBytes + hostBytes);
  computeSeconds = std::max(computeSeconds, fusedSeconds(p, inst, machine));
  const double hostSeconds =
      hostBytes / machine.link(LinkClass::HostDevice).bandwidth;
  cost.offloadIo = hostSeconds > std::max(computeSeconds, memorySeconds);
  cost.hostBytes = hostBytes;
  cost.seconds = std::max({computeSeconds, memorySeconds, hostSeconds}) +
                 widened * machine.device.halfWideningSeconds +
                 machine.device.launchSeconds;
  return cost;
}

namespace {

/// A time interval of one rank's timeline.
struct Interval {
  double begin = 0, end = 0;
};

/// The length of the union of `intervals`.
double unionLength(std::vector<Interval> intervals) {
  std::sort(
      intervals.begin(), intervals.end(),
      [](const Interval &a, const Interval &b) { return a.begin < b.begin; });
  double total = 0, openBegin = 0, openEnd = -1;
  for (const Interval &i : intervals) {
    if (i.end <= i.begin)
      continue;
    if (i.begin > openEnd) {
      total += std::max(0.0, openEnd - openBegin);
      openBegin = i.begin;
      openEnd = i.end;
    } else {
      openEnd = std::max(openEnd, i.end);
    }
  }
  return total + std::max(0.0, openEnd - openBegin);
}

/// One instance of a collective: instruction `index` in one part of its group.
struct CollectiveInstance {
  size_t expected = 0;
  double lastArrival = 0;
  size_t arrived = 0;
  double start = 0, end = 0;
  bool resolved() const { return arrived == expected; }
};

/// A message in flight: when its Send started and how long it travels.
struct Message {
  double sent = 0, travel = 0;
};

/// One executed instruction, for the trace, the breakdown and the memory
/// replay: arrival at it, begin of its own work, end.
struct Executed {
  size_t index = 0;
  uint32_t stream = 0;
  double arrival = 0, begin = 0, end = 0;
};

/// An executed instruction's start or finish, for the memory replay.
enum Edge { Finish = 0, Start = 1, StartAndFinish = 2 };
struct Boundary {
  double at;
  Edge edge;
  size_t order; ///< the instruction's place in the rank's executed list
  size_t index;
};

/// Whether `a` and `b` are replayed at the same place whatever their order.
bool tied(const Boundary &a, const Boundary &b) {
  return a.at == b.at && (a.edge != Finish) == (b.edge != Finish);
}

/// A rank whose summarize and replayMemory figures others may copy, and the
/// order its tied boundaries replay in (TimelineClass::ties).
struct Representative {
  int rank = 0;
  std::vector<size_t> tieOrder;
};

/// Ranks that executed the same instructions at the same times (bit for bit)
/// with the same kernel sums: their figures differ at most by the order
/// their tied boundaries (equal times, both starts or both finishes) replay
/// in, the order of their executed lists.
struct TimelineClass {
  int first = 0;
  /// The first rank's boundaries, sorted.
  std::vector<Boundary> sorted;
  /// Groups of tied boundaries, as instruction indices, in the first rank's
  /// order; where each group's boundaries are in `sorted`; whether they are
  /// all starts (or touch no operand): the replay only adds live bytes in
  /// them, so it ends them in the same state whatever their order.
  std::vector<std::vector<size_t>> ties;
  std::vector<std::pair<size_t, size_t>> tieRange;
  std::vector<bool> startsOnly;
  std::unordered_map<uint64_t, std::vector<Representative>> byTieOrder;
  std::vector<Representative> representatives; ///< the first one's first
  /// A tracker for the executed instructions, reset for each replay.
  std::unique_ptr<LiveBytesTracker> tracker;
  uint64_t plannedPeakGatheredBytes = 0;
};

/// Each world rank's class: ranks of one class are listed by the same
/// instructions' `ranks` and are members of the same groups, so they execute
/// the same instructions (executedInstructions) and pass or fail
/// checkEventOrder alike. Classes are numbered in order of their first rank.
std::vector<int> rankClasses(const Program &p) {
  std::map<std::vector<int>, size_t> lists; // distinct non-empty `ranks`
  for (const Instruction &inst : p.instructions)
    if (!inst.ranks.empty())
      lists.emplace(inst.ranks, lists.size());
  const size_t world = size_t(std::max(0, p.worldSize));
  const size_t width = lists.size() + p.groups.size();
  std::vector<std::vector<bool>> signature(world,
                                           std::vector<bool>(width, false));
  for (const auto &[ranks, id] : lists)
    for (int r : ranks)
      if (r >= 0 && size_t(r) < world)
        signature[size_t(r)][id] = true;
  for (size_t g = 0; g < p.groups.size(); ++g)
    for (int r : p.groups[g].ranks)
      if (r >= 0 && size_t(r) < world)
        signature[size_t(r)][lists.size() + g] = true;
  std::map<std::vector<bool>, int> classes;
  std::vector<int> classOf(world);
  for (size_t r = 0; r < world; ++r)
    classOf[r] =
        classes.emplace(signature[r], int(classes.size())).first->second;
  return classOf;
}

/// The ranks of one part of a collective's group (membersOf), shared by the
/// part's members.
struct CollectiveMembers {
  std::vector<int> ranks;
};

class Simulator {
public:
  Simulator(const Program &p, const MachineModel &m, int ranksPerNode);

  Status run(Simulation &out);

private:
  struct StreamState {
    /// Instruction indices, in program order (shared by a class of ranks).
    const std::vector<size_t> *steps = nullptr;
    size_t next = 0;
    double free = 0;
    bool arrived = false; ///< at steps[next], a collective it registered with
    double arrival = 0;
    CollectiveInstance *collective = nullptr; ///< the one it registered with
  };
  struct RankState {
    std::vector<StreamState> streams;
    std::vector<double> eventTime; ///< -1: not recorded yet
    std::vector<Executed> executed;
    std::vector<Interval> compute, communication, io;
    uint64_t flops = 0;
    double peakSeconds = 0;
  };

  /// Advances (rank, stream) by one instruction if it can.
  bool step(int rank, uint32_t stream);
  bool stepCollective(int rank, uint32_t stream, size_t index);
  bool stepRecv(int rank, uint32_t stream, size_t index);
  void finish(int rank, uint32_t stream, size_t index, double arrival,
              double begin, double end);
  /// The world ranks of the part of `inst`'s group that `rank` uses.
  std::vector<int> membersOf(const Instruction &inst, int rank) const;
  /// membersOf(p_.instructions[index], rank), computed once per part.
  const std::vector<int> &cachedMembersOf(size_t index, int rank);
  /// kernelCost(p_, p_.instructions[index], m_), computed once.
  const InstructionCost &cachedKernelCost(size_t index);
  int peerRank(const Instruction &inst, int rank) const;
  LinkClass linkBetween(int a, int b) const {
    return a / ranksPerNode_ == b / ranksPerNode_ ? LinkClass::IntraNode
                                                  : LinkClass::InterNode;
  }
  double collectiveCost(const Instruction &inst,
                        const std::vector<int> &members);
  Status deadlock() const;
  void summarize(int rank, double step, RankSimulation &out) const;
  /// The rank's instructions' starts and finishes in replay order.
  std::vector<Boundary> boundaries(int rank) const;
  void replayMemory(const std::vector<Boundary> &boundaries,
                    LiveBytesTracker &tracker, RankSimulation &out) const;
  /// Whether rank `b` belongs to rank `a`'s TimelineClass (`position`: each
  /// instruction's place in b's executed list).
  bool sameTimeline(int a, int b, const std::vector<size_t> &position) const;
  /// A new TimelineClass of `rank`, whose sorted boundaries are `sorted`.
  TimelineClass newClass(int rank, const std::vector<Boundary> &sorted) const;
  /// The representative of `c` whose tie order is rank `rank`'s (`rank`
  /// itself, made one, if none is yet).
  int classify(TimelineClass &c, int rank,
               const std::vector<size_t> &position) const;
  /// The class's first boundaries with the ties of groups `differs` in
  /// representative k's order (`tieStart`: each group's place in tieOrder).
  std::vector<Boundary> reordered(const TimelineClass &c, size_t k,
                                  const std::vector<size_t> &differs,
                                  const std::vector<size_t> &tieStart) const;
  /// The figures of `c`'s representatives.
  void replayClass(TimelineClass &c, double step, Simulation &out) const;
  /// summarize and replayMemory for every rank; a rank whose timeline equals
  /// an earlier one's copies its figures.
  void summarizeRanks(double step, Simulation &out);

  const Program &p_;
  const MachineModel &m_;
  int ranksPerNode_;
  std::vector<RankState> ranks_;
  std::vector<std::vector<std::vector<size_t>>> stepsByClass_; // [class][s]
  /// Per group: each world rank's part (ProcessGroupDesc::partOf).
  std::vector<std::vector<int>> partOf_;
  std::unordered_map<uint64_t, std::unique_ptr<CollectiveMembers>>
      members_; // (index, part)
  std::vector<InstructionCost> costs_;
  std::vector<bool> costed_;
  std::map<std::pair<size_t, int>, CollectiveInstance>
      collectives_; // (index, first member)
  std::map<std::tuple<int, int, int64_t>, std::vector<Message>>
      mailboxes_; // src, dst, tag
  std::map<std::tuple<int, int, int64_t>, size_t> received_;
  double bytesByLink_[kNumLinkClasses] = {0, 0, 0, 0};
};

Simulator::Simulator(const Program &p, const MachineModel &m, int ranksPerNode)
    : p_(p), m_(m), ranksPerNode_(ranksPerNode) {
  partOf_.resize(p.groups.size());
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const ProcessGroupDesc &group = p.groups[g];
    partOf_[g].assign(size_t(p.worldSize), -1);
    // partOf: the first place a rank is listed at.
    for (size_t i = group.ranks.size(); i-- > 0;) {
      const int r = group.ranks[i];
      if (r >= 0 && r < p.worldSize)
        partOf_[g][size_t(r)] = int(i) / group.size();
    }
  }
  costs_.resize(p.instructions.size());
  costed_.assign(p.instructions.size(), false);
}

const std::vector<int> &Simulator::cachedMembersOf(size_t index, int rank) {
  const Instruction &inst = p_.instructions[index];
  int part = 0;
  if (inst.group >= 0 && p_.groups[size_t(inst.group)].groupSize > 0) {
    const std::vector<int> &parts = partOf_[size_t(inst.group)];
    part = rank >= 0 && size_t(rank) < parts.size() ? parts[size_t(rank)] : -1;
  }
  std::unique_ptr<CollectiveMembers> &members =
      members_[(uint64_t(index) << 32) | uint32_t(part)];
  if (!members)
    members = std::make_unique<CollectiveMembers>(
        CollectiveMembers{membersOf(inst, rank)});
  return members->ranks;
}

const InstructionCost &Simulator::cachedKernelCost(size_t index) {
  if (!costed_[index]) {
    costs_[index] = kernelCost(p_, p_.instructions[index], m_);
    costed_[index] = true;
  }
  return costs_[index];
}

std::vector<int> Simulator::membersOf(const Instruction &inst, int rank) const {
  std::vector<int> members;
  if (inst.group < 0) {
    for (int r = 0; r < p_.worldSize; ++r)
      members.push_back(r);
  } else {
    const ProcessGroupDesc &g = p_.groups[size_t(inst.group)];
    members = g.groupSize > 0 ? g.part(g.partOf(rank)) : g.ranks;
  }
  members.erase(std::remove_if(members.begin(), members.end(),
                               [&](int r) { return !inst.runsOn(r); }),
                members.end());
  return members;
}

int Simulator::peerRank(const Instruction &inst, int rank) const {
  const int peer = int(inst.attrs.getInt("peer", 0));
  const int dp = inst.ranks.empty() ? 1 : int(inst.ranks.size());
  return peer * dp + rank % dp;
}

double Simulator::collectiveCost(const Instruction &inst,
                                 const std::vector<int> &members) {
  double seconds = 0, bytes = 0;
  // A coalesced AllGather runs one gather per input, one after the other.
  const size_t calls = inst.kind == OpKind::AllGather ? inst.inputs.size() : 1;
  for (size_t c = 0; c < calls; ++c) {
    const bool byOutput = inst.kind == OpKind::AllGather;
    const std::vector<uint32_t> &buffers =
        byOutput ? inst.outputs : inst.inputs;
    if (c >= buffers.size())
      break;
    const BufferDesc &buffer = p_.buffers[buffers[c]];
    const double s = double(buffer.bytes());
    seconds += collectiveSeconds(m_, inst.kind, members, ranksPerNode_, s);
    const bool half = buffer.dtype == DType::BF16 || buffer.dtype == DType::F16;
    if (half && (inst.kind == OpKind::ReduceScatter ||
                 inst.kind == OpKind::AllReduce)) {
      const double n = double(members.size());
      seconds += (n - 1) / n * double(buffer.numel()) * m_.halfReduceSeconds;
    }
    bytes += s;
  }
  bool oneNode = true;
  for (int r : members)
    oneNode &= r / ranksPerNode_ == members.front() / ranksPerNode_;
  bytesByLink_[int(oneNode ? LinkClass::IntraNode : LinkClass::InterNode)] +=
      bytes;
  return seconds;
}

void Simulator::finish(int rank, uint32_t stream, size_t index, double arrival,
                       double begin, double end) {
  StreamState &s = ranks_[size_t(rank)].streams[stream];
  ranks_[size_t(rank)].executed.push_back({index, stream, arrival, begin, end});
  s.free = end;
  s.arrived = false;
  ++s.next;
}

bool Simulator::stepCollective(int rank, uint32_t stream, size_t index) {
  StreamState &s = ranks_[size_t(rank)].streams[stream];
  if (!s.arrived) {
    const Instruction &inst = p_.instructions[index];
    const std::vector<int> &members = cachedMembersOf(index, rank);
    CollectiveInstance &c =
        collectives_[{index, members.empty() ? rank : members.front()}];
    s.collective = &c;
    s.arrived = true;
    s.arrival = s.free;
    c.expected = members.size();
    c.lastArrival = std::max(c.lastArrival, s.free);
    if (++c.arrived == c.expected) {
      c.start = c.lastArrival;
      c.end = c.start + collectiveCost(inst, members);
    }
  }
  const CollectiveInstance &c = *s.collective;
  if (!c.resolved())
    return false;
  ranks_[size_t(rank)].communication.push_back({c.start, c.end});
  finish(rank, stream, index, s.arrival, c.start, c.end);
  return true;
}

bool Simulator::stepRecv(int rank, uint32_t stream, size_t index) {
  const Instruction &inst = p_.instructions[index];
  StreamState &s = ranks_[size_t(rank)].streams[stream];
  const int src = peerRank(inst, rank);
  const auto key = std::make_tuple(src, rank, inst.attrs.getInt("tag", 0));
  const std::vector<Message> &box = mailboxes_[key];
  size_t &taken = received_[key];
  if (taken >= box.size())
    return false; // its Send has not started yet
  const Message msg = box[taken++];
  const double end = std::max(s.free, msg.sent + msg.travel);
  const double transferBegin = std::max(s.free, msg.sent);
  ranks_[size_t(rank)].communication.push_back({transferBegin, end});
  finish(rank, stream, index, s.free, transferBegin, end);
  return true;
}

bool Simulator::step(int rank, uint32_t stream) {
  RankState &r = ranks_[size_t(rank)];
  StreamState &s = r.streams[stream];
  if (s.next >= s.steps->size())
    return false;
  const size_t index = (*s.steps)[s.next];
  const Instruction &inst = p_.instructions[index];
  const double t = s.free;
  switch (inst.kind) {
  case OpKind::Kernel: {
    const InstructionCost &cost = cachedKernelCost(index);
    (cost.offloadIo ? r.io : r.compute).push_back({t, t + cost.seconds});
    r.flops += cost.flops;
    bytesByLink_[int(LinkClass::HostDevice)] += cost.hostBytes;
    bytesByLink_[int(LinkClass::Nvme)] += cost.nvmeBytes;
    r.peakSeconds += cost.peakSeconds;
    finish(rank, stream, index, t, t, t + cost.seconds);
    return true;
  }
  case OpKind::Record:
    r.eventTime[size_t(inst.event)] = t;
    finish(rank, stream, index, t, t, t);
    return true;
  case OpKind::Wait: {
    const double recorded = r.eventTime[size_t(inst.event)];
    if (recorded < 0)
      return false;
    finish(rank, stream, index, t, t, std::max(t, recorded));
    return true;
  }
  case OpKind::Send: {
    // Buffered, as the executor's sends: the stream goes on at once; the
    // bytes reach the receiver after the link's time.
    const int dst = peerRank(inst, rank);
    const double bytes = double(p_.buffers[inst.inputs[0]].bytes());
    const LinkClass link = linkBetween(rank, dst);
    bytesByLink_[int(link)] += bytes;
    mailboxes_[std::make_tuple(rank, dst, inst.attrs.getInt("tag", 0))]
        .push_back({t, transferSeconds(m_.link(link), bytes)});
    finish(rank, stream, index, t, t, t);
    return true;
  }
  case OpKind::Recv:
    return stepRecv(rank, stream, index);
  default:
    return stepCollective(rank, stream, index);
  }
}

Status Simulator::deadlock() const {
  for (size_t r = 0; r < ranks_.size(); ++r)
    for (size_t s = 0; s < ranks_[r].streams.size(); ++s) {
      const StreamState &st = ranks_[r].streams[s];
      if (st.next < st.steps->size())
        return Status::error(p_.path + ": the simulation cannot go on: rank " +
                             std::to_string(r) + ", stream " +
                             std::to_string(s) + " \"" + p_.streams[s].name +
                             "\" waits at " +
                             p_.describeInstruction((*st.steps)[st.next]) +
                             " forever (an event never recorded, a collective "
                             "some member of its group "
                             "never reaches, or a receive without its send)");
    }
  return Status::ok();
}

void Simulator::summarize(int rank, double step, RankSimulation &out) const {
  const RankState &r = ranks_[size_t(rank)];
  std::vector<Interval> all = r.compute;
  out.computeSeconds = unionLength(all);
  all.insert(all.end(), r.communication.begin(), r.communication.end());
  const double withComm = unionLength(all);
  out.exposedCommunicationSeconds = withComm - out.computeSeconds;
  all.insert(all.end(), r.io.begin(), r.io.end());
  const double busy = unionLength(all);
  out.offloadIoSeconds = busy - withComm;
  out.bubbleSeconds = std::max(0.0, step - busy);
  out.flops = r.flops;
  out.peakSeconds = r.peakSeconds;
  double end = 0;
  for (const Executed &e : r.executed)
    end = std::max(end, e.end);
  out.stats.wallSeconds = end;
  // The trace: stream order, then time order, as the executor gives it.
  std::vector<Executed> sorted = r.executed;
  std::stable_sort(
      sorted.begin(), sorted.end(), [](const Executed &a, const Executed &b) {
        return std::tie(a.stream, a.arrival) < std::tie(b.stream, b.arrival);
      });
  for (const Executed &e : sorted)
    out.stats.trace.push_back({uint32_t(e.index), e.stream, e.arrival * 1e6,
                               (e.end - e.arrival) * 1e6});
}

std::vector<Boundary> Simulator::boundaries(int rank) const {
  const RankState &r = ranks_[size_t(rank)];
  // Boundaries in time order; at equal times an instruction's end comes
  // before another's start (a stream finishes one step before its next). An
  // instruction that takes no time (a Record, a Send) starts and finishes at
  // its start's place, never finishing before it starts.
  std::vector<Boundary> boundaries;
  for (size_t k = 0; k < r.executed.size(); ++k) {
    const Executed &e = r.executed[k];
    if (e.end <= e.arrival) {
      boundaries.push_back({e.arrival, StartAndFinish, k, e.index});
      continue;
    }
    boundaries.push_back({e.arrival, Start, k, e.index});
    boundaries.push_back({e.end, Finish, k, e.index});
  }
  std::sort(boundaries.begin(), boundaries.end(),
            [](const Boundary &a, const Boundary &b) {
              return std::make_tuple(a.at, a.edge != Finish, a.order) <
                     std::make_tuple(b.at, b.edge != Finish, b.order);
            });
  return boundaries;
}

void Simulator::replayMemory(const std::vector<Boundary> &boundaries,
                             LiveBytesTracker &tracker,
                             RankSimulation &out) const {
  tracker.setSimulatedTime(0);
  tracker.reset();
  for (const Boundary &b : boundaries) {
    tracker.setSimulatedTime(b.at * 1e6);
    if (b.edge != Finish)
      tracker.instructionStarted(p_.instructions[b.index]);
    if (b.edge != Start)
      tracker.instructionFinished(p_.instructions[b.index]);
  }
  out.stats.peakLiveBytes = tracker.peaks();
  out.stats.memoryTimeline = tracker.timeline();
  out.stats.peakGatheredBytes = tracker.peakGatheredBytes();
}

namespace {

bool sameBits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

/// A hash of a rank's executed instructions and their times, whatever the
/// order they are listed in.
uint64_t timelineHash(const std::vector<Executed> &executed) {
  uint64_t sum = 0;
  for (const Executed &e : executed) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    uint64_t bits[3];
    std::memcpy(&bits[0], &e.arrival, sizeof(double));
    std::memcpy(&bits[1], &e.begin, sizeof(double));
    std::memcpy(&bits[2], &e.end, sizeof(double));
    mix(e.index);
    for (uint64_t b : bits)
      mix(b);
    sum += h;
  }
  return sum;
}

} // namespace

bool Simulator::sameTimeline(int a, int b,
                             const std::vector<size_t> &position) const {
  const RankState &x = ranks_[size_t(a)], &y = ranks_[size_t(b)];
  if (x.executed.size() != y.executed.size() || x.flops != y.flops ||
      !sameBits(x.peakSeconds, y.peakSeconds) ||
      x.compute.size() != y.compute.size() ||
      x.communication.size() != y.communication.size() ||
      x.io.size() != y.io.size())
    return false;
  // The same instructions at the same times: each rank executes an
  // instruction once, so the two lists hold the same entries. A stream's
  // entries are in program order in both; the intervals and the trace are
  // made of the entries alone.
  for (const Executed &e : x.executed) {
    const size_t k = position[e.index];
    if (k == std::string::npos)
      return false;
    const Executed &f = y.executed[k];
    if (e.stream != f.stream || !sameBits(e.arrival, f.arrival) ||
        !sameBits(e.begin, f.begin) || !sameBits(e.end, f.end))
      return false;
  }
  return true;
}

TimelineClass Simulator::newClass(int rank,
                                  const std::vector<Boundary> &sorted) const {
  TimelineClass c;
  c.first = rank;
  // An instruction without operands (Record, Wait) changes nothing in the
  // replay: its place among its ties does not matter.
  auto touches = [&](size_t index) {
    const Instruction &inst = p_.instructions[index];
    return !inst.inputs.empty() || !inst.outputs.empty();
  };
  for (size_t i = 0, j = 0; i < sorted.size(); i = j) {
    std::vector<size_t> group;
    bool starts = true;
    for (j = i; j < sorted.size() && tied(sorted[i], sorted[j]); ++j)
      if (touches(sorted[j].index)) {
        group.push_back(sorted[j].index);
        starts &= sorted[j].edge == Start;
      }
    if (group.size() > 1) {
      c.ties.push_back(std::move(group));
      c.tieRange.push_back({i, j});
      c.startsOnly.push_back(starts);
    }
  }
  c.sorted = sorted;
  std::vector<size_t> executed;
  for (const Executed &e : ranks_[size_t(rank)].executed)
    executed.push_back(e.index);
  std::sort(executed.begin(), executed.end());
  c.tracker = std::make_unique<LiveBytesTracker>(p_, executed);
  c.plannedPeakGatheredBytes = plannedPeakGatheredBytes(p_, executed);
  return c;
}

int Simulator::classify(TimelineClass &c, int rank,
                        const std::vector<size_t> &position) const {
  // Tied boundaries replay in the order of the executed list.
  Representative r;
  r.rank = rank;
  uint64_t hash = 1469598103934665603ull;
  for (const std::vector<size_t> &group : c.ties) {
    const size_t from = r.tieOrder.size();
    r.tieOrder.insert(r.tieOrder.end(), group.begin(), group.end());
    std::sort(r.tieOrder.begin() + int64_t(from), r.tieOrder.end(),
              [&](size_t a, size_t b) { return position[a] < position[b]; });
    for (size_t k = from; k < r.tieOrder.size(); ++k)
      hash = (hash ^ r.tieOrder[k]) * 1099511628211ull;
  }
  std::vector<Representative> &same = c.byTieOrder[hash];
  const auto earlier =
      std::find_if(same.begin(), same.end(), [&](const Representative &e) {
        return e.tieOrder == r.tieOrder;
      });
  if (earlier != same.end())
    return earlier->rank;
  same.push_back(r);
  c.representatives.push_back(std::move(r));
  return rank;
}

std::vector<Boundary>
Simulator::reordered(const TimelineClass &c, size_t k,
                     const std::vector<size_t> &differs,
                     const std::vector<size_t> &tieStart) const {
  std::vector<Boundary> sorted = c.sorted;
  const std::vector<size_t> &order = c.representatives[k].tieOrder;
  for (size_t d : differs) {
    // The tie group's touching boundaries, in representative k's order.
    const auto begin = c.sorted.begin() + int64_t(c.tieRange[d].first);
    const auto end = c.sorted.begin() + int64_t(c.tieRange[d].second);
    size_t next = tieStart[d];
    for (size_t q = c.tieRange[d].first; q < c.tieRange[d].second; ++q) {
      const std::vector<size_t> &group = c.ties[d];
      if (std::find(group.begin(), group.end(), c.sorted[q].index) ==
          group.end())
        continue;
      const size_t index = order[next++];
      sorted[q] = *std::find_if(
          begin, end, [&](const Boundary &b) { return b.index == index; });
    }
  }
  return sorted;
}

void Simulator::replayClass(TimelineClass &c, double step,
                            Simulation &out) const {
  // The groups where representatives order their ties otherwise than the
  // first: at starts-only groups, one other order per group is replayed
  // alongside the first's (`other`, from the same state, ending in the same
  // state) and spliced into the timelines of the representatives that differ
  // from the first only there; the others are replayed whole.
  const std::vector<size_t> &base = c.representatives.front().tieOrder;
  std::vector<int> chosen(c.ties.size(), -1); // representative
  std::vector<std::vector<size_t>> differs(c.representatives.size());
  std::vector<bool> spliced(c.representatives.size(), true);
  for (size_t k = 1; k < c.representatives.size(); ++k) {
    const std::vector<size_t> &order = c.representatives[k].tieOrder;
    for (size_t g = 0, at = 0; g < c.ties.size(); at += c.ties[g++].size()) {
      const size_t n = c.ties[g].size();
      if (std::equal(base.begin() + int64_t(at), base.begin() + int64_t(at + n),
                     order.begin() + int64_t(at)))
        continue;
      differs[k].push_back(g);
      if (c.startsOnly[g] && chosen[g] < 0)
        chosen[g] = int(k);
      const std::vector<size_t> &other =
          c.representatives[size_t(std::max(0, chosen[g]))].tieOrder;
      spliced[k] = spliced[k] && c.startsOnly[g] &&
                   std::equal(other.begin() + int64_t(at),
                              other.begin() + int64_t(at + n),
                              order.begin() + int64_t(at));
    }
  }
  RankSimulation &first = out.ranks[size_t(c.first)];
  summarize(c.first, step, first);
  std::vector<size_t> tieStart(c.ties.size());
  for (size_t g = 0, at = 0; g < c.ties.size(); at += c.ties[g++].size())
    tieStart[g] = at;
  // Timeline ranges of each chosen group: [a, b) in the first's, [x, y) in
  // the other's.
  std::vector<std::array<size_t, 4>> ranges(c.ties.size());
  LiveBytesTracker &tracker = *c.tracker;
  std::vector<size_t> executed;
  for (const Executed &e : ranks_[size_t(c.first)].executed)
    executed.push_back(e.index);
  std::sort(executed.begin(), executed.end());
  LiveBytesTracker other(p_, executed);
  for (LiveBytesTracker *t : {&tracker, &other}) {
    t->setSimulatedTime(0);
    t->reset();
  }
  size_t g = 0;
  for (size_t i = 0; i < c.sorted.size();) {
    while (g < c.ties.size() && c.tieRange[g].first < i)
      ++g;
    const bool alternative =
        g < c.ties.size() && c.tieRange[g].first == i && chosen[g] >= 0;
    const size_t end = alternative ? c.tieRange[g].second : i + 1;
    if (alternative) {
      ranges[g][0] = tracker.timeline().size();
      ranges[g][2] = other.timeline().size();
    }
    for (size_t k = i; k < end; ++k) {
      const Boundary &b = c.sorted[k];
      tracker.setSimulatedTime(b.at * 1e6);
      if (b.edge != Finish)
        tracker.instructionStarted(p_.instructions[b.index]);
      if (b.edge != Start)
        tracker.instructionFinished(p_.instructions[b.index]);
      if (alternative)
        continue;
      other.setSimulatedTime(b.at * 1e6);
      if (b.edge != Finish)
        other.instructionStarted(p_.instructions[b.index]);
      if (b.edge != Start)
        other.instructionFinished(p_.instructions[b.index]);
    }
    if (alternative) {
      // Its operand-less boundaries change nothing; the others are starts.
      other.setSimulatedTime(c.sorted[i].at * 1e6);
      const std::vector<size_t> &order =
          c.representatives[size_t(chosen[g])].tieOrder;
      for (size_t k = 0; k < c.ties[g].size(); ++k)
        other.instructionStarted(p_.instructions[order[tieStart[g] + k]]);
      ranges[g][1] = tracker.timeline().size();
      ranges[g][3] = other.timeline().size();
    }
    i = end;
  }
  first.stats.peakLiveBytes = tracker.peaks();
  first.stats.memoryTimeline = tracker.timeline();
  first.stats.peakGatheredBytes = tracker.peakGatheredBytes();
  first.stats.plannedPeakGatheredBytes = c.plannedPeakGatheredBytes;
  for (size_t k = 1; k < c.representatives.size(); ++k) {
    RankSimulation &rs = out.ranks[size_t(c.representatives[k].rank)];
    rs = first;
    if (!spliced[k]) {
      replayMemory(reordered(c, k, differs[k], tieStart), tracker, rs);
      continue;
    }
    std::vector<MemorySample> &timeline = rs.stats.memoryTimeline;
    timeline.clear();
    size_t copied = 0;
    for (size_t d : differs[k]) {
      timeline.insert(
          timeline.end(), first.stats.memoryTimeline.begin() + int64_t(copied),
          first.stats.memoryTimeline.begin() + int64_t(ranges[d][0]));
      timeline.insert(timeline.end(),
                      other.timeline().begin() + int64_t(ranges[d][2]),
                      other.timeline().begin() + int64_t(ranges[d][3]));
      copied = ranges[d][1];
    }
    timeline.insert(timeline.end(),
                    first.stats.memoryTimeline.begin() + int64_t(copied),
                    first.stats.memoryTimeline.end());
  }
}

void Simulator::summarizeRanks(double step, Simulation &out) {
  std::unordered_map<uint64_t, std::vector<TimelineClass>> seen; // by hash
  std::vector<size_t> position(p_.instructions.size(), std::string::npos);
  std::vector<int> copyOf(size_t(p_.worldSize)); // its representative
  for (int rank = 0; rank < p_.worldSize; ++rank) {
    const std::vector<Executed> &executed = ranks_[size_t(rank)].executed;
    for (size_t k = 0; k < executed.size(); ++k)
      position[executed[k].index] = k;
    std::vector<TimelineClass> &classes = seen[timelineHash(executed)];
    auto c = std::find_if(classes.begin(), classes.end(),
                          [&](const TimelineClass &t) {
                            return sameTimeline(t.first, rank, position);
                          });
    if (c == classes.end()) {
      classes.push_back(newClass(rank, boundaries(rank)));
      c = classes.end() - 1;
    }
    copyOf[size_t(rank)] = classify(*c, rank, position);
    for (const Executed &e : executed)
      position[e.index] = std::string::npos;
    if (c->first != rank) // no longer needed: free it for the next ranks
      ranks_[size_t(rank)] = RankState();
  }
  for (auto &[hash, classes] : seen)
    for (TimelineClass &c : classes)
      replayClass(c, step, out);
  for (int rank = 0; rank < p_.worldSize; ++rank) {
    if (copyOf[size_t(rank)] != rank)
      out.ranks[size_t(rank)] = out.ranks[size_t(copyOf[size_t(rank)])];
    out.ranks[size_t(rank)].rank = rank;
    out.ranks[size_t(rank)].node = rank / ranksPerNode_;
  }
}

Status Simulator::run(Simulation &out) {
  ranks_.assign(size_t(p_.worldSize), {});
  const std::vector<int> classOf = rankClasses(p_);
  // Per class of ranks: its instructions, per stream.
  stepsByClass_.clear();
  std::vector<size_t> executedByClass;
  for (int rank = 0; rank < p_.worldSize; ++rank) {
    const size_t c = size_t(classOf[size_t(rank)]);
    if (c == stepsByClass_.size()) {
      const std::vector<size_t> executed = executedInstructions(p_, rank);
      executedByClass.push_back(executed.size());
      stepsByClass_.emplace_back(p_.streams.size());
      for (size_t i : executed)
        stepsByClass_.back()[p_.instructions[i].stream].push_back(i);
    }
    RankState &r = ranks_[size_t(rank)];
    r.streams.assign(p_.streams.size(), {});
    for (size_t s = 0; s < p_.streams.size(); ++s)
      r.streams[s].steps = &stepsByClass_[c][s];
    r.eventTime.assign(p_.numEvents, -1);
    r.executed.reserve(executedByClass[c]);
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (int rank = 0; rank < p_.worldSize; ++rank)
      for (uint32_t s = 0; s < p_.streams.size(); ++s)
        while (step(rank, s))
          progress = true;
  }
  ZRT_RETURN_IF_ERROR(deadlock());
  out.ranks.assign(size_t(p_.worldSize), {});
  out.stepSeconds = 0;
  for (const RankState &r : ranks_)
    for (const Executed &e : r.executed)
      out.stepSeconds = std::max(out.stepSeconds, e.end);
  summarizeRanks(out.stepSeconds, out);
  std::copy(std::begin(bytesByLink_), std::end(bytesByLink_),
            std::begin(out.bytesByLink));
  return Status::ok();
}

} // namespace

Expected<Simulation> simulateProgram(const Program &program,
                                     const MachineModel &machine,
                                     const SimulationOptions &options) {
  const int world = program.worldSize;
  const int capacity = machine.nodes * machine.devicesPerNode;
  Simulation simulation;
  if (options.nodes > 0) {
    if (world % options.nodes != 0)
      return Status::error("--nodes " + std::to_string(options.nodes) + ": " +
                           program.path + " has " + std::to_string(world) +
                           " ranks, which do not spread evenly over " +
                           std::to_string(options.nodes) + " nodes");
    simulation.ranksPerNode = world / options.nodes;
    if (simulation.ranksPerNode > machine.devicesPerNode)
      return Status::error("--nodes " + std::to_string(options.nodes) + ": " +
                           std::to_string(simulation.ranksPerNode) +
                           " ranks per node, but a node of " + machine.path +
                           " has " + std::to_string(machine.devicesPerNode) +
                           " devices");
  } else {
    if (world > capacity)
      return Status::error(
          program.path + " has " + std::to_string(world) + " ranks but " +
          machine.path + " describes " + std::to_string(machine.nodes) +
          " node(s) of " + std::to_string(machine.devicesPerNode) +
          " devices; pass --nodes K for a larger cluster of such nodes");
    simulation.ranksPerNode = machine.devicesPerNode;
  }
  simulation.nodes =
      (world + simulation.ranksPerNode - 1) / simulation.ranksPerNode;
  // Ranks of one class run the same instructions: one check per class.
  const std::vector<int> classOf = rankClasses(program);
  int checked = 0;
  for (int rank = 0; rank < world; ++rank)
    if (classOf[size_t(rank)] == checked) {
      ZRT_RETURN_IF_ERROR(checkEventOrder(program, rank));
      ++checked;
    }
  Simulator simulator(program, machine, simulation.ranksPerNode);
  ZRT_RETURN_IF_ERROR(simulator.run(simulation));
  return simulation;
}

nlohmann::json describeSimulation(const Program &program,
                                  const MachineModel &machine,
                                  const Simulation &sim) {
  nlohmann::json ranks = nlohmann::json::array();
  double compute = 0, comm = 0, io = 0, bubble = 0, peakSeconds = 0;
  for (const RankSimulation &r : sim.ranks) {
    nlohmann::json arenas = nlohmann::json::object();
    // Device memory: every arena but swap files, and host memory unless
    // the device's memory is the host's; the executor allocates each
    // arena's planned size whole.
    uint64_t peak = 0, devicePeak = 0, devicePlanned = 0;
    for (size_t a = 0; a < program.arenas.size(); ++a) {
      const uint64_t bytes =
          a < r.stats.peakLiveBytes.size() ? r.stats.peakLiveBytes[a] : 0;
      arenas[program.arenas[a].name] = bytes;
      peak += bytes;
      const ArenaDesc &arena = program.arenas[a];
      if ((!arena.host || machine.device.hostIsDevice) && arena.path.empty()) {
        devicePeak += bytes;
        devicePlanned += program.arenas[a].size;
      }
    }
    ranks.push_back(
        {{"rank", r.rank},
         {"node", r.node},
         {"peak_bytes", peak},
         {"device_peak_bytes", devicePeak},
         {"device_planned_bytes", devicePlanned},
         {"fits_device_memory", devicePlanned <= machine.device.memoryBytes},
         {"arenas", arenas},
         {"end_s", r.stats.wallSeconds},
         {"compute_s", r.computeSeconds},
         {"exposed_communication_s", r.exposedCommunicationSeconds},
         {"offload_io_s", r.offloadIoSeconds},
         {"bubble_s", r.bubbleSeconds},
         {"flops", r.flops},
         {"peak_gathered_bytes", r.stats.peakGatheredBytes}});
    compute += r.computeSeconds;
    comm += r.exposedCommunicationSeconds;
    io += r.offloadIoSeconds;
    bubble += r.bubbleSeconds;
    peakSeconds += r.peakSeconds;
  }
  const double n = double(std::max<size_t>(1, sim.ranks.size()));
  nlohmann::json bytesByLink = nlohmann::json::object();
  for (int c = 0; c < kNumLinkClasses; ++c)
    bytesByLink[linkClassName(LinkClass(c))] = sim.bytesByLink[c];
  return {
      {"machine", machine.path},
      {"machine_name", machine.name},
      {"step", program.training ? "one optimizer step" : "one forward pass"},
      {"nodes", sim.nodes},
      {"ranks_per_node", sim.ranksPerNode},
      {"step_s", sim.stepSeconds},
      {"compute_s", compute / n},
      {"exposed_communication_s", comm / n},
      {"bubble_s", bubble / n},
      {"offload_io_s", io / n},
      {"mfu", sim.stepSeconds > 0 ? peakSeconds / (n * sim.stepSeconds) : 0.0},
      {"bytes_by_link", bytesByLink},
      {"ranks", ranks}};
}

} // namespace zrt
