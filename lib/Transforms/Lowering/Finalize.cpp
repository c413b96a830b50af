//===- Finalize.cpp - zero-finalize-program
//---------------------------------===//
//
// The last step of zero-lower-to-runtime: every buffer that is a view of a
// planned zrt.block becomes the same view of the block's arena, at the
// block's offset (and in-order offset) plus its own, and the blocks are
// erased. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "ProgramModel.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace zero {
#define GEN_PASS_DEF_ZEROFINALIZEPROGRAMPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace zrt = ::zero::zrt;

namespace {

struct ZeroFinalizeProgramPass
    : public ::zero::impl::ZeroFinalizeProgramPassBase<
          ZeroFinalizeProgramPass> {
  using Base::Base;

  void runOnOperation() override {
    zrt::ProgramOp program = getOperation();
    Block &body = program.getBody().front();
    llvm::StringMap<zrt::BlockOp> blocks;
    for (Operation &op : body) {
      if (auto release = dyn_cast<zrt::ReleaseOp>(op)) {
        release.emitOpError(
            "zero-finalize-program: a release left (run zero-plan-memory "
            "first)");
        return signalPassFailure();
      }
      auto block = dyn_cast<zrt::BlockOp>(op);
      if (!block)
        continue;
      if (!block.getOffsetAttr()) {
        block.emitOpError(
            "zero-finalize-program: a block without an offset (run "
            "zero-plan-memory first)");
        return signalPassFailure();
      }
      blocks[block.getSymName()] = block;
    }
    Builder b(&getContext());
    for (auto buffer : body.getOps<zrt::BufferOp>()) {
      auto it = blocks.find(buffer.getArena());
      if (it == blocks.end())
        continue; // already in its arena
      zrt::BlockOp block = it->second;
      const int64_t view = int64_t(buffer.getOffset());
      if (auto inOrder = block.getInOrderOffsetAttr())
        buffer.setInOrderOffsetAttr(
            b.getI64IntegerAttr(inOrder.getInt() + view));
      buffer.setArenaAttr(block.getArenaAttr());
      buffer.setOffset(uint64_t(block.getOffsetAttr().getInt() + view));
    }
    for (auto &entry : blocks)
      entry.second.erase();
  }
};

} // namespace
