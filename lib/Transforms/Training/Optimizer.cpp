//===- Optimizer.cpp - zero-optimizer --------------------------------------===//
//
// Appends the optimizer step to @train_step (built by zero-autodiff): the
// global gradient norm and clipping coefficient (torch.nn.utils.
// clip_grad_norm_), the step counter, the learning rate of the step, and one
// elementwise update per parameter whose results are stored back into the
// parameter and its optimizer-state globals. The state globals start at zero
// (the runtime fills them; they are not in the weights file) and carry
// `zero.role` so the lowering and --save-optimizer can tell them apart.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/ShardLayout.h"

#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/Format.h"

namespace zero {
#define GEN_PASS_DEF_ZEROOPTIMIZERPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace onnx = ::zero::onnx;

namespace {

struct ZeroOptimizerPass : public ::zero::impl::ZeroOptimizerPassBase<ZeroOptimizerPass> {
  using Base::Base;

  Value scalar(ImplicitLocOpBuilder &b, double v, Type elem) {
    auto t = RankedTensorType::get({}, elem);
    Attribute a = isa<FloatType>(elem) ? Attribute(FloatAttr::get(elem, v))
                                       : Attribute(IntegerAttr::get(elem, int64_t(v)));
    return onnx::ConstantOp::create(b, t, DenseElementsAttr::get(t, a));
  }

  /// How a parameter of `numel` elements splits over the ranks: flattened,
  /// zero-padded to a multiple of the world size, rank r owns elements
  /// [r*shard, (r+1)*shard) (DeepSpeed's flatten-pad-split, per parameter).
  struct Layout {
    int64_t numel = 0, padded = 0, shard = 0;
  };

  /// `v` flattened and zero-padded to `l.padded` elements.
  Value flatPadded(ImplicitLocOpBuilder &b, Value v, const Layout &l) {
    return ::zero::flatPadded(b, v, l.padded);
  }

