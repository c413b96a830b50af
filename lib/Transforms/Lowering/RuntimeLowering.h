//===- RuntimeLowering.h - zero-lower-to-runtime internals ------*- C++ -*-===//
//
// The lowering of one function to a zrt.program, shared by the files that
// implement its steps: instruction selection and stream assignment
// (LowerToRuntime.cpp), live intervals and arena placement (MemoryPlan.cpp),
// cross-stream events (Events.cpp) and emission of the zrt ops
// (EmitProgram.cpp). Internal to lib/Transforms/Lowering.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_TRANSFORMS_LOWERING_RUNTIMELOWERING_H
#define ZERO_LIB_TRANSFORMS_LOWERING_RUNTIMELOWERING_H

#include "zero/Transforms/Analysis/GatherPlan.h"

#include "zero/Dialect/ZRT/ZRTDialect.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zero {
namespace lowering {

using namespace mlir;

inline constexpr int64_t kAlignment = 64;
inline constexpr int64_t kMaxInlineSplat = 64; // larger splats become Fill kernels

inline int64_t alignUp(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
/// Offloaded globals start on a page of the swap file (swaps work on pages).
inline constexpr int64_t kPageBytes = 4096;

inline int64_t byteSize(Type t) { return ::zero::tensorBytes(t); }

/// Offload: the swap file (zero.offload "nvme"); Host: host memory that a GPU
/// backend's kernels read over the bus (zero.offload "cpu").
enum class ArenaKind { Params = 0, Constants = 1, Activations = 2, Offload = 3, Host = 4 };
constexpr int kNumArenas = 5;
/// The program's two streams, numbered as zero.stream's StreamKind
/// (ZeroEnums.td), which spells their names.
enum StreamId {
  kCompute = int(::zero::attrs::StreamKind::Compute),
  kComm = int(::zero::attrs::StreamKind::Comm)
};

/// A block of memory some values live in (several, when views alias it).
struct Storage {
  ArenaKind arena = ArenaKind::Activations;
  int64_t bytes = 0;
  int64_t offset = -1;
  int64_t def = INT64_MAX; ///< first instruction writing it (-1: before the run)
  int64_t lastUse = -1;    ///< last instruction reading it
  bool gathered = false;   ///< holds a gathered parameter (dies at its release)
  int64_t released = -1;   ///< the instruction its (last) zero.release follows
  Operation *release = nullptr;
  /// Gathered values it holds (a bucket's members: one release each), and
  /// the releases seen so far.
  int members = 1, releases = 0;
  /// Instructions that touched it, by stream: the latest index per stream.
  int64_t lastAccess[2] = {-1, -1};
  /// The ranks whose instructions touch it, one bit per pipeline stage (all
  /// bits: every rank, as in a program without stages). Blocks of disjoint
  /// stages never meet in one process, so they may share bytes.
  uint64_t stages = 0;
  /// Its offset in the in-order plan (-1: none, or the same as `offset`).
  int64_t inOrderOffset = -1;
};

/// A value's place: its storage block and a byte offset inside it.
struct Placement {
  int storage = -1;
  int64_t offset = 0;
};

/// One runtime instruction before events are added: made by its kind, then
/// completed in place once appended to the program (RuntimeLowering::append):
///
///   append(Instr::kernel("Copy", loc)).reads(value).writesTo(storage, 0, type);
///   append(Instr::collective("AllGather", loc, group)).reads(shard).writes(full);
///   append(Instr::kernel("Fill", loc)).withParams(params).writes(result);
///
/// A kernel runs on the compute stream and a collective on the communication
/// stream unless `on` moves it; both start with no parameters.
struct Instr {
  bool isCollective = false;
  std::string name;
  int stream = kCompute;
  SmallVector<std::pair<Value, Type>> ins, outs; ///< value and the view type
  SmallVector<std::pair<int, int64_t>> inViews, outViews; ///< explicit placements
  DictionaryAttr params;
  Location loc;
  /// Collectives: the zero.process_group they run over (null: the world).
  FlatSymbolRefAttr group = nullptr;
  /// The world ranks that run it (a pipeline stage's); empty: every rank.
  SmallVector<int64_t> ranks;
  /// Whether an evaluation step runs it: it computes what the training
  /// program's loss is made of (RuntimeLowering::findEvalSlice).
  bool eval = false;

  /// A kernel named `name` (the runtime's kernel table) on the compute stream.
  static Instr kernel(StringRef name, Location loc) {
    return Instr(/*isCollective=*/false, name, kCompute, loc);
  }
  /// A collective named `name` on the communication stream, over `group`
  /// (null: the world).
  static Instr collective(StringRef name, Location loc, FlatSymbolRefAttr group) {
    Instr in(/*isCollective=*/true, name, kComm, loc);
    in.group = group;
    return in;
  }

  /// Runs it on `s` instead.
  Instr &on(StreamId s) {
    stream = s;
    return *this;
  }
  /// The kernel's or collective's parameters (how it runs).
  Instr &withParams(DictionaryAttr p) {
    params = p;
    return *this;
  }
  /// Reads `v` where it is placed, as its own type.
  Instr &reads(Value v) {
    ins.push_back({v, v.getType()});
    return *this;
  }
  /// Reads each of `vs`, in order.
  Instr &readsAll(ValueRange vs) {
    for (Value v : vs)
      reads(v);
    return *this;
  }
  /// Writes `v` where it is placed, as its own type.
  Instr &writes(Value v) {
    outs.push_back({v, v.getType()});
    return *this;
  }
  /// Reads a `type` view at `offset` in block `storage` (a global's, before
  /// any load of it is lowered).
  Instr &readsFrom(int storage, int64_t offset, Type type) {
    inViews.push_back({storage, offset});
    ins.push_back({Value(), type});
    return *this;
  }
  /// Writes a `type` view at `offset` in block `storage`, whatever value
  /// (if any) is placed there: a copy into a global's storage.
  Instr &writesTo(int storage, int64_t offset, Type type) {
    outViews.push_back({storage, offset});
    outs.push_back({Value(), type});
    return *this;
  }

private:
  Instr(bool isCollective, StringRef name, StreamId stream, Location loc)
      : isCollective(isCollective), name(name.str()), stream(stream),
        params(DictionaryAttr::get(loc.getContext())), loc(loc) {}
};

/// A group of f32 elementwise ops lowered to one FusedElementwise kernel
/// (FuseElementwise.cpp): members in program order, the last is the root,
/// whose result is the only one read outside the group.
struct FusionGroup {
  SmallVector<Operation *> members;
  Operation *root = nullptr;
};

/// The value of a one-element f32, f16 or bf16 onnx.Constant, if `v` is
/// one: a fusion group reads it as a constant of its program
/// (FuseElementwise.cpp).
std::optional<float> scalarConstant(Value v);

/// The fusion groups of `body`, in program order (FuseElementwise.cpp).
std::vector<FusionGroup> findFusionGroups(Block &body);

/// The groups zero-fuse-elementwise marked in `body` (zero.fusion_group),
/// each with its members in program order and its last member as the root.
std::vector<FusionGroup> markedFusionGroups(Block &body);

/// The stream `op`'s kernel runs on: the communication stream when a pass
/// marked it zero.stream = "comm" (an op packing a collective's input), so
/// compute does not wait for it; else the compute stream.
StreamId kernelStream(Operation *op);

/// What a lowering produced: the pass's statistics (--mlir-pass-statistics).
struct ProgramSummary {
  int64_t instructions = 0; ///< kernels and collectives
  int64_t collectives = 0;
  int64_t fusedGroups = 0; ///< FusedElementwise kernels
  int64_t fusedOps = 0;    ///< elementwise ops inside them
};

/// The program's zrt.buffer ops, one per distinct view (EmitProgram.cpp).
class BufferTable;

/// Instruction selection and stream assignment: lowers one function to a
/// zrt.program whose buffers are views of zrt.blocks, with zrt.release
/// marks, before the memory plan (MemoryPlan.cpp), events (Events.cpp), the
/// in-order plan (InOrderPlan.cpp) and finalization (Finalize.cpp), each a
/// pass over the program.
class RuntimeLowering {
public:
  RuntimeLowering(ModuleOp module, func::FuncOp func, bool fuseElementwise = true)
      : module_(module), func_(func), b_(module.getContext()),
        fuseElementwise_(fuseElementwise) {}

  LogicalResult run();

  /// The program made by run().
  ::zero::zrt::ProgramOp program() const { return program_; }

  /// The program's counts, after run().
  ProgramSummary summary() const;

private:
  int newStorage(ArenaKind arena, int64_t bytes) {
    Storage s;
    s.arena = arena;
    s.bytes = bytes;
    storages_.push_back(s);
    return storages_.size() - 1;
  }
  void bind(Value v, int storage, int64_t offset = 0) {
    placement_[v] = {storage, offset};
  }
  /// The block `in` reads as its `k`th input: its explicit view's, else the
  /// one its value is placed in.
  int inputStorage(const Instr &in, size_t k) const {
    return k < in.inViews.size() ? in.inViews[k].first
                                 : placement_.lookup(in.ins[k].first).storage;
  }
  /// The block `in` writes as its `k`th output.
  int outputStorage(const Instr &in, size_t k) const {
    return k < in.outViews.size() ? in.outViews[k].first
                                  : placement_.lookup(in.outs[k].first).storage;
  }
  /// Marks the block `v` is placed in as a gathered parameter: it lives until
  /// its zero.release.
  void markGathered(Value v) { storages_[placement_.lookup(v).storage].gathered = true; }

  /// Instruction selection and stream assignment (LowerToRuntime.cpp).
  LogicalResult collect();
  /// A block for each of the function's arguments, and its input name.
  void bindArguments(Block &body);
  /// A training program's evaluation slice: the ops the loss output depends
  /// on, through operands and, across pipeline stages, from each zero.recv
  /// to its zero.send (the k-th of a stage pair and tag to the k-th). An
  /// evaluation step (zero-run --eval-tokens) runs their instructions only:
  /// the forward, never a gradient, an update or a store.
  void findEvalSlice(Block &body);
  /// Marks the instructions from `first` on, which `op` became, with its
  /// pipeline step and the ranks of its pipeline stage.
  LogicalResult markPipelinePlacement(Operation &op, size_t first);
  /// Dispatches `op` to the lowering of its op family.
  LogicalResult lowerOp(Operation *op);
  /// Appends `in` to the program and returns it for the caller to complete.
  Instr &append(Instr in) {
    instrs_.push_back(std::move(in));
    return instrs_.back();
  }
  /// A kernel for `op`: reads its operands, writes each result into a new
  /// activation block, on the stream its zero.stream asks for.
  Instr &appendKernel(Operation *op, StringRef name, DictionaryAttr params);
  /// A collective for `op` over its `group`, on the communication stream.
  Instr &appendCollective(Operation *op, StringRef name, DictionaryAttr params);
  /// Makes `in` read `op`'s operands and write each of its results, placed in
  /// a new activation block.
  void readOperandsWriteResults(Instr &in, Operation *op);

  // The op families (LowerToRuntime.cpp).
  /// Parameters and optimizer state: a load is the global's storage.
  LogicalResult lowerGlobalLoad(ml_program::GlobalLoadOp load);
  /// A store copies its value into the global unless it is already there.
  LogicalResult lowerGlobalStore(ml_program::GlobalStoreOp store);
  /// AdamW, SGD and LrSchedule: a kernel that updates in place when its
  /// result only goes back into a global.
  LogicalResult lowerOptimizerUpdate(Operation *update);
  /// zero.release: the end of a gathered parameter's live interval.
  LogicalResult lowerRelease(::zero::dist::ReleaseOp release);
  /// A collective of the zero dialect, named `name` in the runtime.
  LogicalResult lowerCollective(Operation *op, StringRef name,
                                ArrayRef<NamedAttribute> params = {});
  /// zero.all_gather: a collective whose result may be a gathered parameter.
  LogicalResult lowerAllGather(::zero::dist::AllGatherOp gather);
  /// zero.bucket_all_gather: one AllGather into one buffer for the bucket.
  LogicalResult lowerBucketAllGather(::zero::dist::BucketAllGatherOp gather);
  /// A pipeline stage's send to the next: a Send on the communication stream.
  LogicalResult lowerSend(::zero::dist::SendOp send);
  /// A pipeline stage's receive: a Recv on the compute stream.
  LogicalResult lowerRecv(::zero::dist::RecvOp recv);
  /// ZeRO++ block quantization (qwZ, qgZ) before a collective.
  LogicalResult lowerQuantize(::zero::dist::QuantizeOp quantize);
  /// Its inverse after the collective; qwZ's result is a gathered parameter.
  LogicalResult lowerDequantize(::zero::dist::DequantizeOp dequantize);
  /// This rank's shard of a replicated tensor.
  LogicalResult lowerLocalShard(::zero::dist::LocalShardOp shard);
  /// An onnx.Constant: a block of the constants arena, or a Fill kernel.
  LogicalResult lowerConstant(::zero::onnx::ConstantOp constant);
  /// Reshape-like ops: a view of their operand's block, no instruction.
  LogicalResult lowerView(Operation *view);
  /// onnx.Slice: a view when contiguous, else a Slice kernel.
  LogicalResult lowerSlice(::zero::onnx::SliceOp slice);
  /// ScatterND and ScatterElements: a kernel, in place when it may be.
  LogicalResult lowerScatter(Operation *scatter);
  /// The function's results become the program's outputs.
  LogicalResult lowerReturn(func::ReturnOp ret);
  /// Any other onnx op: the kernel of its name.
  LogicalResult lowerComputeOp(Operation *op);

  /// One FusedElementwise instruction for a fusion group, at its root.
  void lowerFusionGroup(const FusionGroup &group);
  /// The params storage of the global `sym` names (created on first use);
  /// -1 after an error on `user`.
  int globalStorage(Operation *user, SymbolRefAttr sym);
  /// The zrt.program before the memory plan (EmitProgram.cpp).
  void emit();
  /// The zrt.program op with its attributes, before func_; moves `b` into
  /// its body.
  void emitProgramOp(OpBuilder &b, ::zero::dist::TrainingAttr training);
  /// Streams, the world and the process groups, the arenas (unsized), a
  /// block per storage.
  void emitResources(OpBuilder &b);
  /// A zrt.global per global: its buffer, name, full type, role, shard.
  void emitGlobals(OpBuilder &b, BufferTable &buffers,
                   ::zero::dist::TrainingAttr training);
  /// Each instruction, and the release marks after it.
  void emitInstructions(OpBuilder &b, BufferTable &buffers);

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder b_;
  bool fuseElementwise_ = true;
  int64_t worldSize_ = 1;
  /// Ranks per pipeline stage (the plan's dp), and whether the program is cut
  /// into stages at all.
  int64_t pipelineDp_ = 1;
  bool pipelined_ = false;
  std::vector<Storage> storages_;
  llvm::DenseMap<Value, Placement> placement_;
  std::vector<Instr> instrs_;
  /// The evaluation slice (findEvalSlice); empty for a forward program.
  llvm::DenseSet<Operation *> evalOps_;
  /// Globals: (global op, storage).
  SmallVector<std::pair<ml_program::GlobalOp, int>> globals_;
  llvm::DenseMap<Operation *, int> globalStorage_;
  /// ZeRO-Offload: the optimizer updates in program order, the offloaded
  /// globals each reads (planned at the first update), how many are swapped
  /// in so far, and the updates swapped in but not yet out.
  struct OffloadedUpdate {
    Operation *update; ///< an optimizer update or a parameter shard's gather
    SmallVector<std::pair<int, Type>> storages;
    StreamId stream = kCompute; ///< the consumer's (a gather's: comm)
  };
  std::vector<OffloadedUpdate> offloadedUpdates_;
  bool offloadPlanned_ = false;
  size_t swappedIn_ = 0;
  std::vector<size_t> resident_;
  /// Bytes swapped in and not yet out as the swaps are placed, and their
  /// peak: the offload arena's planned resident bound (its lower_bound).
  int64_t residentBytes_ = 0, residentPeak_ = 0;
  /// Plans offloadedUpdates_ (once); places the swaps around update `op`.
  void planOffload();
  void swapAround(Operation *op);
  /// SwapOut for every update still resident (at the return).
  void swapOutResident(Location loc);
  SmallVector<std::pair<::zero::onnx::ConstantOp, int>> constants_;
  SmallVector<std::pair<std::string, Value>> inputs_, outputs_;
  /// zero.release ops met: (the instruction before it, its storage, where).
  struct ReleaseMark {
    int64_t after;
    int storage;
    Location loc;
  };
  std::vector<ReleaseMark> releaseMarks_;
  ::zero::zrt::ProgramOp program_;
  /// Fusion groups lowered, and the ops inside them.
  int64_t fusedGroups_ = 0, fusedOps_ = 0;
};

} // namespace lowering
} // namespace zero

#endif // ZERO_LIB_TRANSFORMS_LOWERING_RUNTIMELOWERING_H
