//===- GatherPlan.cpp - What the ZeRO passes know about gathers -----------===//
//
// Shared queries over gathered parameters for the ZeRO passes.
//
//===----------------------------------------------------------------------===//

#include "GatherPlan.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

int64_t zero::tensorBytes(Type type) {
  auto t = cast<RankedTensorType>(type);
  Type e = t.getElementType();
  int64_t elem = e.isInteger(1) ? 1 : (e.getIntOrFloatBitWidth() + 7) / 8;
  return t.getNumElements() * elem;
}

int64_t zero::gatheredBytes(Operation *gather) {
  int64_t n = 0;
  for (Value r : gather->getResults())
    n += tensorBytes(r.getType());
  return n;
}

/// Slice/Reshape: the kinds of op the partitioner uses as parameter views.
static bool isViewKind(Operation *op) {
  return isa<zero::onnx::SliceOp, zero::onnx::ReshapeOp>(op);
}

bool zero::isParameterView(Operation *op) {
  if (!isViewKind(op) || op->getNumOperands() == 0)
    return false;
  Value source = op->getOperand(0);
  while (Operation *def = source.getDefiningOp()) {
    if (isGather(def))
      return true;
    if (!isViewKind(def))
      return false;
    source = def->getOperand(0);
  }
  return false;
}

SmallVector<Value> zero::parameterViews(Value gathered) {
  SmallVector<Value> out{gathered};
  for (size_t i = 0; i < out.size(); ++i)
    for (Operation *user : out[i].getUsers())
      if (isViewKind(user) && user->getBlock() == gathered.getParentBlock())
        out.push_back(user->getResult(0));
  return out;
}

/// Ops (outside the view chain) that use any view of any result of `gather`.
static SmallVector<Operation *> computeUsers(Operation *gather) {
  SmallVector<Operation *> users;
  for (Value r : gather->getResults())
    for (Value v : zero::parameterViews(r))
      for (Operation *user : v.getUsers())
        if (!isViewKind(user) && !isa<zero::dist::ReleaseOp>(user))
          users.push_back(user);
  return users;
}

Operation *zero::firstUse(Operation *gather) {
  Operation *first = nullptr;
  for (Operation *u : computeUsers(gather)) {
    while (u->getBlock() != gather->getBlock())
      u = u->getParentOp();
    if (!first || u->isBeforeInBlock(first))
      first = u;
  }
  return first;
}

Operation *zero::lastUse(Operation *gather) {
  Operation *last = nullptr;
  for (Operation *u : computeUsers(gather)) {
    while (u->getBlock() != gather->getBlock())
      u = u->getParentOp();
    if (!last || last->isBeforeInBlock(u))
      last = u;
  }
  return last;
}
