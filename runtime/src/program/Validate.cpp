//===- Validate.cpp - Index and shape checks of a loaded program ----------===//
//
// Everything the executor relies on without checking again: indices in range,
// buffers inside their arenas, constants and shards the size of their buffers,
// collectives whose operand sizes fit their process group, known kernels. The
// first problem found is reported, naming the file, the table entry (for
// instructions: index, op and ONNX location) and what was expected.
//
//===----------------------------------------------------------------------===//

#include "zrt/Program.h"

#include <set>
#include <sstream>

namespace zrt {
namespace {

/// Collects the message prefix and formats errors for one program.
class ProgramValidator {
public:
  ProgramValidator(const Program &p, const KernelTable *kernels)
      : p_(p), kernels_(kernels) {}

  Status run();

private:
  Status error(const std::string &where, const std::string &what) const {
    return Status::error(p_.path + ": " + where + ": " + what);
  }
  Status checkBuffer(uint32_t index);
  Status checkBufferIndex(const std::string &where, const std::string &role,
                          uint32_t index) const;
  Status checkGlobal(size_t index);
  Status checkBindings(const std::vector<BindingDesc> &bindings,
                       const char *what) const;
  Status checkInstruction(size_t index);
  Status checkCollective(size_t index);
  /// Input `pair` against output `pair` of a collective over `g` ranks.
  Status checkCollectivePair(const Instruction &inst, const std::string &where,
                             int64_t g, size_t pair);
  Status checkTraining() const;

