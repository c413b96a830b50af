//===- EmitProgram.cpp - zero-lower-to-runtime: zrt emission
//----------------===//
//
// Writes the zrt.program before the memory plan: streams, the world group,
// the arenas (sized by zero-plan-memory), a zrt.block per storage, one buffer
// per distinct (storage, offset, type) view (at the block), globals,
// constants, bindings, and the instructions with a zrt.release mark where
// each zero.release was. The passes after it place the blocks, add events
// and finalize the buffers in place, so the program keeps this op order.
//
//===----------------------------------------------------------------------===//

#include "ProgramModel.h"

#include "zero/Dialect/Zero/ZeroAttributes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Debug.h"

#include <map>
#include <tuple>

#define DEBUG_TYPE "zero-lower-to-runtime"

using namespace mlir;

namespace zero {
namespace lowering {

/// The symbol of storage block `s`.
static std::string blockName(int s) { return "blk" + std::to_string(s); }

/// The program's zrt.buffer ops: one per distinct (storage, offset, type)
/// view, named b0, b1, ... in the order they are first asked for, each
/// created where the builder stands when it is, as a view of its block.
class BufferTable {
public:
  BufferTable(OpBuilder &b, Location loc, const std::vector<Storage> &storages,
              const llvm::DenseMap<Value, Placement> &placement)
      : b_(b), loc_(loc), storages_(storages), placement_(placement) {}

