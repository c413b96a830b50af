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

LogicalResult AllReduceOp::verify() {
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1, 1);
}

LogicalResult BroadcastOp::verify() {
  if (getRoot() < 0 || getRoot() >= getWorld())
    return emitOpError() << "root " << getRoot() << " is not a rank of a world of "
                         << getWorld();
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1, 1);
}

#define GET_OP_CLASSES
#include "zero/Dialect/Zero/ZeroOps.cpp.inc"