  /// Averages every gradient over the ranks (sum, times 1/N): all-reduced
  /// (stage 0) or reduce-scattered into the rank's shard (stages 1-3). The
  /// gradients are taken in the order they become final in backward and
  /// grouped into buckets of at most `bucket` elements (0: each alone); a
  /// bucket's collective sits right after its last gradient, so it overlaps
  /// the rest of backward. A bucket of several gradients moves one flat
  /// buffer: concatenated (stage 0), or each padded gradient as [N, s] rows
  /// concatenated along the columns, so that rank r's block holds its shard
  /// of every gradient (stages 1-3). What reads a collective's result (the
  /// 1/N scaling, a bucket's slices) is placed with `late`, at the optimizer
  /// step: a stream runs in order, so a reader right behind the collective
  /// would hold the rest of backward until the collective is done.
  void averageGradients(func::FuncOp func,
                        SmallVectorImpl<std::pair<ml_program::GlobalOp, Value>> &params,
                        ArrayRef<Layout> layouts, bool sharded,
                        ImplicitLocOpBuilder &late, const llvm::DenseSet<unsigned> &reduced) {
    MLIRContext *ctx = &getContext();
    // Gradients zero-autodiff already reduce-scattered (every micro-step, ZeRO-2)
    // and summed: only the mean is left.
    for (unsigned i : reduced) {
      Value &grad = params[i].second;
      Type fe = cast<RankedTensorType>(grad.getType()).getElementType();
      grad = onnx::MulOp::create(late, grad, scalar(late, 1.0 / double(world), fe));
    }
    SmallVector<size_t> order;
    for (size_t i = 0; i < params.size(); ++i)
      if (!reduced.contains(unsigned(i)))
        order.push_back(i);
    auto defOf = [&](size_t i) { return params[i].second.getDefiningOp(); };
    llvm::stable_sort(order, [&](size_t x, size_t y) {
      Operation *a = defOf(x), *c = defOf(y);
      if (!a || !c)
        return a == nullptr && c != nullptr;
      return a != c && a->isBeforeInBlock(c);
    });
    SmallVector<SmallVector<size_t>> buckets;
    int64_t filled = 0;
    for (size_t i : order) {
      int64_t n = sharded ? layouts[i].padded : layouts[i].numel;
      if (buckets.empty() || bucket == 0 || filled + n > bucket) {
        buckets.push_back({});
        filled = 0;
      }
      buckets.back().push_back(i);
      filled += n;
    }
    for (ArrayRef<size_t> members : buckets) {
      Value last = params[members.back()].second;
      ImplicitLocOpBuilder cb(last.getLoc(), ctx);
      cb.setInsertionPointAfterValue(last);
      auto gt0 = cast<RankedTensorType>(last.getType());
      Type fe = gt0.getElementType();
      auto mean = [&](Value sum) {
        return onnx::MulOp::create(late, sum, scalar(late, 1.0 / double(world), fe)).getResult();
      };
      if (members.size() == 1) {
        Value &grad = params[members[0]].second;
        const Layout &l = layouts[members[0]];
        auto gt = cast<RankedTensorType>(grad.getType());
        if (!sharded) {
          grad = mean(::zero::dist::AllReduceOp::create(cb, gt, grad, int64_t(world)));
        } else {
          grad = mean(::zero::dist::ReduceScatterOp::create(
              cb, RankedTensorType::get({l.shard}, fe), flatPadded(cb, grad, l),
              int64_t(world)));
        }
        continue;
      }
      SmallVector<Value> parts;
      SmallVector<int64_t> offsets;
      int64_t total = 0;
      for (size_t i : members) {
        const Layout &l = layouts[i];
        Value g = params[i].second;
        offsets.push_back(total);
        if (!sharded) {
          if (cast<RankedTensorType>(g.getType()).getRank() != 1)
            g = onnx::ReshapeOp::create(cb, g, ArrayRef<int64_t>{l.numel});
          parts.push_back(g);
          total += l.numel;
        } else {
          parts.push_back(onnx::ReshapeOp::create(cb, flatPadded(cb, g, l),
                                                  ArrayRef<int64_t>{int64_t(world), l.shard}));
          total += l.shard;
        }
      }
      Value avg;
      if (!sharded) {
        Value flat = onnx::ConcatOp::create(cb, parts, uint64_t(0));
        avg = mean(::zero::dist::AllReduceOp::create(cb, flat.getType(), flat, int64_t(world)));
      } else {
        Value rows = onnx::ConcatOp::create(cb, parts, uint64_t(1));
        Value flat = onnx::ReshapeOp::create(cb, rows, ArrayRef<int64_t>{int64_t(world) * total});
        avg = mean(::zero::dist::ReduceScatterOp::create(
            cb, RankedTensorType::get({total}, fe), flat, int64_t(world)));
      }
      for (auto [k, i] : llvm::enumerate(members)) {
        const Layout &l = layouts[i];
        Value &grad = params[i].second;
        int64_t n = sharded ? l.shard : l.numel;
        Value piece = onnx::SliceOp::create(late, avg, ArrayRef<int64_t>{offsets[k]},
                                            ArrayRef<int64_t>{offsets[k] + n},
                                            ArrayRef<int64_t>{1});
        auto gt = cast<RankedTensorType>(grad.getType());
        if (!sharded && gt.getRank() != 1)
          piece = onnx::ReshapeOp::create(late, piece, gt.getShape());
        grad = piece;
      }
    }
  }

