//===- GatherPlan.h - What the ZeRO passes know about gathers ---*- C++ -*-===//
//
// The release, prefetch, bucket and report passes all reason about the same
// things: which ops gather parameters, how many bytes each brings in, and the
// parameter views (unpad slice, reshape) through which compute uses them.
// Used by the ZeRO passes, the pipeline split and the lowering.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_TRANSFORMS_ANALYSIS_GATHERPLAN_H
#define ZERO_TRANSFORMS_ANALYSIS_GATHERPLAN_H

#include "zero/Dialect/ONNX/ONNXDialect.h"
#include "zero/Dialect/Zero/ZeroDialect.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <vector>

namespace zero {

/// Element offset of a slice whose result is one contiguous run of its input
/// (unit steps; every dim after the first partial one is whole; every dim
/// before it has extent 1), or nothing: zero-lower-to-runtime makes such a
/// slice a view of its input's bytes, any other a copy.
std::optional<int64_t> contiguousSliceOffset(onnx::SliceOp slice);

/// True for a value that holds a rank's part of a parameter: a global's load,
/// or hpZ's secondary shard (a zero.local_shard over a process group, taken
/// from a gathered parameter and kept for the backward re-gather).
inline bool isParameterShard(mlir::Value v) {
  if (v.getDefiningOp<mlir::ml_program::GlobalLoadOp>())
    return true;
  auto secondary = v.getDefiningOp<dist::LocalShardOp>();
  return secondary && secondary.getGroupAttr();
}

/// True for ops that bring a whole parameter in, i.e. whose results are the
/// gathered parameters that prefetch, bucket, release and the memory plan
/// reason about:
///  - an all-gather (single or bucketed) whose every operand is a parameter
///    shard;
///  - with qwZ, the zero.dequantize of all-gathered quantized shards (the
///    gathers of int8 bytes and scales before it are ordinary transfers).
/// The all-gather of a training step's updated shards (zero-optimizer, stages
/// 1-2) gathers a computed value: it is not a parameter fetch to prefetch,
/// bucket or release.
/// True for qwZ's all-gather (single or bucketed) of quantized parameter
/// shards (data or scales): the transfer before a zero.dequantize.
inline bool isQuantizedShardGather(mlir::Operation *op) {
  if (!op || !llvm::isa<dist::AllGatherOp, dist::BucketAllGatherOp>(op) ||
      op->getNumOperands() == 0)
    return false;
  for (mlir::Value v : op->getOperands()) {
    auto q = v.getDefiningOp<dist::QuantizeOp>();
    if (!q || !isParameterShard(q.getInput()))
      return false;
  }
  return true;
}

inline bool isGather(mlir::Operation *op) {
  if (auto dq = llvm::dyn_cast<dist::DequantizeOp>(op))
    return isQuantizedShardGather(dq.getData().getDefiningOp());
  if (!llvm::isa<dist::AllGatherOp, dist::BucketAllGatherOp>(op))
    return false;
  for (mlir::Value v : op->getOperands())
    if (!isParameterShard(v))
      return false;
  return true;
}

/// The process group zero-pipeline-split puts a stage's data-parallel
/// collectives on (each stage's replicas).
inline constexpr llvm::StringLiteral kStageReplicasGroup = "dp";

/// True for a collective over the whole data-parallel world: one without a
/// process group, or, in a program cut into pipeline stages, one over the
/// stage's replicas (@dp). ZeRO++'s passes rewrite these and leave the
/// collectives over their own groups (hpZ's, qgZ's) alone.
inline bool overDataParallelWorld(mlir::Operation *op) {
  auto group = op->getAttrOfType<mlir::FlatSymbolRefAttr>("group");
  return !group || group.getValue() == kStageReplicasGroup;
}

/// Bytes of a ranked tensor type.
int64_t tensorBytes(mlir::Type type);

/// Bytes a gather op brings into memory (the sum of its results).
int64_t gatheredBytes(mlir::Operation *gather);

/// True for the free views the partitioner puts on a gathered parameter (the
/// unpad Slice and the Reshape back to the parameter's shape) when `op` is
/// one of them, i.e. its operand is a gathered value or a view of one.
bool isParameterView(mlir::Operation *op);

/// The values compute sees for one gathered result: the result itself and the
/// views the partitioner put on it (unpad Slice, Reshape), transitively.
llvm::SmallVector<mlir::Value> parameterViews(mlir::Value gathered);

/// The first op in `block` (in order) that uses any view of any result of
/// `gather` other than the view chain itself; null if none.
mlir::Operation *firstUse(mlir::Operation *gather);

/// The last such op; null if none.
mlir::Operation *lastUse(mlir::Operation *gather);

/// The liveness of gathered parameters in one block: the one analysis the
/// prefetch, release and report passes and the runtime lowering read, so
/// they agree on when a gathered buffer lives and how many gathered bytes are
/// live at each point.
///
/// A gather's result is live from the gather to its death: its
/// `zero.release` when it has one (the single source of truth; a use after it
/// is an error), otherwise its last use, where zero-release will put the
/// release (a value never released is kept by the lowering to the end of the
/// program). A bucket's results are views of one buffer (zero-lower-to-
/// runtime), which holds all of the bucket's bytes from the bucket op to the
/// last result's death. Built in one walk; rebuild it after moving ops.
class GatherLiveness {
public:
  /// One gather op and what it brings in.
  struct Gather {
    mlir::Operation *op;
    int64_t bytes;             ///< sum of its results
    mlir::Operation *firstUse; ///< null: unused
    mlir::Operation *death;    ///< the last result's death; null: unused
    bool released;             ///< some result has a zero.release
    /// Per result: its bytes and where it dies (its release, else its last
    /// use; null: unused).
    llvm::SmallVector<std::pair<int64_t, mlir::Operation *>, 1> results;
  };

  explicit GatherLiveness(mlir::Block &block);

  llvm::ArrayRef<Gather> gathers() const { return gathers_; }
  /// Program-order index of an op of the block.
  int64_t position(mlir::Operation *op) const { return position_.lookup(op); }
  /// Gathered bytes live while the op at `position` runs, leaving out the
  /// gather `except` (to ask what moving it would add).
  int64_t liveBytesAt(int64_t position, mlir::Operation *except = nullptr) const;
  /// The most gathered bytes live at once anywhere in the block.
  int64_t peakBytes() const;
  /// The most gathered bytes that would be live at once were the gathers
  /// `members` (in program order) one bucket: its buffer holds all their
  /// bytes from the first member to the last death among them.
  int64_t peakAsBucket(llvm::ArrayRef<mlir::Operation *> members) const;

private:
  /// Adds (sign +1) the live bytes per position of gather `g` to `live`, as
  /// a difference array.
  void addRange(const Gather &g, std::vector<int64_t> &live, int sign) const;

  mlir::Block &block_;
  llvm::DenseMap<mlir::Operation *, int64_t> position_;
  llvm::SmallVector<Gather> gathers_;
  llvm::DenseMap<mlir::Operation *, size_t> indexOf_;
  std::vector<int64_t> live_; ///< per position, all gathers
};

} // namespace zero

#endif // ZERO_TRANSFORMS_ANALYSIS_GATHERPLAN_H
