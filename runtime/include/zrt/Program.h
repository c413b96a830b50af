//===- Program.h - A loaded, validated .zrt program -------------*- C++ -*-===//
//
// The in-memory form of a .zrt file (schema/zrt.fbs). loadProgram() verifies the
// FlatBuffer, checks the format version, copies the tables into the plain structs
// below and validates every index, so that the executor and the tools never see
// an out-of-range buffer, arena, stream, event or group. The FlatBuffers-generated
// code stays private to the loader.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_PROGRAM_H
#define ZRT_PROGRAM_H

#include "zrt/Kernel.h"
#include "zrt/Status.h"
#include "zrt/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zrt {

/// The .zrt format version this runtime reads. Programs with another `version`
/// are rejected with a message asking for a matching zero-opt. Version 2 added
/// Global.role and Program.training (training programs).
constexpr uint32_t kFormatVersion = 2;

/// Which kind of work a stream carries; mirrors `zrt.fb.StreamKind`.
enum class StreamKind : uint8_t { Compute = 0, Comm };

/// What an instruction does, derived from its op name at load time.
enum class OpKind : uint8_t {
  Kernel,        ///< a kernel from the backend's KernelTable
  Record,        ///< marks `event` as reached on this stream
  Wait,          ///< blocks this stream until `event` has been recorded
  AllGather,     ///< rank-major concatenation of equal shards
  ReduceScatter, ///< sum, then rank r keeps block r
  AllReduce,     ///< sum on every rank
  Broadcast,     ///< attr `root` (group rank) sends, all receive
  AllToAll,      ///< block j of the input goes to group rank j
  Send,          ///< input to attr `peer` (group rank)
  Recv,          ///< output from attr `peer` (group rank)
};

/// Number of collective kinds (AllGather .. Recv), for per-kind counters.
constexpr int kNumCollectiveKinds = 7;

/// True for AllGather .. Recv.
inline bool isCollective(OpKind k) { return k >= OpKind::AllGather; }

/// Index 0..kNumCollectiveKinds-1 of a collective kind.
inline int collectiveIndex(OpKind k) {
  return int(k) - int(OpKind::AllGather);
}

/// The op name of `k` as written in programs ("AllGather", "Record", ...);
/// "kernel" for OpKind::Kernel.
const char *opKindName(OpKind k);

/// The collective kind named `op`, Record/Wait for those names, else Kernel.
OpKind classifyOp(const std::string &op);

/// A region of memory sized by the compiler's memory plan.
struct ArenaDesc {
  std::string name;
  uint64_t size = 0;        ///< bytes to allocate (the planned peak)
  uint64_t noReuseSize = 0; ///< bytes the buffers would take without reuse
  uint64_t lowerBound = 0;  ///< the most bytes simultaneously live
  uint64_t inOrderSize = 0; ///< bytes of the in-order plan (0: none)
  /// A directory: the arena is a swap file there (ZeRO-Offload to NVMe;
  /// Executor maps it); empty: memory.
  std::string path;
  /// Host memory (ZeRO-Offload to the CPU): pinned host memory mapped into
  /// the device's address space on a GPU backend (Allocator::allocateHost);
  /// memory like any other on the CPU backend.
  bool host = false;
};

/// A typed view at a fixed offset of an arena. Several buffers may alias.
struct BufferDesc {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint32_t arena = 0;
  uint64_t offset = 0;
  int64_t inOrderOffset = -1; ///< offset in the in-order plan (-1: `offset`)

  /// Elements of the shape (1 for a scalar).
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  /// Bytes the buffer spans in its arena.
  uint64_t bytes() const { return uint64_t(numel()) * dtypeSize(dtype); }
};

/// Initial contents of a buffer.
struct ConstantDesc {
  uint32_t buffer = 0;
  std::vector<uint8_t> data;
};

/// The ZeRO-3 split of a global over `world` ranks: flatten, zero-pad to
/// `paddedNumel` (a multiple of `world`), rank r holds [r*s, (r+1)*s).
struct ShardSpec {
  int world = 1;
  uint64_t numel = 0;
  uint64_t paddedNumel = 0;

  /// Elements per rank, s = paddedNumel / world.
  uint64_t shardNumel() const { return paddedNumel / uint64_t(world); }
  /// The real (unpadded) elements rank `rank` holds: [begin, end) of the
  /// flattened tensor; empty when the rank holds only padding.
  std::pair<uint64_t, uint64_t> range(int rank) const {
    uint64_t s = shardNumel();
    uint64_t b = std::min(numel, uint64_t(rank) * s);
    uint64_t e = std::min(numel, uint64_t(rank + 1) * s);
    return {b, e};
  }
};

