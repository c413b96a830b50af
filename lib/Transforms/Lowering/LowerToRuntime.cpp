//===- LowerToRuntime.cpp - onnx + zero -> zrt program --------------------===//
//
// The last pass before serialisation. It walks the forward function in order
// and produces a zrt.program:
//  - streams: collectives run on the communication stream, everything else on
//    the compute stream;
//  - storage: every value lives in a storage block; Reshape-like ops are views
//    of their operand's block; parameters sit in the `params` arena (shards
//    of one bucket packed back to back), small constants in `constants`,
//    everything else in `activations`;
//  - memory plan: activation blocks get offsets by greedy-by-size placement
//    over their live intervals [first write, last read], so dead blocks'
//    space is reused (what zero.release makes possible for gathered params);
//  - events: a record/wait pair for every dependency that crosses streams,
//    both read-after-write and the write-after-read that memory reuse creates.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/GatherPlan.h"
#include "RuntimeLowering.h"

#include "llvm/ADT/SmallPtrSet.h"

#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>
#include <set>

namespace zero {
#define GEN_PASS_DEF_ZEROLOWERTORUNTIMEPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
using namespace zero;

using namespace zero::lowering;

namespace zero {
namespace lowering {

DictionaryAttr kernelParams(Operation *op, OpBuilder &b) {
  SmallVector<NamedAttribute> out;
  for (NamedAttribute a : op->getAttrDictionary()) {
    if (isa<TypeAttr>(a.getValue()))
      continue; // Cast's target: the output buffer's dtype says it.
    if (a.getName().getValue().starts_with("zero."))
      continue; // where and when it runs (stream, stage, micro-batch), not how
    out.push_back(a);
  }
  return b.getDictionaryAttr(out);
}

int RuntimeLowering::globalStorage(Operation *user, SymbolRefAttr sym) {
  auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(user, sym);
  if (!global) {
    user->emitOpError("refers to an unknown global");
    return -1;
  }
  auto it = globalStorage_.find(global);
  if (it == globalStorage_.end()) {
    int s = newStorage(ArenaKind::Params, byteSize(global.getType()));
    storages_[s].def = -1;
    it = globalStorage_.insert({global, s}).first;
    globals_.push_back({global, s});
  }
  return it->second;
}

LogicalResult RuntimeLowering::lowerOp(Operation *op) {
  MLIRContext *ctx = op->getContext();
  // Ops a pass added to pack a collective (zero.stream = "comm") run on the
  // communication stream, so compute does not wait for them.
  auto stream = op->getAttrOfType<StringAttr>("zero.stream");
  const int kernelStream = stream && stream.getValue() == "comm" ? kComm : kCompute;
  auto addKernel = [&](StringRef name, DictionaryAttr params) {
    Instr in{false, name.str(), kernelStream, {}, {}, {}, {}, params, op->getLoc()};
    for (Value v : op->getOperands())
      in.ins.push_back({v, v.getType()});
    for (Value v : op->getResults()) {
      bind(v, newStorage(ArenaKind::Activations, byteSize(v.getType())));
      in.outs.push_back({v, v.getType()});
    }
    instrs_.push_back(std::move(in));
  };
  auto collective = [&](StringRef name, DictionaryAttr params) {
    addKernel(name, params);
    instrs_.back().collective = true;
    instrs_.back().stream = kComm;
    instrs_.back().group = op->getAttrOfType<FlatSymbolRefAttr>("group");
  };
  Builder &b = b_;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ml_program::GlobalLoadOp load) -> LogicalResult {
        int s = globalStorage(load, load.getGlobalAttr());
        if (s < 0)
          return failure();
        bind(load.getResult(), s);
        return success();
      })
      .Case([&](ml_program::GlobalStoreOp store) -> LogicalResult {
        // The optimizer's updates are bound to their global's storage when
        // lowered (in place); anything else is copied in.
        int s = globalStorage(store, store.getGlobalAttr());
        if (s < 0)
          return failure();
        Placement p = placement_.lookup(store.getValue());
        if (p.storage == s && p.offset == 0)
          return success();
        Instr copy{false, "Copy", kCompute, {}, {}, {}, {}, b.getDictionaryAttr({}),
                   op->getLoc()};
        copy.ins.push_back({store.getValue(), store.getValue().getType()});
        copy.outViews.push_back({s, 0});
        copy.outs.push_back({Value(), store.getValue().getType()});
        instrs_.push_back(std::move(copy));
        return success();
      })
      .Case<::zero::dist::AdamWOp, ::zero::dist::SGDOp, ::zero::dist::LrScheduleOp>(
          [&](Operation *update) -> LogicalResult {
            StringRef kernel = isa<::zero::dist::AdamWOp>(update)  ? "AdamW"
                               : isa<::zero::dist::SGDOp>(update) ? "SGD"
                                                                  : "LrSchedule";
            SmallVector<NamedAttribute> params;
            for (NamedAttribute a : update->getAttrDictionary())
              params.push_back(a.getName() == "schedule"
                                   ? b.getNamedAttr("type", a.getValue())
                                   : a);
            addKernel(kernel, b.getDictionaryAttr(params));
            auto rebind = [&](Value r, int s) {
              storages_[placement_.lookup(r).storage].bytes = 0; // never used
              bind(r, s);
            };
            // An update whose only use stores it into a global is written
            // there directly: the kernel runs in place.
            for (Value r : update->getResults()) {
              if (!r.hasOneUse())
                continue;
              auto store = dyn_cast<ml_program::GlobalStoreOp>(*r.getUsers().begin());
              if (!store)
                continue;
              int s = globalStorage(store, store.getGlobalAttr());
              if (s < 0)
                return failure();
              rebind(r, s);
            }
            return success();
          })
      .Case([&](::zero::onnx::ConstantOp c) -> LogicalResult {
        auto value = cast<ElementsAttr>(c.getValue());
        auto dense = dyn_cast<DenseElementsAttr>(value);
        if (dense && dense.isSplat() && value.getNumElements() > kMaxInlineSplat) {
          Attribute splat = dense.getSplatValue<Attribute>();
          double v = 0;
          if (auto f = dyn_cast<FloatAttr>(splat))
            v = f.getValueAsDouble();
          else if (auto i = dyn_cast<IntegerAttr>(splat))
            v = double(i.getValue().getSExtValue());
          else if (auto bl = dyn_cast<BoolAttr>(splat))
            v = bl.getValue();
          Instr in{false, "Fill", kCompute, {}, {}, {}, {},
                   b.getDictionaryAttr({b.getNamedAttr("value", b.getF64FloatAttr(v))}),
                   op->getLoc()};
          bind(c.getResult(), newStorage(ArenaKind::Activations, byteSize(c.getType())));
          in.outs.push_back({c.getResult(), c.getType()});
          instrs_.push_back(std::move(in));
          return success();
        }
        int s = newStorage(ArenaKind::Constants, byteSize(c.getType()));
        storages_[s].def = -1;
        bind(c.getResult(), s);
        constants_.push_back({c, s});
        return success();
      })
      .Case<::zero::onnx::ReshapeOp, ::zero::onnx::SqueezeOp, ::zero::onnx::UnsqueezeOp,
            ::zero::onnx::FlattenOp, ::zero::onnx::IdentityOp, ::zero::onnx::DropoutOp>(
          [&](Operation *view) {
            // Same bytes, another shape: a view of the operand's block.
            placement_[view->getResult(0)] = placement_.lookup(view->getOperand(0));
            return success();
          })
      .Case([&](::zero::onnx::SliceOp slice) -> LogicalResult {
        // A contiguous block of the input (the unpad of a gathered parameter,
        // a row range) is a view at an offset; anything else is a copy.
        if (std::optional<int64_t> offset = ::zero::contiguousSliceOffset(slice)) {
          Placement p = placement_.lookup(slice.getData());
          p.offset += *offset * (byteSize(slice.getType()) /
                                 std::max<int64_t>(1, slice.getType().getNumElements()));
          placement_[slice.getResult()] = p;
          return success();
        }
        addKernel("Slice", kernelParams(op, b_));
        return success();
      })
      .Case([&](::zero::dist::LocalShardOp shard) -> LogicalResult {
        SmallVector<NamedAttribute> params{b.getNamedAttr("world", shard.getWorldAttr())};
        if (shard.getGroupAttr()) {
          // The kernel finds the rank's position in its group as
          // (rank / stride) % world.
          auto pg = SymbolTable::lookupNearestSymbolFrom<::zero::dist::ProcessGroupOp>(
              shard, shard.getGroupAttr());
          std::optional<int64_t> stride = pg ? pg.positionStride() : std::nullopt;
          if (!stride)
            return shard.emitOpError("takes a shard over a process group whose "
                                     "positions are not (rank / stride) % size; "
                                     "the runtime cannot compute them");
          params.push_back(b.getNamedAttr("stride", b.getI64IntegerAttr(*stride)));
        }
        addKernel("LocalShard", b.getDictionaryAttr(params));
        return success();
      })
      .Case([&](::zero::dist::QuantizeOp q) -> LogicalResult {
        addKernel("Quantize", b.getDictionaryAttr(
                                  {b.getNamedAttr("bits", q.getBitsAttr()),
                                   b.getNamedAttr("block", q.getBlockAttr()),
                                   b.getNamedAttr("chunks", q.getChunksAttr())}));
        return success();
      })
      .Case([&](::zero::dist::DequantizeOp dq) -> LogicalResult {
        addKernel("Dequantize", b.getDictionaryAttr(
                                    {b.getNamedAttr("bits", dq.getBitsAttr()),
                                     b.getNamedAttr("block", dq.getBlockAttr()),
                                     b.getNamedAttr("chunks", dq.getChunksAttr())}));
        // qwZ: the dequantized parameter is the gathered one (released by
        // its zero.release).
        if (::zero::isGather(dq))
          storages_[placement_.lookup(dq.getResult()).storage].gathered = true;
        return success();
      })
      .Case([&](::zero::dist::SendOp send) {
        collective("Send", b.getDictionaryAttr({b.getNamedAttr("peer", send.getPeerAttr()),
                                                b.getNamedAttr("tag", send.getTagAttr())}));
        return success();
      })
      .Case([&](::zero::dist::RecvOp recv) {
        collective("Recv", b.getDictionaryAttr({b.getNamedAttr("peer", recv.getPeerAttr()),
                                                b.getNamedAttr("tag", recv.getTagAttr())}));
        // A stage receives on its compute stream (its own channel), which
        // needs the data next anyway; sends stay on the communication stream.
        // So a stage's sends never wait behind its receives: with blocking
        // point-to-point calls the two directions cannot deadlock.
        instrs_.back().stream = kCompute;
        return success();
      })
      .Case([&](::zero::dist::AllToAllOp) {
        collective("AllToAll", b.getDictionaryAttr({}));
        return success();
      })
      .Case([&](::zero::dist::ReleaseOp release) -> LogicalResult {
        // zero.release is when a gathered buffer dies: its memory is free for
        // reuse after the instruction before it.
        Placement p = placement_.lookup(release.getValue());
        if (p.storage < 0 || !storages_[p.storage].gathered)
          return release.emitOpError(
              "releases a value that is not a gathered parameter (the result "
              "of zero.all_gather or zero.bucket_all_gather, or a view of one)");
        Storage &st = storages_[p.storage];
        // A bucket's buffer is released once per member; it dies at the last.
        if (st.release && ++st.releases > st.members)
          return release.emitOpError("releases a gathered parameter that was "
                                     "already released")
                     .attachNote(st.release->getLoc())
                 << "released here";
        if (!st.release)
          st.releases = 1;
        st.released = int64_t(instrs_.size()) - 1;
        st.release = release;
        return success();
      })
      .Case([&](::zero::dist::AllGatherOp g) {
        collective("AllGather", b.getDictionaryAttr({}));
        // A gathered parameter lives until its zero.release; a gathered
        // computed value (a training step's updated shards) is an ordinary
        // activation.
        if (::zero::isGather(g))
          storages_[placement_.lookup(g.getResult()).storage].gathered = true;
        return success();
      })
      .Case([&](::zero::dist::ReduceScatterOp) {
        collective("ReduceScatter", b.getDictionaryAttr({}));
        return success();
      })
      .Case([&](::zero::dist::AllReduceOp) {
        collective("AllReduce", b.getDictionaryAttr({}));
        return success();
      })
      .Case([&](::zero::dist::BroadcastOp bc) {
        collective("Broadcast", b.getDictionaryAttr(
                                    {b.getNamedAttr("root", bc.getRootAttr())}));
        return success();
      })
      .Case([&](::zero::dist::BucketAllGatherOp g) -> LogicalResult {
        // DeepSpeed's coalesced all-gather: one buffer for the whole bucket,
        // each member gathered into its own part of it (world x its shard,
        // back to back in the bucket's order), so every result is a view of
        // the bucket's buffer and the bucket holds its bytes once. One
        // AllGather instruction with a shard in and a part out per member;
        // the buffer lives until the last member's zero.release.
        int64_t total = 0;
        for (Value r : g.getResults())
          total += byteSize(r.getType());
        int bucket = newStorage(ArenaKind::Activations, total);
        storages_[bucket].gathered = true;
        storages_[bucket].members = int(g.getResults().size());
        Instr gather{true, "AllGather", kComm, {}, {}, {}, {},
                     b.getDictionaryAttr({}), op->getLoc()};
        gather.group = g.getGroupAttr();
        int64_t offset = 0;
        for (auto [shard, result] : llvm::zip(g.getShards(), g.getResults())) {
          placement_[result] = Placement{bucket, offset};
          gather.ins.push_back({shard, shard.getType()});
          gather.outs.push_back({result, result.getType()});
          offset += byteSize(result.getType());
        }
        instrs_.push_back(std::move(gather));
        return success();
      })
      .Case<::zero::onnx::ScatterNDOp, ::zero::onnx::ScatterElementsOp>(
          [&](Operation *scatter) -> LogicalResult {
            addKernel(scatter->getName().stripDialect(), kernelParams(scatter, b_));
            // A scatter is the last reader of its data when nothing else reads
            // the data's block (a gradient sum's running total, zeros filled
            // for it): it then writes there, and the kernel skips its copy.
            Value data = scatter->getOperand(0), result = scatter->getResult(0);
            Placement p = placement_.lookup(data);
            if (!data.hasOneUse() || !data.getDefiningOp() || p.storage < 0 || p.offset != 0)
              return success();
            const Storage &st = storages_[p.storage];
            if (st.arena != ArenaKind::Activations || st.gathered ||
                st.bytes != byteSize(result.getType()))
              return success();
            // Other values on the block (a view of it, the data of an
            // earlier in-place scatter) must all have been read already.
            for (auto &[v, q] : placement_)
              if (q.storage == p.storage && v != data)
                for (Operation *user : v.getUsers())
                  if (user->getBlock() != scatter->getBlock() ||
                      !user->isBeforeInBlock(scatter))
                    return success();
            storages_[placement_.lookup(result).storage].bytes = 0; // never used
            bind(result, p.storage);
            return success();
          })
      .Case([&](func::ReturnOp ret) {
        ArrayAttr names = func_.getResAttrsAttr();
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          std::string name = "output" + std::to_string(i);
          if (auto n = func_.getResultAttrOfType<StringAttr>(i, "onnx.name"))
            name = n.str();
          outputs_.push_back({name, v});
        }
        (void)names;
        return success();
      })
      .Default([&](Operation *other) -> LogicalResult {
        if (!isa<::zero::onnx::ONNXDialect>(other->getDialect()))
          return other->emitOpError("cannot be lowered to the runtime: only onnx, "
                                    "zero and ml_program ops are supported");
        addKernel(other->getName().stripDialect(), kernelParams(other, b_));
        (void)ctx;
        return success();
      });
}