  /// A zero-initialised mutable global beside `anchor`.
  ml_program::GlobalOp stateGlobal(OpBuilder &mb, Operation *anchor, StringRef sym,
                                   StringRef tensor, RankedTensorType type,
                                   StringRef role, SymbolTable &symbols) {
    OpBuilder::InsertionGuard guard(mb);
    mb.setInsertionPointAfter(anchor);
    Attribute zero = isa<FloatType>(type.getElementType())
                         ? Attribute(FloatAttr::get(type.getElementType(), 0.0))
                         : Attribute(IntegerAttr::get(type.getElementType(), 0));
    auto g = ml_program::GlobalOp::create(mb, anchor->getLoc(), sym, type,
                                          /*is_mutable=*/true,
                                          DenseElementsAttr::get(type, zero),
                                          mb.getStringAttr("private"));
    g->setAttr("zero.tensor", mb.getStringAttr(tensor));
    g->setAttr("zero.role", mb.getStringAttr(role));
    symbols.insert(g); // uniquifies the symbol
    return g;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto func = module.lookupSymbol<func::FuncOp>("train_step");
    if (!func) {
      module.emitError() << "zero-optimizer: no @train_step; run zero-autodiff first";
      return signalPassFailure();
    }
    std::string kind = StringRef(type).lower();
    if (kind != "adamw" && kind != "adam" && kind != "sgd") {
      module.emitError() << "zero-optimizer: unknown optimizer '" << type
                         << "'; the optimizers are adamw, adam and sgd";
      return signalPassFailure();
    }
    if (lr < 0 || clip < 0 || weightDecay < 0 || momentum < 0 || eps < 0) {
      module.emitError() << "zero-optimizer: lr, clip, weight-decay, momentum and eps "
                            "must be >= 0";
      return signalPassFailure();
    }
    if (kind != "sgd" && (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1)) {
      module.emitError() << "zero-optimizer: betas must be in [0, 1), got " << beta1 << ", "
                         << beta2;
      return signalPassFailure();
    }
    if (nesterov && (momentum <= 0 || dampening != 0)) {
      module.emitError() << "zero-optimizer: Nesterov momentum requires a momentum and "
                            "zero dampening (as torch.optim.SGD)";
      return signalPassFailure();
    }
    StringRef sched = schedule;
    if (sched != "constant" && sched != "WarmupLR" && sched != "WarmupDecayLR" &&
        sched != "WarmupCosineLR") {
      module.emitError() << "zero-optimizer: unknown schedule '" << sched
                         << "' (constant, WarmupLR, WarmupDecayLR, WarmupCosineLR)";
      return signalPassFailure();
    }
    if ((sched == "WarmupDecayLR" || sched == "WarmupCosineLR") &&
        totalNumSteps < warmupNumSteps) {
      module.emitError() << "zero-optimizer: " << sched << " needs total_num_steps ("
                         << totalNumSteps << ") >= warmup_num_steps (" << warmupNumSteps
                         << ")";
      return signalPassFailure();
    }
    if (sched != "constant" && warmupType != "log" && warmupType != "linear") {
      module.emitError() << "zero-optimizer: warmup_type must be log or linear, got '"
                         << warmupType << "'";
      return signalPassFailure();
    }

    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    ImplicitLocOpBuilder b(NameLoc::get(StringAttr::get(ctx, "optimizer")), ret);
    SymbolTable symbols(module);
    OpBuilder mb(ctx);
    Type f32 = Float32Type::get(ctx), i64 = IntegerType::get(ctx, 64);
    auto f32s = RankedTensorType::get({}, f32), i64s = RankedTensorType::get({}, i64);

    // Gradients and their parameters.
    SmallVector<std::pair<ml_program::GlobalOp, Value>> params;
    llvm::DenseSet<unsigned> reduced; // params whose gradient is already a summed shard
    for (unsigned i = 1; i < func.getNumResults(); ++i) {
      if (auto shard = func.getResultAttrOfType<IntegerAttr>(i, "zero.grad_shard")) {
        if (shard.getInt() != world || stage != 2) {
          func.emitOpError() << "result " << i << " is a gradient shard over "
                             << shard.getInt() << " ranks (zero-autodiff world/stage), but "
                             << "zero-optimizer has world=" << int64_t(world)
                             << " stage=" << int64_t(stage);
          return signalPassFailure();
        }
        reduced.insert(i - 1);
      }
      auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(i, "zero.grad_of");
      auto g = of ? symbols.lookup<ml_program::GlobalOp>(of.getValue()) : nullptr;
      if (!g) {
        func.emitOpError() << "result " << i << " is not a parameter gradient "
                              "(zero.grad_of); zero-optimizer expects zero-autodiff's "
                              "@train_step";
        return signalPassFailure();
      }
      params.push_back({g, ret.getOperand(i)});
    }
    if (params.empty()) {
      module.emitError() << "zero-optimizer: nothing to train (no parameter reaches "
                            "the loss, or all are frozen)";
      return signalPassFailure();
    }
    Operation *anchor = params.back().first;

    // Data parallelism: each gradient averaged over the ranks right after its
    // last contribution, so the collective overlaps the rest of backward.
    if (world < 1 || world > ::zero::kMaxWorldSize) {
      module.emitError() << "zero-optimizer: world must be between 1 and "
                         << ::zero::kMaxWorldSize << ", got " << int64_t(world);
      return signalPassFailure();
    }
    if (stage < 0 || stage > 3) {
      module.emitError() << "zero-optimizer: stage must be 0, 1, 2 or 3, got "
                         << int64_t(stage);
      return signalPassFailure();
    }
    const bool sharded = world > 1 && stage > 0;
    if (world > 1) {
      module->setAttr("zero.world_size", b.getI64IntegerAttr(world));
      module->setAttr("zero.stage", b.getI64IntegerAttr(stage));
    }
    if (bucket < 0) {
      module.emitError() << "zero-optimizer: bucket must be >= 0 elements, got "
                         << int64_t(bucket);
      return signalPassFailure();
    }
    SmallVector<Layout> layouts;
    for (auto &[g, grad] : params) {
      Layout l;
      l.numel = cast<RankedTensorType>(g.getType()).getNumElements();
      l.padded = ::zero::paddedNumel(l.numel, world);
      l.shard = l.padded / world;
      layouts.push_back(l);
    }
    if (world > 1)
      averageGradients(func, params, layouts, sharded, b, reduced);
    // Step counter: t = step + 1, stored back.
    auto counter = stateGlobal(mb, anchor, "optimizer_step", "optimizer.step", i64s,
                               "counter", symbols);
    Value t = onnx::AddOp::create(
        b, ml_program::GlobalLoadOp::create(b, i64s, FlatSymbolRefAttr::get(counter.getSymNameAttr())),
        scalar(b, 1, i64));
    ml_program::GlobalStoreOp::create(b, FlatSymbolRefAttr::get(counter.getSymNameAttr()), t);

    // Learning rate of this step.
    auto lrOp = ::zero::dist::LrScheduleOp::create(b, f32s, t, b.getStringAttr(sched));
    if (sched == "constant") {
      lrOp->setAttr("lr", b.getF64FloatAttr(lr));
    } else {
      lrOp->setAttr("warmup_min_lr", b.getF64FloatAttr(warmupMinLr));
      lrOp->setAttr("warmup_max_lr", b.getF64FloatAttr(warmupMaxLr));
      lrOp->setAttr("warmup_num_steps", b.getI64IntegerAttr(warmupNumSteps));
      lrOp->setAttr("warmup_type", b.getStringAttr(warmupType));
      if (sched != "WarmupLR")
        lrOp->setAttr("total_num_steps", b.getI64IntegerAttr(totalNumSteps));
      if (sched == "WarmupCosineLR") {
        lrOp->setAttr("cos_min_ratio", b.getF64FloatAttr(cosMinRatio));
        lrOp->setAttr("warmup_min_ratio", b.getF64FloatAttr(warmupMinRatio));
        lrOp->setAttr("lr", b.getF64FloatAttr(lr));
      }
    }
    Value rate = lrOp.getResult();

    // Global gradient norm (before clipping) and the clipping coefficient.
    Value sumSq;
    for (auto &[g, grad] : params) {
      auto gt = cast<RankedTensorType>(grad.getType());
      SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, gt.getRank()));
      Value s = grad;
      s = gt.getRank() == 0 ? onnx::MulOp::create(b, grad, grad).getResult()
                            : onnx::ReduceSumSquareOp::create(b, grad, axes, 0).getResult();
      sumSq = sumSq ? onnx::AddOp::create(b, sumSq, s).getResult() : s;
    }
    // Sharded gradients: the ranks' local squared norms, summed by one all-reduce.
    if (sharded)
      sumSq = ::zero::dist::AllReduceOp::create(b, sumSq.getType(), sumSq, int64_t(world));
    Value norm = onnx::SqrtOp::create(b, sumSq);
    Value scale = scalar(b, 1.0, f32);
    if (clip > 0) {
      // clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1.
      Value coef = onnx::DivOp::create(
          b, scalar(b, clip, f32), onnx::AddOp::create(b, norm, scalar(b, 1e-6, f32)));
      scale = onnx::MinOp::create(b, coef, scalar(b, 1.0, f32));
    }