/// What a global holds; mirrors `zrt.fb.GlobalRole`.
enum class GlobalRole : uint8_t {
  Parameter = 0,  ///< trained; read from the weights file, written by --save
  Frozen,         ///< read from the weights file, never written
  OptimizerState, ///< zero-filled at start-up, written by --save-optimizer
  Counter,        ///< the optimizer step (an I64 scalar), zero at start-up
};

/// "Parameter", "Frozen", "OptimizerState", "Counter".
const char *globalRoleName(GlobalRole role);

/// Whether a global of `role` is read from the weights file (Parameter and
/// Frozen); the others start as zeros and are never looked up there.
inline bool readsWeights(GlobalRole role) {
  return role == GlobalRole::Parameter || role == GlobalRole::Frozen;
}

/// A trained parameter's gradient as a rank holds it over the step: whole at
/// ZeRO stages 0-1, the rank's shard at stages 2-3.
struct HeldGradient {
  DType dtype = DType::F32;
  uint64_t numel = 0;
};

/// A parameter or state tensor: read from the weights file at start-up, or
/// zero-filled (optimizer state, step counter).
struct GlobalDesc {
  std::string name;            ///< IR symbol
  std::string tensor;          ///< name in the safetensors weights file
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  ///< full logical shape, as in the file
  uint32_t buffer = 0;         ///< whole tensor, or this rank's shard
  std::optional<ShardSpec> shard; ///< absent: replicated
  GlobalRole role = GlobalRole::Parameter;
  std::optional<HeldGradient> gradient; ///< a trained parameter's, when recorded
  /// An OptimizerState global (an fp32 master) that starts as global
  /// `widenFrom` (f16/bf16) widened, its rank's shard when sharded; -1: zeros.
  int32_t widenFrom = -1;
};

/// The training table of a training program: each run of the instructions is
/// one optimizer step; globals keep their values between runs.
struct TrainingDesc {
  std::string loss;      ///< output: the step's loss (f32 scalar), required
  std::string gradNorm;  ///< output: gradient norm before clipping, or ""
  std::string lr;        ///< output: learning rate of the step, or ""
  int accumulationSteps = 1; ///< micro-batches per step
  std::string optimizer; ///< description, for messages and logs
  std::string lossScale; ///< output: fp16's loss scale of the step, or ""
  std::string skipped;   ///< output: 1 when an fp16 step overflowed and was skipped, or ""
  int64_t stepsPerPrint = 0; ///< DeepSpeed steps_per_print (zero-run's --log-every default)
  std::string csvMonitor;    ///< DeepSpeed csv_monitor's output_path/job_name, or ""
};

/// A queue of instructions executed in program order.
struct StreamDesc {
  std::string name;
  StreamKind kind = StreamKind::Compute;
};

/// Ranks of a process group, in group-rank order (group rank i = ranks[i]),
/// or, with a groupSize, a partition of them: SPMD programs name "the group
/// of my node" (hpZ) with one group that every rank reads its own part of.
struct ProcessGroupDesc {
  std::string name;
  std::vector<int> ranks;
  /// 0: one group of all `ranks`; k > 0: `ranks` is cut into consecutive
  /// groups of k, and each rank uses the group that holds it.
  int groupSize = 0;

  /// Ranks in the group a member uses.
  int size() const { return groupSize > 0 ? groupSize : int(ranks.size()); }
  /// Which consecutive group of size() ranks holds world rank `rank`; -1
  /// when none does.
  int partOf(int rank) const {
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] == rank)
        return int(i) / size();
    return -1;
  }
  /// The world ranks of part `index`, in group-rank order.
  std::vector<int> part(int index) const {
    auto begin = ranks.begin() + int64_t(index) * size();
    return std::vector<int>(begin, begin + size());
  }
};

/// A named graph input or output and the buffer holding it.
struct BindingDesc {
  std::string name;
  uint32_t buffer = 0;
};

/// One step of one stream: a kernel call, a collective, Record or Wait.
struct Instruction {
  std::string op;
  OpKind kind = OpKind::Kernel;
  uint32_t stream = 0;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  AttrMap attrs;
  int event = -1;          ///< Record/Wait
  int group = -1;          ///< collectives; -1 is the world
  std::vector<int> ranks;  ///< world ranks that execute it; empty: all
  std::string loc;
  /// A training program's instruction that an evaluation step runs too: part
  /// of what the loss is computed from (Executor::run(RunMode::Eval)).
  bool eval = false;
  /// A product kernel's floating-point operations, as the compiler counted
  /// them (2 per multiply-add); 0 for the others.
  uint64_t flops = 0;

  /// Whether world rank `rank` executes this instruction (see ranks).
  bool runsOn(int rank) const {
    if (ranks.empty())
      return true;
    for (int r : ranks)
      if (r == rank)
        return true;
    return false;
  }
};