LogicalResult RuntimeLowering::collect() {
  if (auto w = module_->getAttrOfType<IntegerAttr>("zero.world_size"))
    worldSize_ = w.getInt();
  const bool pipelined = module_->hasAttr("zero.pipeline_plan");
  int64_t pipelineDp = 1;
  if (auto plan = module_->getAttrOfType<DictionaryAttr>("zero.pipeline_plan"))
    if (auto d = plan.getAs<IntegerAttr>("dp"))
      pipelineDp = d.getInt();
  Block &body = func_.getBody().front();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    int s = newStorage(ArenaKind::Activations, byteSize(arg.getType()));
    storages_[s].def = -1;
    bind(arg, s);
    std::string name = "input" + std::to_string(i);
    if (auto n = func_.getArgAttrOfType<StringAttr>(i, "onnx.name"))
      name = n.str();
    inputs_.push_back({name, arg});
  }
  // Fusion groups: members before the root become nothing, the root one
  // FusedElementwise instruction (FuseElementwise.cpp).
  std::vector<FusionGroup> groups;
  llvm::DenseMap<Operation *, int> groupOf;
  if (fuseElementwise_) {
    groups = findFusionGroups(body);
    for (auto [g, group] : llvm::enumerate(groups))
      for (Operation *m : group.members)
        groupOf[m] = int(g);
  }
  for (Operation &op : body) {
    size_t first = instrs_.size();
    if (auto it = groupOf.find(&op); it != groupOf.end()) {
      if (groups[size_t(it->second)].root == &op)
        lowerFusionGroup(groups[size_t(it->second)]);
    } else if (isa<::zero::onnx::ConstantOp>(op) && !op.use_empty() &&
               scalarConstant(op.getResult(0)) &&
               llvm::all_of(op.getUsers(),
                            [&](Operation *u) { return groupOf.count(u) != 0; })) {
      // A scalar read only by fusion groups: a constant of their programs.
    } else if (failed(lowerOp(&op))) {
      return failure();
    }
    // A pipeline stage's op runs on that stage's rank only. In a cut program
    // every op that becomes an instruction has a stage: one without would run
    // on every rank, reading memory only its own stage wrote.
    auto stage = op.getAttrOfType<IntegerAttr>("zero.pipeline_stage");
    if (!stage && pipelined && first < instrs_.size())
      return op.emitOpError("has no zero.pipeline_stage in a program cut into pipeline "
                            "stages (a rewrite after zero-pipeline-split dropped it)");
    // A training pipeline's step ("F3", "B1", ...): the trace's schedule track.
    if (auto step = op.getAttrOfType<StringAttr>("zero.pipeline_step"))
      for (size_t i = first; i < instrs_.size(); ++i) {
        NamedAttrList params(instrs_[i].params);
        params.set("pipeline_step", step);
        instrs_[i].params = params.getDictionary(op.getContext());
      }
    if (stage)
      for (size_t i = first; i < instrs_.size(); ++i) {
        // Stage s runs on its data-parallel replicas' ranks [s*dp, (s+1)*dp).
        instrs_[i].ranks.clear();
        for (int64_t d = 0; d < pipelineDp; ++d)
          instrs_[i].ranks.push_back(stage.getInt() * pipelineDp + d);
      }
  }
  return success();
}