    // One update per parameter, stored back.
    auto load = [&](ml_program::GlobalOp g) -> Value {
      return ml_program::GlobalLoadOp::create(b, g.getType(),
                                              FlatSymbolRefAttr::get(g.getSymNameAttr()));
    };
    auto store = [&](ml_program::GlobalOp g, Value v) {
      ml_program::GlobalStoreOp::create(b, FlatSymbolRefAttr::get(g.getSymNameAttr()), v);
    };
    for (auto [index, entry] : llvm::enumerate(params)) {
      auto &[g, grad] = entry;
      const Layout &layout = layouts[index];
      auto fullType = cast<RankedTensorType>(g.getType());
      if (fullType.getElementType() != f32) {
        g.emitOpError() << "is " << fullType
                        << "; the optimizers update f32 parameters (fp32 master "
                           "weights, as DeepSpeed keeps them): export the model in "
                           "float32 (model.float() before torch.onnx.export)";
        return signalPassFailure();
      }
      b.setLoc(g.getLoc());
      auto tensor = g->getAttrOfType<StringAttr>("zero.tensor");
      std::string name = tensor ? tensor.str() : g.getSymName().str();
      // Sharded: the rank steps its shard of the parameter and its state.
      RankedTensorType pt = sharded ? RankedTensorType::get({layout.shard}, f32) : fullType;
      Value p = load(g);
      if (sharded)
        p = ::zero::dist::LocalShardOp::create(b, pt, flatPadded(b, p, layout), int64_t(world));
      auto stateOf = [&](ml_program::GlobalOp state) {
        if (!sharded)
          return;
        state->setAttr("zero.full_type", TypeAttr::get(fullType));
        state->setAttr("zero.shard",
                       b.getDictionaryAttr(
                           {b.getNamedAttr("world", b.getI64IntegerAttr(world)),
                            b.getNamedAttr("numel", b.getI64IntegerAttr(layout.numel)),
                            b.getNamedAttr("padded_numel", b.getI64IntegerAttr(layout.padded))}));
      };
      // The updated parameter: in place, or (sharded) gathered back whole.
      auto storeParam = [&](Value updated) {
        if (!sharded)
          return store(g, updated);
        Value full = ::zero::dist::AllGatherOp::create(
            b, RankedTensorType::get({layout.padded}, f32), updated, int64_t(world));
        if (layout.padded != layout.numel)
          full = onnx::SliceOp::create(b, full, ArrayRef<int64_t>{0},
                                       ArrayRef<int64_t>{layout.numel}, ArrayRef<int64_t>{1});
        if (fullType.getRank() != 1)
          full = onnx::ReshapeOp::create(b, full, fullType.getShape());
        store(g, full);
      };
      if (kind == "sgd") {
        ml_program::GlobalOp buf;
        Value bufIn;
        if (momentum > 0) {
          buf = stateGlobal(mb, anchor, (g.getSymName() + ".momentum_buffer").str(),
                            name + ".momentum_buffer", pt, "optimizer_state", symbols);
          stateOf(buf);
          anchor = buf;
          bufIn = load(buf);
        }
        SmallVector<Type> types{pt};
        if (buf)
          types.push_back(pt);
        SmallVector<Value> operands{p, grad, t, rate, scale};
        if (bufIn)
          operands.push_back(bufIn);
        auto op = ::zero::dist::SGDOp::create(
            b, types, operands,
            {b.getNamedAttr("momentum", b.getF64FloatAttr(momentum)),
             b.getNamedAttr("dampening", b.getF64FloatAttr(dampening)),
             b.getNamedAttr("weight_decay", b.getF64FloatAttr(weightDecay)),
             b.getNamedAttr("nesterov", b.getI64IntegerAttr(nesterov ? 1 : 0))});
        storeParam(op.getResult(0));
        if (buf)
          store(buf, op.getResult(1));
        continue;
      }
      auto m = stateGlobal(mb, anchor, (g.getSymName() + ".exp_avg").str(),
                           name + ".exp_avg", pt, "optimizer_state", symbols);
      auto v = stateGlobal(mb, m, (g.getSymName() + ".exp_avg_sq").str(),
                           name + ".exp_avg_sq", pt, "optimizer_state", symbols);
      stateOf(m);
      stateOf(v);
      anchor = v;
      auto op = ::zero::dist::AdamWOp::create(
          b, TypeRange{pt, pt, pt}, p, grad, t, rate, scale, load(m), load(v),
          b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
          b.getF64FloatAttr(weightDecay), b.getI64IntegerAttr(kind == "adamw" ? 1 : 0));
      storeParam(op.getParamOut());
      store(m, op.getExpAvgOut());
      store(v, op.getExpAvgSqOut());
    }

