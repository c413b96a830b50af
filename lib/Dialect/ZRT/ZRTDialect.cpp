//===- ZRTDialect.cpp - The runtime program dialect -----------------------===//
//
// Registers the zrt ops and checks that every buffer, arena, stream and group
// an instruction names is declared in its program.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/ZRT/ZRTDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace zero::zrt;

#include "zero/Dialect/ZRT/ZRTOpsDialect.cpp.inc"

void ZRTDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zero/Dialect/ZRT/ZRTOps.cpp.inc"
      >();
}

LogicalResult ProgramOp::verify() {
  mlir::SymbolTable symbols(*this);
  auto expect = [&](Operation *user, Attribute ref, StringRef kind,
                    auto isKind) -> LogicalResult {
    auto sym = cast<FlatSymbolRefAttr>(ref);
    Operation *def = symbols.lookup(sym.getValue());
    if (!def || !isKind(def))
      return user->emitOpError() << "refers to " << sym << ", which is not "
                                 << kind << " of this program";
    return success();
  };
  auto isBuffer = [](Operation *op) { return isa<BufferOp>(op); };
  auto isStream = [](Operation *op) { return isa<StreamOp>(op); };
  auto isArena = [](Operation *op) { return isa<ArenaOp>(op); };
  auto isArenaOrBlock = [](Operation *op) { return isa<ArenaOp, BlockOp>(op); };
  auto isBlock = [](Operation *op) { return isa<BlockOp>(op); };
  auto isGroup = [](Operation *op) { return isa<GroupOp>(op); };
  for (Operation &op : getBody().front()) {
    LogicalResult ok = success();
    if (auto b = dyn_cast<BufferOp>(op)) {
      ok = expect(&op, b.getArenaAttr(), "an arena or a block", isArenaOrBlock);
    } else if (auto block = dyn_cast<BlockOp>(op)) {
      ok = expect(&op, block.getArenaAttr(), "an arena", isArena);
    } else if (auto release = dyn_cast<ReleaseOp>(op)) {
      ok = expect(&op, release.getBlockAttr(), "a block", isBlock);
    } else if (auto g = dyn_cast<GlobalOp>(op)) {
      ok = expect(&op, g.getBufferAttr(), "a buffer", isBuffer);
    } else if (auto c = dyn_cast<ConstantOp>(op)) {
      ok = expect(&op, c.getBufferAttr(), "a buffer", isBuffer);
    } else if (auto in = dyn_cast<InputOp>(op)) {
      ok = expect(&op, in.getBufferAttr(), "a buffer", isBuffer);
    } else if (auto out = dyn_cast<OutputOp>(op)) {
      ok = expect(&op, out.getBufferAttr(), "a buffer", isBuffer);
    } else if (auto k = dyn_cast<KernelOp>(op)) {
      ok = expect(&op, k.getStreamAttr(), "a stream", isStream);
      for (Attribute a : k.getIns())
        ok = succeeded(ok) ? expect(&op, a, "a buffer", isBuffer) : ok;
      for (Attribute a : k.getOuts())
        ok = succeeded(ok) ? expect(&op, a, "a buffer", isBuffer) : ok;
    } else if (auto c = dyn_cast<CollectiveOp>(op)) {
      ok = expect(&op, c.getStreamAttr(), "a stream", isStream);
      ok = succeeded(ok) ? expect(&op, c.getGroupAttr(), "a group", isGroup)
                         : ok;
      for (Attribute a : c.getIns())
        ok = succeeded(ok) ? expect(&op, a, "a buffer", isBuffer) : ok;
      for (Attribute a : c.getOuts())
        ok = succeeded(ok) ? expect(&op, a, "a buffer", isBuffer) : ok;
    } else if (auto r = dyn_cast<RecordOp>(op)) {
      ok = expect(&op, r.getStreamAttr(), "a stream", isStream);
    } else if (auto w = dyn_cast<WaitOp>(op)) {
      ok = expect(&op, w.getStreamAttr(), "a stream", isStream);
    }
    if (failed(ok))
      return failure();
  }
  return success();
}

#define GET_OP_CLASSES
#include "zero/Dialect/ZRT/ZRTOps.cpp.inc"