  /// The buffer of a `type` view at `offset` in block `storage`.
  FlatSymbolRefAttr at(int storage, int64_t offset, Type type) {
    std::string key;
    llvm::raw_string_ostream(key) << type;
    auto it = buffers_.find({storage, offset, key});
    if (it != buffers_.end())
      return it->second;
    std::string name = "b" + std::to_string(buffers_.size());
    ::zero::zrt::BufferOp::create(b_, loc_, name, type, blockName(storage),
                                  offset, nullptr);
    auto ref = FlatSymbolRefAttr::get(b_.getContext(), name);
    buffers_[{storage, offset, key}] = ref;
    return ref;
  }
  /// The buffer of a `type` view of `v` where it is placed.
  FlatSymbolRefAttr of(Value v, Type type) {
    Placement p = placement_.lookup(v);
    return at(p.storage, p.offset, type);
  }

private:
  OpBuilder &b_;
  Location loc_;
  const std::vector<Storage> &storages_;
  const llvm::DenseMap<Value, Placement> &placement_;
  std::map<std::tuple<int, int64_t, std::string>, FlatSymbolRefAttr> buffers_;
};

void RuntimeLowering::emitProgramOp(OpBuilder &b,
                                    ::zero::dist::TrainingAttr training) {
  b.setInsertionPoint(func_);
  auto program = ::zero::zrt::ProgramOp::create(b, func_.getLoc(), func_.getName(), worldSize_);
  program_ = program;
  if (training)
    program->setAttr("training", training);
  // A pipeline: its replicas per stage (the runtime's data split and shard
  // positions).
  if (auto plan = attrs::kPipelinePlan.get(module_))
    program->setAttr("pipeline_dp", b.getI32IntegerAttr(int32_t(plan.getDp())));
  Block *body = new Block();
  program.getBody().push_back(body);
  b.setInsertionPointToStart(body);
}

void RuntimeLowering::emitResources(OpBuilder &b) {
  Location loc = func_.getLoc();
  for (int s : {kCompute, kComm})
    ::zero::zrt::StreamOp::create(b, loc, streamName(s), streamName(s));
  SmallVector<int64_t> ranks;
  for (int64_t r = 0; r < worldSize_; ++r)
    ranks.push_back(r);
  ::zero::zrt::GroupOp::create(b, loc, "world", b.getDenseI64ArrayAttr(ranks), nullptr);
  // Sub-communicators (hpZ, qgZ's hierarchy): every rank lists all of them.
  for (auto pg : module_.getOps<::zero::dist::ProcessGroupOp>())
    ::zero::zrt::GroupOp::create(b, loc, pg.getSymName(), pg.getRanksAttr(),
                                 pg.getGroupSizeAttr());
  // The offload arena (a swap file in nvme_path) and the host arena
  // (offload device cpu) only when something lives there; the offload
  // arena's lower bound is the swaps' resident peak until zero-plan-memory
  // sizes it.
  bool used[kNumArenas] = {true, true, true, false, false};
  for (const Storage &st : storages_)
    if (st.bytes > 0)
      used[int(st.arena)] = true;
  for (int a = 0; a < kNumArenas; ++a) {
    if (!used[a])
      continue;
    StringAttr path;
    if (a == int(ArenaKind::Offload))
      if (auto cfg = attrs::kOffloadConfig.get(module_))
        path = b.getStringAttr(cfg.getNvmePath());
    ::zero::zrt::ArenaOp::create(b, loc, kArenaNames[a], 0, 0,
                                 a == int(ArenaKind::Offload) ? residentPeak_
                                                              : 0,
                                 nullptr, path, a == int(ArenaKind::Host));
  }
  for (auto [s, st] : llvm::enumerate(storages_)) {
    // def -1: bound before the run (globals, constants, inputs).
    ::zero::zrt::BlockOp::create(
        b, loc, blockName(int(s)), kArenaNames[int(st.arena)],
        uint64_t(st.bytes), st.gathered,
        st.def == -1 ? b.getI64IntegerAttr(-1) : IntegerAttr(), nullptr,
        nullptr, nullptr, nullptr);
  }
}

void RuntimeLowering::emitGlobals(OpBuilder &b, BufferTable &buffers,
                                  ::zero::dist::TrainingAttr training) {
  Location loc = func_.getLoc();
  for (auto &[global, s] : globals_) {
    auto type = cast<RankedTensorType>(global.getType());
    auto ref = buffers.at(s, 0, type);
    Type full = type;
    if (TypeAttr f = attrs::kFullType.get(global))
      full = f.getValue();
    StringAttr tensor = attrs::kTensor.get(global);
    auto op = ::zero::zrt::GlobalOp::create(
        b, loc, global.getSymName(), tensor ? tensor.getValue() : global.getSymName(), full,
        ref.getValue(), nullptr, nullptr, nullptr, attrs::kGradType.get(global),
        attrs::kWidenFrom.get(global) ? b.getStringAttr(attrs::kWidenFrom.get(global).getValue())
                                      : nullptr);
    // What the global holds: in a training program, parameters are trained
    // or frozen, optimizer state and the step counter start at zero.
    if (StringAttr role = attrs::kRole.getAttr(global))
      op.setRoleAttr(role);
    else if (training)
      op.setRoleAttr(
          b.getStringAttr(attrs::kTrainable.isSetOn(global) ? "parameter" : "frozen"));
    if (auto shard = attrs::kShard.get(global)) {
      op.setShardWorldAttr(b.getI64IntegerAttr(shard.getWorld()));
      op.setPaddedNumelAttr(b.getI64IntegerAttr(shard.getPaddedNumel()));
    }
  }
}

/// The floating-point operations of a product kernel (2 per multiply-add:
/// MatMul, Gemm, Conv, ConvTranspose), for zero-run's MFU; 0 for any other
/// kernel, whose arithmetic the estimate leaves out as PaLM's MFU does.
static int64_t productFlops(const Instr &in) {
  if (in.isCollective || in.outs.empty() || in.ins.size() < 2)
    return 0;
  auto out = dyn_cast<RankedTensorType>(in.outs[0].second);
  auto a = dyn_cast<RankedTensorType>(in.ins[0].second);
  auto w = dyn_cast<RankedTensorType>(in.ins[1].second);
  if (!out || !a || !w || !out.hasStaticShape() || !a.hasStaticShape() ||
      !w.hasStaticShape() || a.getRank() == 0 || w.getRank() == 0)
    return 0;
  if (in.name == "MatMul")
    return 2 * out.getNumElements() * a.getShape().back();
  if (in.name == "Gemm" && a.getRank() == 2) {
    auto transA = in.params.getAs<IntegerAttr>("transA");
    return 2 * out.getNumElements() * a.getDimSize(transA && transA.getInt() ? 0 : 1);
  }
  if (in.name == "Conv" && w.getDimSize(0) > 0)
    return 2 * out.getNumElements() * (w.getNumElements() / w.getDimSize(0));
  if (in.name == "ConvTranspose" && w.getDimSize(0) > 0)
    return 2 * a.getNumElements() * (w.getNumElements() / w.getDimSize(0));
  return 0;
}

void RuntimeLowering::emitInstructions(OpBuilder &b, BufferTable &buffers) {
  MLIRContext *ctx = b.getContext();
  auto streamRef = [&](int s) {
    return FlatSymbolRefAttr::get(ctx, streamName(s));
  };
  auto worldRef = FlatSymbolRefAttr::get(ctx, "world");
  auto ranksAttr = [&](const Instr &in) -> DenseI64ArrayAttr {
    return in.ranks.empty() ? nullptr : b.getDenseI64ArrayAttr(in.ranks);
  };
  auto evalAttr = [&](const Instr &in) { return in.eval ? b.getUnitAttr() : UnitAttr(); };
  auto flopsAttr = [&](const Instr &in) {
    int64_t flops = productFlops(in);
    return flops > 0 ? b.getI64IntegerAttr(flops) : IntegerAttr();
  };
  size_t mark = 0;
  auto releasesAfter = [&](int64_t i) {
    for (; mark < releaseMarks_.size() && releaseMarks_[mark].after == i;
         ++mark)
      ::zero::zrt::ReleaseOp::create(b, releaseMarks_[mark].loc,
                                     blockName(releaseMarks_[mark].storage));
  };
  releasesAfter(-1);
  for (auto [i, in] : llvm::enumerate(instrs_)) {
    SmallVector<Attribute> ins, outs;
    for (auto [k, v] : llvm::enumerate(in.ins))
      ins.push_back(k < in.inViews.size()
                        ? buffers.at(in.inViews[k].first, in.inViews[k].second, v.second)
                        : buffers.of(v.first, v.second));
    for (auto [k, v] : llvm::enumerate(in.outs))
      outs.push_back(k < in.outViews.size()
                         ? buffers.at(in.outViews[k].first, in.outViews[k].second, v.second)
                         : buffers.of(v.first, v.second));
    if (in.isCollective)
      ::zero::zrt::CollectiveOp::create(b, in.loc, b.getStringAttr(in.name), streamRef(in.stream),
                                        in.group ? in.group : worldRef, b.getArrayAttr(ins),
                                        b.getArrayAttr(outs), in.params, ranksAttr(in),
                                        evalAttr(in));
    else
      ::zero::zrt::KernelOp::create(b, in.loc, b.getStringAttr(in.name), streamRef(in.stream),
                                    b.getArrayAttr(ins), b.getArrayAttr(outs), in.params,
                                    ranksAttr(in), evalAttr(in), flopsAttr(in));
    releasesAfter(int64_t(i));
  }
}

void RuntimeLowering::emit() {
  OpBuilder b(module_.getContext());
  Location loc = func_.getLoc();
  ::zero::dist::TrainingAttr training = attrs::kTraining.get(module_);
  emitProgramOp(b, training);
  emitResources(b);
  BufferTable buffers(b, loc, storages_, placement_);
  emitGlobals(b, buffers, training);
  for (auto &[c, s] : constants_)
    ::zero::zrt::ConstantOp::create(b, loc, buffers.at(s, 0, c.getType()).getValue(),
                                    cast<ElementsAttr>(c.getValue()));
  for (auto &[name, v] : inputs_)
    ::zero::zrt::InputOp::create(b, loc, name, buffers.of(v, v.getType()).getValue());
  emitInstructions(b, buffers);
  for (auto &[name, v] : outputs_)
    ::zero::zrt::OutputOp::create(b, loc, name, buffers.of(v, v.getType()).getValue());
}

} // namespace lowering
} // namespace zero