    // The step returns loss, grad_norm and lr.
    b.setLoc(NameLoc::get(StringAttr::get(ctx, "optimizer")));
    SmallVector<Value> results{ret.getOperand(0), norm, rate};
    func::ReturnOp::create(b, results);
    ret.erase();
    auto named = [&](StringRef n) {
      return b.getDictionaryAttr({b.getNamedAttr("onnx.name", b.getStringAttr(n))});
    };
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    SmallVector<DictionaryAttr> resAttrs{named("loss"), named("grad_norm"), named("lr")};
    func.setAllResultAttrs(resAttrs);

    // What the runtime needs to know about the step.
    std::string desc;
    llvm::raw_string_ostream os(desc);
    os << kind << " lr=" << lr;
    if (kind == "sgd")
      os << " momentum=" << momentum << " dampening=" << dampening
         << " nesterov=" << (nesterov ? 1 : 0);
    else
      os << " betas=" << beta1 << "," << beta2 << " eps=" << eps;
    os << " weight-decay=" << weightDecay;
    if (clip > 0)
      os << " clip=" << clip;
    os << " schedule=" << sched;
    int64_t accumulation = 1;
    if (auto a = module->getAttrOfType<IntegerAttr>("zero.accumulation_steps"))
      accumulation = a.getInt();
    module->setAttr("zero.training",
                    b.getDictionaryAttr({b.getNamedAttr("loss", b.getStringAttr("loss")),
                                         b.getNamedAttr("grad_norm", b.getStringAttr("grad_norm")),
                                         b.getNamedAttr("lr", b.getStringAttr("lr")),
                                         b.getNamedAttr("accumulation_steps",
                                                        b.getI64IntegerAttr(accumulation)),
                                         b.getNamedAttr("optimizer", b.getStringAttr(desc))}));
  }
};

} // namespace