/// A loaded program. `path` is used in every message about it.
struct Program {
  std::string path;
  /// hashBytes() of the program file's bytes: ranks compare it to make sure
  /// they all run the same program.
  uint64_t contentHash = 0;
  uint32_t version = 0;
  int worldSize = 1;
  /// A program cut into pipeline stages: each stage's data-parallel ranks
  /// (stage s runs on world ranks [s*dp, (s+1)*dp)); 0: not a pipeline.
  int pipelineDp = 0;
  std::vector<ArenaDesc> arenas;
  std::vector<BufferDesc> buffers;
  std::vector<ConstantDesc> constants;
  std::vector<GlobalDesc> globals;
  std::vector<StreamDesc> streams;
  uint32_t numEvents = 0;
  std::vector<ProcessGroupDesc> groups;
  std::vector<BindingDesc> inputs;
  std::vector<BindingDesc> outputs;
  std::vector<Instruction> instructions;
  /// Present in a training program.
  std::optional<TrainingDesc> training;

  /// The output binding called `name`, or null.
  const BindingDesc *findOutput(const std::string &name) const {
    for (const BindingDesc &b : outputs)
      if (b.name == name)
        return &b;
    return nullptr;
  }

  /// "instruction 12 (MatMul at \"node_3\")", for messages.
  std::string describeInstruction(size_t index) const;
  /// "buffer 7 \"h1\" (f32[2x8] in arena 1 \"activations\" at offset 128)".
  std::string describeBuffer(uint32_t index) const;
  /// Whether the program has an in-order plan (buffers placed for streams
  /// that take turns; docs/program-format.md).
  bool hasInOrderPlan() const;
  /// Moves every buffer to its in-order offset (or back: the two offsets
  /// swap) and sizes the arenas for both plans. The in-order plan is only
  /// valid when the executor's streams take turns
  /// (ExecutorOptions::serializeStreams) and kernels complete before their
  /// stream's next step (the CPU backend).
  void useInOrderPlan(bool inOrder = true);
  /// Whether the buffers are at their in-order offsets.
  bool inOrderPlanInUse = false;
  /// Whether the program is cut into pipeline stages.
  bool pipelined() const { return pipelineDp > 0; }
  /// The product kernels' floating-point operations world rank `rank` runs
  /// in one run (Instruction::flops).
  uint64_t flopsOn(int rank) const {
    uint64_t sum = 0;
    for (const Instruction &i : instructions)
      if (i.runsOn(rank))
        sum += i.flops;
    return sum;
  }
  /// Whether an evaluation step can run it: a training program whose
  /// instructions say which compute its loss (Instruction::eval).
  bool evaluable() const {
    if (!training)
      return false;
    for (const Instruction &i : instructions)
      if (i.eval)
        return true;
    return false;
  }
  /// Ranks that each read their own rows of the global batch: the world, or
  /// in a pipeline the ranks of one stage (stage s runs on world ranks
  /// [s*dp, (s+1)*dp); data-parallel replica d is rank s*dp + d of every
  /// stage, and all its stages read the same rows).
  int dataParallelSize() const { return pipelined() ? pipelineDp : worldSize; }
  /// Number of ranks in the group that a member of `group` uses (worldSize
  /// for -1).
  int64_t groupSize(int group) const {
    return group >= 0 && size_t(group) < groups.size()
               ? int64_t(groups[size_t(group)].size())
               : int64_t(worldSize);
  }
};

/// The FNV-1a offset basis, the default seed of hashBytes().
constexpr uint64_t kHashSeed = 0xcbf29ce484222325ull;

/// A 64-bit FNV-1a hash of `size` bytes taken as little-endian 64-bit words
/// (then the remaining bytes one at a time), continuing from `seed`. The same
/// on every host; not cryptographic.
uint64_t hashBytes(const void *data, size_t size, uint64_t seed = kHashSeed);

/// Reads, verifies and validates the program file at `path`. When `kernels` is
/// given, every kernel op must exist in it.
Expected<Program> loadProgram(const std::string &path,
                              const KernelTable *kernels = nullptr);

/// Like loadProgram, from bytes already in memory; `name` stands for the file
/// in messages.
Expected<Program> parseProgram(const void *data, size_t size,
                               const std::string &name,
                               const KernelTable *kernels = nullptr);

/// The index checks loadProgram runs: every buffer, arena, stream, event and
/// group index in range, buffers inside their arenas, constants and shards
/// consistent with their buffers, collectives shaped for their groups, Counter
/// globals replicated i64 scalars, the training table's outputs present f32
/// scalars, and (if `kernels` is given) every kernel op known.
Status validateProgram(const Program &program,
                       const KernelTable *kernels = nullptr);

/// Checks that the instructions `rank` executes cannot deadlock on events: each
/// event is recorded at most once and every Wait is eventually satisfied when
/// each stream runs its instructions in order. Cross-rank ordering of
/// collectives is not checked.
Status checkEventOrder(const Program &program, int rank);

} // namespace zrt

#endif // ZRT_PROGRAM_H
