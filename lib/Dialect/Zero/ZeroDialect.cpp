//===- ZeroDialect.cpp - ZeRO collectives and life cycle ------------------===//
//
// Registers the zero ops and checks the shape rules of each collective.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/ZeroDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace zero::dist;

#include "zero/Dialect/Zero/ZeroOpsDialect.cpp.inc"

void ZeroDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zero/Dialect/Zero/ZeroOps.cpp.inc"
      >();
}

/// Checks `world` and that `in` and `out` are 1-D of one element type with
/// out = in * numerator / denominator elements.
static LogicalResult verifyFlatRatio(Operation *op, Type in, Type out,
                                     int64_t world, int64_t num, int64_t den) {
  if (world < 1)
    return op->emitOpError() << "world must be >= 1, got " << world;
  auto it = cast<RankedTensorType>(in), ot = cast<RankedTensorType>(out);
  if (it.getElementType() != ot.getElementType())
    return op->emitOpError() << "input and result element types differ";
  if (num == den)
    return it.getShape() == ot.getShape()
               ? success()
               : op->emitOpError() << "result shape must equal the input shape";
  if (it.getRank() != 1 || ot.getRank() != 1)
    return op->emitOpError() << "operates on flat (1-D) tensors";
  if (it.getNumElements() * num != ot.getNumElements() * den)
    return op->emitOpError() << "expects " << it.getNumElements() * num / den
                             << " result elements for " << it.getNumElements()
                             << " input elements and world " << world << ", got "
                             << ot.getNumElements();
  return success();
}

LogicalResult AllGatherOp::verify() {
  return verifyFlatRatio(*this, getShard().getType(), getType(), getWorld(),
                         getWorld(), 1);
}

LogicalResult BucketAllGatherOp::verify() {
  if (getShards().size() != getResults().size() || getShards().empty())
    return emitOpError() << "needs one result per shard and at least one shard";
  for (auto [s, r] : llvm::zip(getShards(), getResults()))
    if (failed(verifyFlatRatio(*this, s.getType(), r.getType(), getWorld(),
                               getWorld(), 1)))
      return failure();
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1,
                         getWorld());
}

LogicalResult LocalShardOp::verify() {
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1,
                         getWorld());
}

LogicalResult AllReduceOp::verify() {
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1, 1);
}

LogicalResult BroadcastOp::verify() {
  if (getRoot() < 0 || getRoot() >= getWorld())
    return emitOpError() << "root " << getRoot() << " is not a rank of a world of "
                         << getWorld();
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1, 1);
}

/// `v` is a scalar (rank 0) tensor of element type `elem`.
static bool isScalarOf(Value v, Type elem) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() == 0 && t.getElementType() == elem;
}

/// The operands every optimizer update shares: parameter and gradient of one
/// f32 type, i64 step, f32 lr and grad_scale scalars; state and results of
/// the parameter's type.
static LogicalResult verifyUpdate(Operation *op, Value param, Value grad, Value step,
                                  Value lr, Value scale, ValueRange state,
                                  ValueRange results) {
  MLIRContext *ctx = op->getContext();
  Type f32 = Float32Type::get(ctx);
  Type pt = param.getType();
  if (cast<RankedTensorType>(pt).getElementType() != f32)
    return op->emitOpError() << "updates f32 parameters, got " << pt;
  if (grad.getType() != pt)
    return op->emitOpError() << "gradient type " << grad.getType()
                             << " differs from the parameter type " << pt;
  if (!isScalarOf(step, IntegerType::get(ctx, 64)))
    return op->emitOpError() << "step must be an i64 scalar, got " << step.getType();
  if (!isScalarOf(lr, f32) || !isScalarOf(scale, f32))
    return op->emitOpError() << "lr and grad_scale must be f32 scalars";
  for (Value v : state)
    if (v.getType() != pt)
      return op->emitOpError() << "optimizer state type " << v.getType()
                               << " differs from the parameter type " << pt;
  for (Value v : results)
    if (v.getType() != pt)
      return op->emitOpError() << "result type " << v.getType()
                               << " differs from the parameter type " << pt;
  return success();
}

LogicalResult AdamWOp::verify() {
  if (getBeta1().convertToDouble() < 0 || getBeta1().convertToDouble() >= 1 ||
      getBeta2().convertToDouble() < 0 || getBeta2().convertToDouble() >= 1)
    return emitOpError() << "betas must be in [0, 1)";
  if (getEps().convertToDouble() < 0 || getWeightDecay().convertToDouble() < 0)
    return emitOpError() << "eps and weight_decay must be >= 0";
  return verifyUpdate(*this, getParam(), getGrad(), getStep(), getLr(), getGradScale(),
                      {getExpAvg(), getExpAvgSq()}, getResults());
}

LogicalResult SGDOp::verify() {
  bool momentum = getMomentum().convertToDouble() != 0;
  if (momentum != bool(getMomentumBuffer()) || momentum != bool(getMomentumBufferOut()))
    return emitOpError() << "has a momentum buffer operand and result exactly when "
                            "momentum is non-zero";
  if (getNesterov() && (!momentum || getDampening().convertToDouble() != 0))
    return emitOpError() << "nesterov needs momentum and zero dampening";
  SmallVector<Value> state;
  if (getMomentumBuffer())
    state.push_back(getMomentumBuffer());
  return verifyUpdate(*this, getParam(), getGrad(), getStep(), getLr(), getGradScale(),
                      state, getResults());
}

LogicalResult LrScheduleOp::verify() {
  StringRef type = getSchedule();
  if (type != "constant" && type != "WarmupLR" && type != "WarmupDecayLR" &&
      type != "WarmupCosineLR")
    return emitOpError() << "unknown schedule '" << type
                         << "' (constant, WarmupLR, WarmupDecayLR, WarmupCosineLR)";
  if (!isScalarOf(getStep(), IntegerType::get(getContext(), 64)) ||
      !isScalarOf(getLr(), Float32Type::get(getContext())))
    return emitOpError() << "maps an i64 scalar step to an f32 scalar rate";
  return success();
}

#define GET_OP_CLASSES
#include "zero/Dialect/Zero/ZeroOps.cpp.inc"