  const Program &p_;
  const KernelTable *kernels_;
};

/// a * b, or false on overflow of int64.
bool mulNoOverflow(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}

Status ProgramValidator::checkBufferIndex(const std::string &where,
                                          const std::string &role,
                                          uint32_t index) const {
  if (index >= p_.buffers.size())
    return error(where, role + " is buffer " + std::to_string(index) +
                            " but the program has " +
                            std::to_string(p_.buffers.size()) + " buffers");
  return Status::ok();
}

Status ProgramValidator::checkBuffer(uint32_t index) {
  const BufferDesc &b = p_.buffers[index];
  std::string where = "buffer " + std::to_string(index) +
                      (b.name.empty() ? "" : " \"" + b.name + "\"");
  int64_t numel = 1;
  for (int64_t d : b.shape) {
    if (d < 0)
      return error(where, "negative dimension in shape [" +
                              shapeString(b.shape) + "]");
    if (!mulNoOverflow(numel, d, numel))
      return error(where, "shape [" + shapeString(b.shape) + "] is too large");
  }
  int64_t bytes;
  if (!mulNoOverflow(numel, int64_t(dtypeSize(b.dtype)), bytes))
    return error(where, "shape [" + shapeString(b.shape) + "] is too large");
  if (b.arena >= p_.arenas.size())
    return error(where, "arena " + std::to_string(b.arena) +
                            " but the program has " +
                            std::to_string(p_.arenas.size()) + " arenas");
  const ArenaDesc &a = p_.arenas[b.arena];
  if (b.offset > a.size || uint64_t(bytes) > a.size - b.offset)
    return error(where, "bytes [" + std::to_string(b.offset) + ", " +
                            std::to_string(b.offset + uint64_t(bytes)) +
                            ") lie outside arena " + std::to_string(b.arena) +
                            " \"" + a.name + "\" of " + std::to_string(a.size) +
                            " bytes");
  if (b.offset % dtypeSize(b.dtype) != 0)
    return error(where, "offset " + std::to_string(b.offset) +
                            " is not a multiple of the element size " +
                            std::to_string(dtypeSize(b.dtype)));
  return Status::ok();
}

Status ProgramValidator::checkGlobal(size_t index) {
  const GlobalDesc &g = p_.globals[index];
  std::string where = "global " + std::to_string(index) + " \"" + g.name + "\"";
  if (g.tensor.empty())
    return error(where, "no weights tensor name");
  ZRT_RETURN_IF_ERROR(checkBufferIndex(where, "its storage", g.buffer));
  const BufferDesc &b = p_.buffers[g.buffer];
  if (b.dtype != g.dtype)
    return error(where, std::string("dtype ") + dtypeName(g.dtype) +
                            " but its buffer " + std::to_string(g.buffer) +
                            " is " + dtypeName(b.dtype));
  int64_t numel = 1;
  for (int64_t d : g.shape)
    if (d < 0 || !mulNoOverflow(numel, d, numel))
      return error(where, "invalid shape [" + shapeString(g.shape) + "]");
  if (g.widenFrom != -1) {
    // An fp32 master of a 16-bit parameter of the same shape: whole, or
    // sharded as the parameter is or over the parameter whole.
    if (g.widenFrom < 0 || size_t(g.widenFrom) >= p_.globals.size())
      return error(where, "widens from global " + std::to_string(g.widenFrom) + " of " +
                              std::to_string(p_.globals.size()));
    const GlobalDesc &from = p_.globals[size_t(g.widenFrom)];
    if (g.role != GlobalRole::OptimizerState || g.dtype != DType::F32 ||
        (from.dtype != DType::F16 && from.dtype != DType::BF16) || from.shape != g.shape ||
        (from.shard && (!g.shard || g.shard->world != from.shard->world ||
                        g.shard->paddedNumel != from.shard->paddedNumel)))
      return error(where, std::string("a ") + globalRoleName(g.role) + " global of " +
                              dtypeName(g.dtype) + "[" + shapeString(g.shape) +
                              "] cannot start as global \"" + from.name + "\" (" +
                              dtypeName(from.dtype) + "[" + shapeString(from.shape) +
                              "]) widened: it must be an f32 OptimizerState of an f16/bf16 "
                              "global's shape, sharded where that global is");
  }
  if (g.role == GlobalRole::Counter &&
      (g.dtype != DType::I64 || numel != 1 || g.shard))
    return error(where, std::string("a Counter global (the optimizer step) "
                                    "must be a replicated i64 scalar, got ") +
                            dtypeName(g.dtype) + "[" + shapeString(g.shape) +
                            "]" + (g.shard ? " sharded" : ""));
  if (!g.shard) {
    if (b.numel() != numel)
      return error(where, "replicated tensor of " + std::to_string(numel) +
                              " elements [" + shapeString(g.shape) +
                              "] but its buffer " + std::to_string(g.buffer) +
                              " holds " + std::to_string(b.numel()));
    return Status::ok();
  }
  const ShardSpec &s = *g.shard;
  // Sharded over the data-parallel ranks: the world, or a pipeline stage's
  // replicas.
  if (s.world != p_.dataParallelSize())
    return error(where, "sharded over " + std::to_string(s.world) +
                            " ranks but the program's " +
                            (p_.pipelined() ? "pipeline stages have " +
                                                  std::to_string(p_.dataParallelSize()) +
                                                  " data-parallel ranks"
                                            : "world size is " + std::to_string(p_.worldSize)));
  if (s.numel != uint64_t(numel))
    return error(where, "shard spec numel " + std::to_string(s.numel) +
                            " but the shape [" + shapeString(g.shape) +
                            "] has " + std::to_string(numel) + " elements");
  if (s.paddedNumel < s.numel || s.paddedNumel % uint64_t(s.world) != 0)
    return error(where, "padded numel " + std::to_string(s.paddedNumel) +
                            " is not a multiple of the world size " +
                            std::to_string(s.world) + " at least numel " +
                            std::to_string(s.numel));
  if (uint64_t(b.numel()) != s.shardNumel())
    return error(where, "shard of " + std::to_string(s.shardNumel()) +
                            " elements but its buffer " +
                            std::to_string(g.buffer) + " holds " +
                            std::to_string(b.numel()));
  return Status::ok();
}

Status ProgramValidator::checkBindings(const std::vector<BindingDesc> &bindings,
                                       const char *what) const {
  std::set<std::string> seen;
  for (size_t i = 0; i < bindings.size(); ++i) {
    std::string where = std::string(what) + " " + std::to_string(i) + " \"" +
                        bindings[i].name + "\"";
    if (bindings[i].name.empty())
      return error(where, "no name");
    if (!seen.insert(bindings[i].name).second)
      return error(where, "the name is used twice");
    ZRT_RETURN_IF_ERROR(checkBufferIndex(where, "its storage", bindings[i].buffer));
  }
  return Status::ok();
}

Status ProgramValidator::checkCollective(size_t index) {
  const Instruction &inst = p_.instructions[index];
  std::string where = p_.describeInstruction(index);
  // A pipeline stage receives on its compute stream (which waits for the
  // data anyway), so its sends, on the communication stream, never queue
  // behind its receives; every other collective runs on a communication
  // stream.
  if (p_.streams[inst.stream].kind != StreamKind::Comm && inst.kind != OpKind::Recv)
    return error(where, "collectives run on communication streams (a Recv may run "
                        "on a compute stream), but stream " +
                            std::to_string(inst.stream) + " \"" +
                            p_.streams[inst.stream].name + "\" is a compute stream");
  if (inst.group < -1 || inst.group >= int(p_.groups.size()))
    return error(where, "process group " + std::to_string(inst.group) +
                            " but the program has " +
                            std::to_string(p_.groups.size()) +
                            " groups (-1 is the world)");
  int64_t g = p_.groupSize(inst.group);
  // Every rank runs the whole program except instructions limited to some
  // ranks; a member of the group that skipped a collective would leave the
  // others waiting in it forever. (Non-members skip it anyway; Send and Recv
  // involve two ranks only and are limited to them on purpose.)
  bool pointToPoint = inst.kind == OpKind::Send || inst.kind == OpKind::Recv;
  if (!inst.ranks.empty() && !pointToPoint) {
    std::vector<int> members;
    if (inst.group >= 0) {
      // A partitioned group: the parts its runners use (the others are
      // other groups' business, as a pipeline stage's replicas).
      const ProcessGroupDesc &pg = p_.groups[size_t(inst.group)];
      std::vector<bool> partUsed(pg.ranks.size(), false);
      for (int r : inst.ranks)
        if (int part = pg.partOf(r); part >= 0 && !partUsed[size_t(part)]) {
          partUsed[size_t(part)] = true;
          for (int m : pg.part(part))
            members.push_back(m);
        }
      if (inst.ranks.empty())
        members = pg.ranks;
    } else
      for (int r = 0; r < p_.worldSize; ++r)
        members.push_back(r);
    for (int r : members)
      if (!inst.runsOn(r))
        return error(where,
                     "runs only on some ranks, but rank " + std::to_string(r) +
                         " of its process group " +
                         (inst.group >= 0
                              ? std::to_string(inst.group) + " \"" +
                                    p_.groups[size_t(inst.group)].name + "\""
                              : std::string("(the world)")) +
                         " does not run it, so the others would wait for it "
                         "forever; every member of the group must run a "
                         "collective (use a process group of just the ranks "
                         "that run it)");
  }
  size_t wantIn = 1, wantOut = 1;
  if (inst.kind == OpKind::Send)
    wantOut = 0;
  if (inst.kind == OpKind::Recv)
    wantIn = 0;
  // A coalesced AllGather (a ZeRO-3 bucket): input i gathered into output i.
  if (inst.kind == OpKind::AllGather && !inst.inputs.empty())
    wantIn = wantOut = inst.inputs.size();
  if (inst.inputs.size() != wantIn || inst.outputs.size() != wantOut)
    return error(where, "takes " + std::to_string(wantIn) + " input(s) and " +
                            std::to_string(wantOut) + " output(s), got " +
                            std::to_string(inst.inputs.size()) + " and " +
                            std::to_string(inst.outputs.size()));

  auto intAttr = [&](const char *name, int64_t &value) -> Status {
    if (!inst.attrs.has(name) || inst.attrs.getInts(name).empty())
      return error(where, std::string("missing integer attribute \"") + name + "\"");
    value = inst.attrs.getInt(name, 0);
    if (value < 0 || value >= g)
      return error(where, std::string("attribute ") + name + " = " +
                              std::to_string(value) + " is not a rank of a group of " +
                              std::to_string(g));
    return Status::ok();
  };
  int64_t unused;
  if (inst.kind == OpKind::Broadcast)
    ZRT_RETURN_IF_ERROR(intAttr("root", unused));
  if (inst.kind == OpKind::Send || inst.kind == OpKind::Recv) {
    ZRT_RETURN_IF_ERROR(intAttr("peer", unused));
    return Status::ok();
  }

  for (size_t pair = 0; pair < inst.inputs.size(); ++pair)
    ZRT_RETURN_IF_ERROR(checkCollectivePair(inst, where, g, pair));
  return Status::ok();
}

Status ProgramValidator::checkCollectivePair(const Instruction &inst,
                                             const std::string &where, int64_t g,
                                             size_t pair) {
  const BufferDesc &in = p_.buffers[inst.inputs[pair]];
  const BufferDesc &out = p_.buffers[inst.outputs[pair]];
  if (in.dtype != out.dtype)
    return error(where, std::string("input is ") + dtypeName(in.dtype) +
                            " but output is " + dtypeName(out.dtype));
  bool reduces = inst.kind == OpKind::ReduceScatter || inst.kind == OpKind::AllReduce;
  if (reduces && in.dtype == DType::Bool)
    return error(where, "cannot sum bool tensors");
  int64_t ni = in.numel(), no = out.numel(), scaled = 0;
  auto sizes = [&](const std::string &rule) {
    return error(where, "input has " + std::to_string(ni) + " elements, output " +
                            std::to_string(no) + "; " + rule +
                            " for a group of " + std::to_string(g));
  };
  switch (inst.kind) {
  case OpKind::AllGather:
    if (!mulNoOverflow(ni, g, scaled) || no != scaled)
      return sizes("AllGather needs output = group size x input");
    break;
  case OpKind::ReduceScatter:
    if (!mulNoOverflow(no, g, scaled) || ni != scaled)
      return sizes("ReduceScatter needs input = group size x output");
    break;
  case OpKind::AllReduce:
  case OpKind::Broadcast:
    if (ni != no)
      return sizes(std::string(opKindName(inst.kind)) +
                   " needs input and output of the same size");
    break;
  case OpKind::AllToAll:
    if (ni != no || ni % g != 0)
      return sizes("AllToAll needs input and output of the same size, a "
                    "multiple of the group size");
    break;
  default:
    break;
  }
  return Status::ok();
}

Status ProgramValidator::checkInstruction(size_t index) {
  const Instruction &inst = p_.instructions[index];
  std::string where = p_.describeInstruction(index);
  if (inst.op.empty())
    return error(where, "empty op name");
  if (inst.stream >= p_.streams.size())
    return error(where, "stream " + std::to_string(inst.stream) +
                            " but the program has " +
                            std::to_string(p_.streams.size()) + " streams");
  for (size_t i = 0; i < inst.inputs.size(); ++i)
    ZRT_RETURN_IF_ERROR(
        checkBufferIndex(where, "input " + std::to_string(i), inst.inputs[i]));
  for (size_t i = 0; i < inst.outputs.size(); ++i)
    ZRT_RETURN_IF_ERROR(
        checkBufferIndex(where, "output " + std::to_string(i), inst.outputs[i]));
  std::set<int> runsOn;
  for (int r : inst.ranks) {
    if (r < 0 || r >= p_.worldSize)
      return error(where, "runs on rank " + std::to_string(r) +
                              " but the world size is " +
                              std::to_string(p_.worldSize));
    if (!runsOn.insert(r).second)
      return error(where, "lists rank " + std::to_string(r) +
                              " twice among the ranks that run it");
  }

  switch (inst.kind) {
  case OpKind::Record:
  case OpKind::Wait:
    if (inst.event < 0 || uint32_t(inst.event) >= p_.numEvents)
      return error(where, "event " + std::to_string(inst.event) +
                              " but the program has " +
                              std::to_string(p_.numEvents) + " events");
    if (!inst.inputs.empty() || !inst.outputs.empty())
      return error(where, "Record and Wait take no buffers");
    return Status::ok();
  case OpKind::Kernel:
    if (kernels_ && !kernels_->lookup(inst.op))
      return error(where, "unknown op \"" + inst.op +
                              "\": no such kernel in this runtime's backend "
                              "(see docs/kernels.md)");
    return Status::ok();
  default:
    return checkCollective(index);
  }
}

Status ProgramValidator::checkTraining() const {
  if (!p_.training)
    return Status::ok();
  const TrainingDesc &t = *p_.training;
  if (t.accumulationSteps < 1)
    return error("training table", "accumulation_steps " +
                                       std::to_string(t.accumulationSteps) +
                                       " is not positive");
  if (t.loss.empty())
    return error("training table", "names no loss output");
  const std::pair<const char *, const std::string *> named[] = {
      {"loss", &t.loss}, {"grad_norm", &t.gradNorm}, {"lr", &t.lr},
      {"loss_scale", &t.lossScale}, {"skipped", &t.skipped}};
  for (const auto &[field, name] : named) {
    if (name->empty())
      continue;
    const BindingDesc *out = p_.findOutput(*name);
    std::string where = std::string("training table: ") + field + " \"" +
                        *name + "\"";
    if (!out) {
      std::string names;
      for (const BindingDesc &b : p_.outputs)
        names += (names.empty() ? "" : ", ") + b.name;
      return Status::error(p_.path + ": " + where +
                           " is not an output of the program (its outputs: " +
                           (names.empty() ? "none" : names) + ")");
    }
    const BufferDesc &b = p_.buffers[out->buffer];
    if (b.dtype != DType::F32 || b.numel() != 1)
      return Status::error(p_.path + ": " + where + " must be an f32 scalar, "
                           "but its buffer " + std::to_string(out->buffer) +
                           " is " + dtypeName(b.dtype) + "[" +
                           shapeString(b.shape) + "]");
  }
  return Status::ok();
}

Status ProgramValidator::run() {
  if (p_.worldSize < 1)
    return Status::error(p_.path + ": world size " +
                         std::to_string(p_.worldSize) + " is not positive");
  if (p_.pipelineDp < 0 || (p_.pipelineDp > 0 && p_.worldSize % p_.pipelineDp != 0))
    return Status::error(p_.path + ": pipeline stages of " + std::to_string(p_.pipelineDp) +
                         " data-parallel ranks do not divide the world size " +
                         std::to_string(p_.worldSize));
  // Every event worth having is recorded by an instruction; this also keeps a
  // corrupted count from sizing the executor's tables.
  if (p_.numEvents > p_.instructions.size())
    return Status::error(p_.path + ": " + std::to_string(p_.numEvents) +
                         " events but only " +
                         std::to_string(p_.instructions.size()) +
                         " instructions to record them");
  for (uint32_t i = 0; i < p_.buffers.size(); ++i)
    ZRT_RETURN_IF_ERROR(checkBuffer(i));
  std::vector<bool> initialised(p_.buffers.size(), false);
  for (size_t i = 0; i < p_.constants.size(); ++i) {
    const ConstantDesc &c = p_.constants[i];
    std::string where = "constant " + std::to_string(i);
    ZRT_RETURN_IF_ERROR(checkBufferIndex(where, "its storage", c.buffer));
    if (c.data.size() != p_.buffers[c.buffer].bytes())
      return error(where, std::to_string(c.data.size()) + " bytes of data for " +
                              p_.describeBuffer(c.buffer) + " of " +
                              std::to_string(p_.buffers[c.buffer].bytes()) +
                              " bytes");
    if (initialised[c.buffer])
      return error(where, "second constant for buffer " + std::to_string(c.buffer));
    initialised[c.buffer] = true;
  }
  for (size_t i = 0; i < p_.globals.size(); ++i)
    ZRT_RETURN_IF_ERROR(checkGlobal(i));
  for (size_t i = 0; i < p_.groups.size(); ++i) {
    const ProcessGroupDesc &g = p_.groups[i];
    std::string where = "process group " + std::to_string(i) + " \"" + g.name + "\"";
    if (g.ranks.empty())
      return error(where, "no ranks");
    if (g.groupSize < 0)
      return error(where, "group_size " + std::to_string(g.groupSize) +
                              " is negative (0 makes one group of all its "
                              "ranks)");
    if (g.groupSize > 0 && g.ranks.size() % size_t(g.groupSize) != 0)
      return error(where, "group_size " + std::to_string(g.groupSize) +
                              " does not divide its " +
                              std::to_string(g.ranks.size()) +
                              " ranks into consecutive groups");
    std::set<int> seen;
    for (int r : g.ranks) {
      if (r < 0 || r >= p_.worldSize)
        return error(where, "rank " + std::to_string(r) +
                                " is outside the world of " +
                                std::to_string(p_.worldSize));
      if (!seen.insert(r).second)
        return error(where, "rank " + std::to_string(r) + " appears twice");
    }
  }
  ZRT_RETURN_IF_ERROR(checkBindings(p_.inputs, "input"));
  ZRT_RETURN_IF_ERROR(checkBindings(p_.outputs, "output"));
  for (size_t i = 0; i < p_.instructions.size(); ++i)
    ZRT_RETURN_IF_ERROR(checkInstruction(i));
  return checkTraining();
}

} // namespace

Status validateProgram(const Program &program, const KernelTable *kernels) {
  return ProgramValidator(program, kernels).run();
}

Status checkEventOrder(const Program &p, int rank) {
  // Per stream, the instructions this rank runs, in program order.
  std::vector<std::vector<size_t>> streams(p.streams.size());
  std::vector<int> recordedBy(p.numEvents, -1);
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const Instruction &inst = p.instructions[i];
    if (!inst.runsOn(rank))
      continue;
    streams[inst.stream].push_back(i);
    if (inst.kind != OpKind::Record)
      continue;
    if (recordedBy[inst.event] >= 0)
      return Status::error(
          p.path + ": " + p.describeInstruction(i) + ": event " +
          std::to_string(inst.event) + " is already recorded by " +
          p.describeInstruction(size_t(recordedBy[inst.event])) +
          " (events are single use per run)" +
          (p.worldSize > 1 ? " on rank " + std::to_string(rank) : ""));
    recordedBy[inst.event] = int(i);
  }
  // Advance every stream until it blocks on a Wait whose Record has not run;
  // if no stream can move and some are unfinished, the program deadlocks.
  std::vector<size_t> next(streams.size(), 0);
  std::vector<bool> recorded(p.numEvents, false);
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t s = 0; s < streams.size(); ++s) {
      while (next[s] < streams[s].size()) {
        const Instruction &inst = p.instructions[streams[s][next[s]]];
        if (inst.kind == OpKind::Wait && !recorded[inst.event])
          break;
        if (inst.kind == OpKind::Record)
          recorded[inst.event] = true;
        ++next[s];
        progress = true;
      }
    }
  }
  for (size_t s = 0; s < streams.size(); ++s) {
    if (next[s] == streams[s].size())
      continue;
    size_t i = streams[s][next[s]];
    int event = p.instructions[i].event;
    std::string why = recordedBy[event] < 0
                          ? "which no instruction records"
                          : "which " + p.describeInstruction(recordedBy[event]) +
                                " records only after streams wait on each other";
    return Status::error(p.path + ": " + p.describeInstruction(i) + " on stream " +
                         std::to_string(s) + " \"" + p.streams[s].name +
                         "\" waits for event " + std::to_string(event) + " " +
                         why + ": the program would deadlock" +
                         (p.worldSize > 1 ? " on rank " + std::to_string(rank) : ""));
  }
  return Status::ok();
}

} // namespace zrt