LogicalResult RuntimeLowering::run() {
  if (failed(collect()))
    return failure();
  if (failed(computeLiveness()))
    return failure();
  planMemory();
  computeEvents();
  planInOrder();
  emit();
  func_.erase();
  for (auto g : llvm::make_early_inc_range(module_.getOps<ml_program::GlobalOp>()))
    g.erase();
  // Now zrt.group ops.
  for (auto g : llvm::make_early_inc_range(module_.getOps<::zero::dist::ProcessGroupOp>()))
    g.erase();
  return success();
}

} // namespace lowering
} // namespace zero

namespace {

struct ZeroLowerToRuntimePass
    : public ::zero::impl::ZeroLowerToRuntimePassBase<ZeroLowerToRuntimePass> {
  using Base::Base;

  /// A program cut into pipeline stages (zero-pipeline-split): the driver
  /// calls one function per stage. The program is one instruction stream in
  /// which each instruction names the ranks that run it, so every stage's
  /// body is lowered in place of its call, each op marked with the stage
  /// (its ranks), one stage after the other: a rank runs its stage's ops in
  /// the stage function's order, and the memory plan lets blocks of
  /// different stages share bytes.
  static LogicalResult inlineStages(ModuleOp module, func::FuncOp driver) {
    SmallVector<func::FuncOp> inlined;
    for (auto call : llvm::make_early_inc_range(driver.getOps<func::CallOp>())) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCalleeAttr());
      if (!callee || !callee->hasAttr("zero.pipeline_stage"))
        continue; // not lowered: a clear error when the lowering meets it
      if (!callee.getBody().hasOneBlock())
        return callee.emitOpError("must have a single block to be lowered");
      Attribute stage = callee->getAttr("zero.pipeline_stage");
      OpBuilder b(call);
      IRMapping map;
      Block &body = callee.getBody().front();
      map.map(body.getArguments(), call.getOperands());
      for (Operation &op : body.without_terminator()) {
        Operation *copy = b.clone(op, map);
        copy->setAttr("zero.pipeline_stage", stage);
      }
      for (auto [result, v] : llvm::zip(call.getResults(), body.getTerminator()->getOperands()))
        result.replaceAllUsesWith(map.lookupOrDefault(v));
      call.erase();
      inlined.push_back(callee);
    }
    for (func::FuncOp f : inlined)
      if (SymbolTable::symbolKnownUseEmpty(f, module))
        f.erase();
    return success();
  }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func;
    if (!function.empty()) {
      func = module.lookupSymbol<func::FuncOp>(function);
    } else {
      // The one function that is not a pipeline stage (a cut program's
      // driver), else @forward.
      SmallVector<func::FuncOp> entries;
      for (func::FuncOp f : module.getOps<func::FuncOp>())
        if (!f->hasAttr("zero.pipeline_stage"))
          entries.push_back(f);
      if (entries.size() == 1)
        func = entries.front();
      else
        func = module.lookupSymbol<func::FuncOp>("forward");
    }
    if (!func) {
      module.emitError() << "zero-lower-to-runtime: no function @"
                         << (function.empty() ? std::string("forward") : std::string(function))
                         << " to lower (name one with function=...)";
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock()) {
      func.emitOpError("must have a single block to be lowered");
      return signalPassFailure();
    }
    if (failed(inlineStages(module, func)))
      return signalPassFailure();
    // Kernel-level simplifications first (e.g. MatMul of a transposed weight
    // becomes a Gemm that reads the weight as stored).
    RewritePatternSet patterns(&getContext());
    ::zero::onnx::MatMulOp::getCanonicalizationPatterns(patterns, &getContext());
    // Program order is the schedule: no constant hoisting or folding here.
    // A rewrite can make an op read a parameter where only its transpose was
    // read before (the tied LM head's Gemm reads the embedding itself): a
    // zero.release that followed the old last use then follows the new one.
    struct CreatedOps : public RewriterBase::Listener {
      void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
        created.insert(op);
      }
      llvm::SmallPtrSet<Operation *, 8> created;
    } listener;
    GreedyRewriteConfig config;
    config.enableFolding(false)
        .enableConstantCSE(false)
        .setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled)
        .setListener(&listener);
    if (failed(applyPatternsGreedily(func, std::move(patterns), config)))
      return signalPassFailure();
    if (!listener.created.empty())
      func.walk([&](::zero::dist::ReleaseOp release) {
        Operation *last = release;
        for (Operation *user : release.getValue().getUsers())
          if (listener.created.contains(user) &&
              user->getBlock() == release->getBlock() &&
              last->isBeforeInBlock(user))
            last = user;
        if (last != release.getOperation())
          release->moveAfter(last);
      });
    RuntimeLowering lowering(module, func, fuseElementwise);
    if (failed(lowering.run()))
      return signalPassFailure();
  }
};

} // namespace
