//===- ProgramModel.cpp - A zrt.program before it is finalized ------------===//

#include "ProgramModel.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <map>

using namespace mlir;
namespace zrt = ::zero::zrt;

namespace zero {
namespace lowering {

namespace {

std::optional<ArenaKind> arenaKind(StringRef name) {
  for (int a = 0; a < kNumArenas; ++a)
    if (name == kArenaNames[a])
      return ArenaKind(a);
  return std::nullopt;
}

Storage storageOf(zrt::BlockOp block, ArenaKind arena) {
  Storage st;
  st.arena = arena;
  st.bytes = block.getBytes();
  st.gathered = block.getGathered();
  if (auto v = block.getDefAttr())
    st.def = v.getInt();
  if (auto v = block.getLastUseAttr())
    st.lastUse = v.getInt();
  if (auto v = block.getStagesAttr())
    st.stages = uint64_t(v.getInt());
  if (auto v = block.getOffsetAttr())
    st.offset = v.getInt();
  if (auto v = block.getInOrderOffsetAttr())
    st.inOrderOffset = v.getInt();
  return st;
}

} // namespace

int ProgramModel::blockOfBuffer(FlatSymbolRefAttr buffer) const {
  auto it = bufferView_.find(buffer.getValue());
  return it == bufferView_.end() ? -1 : it->second.first;
}

FailureOr<ProgramModel> ProgramModel::read(zrt::ProgramOp program,
                                           StringRef pass) {
  ProgramModel m;
  m.program = program;
  std::map<int64_t, int64_t> recorder; // event -> the instruction recording it
  std::vector<int64_t> pendingWaits;
  auto blocksOf = [&](ArrayAttr refs, SmallVector<int> &blocks,
                      SmallVector<Type> &types) {
    for (Attribute a : refs) {
      auto it = m.bufferView_.find(cast<FlatSymbolRefAttr>(a).getValue());
      blocks.push_back(it == m.bufferView_.end() ? -1 : it->second.first);
      types.push_back(it == m.bufferView_.end() ? Type() : it->second.second);
    }
  };
  auto bindingBlock = [&](FlatSymbolRefAttr buffer, std::vector<int> &into) {
    into.push_back(m.blockOfBuffer(buffer));
  };
  for (Operation &op : program.getBody().front()) {
    if (auto arena = dyn_cast<zrt::ArenaOp>(op)) {
      std::optional<ArenaKind> kind = arenaKind(arena.getSymName());
      if (!kind)
        return arena.emitOpError()
               << pass << ": an arena of no known kind (params, constants, "
               << "activations, offload, host)";
      m.arenas[int(*kind)] = arena;
    } else if (auto block = dyn_cast<zrt::BlockOp>(op)) {
      std::optional<ArenaKind> kind = arenaKind(block.getArena());
      if (!kind)
        return block.emitOpError() << pass << ": in an arena of no known kind";
      m.blockIndex[block.getSymName()] = int(m.blocks.size());
      m.blocks.push_back(storageOf(block, *kind));
      m.blockOps.push_back(block);
    } else if (auto buffer = dyn_cast<zrt::BufferOp>(op)) {
      auto it = m.blockIndex.find(buffer.getArena());
      m.bufferView_[buffer.getSymName()] = {
          it == m.blockIndex.end() ? -1 : it->second, buffer.getType()};
    } else if (auto global = dyn_cast<zrt::GlobalOp>(op)) {
      bindingBlock(global.getBufferAttr(), m.globals);
    } else if (auto constant = dyn_cast<zrt::ConstantOp>(op)) {
      bindingBlock(constant.getBufferAttr(), m.constants);
    } else if (auto input = dyn_cast<zrt::InputOp>(op)) {
      bindingBlock(input.getBufferAttr(), m.inputs);
    } else if (auto output = dyn_cast<zrt::OutputOp>(op)) {
      bindingBlock(output.getBufferAttr(), m.outputs);
    } else if (auto release = dyn_cast<zrt::ReleaseOp>(op)) {
      auto it = m.blockIndex.find(release.getBlock());
      if (it == m.blockIndex.end())
        return release.emitOpError()
               << pass << ": releases no block of this program";
      Storage &st = m.blocks[size_t(it->second)];
      st.release = release;
      st.released = int64_t(m.instrs.size()) - 1;
      m.releases.push_back(release);
    } else if (auto record = dyn_cast<zrt::RecordOp>(op)) {
      const int64_t i = int64_t(m.instrs.size()) - 1;
      recorder[record.getEvent()] = i;
      if (i >= 0)
        m.eventOf[size_t(i)] = record.getEvent();
    } else if (auto wait = dyn_cast<zrt::WaitOp>(op)) {
      pendingWaits.push_back(
          recorder.count(wait.getEvent()) ? recorder[wait.getEvent()] : -1);
    } else if (isa<zrt::KernelOp, zrt::CollectiveOp>(op)) {
      ModelInstr in;
      in.op = &op;
      if (auto k = dyn_cast<zrt::KernelOp>(op)) {
        in.name = k.getKernel();
        in.stream = k.getStream() == streamName(kComm) ? kComm : kCompute;
        if (auto r = k.getRanksAttr())
          in.ranks.assign(r.asArrayRef().begin(), r.asArrayRef().end());
        blocksOf(k.getIns(), in.ins, in.inTypes);
        blocksOf(k.getOuts(), in.outs, in.outTypes);
      } else {
        auto c = cast<zrt::CollectiveOp>(op);
        in.isCollective = true;
        in.name = c.getKind();
        in.stream = c.getStream() == streamName(kComm) ? kComm : kCompute;
        if (auto r = c.getRanksAttr())
          in.ranks.assign(r.asArrayRef().begin(), r.asArrayRef().end());
        blocksOf(c.getIns(), in.ins, in.inTypes);
        blocksOf(c.getOuts(), in.outs, in.outTypes);
      }
      m.instrs.push_back(std::move(in));
      m.waits.push_back(std::move(pendingWaits));
      pendingWaits.clear();
      m.eventOf.push_back(-1);
    }
  }
  return m;
}

} // namespace lowering
} // namespace zero
