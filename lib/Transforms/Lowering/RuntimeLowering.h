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

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

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

inline int64_t byteSize(Type t) { return ::zero::tensorBytes(t); }

enum class ArenaKind { Params = 0, Constants = 1, Activations = 2 };
enum StreamId { kCompute = 0, kComm = 1 };

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

/// One runtime instruction before events are added.
struct Instr {
  bool collective = false;
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
};

/// A group of f32 elementwise ops lowered to one FusedElementwise kernel
/// (FuseElementwise.cpp): members in program order, the last is the root,
/// whose result is the only one read outside the group.
struct FusionGroup {
  SmallVector<Operation *> members;
  Operation *root = nullptr;
};

/// The value of a one-element f32 onnx.Constant, if `v` is one: a fusion
/// group reads it as a constant of its program (FuseElementwise.cpp).
std::optional<float> scalarConstant(Value v);

/// The fusion groups of `body`, in program order (FuseElementwise.cpp).
std::vector<FusionGroup> findFusionGroups(Block &body);

/// Lowers one function to a zrt.program in four steps, one file each.
class RuntimeLowering {
public:
  RuntimeLowering(ModuleOp module, func::FuncOp func, bool fuseElementwise = true)
      : module_(module), func_(func), b_(module.getContext()),
        fuseElementwise_(fuseElementwise) {}

  LogicalResult run();

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
  /// Instruction selection and stream assignment (LowerToRuntime.cpp).
  LogicalResult collect();
  LogicalResult lowerOp(Operation *op);
  /// One FusedElementwise instruction for a fusion group, at its root.
  void lowerFusionGroup(const FusionGroup &group);
  /// The params storage of the global `sym` names (created on first use);
  /// -1 after an error on `user`.
  int globalStorage(Operation *user, SymbolRefAttr sym);
  /// Live intervals and arena offsets (MemoryPlan.cpp).
  LogicalResult computeLiveness();
  void planMemory();
  std::vector<int64_t> placeBlocks(const std::vector<int> &order,
                                   const std::vector<int64_t> &def,
                                   const std::vector<int64_t> &last,
                                   int64_t *size) const;
  /// The in-order plan: the activations the communication stream writes,
  /// placed again for streams that take turns (MemoryPlan.cpp). After
  /// computeEvents, whose waits it reads.
  void planInOrder();
  /// Record/wait events for cross-stream dependencies (Events.cpp).
  void computeEvents();
  /// The zrt.program (EmitProgram.cpp).
  void emit();

  Type viewType(Value v) { return v.getType(); }

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder b_;
  bool fuseElementwise_ = true;
  int64_t worldSize_ = 1;
  std::vector<Storage> storages_;
  llvm::DenseMap<Value, Placement> placement_;
  std::vector<Instr> instrs_;
  /// Globals: (global op, storage).
  SmallVector<std::pair<ml_program::GlobalOp, int>> globals_;
  llvm::DenseMap<Operation *, int> globalStorage_;
  SmallVector<std::pair<::zero::onnx::ConstantOp, int>> constants_;
  SmallVector<std::pair<std::string, Value>> inputs_, outputs_;
  int64_t arenaSize_[3] = {0, 0, 0}, noReuse_[3] = {0, 0, 0}, lowerBound_[3] = {0, 0, 0};
  /// The activations arena's size in the in-order plan (0: no such plan).
  int64_t inOrderSize_ = 0;
  /// Per instruction: the event it records (-1: none) and those it waits for.
  std::vector<int64_t> eventOf_;
  std::vector<std::vector<int64_t>> waits_;
};

} // namespace lowering
} // namespace zero

#endif // ZERO_LIB_TRANSFORMS_LOWERING_RUNTIMELOWERING_H
