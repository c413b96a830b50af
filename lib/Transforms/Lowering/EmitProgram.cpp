//===- EmitProgram.cpp - zero-lower-to-runtime: zrt emission ----------------===//
//
// Writes the zrt.program: streams, the world group, arenas, one buffer per
// distinct (storage, offset, type) view, globals, constants, bindings, and
// the instructions with their waits and records.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <tuple>

using namespace mlir;
using namespace zero::lowering;

void RuntimeLowering::emit() {
  MLIRContext *ctx = module_.getContext();
  OpBuilder b(ctx);
  b.setInsertionPoint(func_);
  Location loc = func_.getLoc();
  auto program = ::zero::zrt::ProgramOp::create(b, loc, func_.getName(), worldSize_);
  auto training = module_->getAttrOfType<DictionaryAttr>("zero.training");
  if (training)
    program->setAttr("training", training);
  // A pipeline: its replicas per stage (the runtime's data split and shard
  // positions).
  if (auto plan = module_->getAttrOfType<DictionaryAttr>("zero.pipeline_plan")) {
    auto dp = plan.getAs<IntegerAttr>("dp");
    program->setAttr("pipeline_dp", b.getI32IntegerAttr(dp ? int32_t(dp.getInt()) : 1));
  }
  Block *body = new Block();
  program.getBody().push_back(body);
  b.setInsertionPointToStart(body);

  const char *streamNames[2] = {"compute", "comm"};
  for (const char *s : streamNames)
    ::zero::zrt::StreamOp::create(b, loc, s, s);
  SmallVector<int64_t> ranks;
  for (int64_t r = 0; r < worldSize_; ++r)
    ranks.push_back(r);
  ::zero::zrt::GroupOp::create(b, loc, "world", b.getDenseI64ArrayAttr(ranks), nullptr);
  // Sub-communicators (hpZ, qgZ's hierarchy): every rank lists all of them.
  for (auto pg : module_.getOps<::zero::dist::ProcessGroupOp>())
    ::zero::zrt::GroupOp::create(b, loc, pg.getSymName(), pg.getRanksAttr(),
                                 pg.getGroupSizeAttr());
  const char *arenaNames[3] = {"params", "constants", "activations"};
  for (int a = 0; a < 3; ++a)
    ::zero::zrt::ArenaOp::create(
        b, loc, arenaNames[a], arenaSize_[a], noReuse_[a], lowerBound_[a],
        a == int(ArenaKind::Activations) && inOrderSize_ > 0
            ? b.getI64IntegerAttr(inOrderSize_)
            : nullptr);

  // Buffers: one per distinct (storage, offset, type) view.
  std::map<std::tuple<int, int64_t, std::string>, FlatSymbolRefAttr> buffers;
  auto bufferFor = [&](int storage, int64_t off, Type type) {
    std::string key;
    llvm::raw_string_ostream(key) << type;
    auto it = buffers.find({storage, off, key});
    if (it != buffers.end())
      return it->second;
    std::string name = "b" + std::to_string(buffers.size());
    const Storage &st = storages_[storage];
    ::zero::zrt::BufferOp::create(
        b, loc, name, type, arenaNames[int(st.arena)], st.offset + off,
        st.inOrderOffset >= 0 ? b.getI64IntegerAttr(st.inOrderOffset + off) : nullptr);
    auto ref = FlatSymbolRefAttr::get(ctx, name);
    buffers[{storage, off, key}] = ref;
    return ref;
  };
  auto valueBuffer = [&](Value v, Type type) {
    Placement p = placement_.lookup(v);
    return bufferFor(p.storage, p.offset, type);
  };

  for (auto &[global, s] : globals_) {
    auto type = cast<RankedTensorType>(global.getType());
    auto ref = bufferFor(s, 0, type);
    Type full = type;
    if (auto f = global->getAttrOfType<TypeAttr>("zero.full_type"))
      full = f.getValue();
    auto tensor = global->getAttrOfType<StringAttr>("zero.tensor");
    auto op = ::zero::zrt::GlobalOp::create(
        b, loc, global.getSymName(), tensor ? tensor.getValue() : global.getSymName(),
        full, ref.getValue(), nullptr, nullptr, nullptr);
    // What the global holds: in a training program, parameters are trained
    // or frozen, optimizer state and the step counter start at zero.
    if (auto role = global->getAttrOfType<StringAttr>("zero.role"))
      op.setRoleAttr(role);
    else if (training)
      op.setRoleAttr(b.getStringAttr(global->hasAttr("zero.trainable") ? "parameter"
                                                                       : "frozen"));
    if (auto shard = global->getAttrOfType<DictionaryAttr>("zero.shard")) {
      op.setShardWorldAttr(cast<IntegerAttr>(shard.get("world")));
      op.setPaddedNumelAttr(cast<IntegerAttr>(shard.get("padded_numel")));
    }
  }
  for (auto &[c, s] : constants_)
    ::zero::zrt::ConstantOp::create(b, loc, bufferFor(s, 0, c.getType()).getValue(),
                                  cast<ElementsAttr>(c.getValue()));
  for (auto &[name, v] : inputs_)
    ::zero::zrt::InputOp::create(b, loc, name, valueBuffer(v, v.getType()).getValue());

  auto streamRef = [&](int s) { return FlatSymbolRefAttr::get(ctx, streamNames[s]); };
  auto worldRef = FlatSymbolRefAttr::get(ctx, "world");
  auto ranksAttr = [&](const Instr &in) -> DenseI64ArrayAttr {
    return in.ranks.empty() ? nullptr : b.getDenseI64ArrayAttr(in.ranks);
  };
  const int64_t n = instrs_.size();
  for (int64_t i = 0; i < n; ++i) {
    const Instr &in = instrs_[i];
    for (int64_t d : waits_[i])
      ::zero::zrt::WaitOp::create(b, in.loc, b.getI64IntegerAttr(eventOf_[d]),
                                streamRef(in.stream), ranksAttr(in));
    SmallVector<Attribute> ins, outs;
    for (size_t k = 0; k < in.ins.size(); ++k) {
      if (k < in.inViews.size())
        ins.push_back(bufferFor(in.inViews[k].first, in.inViews[k].second, in.ins[k].second));
      else
        ins.push_back(valueBuffer(in.ins[k].first, in.ins[k].second));
    }
    for (size_t k = 0; k < in.outs.size(); ++k) {
      if (k < in.outViews.size())
        outs.push_back(bufferFor(in.outViews[k].first, in.outViews[k].second, in.outs[k].second));
      else
        outs.push_back(valueBuffer(in.outs[k].first, in.outs[k].second));
    }
    if (in.collective)
      ::zero::zrt::CollectiveOp::create(b, in.loc, b.getStringAttr(in.name),
                                        streamRef(in.stream),
                                        in.group ? in.group : worldRef,
                                      b.getArrayAttr(ins), b.getArrayAttr(outs), in.params,
                                      ranksAttr(in));
    else
      ::zero::zrt::KernelOp::create(b, in.loc, b.getStringAttr(in.name),
                                    streamRef(in.stream),
                                  b.getArrayAttr(ins), b.getArrayAttr(outs), in.params,
                                  ranksAttr(in));
    if (eventOf_[i] >= 0)
      ::zero::zrt::RecordOp::create(b, in.loc, b.getI64IntegerAttr(eventOf_[i]),
                                  streamRef(in.stream), ranksAttr(in));
  }
  for (auto &[name, v] : outputs_)
    ::zero::zrt::OutputOp::create(b, loc, name, valueBuffer(v, v.getType()).getValue());
}
