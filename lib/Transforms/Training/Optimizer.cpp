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
// The steps, in order: check the options; read the gradients @train_step
// returns; average them over the ranks (data parallelism); count the step;
// the step's learning rate; the gradient norm and clipping; the updates; the
// step's results and the settings the runtime reads (`zero.training`).
//
//===----------------------------------------------------------------------===//

#include "LossScaler.h"

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Analysis/ShardLayout.h"

#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"

#define DEBUG_TYPE "zero-optimizer"

namespace zero {
#define GEN_PASS_DEF_ZEROOPTIMIZERPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace attrs = ::zero::attrs;
namespace onnx = ::zero::onnx;

namespace {

/// A scalar constant `v` of element type `elem`.
Value scalar(ImplicitLocOpBuilder &b, double v, Type elem) {
  auto t = RankedTensorType::get({}, elem);
  Attribute a = isa<FloatType>(elem) ? Attribute(FloatAttr::get(elem, v))
                                     : Attribute(IntegerAttr::get(elem, int64_t(v)));
  return onnx::ConstantOp::create(b, t, DenseElementsAttr::get(t, a));
}

/// How a parameter of `numel` elements splits over the ranks: flattened,
/// zero-padded to a multiple of the world size, rank r owns elements
/// [r*shard, (r+1)*shard) (DeepSpeed's flatten-pad-split, per parameter).
struct ParamLayout {
  int64_t numel = 0, padded = 0, shard = 0;
};

/// A trained parameter and its gradient in @train_step.
struct ParamGradient {
  ml_program::GlobalOp param;
  Value grad;
};

/// The optimizer step as it is appended to @train_step: what each step of
/// zero-optimizer leaves for the ones after it.
struct OptimizerStep {
  OptimizerStep(func::FuncOp func, ModuleOp module)
      : func(func), ret(cast<func::ReturnOp>(func.getBody().front().getTerminator())),
        b(NameLoc::get(StringAttr::get(func.getContext(), "optimizer")), ret),
        symbols(module), mb(func.getContext()) {}

  /// A zero-initialised mutable global beside `anchor`, its symbol uniqued.
  ml_program::GlobalOp addStateGlobal(Operation *anchor, StringRef sym,
                                      StringRef tensor, RankedTensorType type,
                                      attrs::GlobalRole role) {
    OpBuilder::InsertionGuard guard(mb);
    mb.setInsertionPointAfter(anchor);
    Attribute zero = isa<FloatType>(type.getElementType())
                         ? Attribute(FloatAttr::get(type.getElementType(), 0.0))
                         : Attribute(IntegerAttr::get(type.getElementType(), 0));
    auto g = ml_program::GlobalOp::create(mb, anchor->getLoc(), sym, type,
                                          /*is_mutable=*/true,
                                          DenseElementsAttr::get(type, zero),
                                          mb.getStringAttr("private"));
    attrs::kTensor.set(g, mb.getStringAttr(tensor));
    attrs::kRole.set(g, role);
    symbols.insert(g); // uniquifies the symbol
    return g;
  }

  Value load(ml_program::GlobalOp g) {
    return ml_program::GlobalLoadOp::create(b, g.getType(),
                                            FlatSymbolRefAttr::get(g.getSymNameAttr()));
  }

  /// Stores `v` into `g`; in a step that may be skipped (fp16's overflow,
  /// bf16's non-finite gradients),
  /// the global keeps its value when it is.
  void store(ml_program::GlobalOp g, Value v) {
    if (overflow)
      v = onnx::WhereOp::create(b, v.getType(), overflow, load(g), v);
    storeAsIs(g, v);
  }
  void storeAsIs(ml_program::GlobalOp g, Value v) {
    ml_program::GlobalStoreOp::create(b, FlatSymbolRefAttr::get(g.getSymNameAttr()), v);
  }

  func::FuncOp func;
  /// @train_step's return: the loss, then one gradient per parameter.
  func::ReturnOp ret;
  /// Builds the step's ops, before `ret`.
  ImplicitLocOpBuilder b;
  SymbolTable symbols;
  /// Builds the optimizer-state globals in the module.
  OpBuilder mb;
  SmallVector<ParamGradient> params;
  SmallVector<ParamLayout> layouts;
  /// Parameters whose gradient zero-reduce-micro-steps already reduce-scattered (every
  /// micro-step, ZeRO-2) and summed.
  llvm::DenseSet<unsigned> reduced;
  /// Where the next state global goes: after the last one added, so the
  /// state globals follow the parameters in order.
  Operation *anchor = nullptr;
  /// Each rank steps its shard of every parameter (world > 1, stage >= 1).
  bool sharded = false;
  /// The step number (1 on the first step), the step's learning rate, the
  /// gradient norm before clipping and the clipping coefficient.
  Value t, rate, norm, scale;
  /// The step counter global and its value before the step.
  ml_program::GlobalOp counter;
  Value stepBefore;
  /// fp16's loss scaler, this step's loss scale, and whether the step's
  /// gradients overflowed (then nothing is stored: the step is skipped).
  std::optional<::zero::training::LossScaler> scaler;
  Value lossScale, overflow;
  /// Whether a step with non-finite gradients is skipped: fp16 (its scaler)
  /// and bf16 marked zero.skip_nonfinite.
  bool skips = false;
};

/// One parameter's update: what the rank steps (the parameter or its shard)
/// and the names its optimizer state takes.
struct ParamUpdate {
  ml_program::GlobalOp param;
  Value grad;
  const ParamLayout &layout;
  RankedTensorType fullType;
  /// The ONNX initializer name: the prefix of the state's tensor names.
  std::string name;
  /// The type the rank steps: the parameter's, or (sharded) its shard's.
  RankedTensorType stepped;
  /// The parameter value (or shard) the update reads.
  Value value;
  /// A 16-bit parameter's fp32 master copy (useMaster), else null.
  ml_program::GlobalOp master = nullptr;
  /// What the rank holds of the parameter before the step (the shard,
  /// sharded), in its own type.
  Value held;
};

struct ZeroOptimizerPass : public ::zero::impl::ZeroOptimizerPassBase<ZeroOptimizerPass> {
  using Base::Base;
  // A clone counts its own statistics (the options are copied by clonePass).
  ZeroOptimizerPass(const ZeroOptimizerPass &other) : Base(other) {}

  Statistic numParamsUpdated{this, "parameters-updated",
                             "Parameters the optimizer step updates"};
  Statistic numStateElements{this, "optimizer-state-elements",
                             "Optimizer-state elements a rank holds (momentum buffers, "
                             "exp_avg, exp_avg_sq)"};
  Statistic numGradientCollectives{this, "gradient-collectives",
                                   "Collectives that average gradients over the ranks "
                                   "(one per bucket)"};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("train_step");
    if (!func) {
      module.emitError() << "zero-optimizer: no @train_step; run zero-autodiff first";
      return signalPassFailure();
    }
    std::string kind = StringRef(type).lower();
    if (failed(checkOptions(module, kind)))
      return signalPassFailure();
    OptimizerStep s(func, module);
    if (failed(collectGradients(module, s)) || failed(configureDataParallel(module, s)))
      return signalPassFailure();
    recordHeldGradients(s);
    preDivides = s.sharded && !gradientSum;
    if (world > 1)
      averageGradients(s);
    // 16-bit gradients (zero-mixed-precision) are clipped and applied in f32.
    for (ParamGradient &p : s.params)
      p.grad = toF32(s.b, p.grad);
    s.scaler = ::zero::training::findLossScaler(module);
    s.skips = s.scaler || attrs::kSkipNonFinite.isSetOn(module);
    if (s.scaler)
      unscaleGradients(s);
    addStepCounter(s);
    buildSchedule(s);
    clipGradients(s);
    if (failed(applyUpdates(s, kind)))
      return signalPassFailure();
    finishStep(s);
    returnLossNormAndRate(s);
    recordTrainingSettings(module, kind);
    markOffloaded(module);
  }

  /// ZeRO-Offload: every optimizer-state global (moments, momentum buffers,
  /// fp32 masters) is marked to live in host memory ("cpu": the host arena)
  /// or in a swap file ("nvme": the module records where and how many
  /// updates read ahead; zero-lower-to-runtime places the swaps).
  void markOffloaded(ModuleOp module) {
    const bool nvme = !nvmePath.empty();
    if (!nvme && !offloadHost)
      return;
    Builder b(module.getContext());
    for (auto g : module.getOps<ml_program::GlobalOp>())
      if (attrs::kRole.get(g) == attrs::GlobalRole::OptimizerState)
        attrs::kOffload.set(g, nvme ? attrs::OffloadDevice::Nvme
                                    : attrs::OffloadDevice::Cpu);
    if (nvme)
      attrs::kOffloadConfig.set(
          module, ::zero::dist::OffloadConfigAttr::get(b.getContext(), nvmePath,
                                                       offloadBuffers));
  }

  /// Checks the optimizer's and the schedule's options (`kind`: the optimizer
  /// type, lower-cased).
  LogicalResult checkOptions(ModuleOp module, StringRef kind) {
    if (kind != "adamw" && kind != "adam" && kind != "sgd")
      return module.emitError() << "zero-optimizer: unknown optimizer '" << type
                                << "'; the optimizers are adamw, adam and sgd";
    if (gradientSum && stage == 3)
      return module.emitError()
             << "zero-optimizer: gradient-sum (gradient_allreduce_op "
                "\"sum\") is not supported with ZeRO stage 3, as in "
                "DeepSpeed 0.19: give \"mean\" or stage 0-2";
    if (lr < 0 || clip < 0 || weightDecay < 0 || momentum < 0 || eps < 0)
      return module.emitError() << "zero-optimizer: lr, clip, weight-decay, momentum and "
                                   "eps must be >= 0";
    if (kind != "sgd" && (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1))
      return module.emitError() << "zero-optimizer: betas must be in [0, 1), got " << beta1
                                << ", " << beta2;
    if (std::string err; !noDecay.empty() && !llvm::Regex(noDecay).isValid(err))
      return module.emitError() << "zero-optimizer: no-decay '" << noDecay
                                << "' is not a valid regex: " << err;
    if (nesterov && (momentum <= 0 || dampening != 0))
      return module.emitError() << "zero-optimizer: Nesterov momentum requires a momentum "
                                   "and zero dampening (as torch.optim.SGD)";
    StringRef sched = ::zero::stringifyEnum(schedule.getValue());
    if (sched == "OneCycle" &&
        (!(cycleFirstStepSize > 0) || cycleSecondStepSize < -1 ||
         decayStepSize < 0 || cycleFirstStairCount < 0 ||
         cycleSecondStairCount < -1 || cycleMinLr < 0 || cycleMaxLr < 0 ||
         (cyclesMomentum(kind) && !(cycleMinMom >= 0 && cycleMinMom < 1 &&
                                    cycleMaxMom >= 0 && cycleMaxMom < 1))))
      return module.emitError()
             << "zero-optimizer: OneCycle needs cycle_first_step_size > 0, "
                "cycle_second_step_size, decay_step_size and the stair "
                "counts >= 0, cycle_min_lr and cycle_max_lr >= 0, and momenta "
                "in [0, 1)";
    if (sched == "LRRangeTest" && !(lrRangeTestStepSize > 0))
      return module.emitError() << "zero-optimizer: LRRangeTest needs lr_range_test_step_size "
                                   "> 0, got "
                                << lrRangeTestStepSize;
    // total_num_steps -1: "auto", the run's steps (zero-run sets it); at or
    // below the warmup, DeepSpeed clamps (the lr stays at the decay's floor
    // after the warmup), as the runtime's LrSchedule does.
    if ((sched == "WarmupDecayLR" || sched == "WarmupCosineLR") &&
        totalNumSteps < -1)
      return module.emitError()
             << "zero-optimizer: " << sched
             << " needs total_num_steps >= 0 (or -1: the run's), got "
             << int64_t(totalNumSteps);
    if (lastBatchIteration < -1)
      return module.emitError()
             << "zero-optimizer: last-batch-iteration must be >= -1, got "
             << int64_t(lastBatchIteration);
    return success();
  }

  /// Reads @train_step's results after the loss: each is the gradient of the
  /// parameter its `zero.grad_of` names; one with `zero.grad_shard` is
  /// already a summed shard, which this pass's world and stage must match.
  LogicalResult collectGradients(ModuleOp module, OptimizerStep &s) {
    func::FuncOp func = s.func;
    for (unsigned i = 1; i < func.getNumResults(); ++i) {
      if (auto shard = func.getResultAttrOfType<IntegerAttr>(i, attrs::kGradShard)) {
        if (shard.getInt() != world || stage != 2)
          return func.emitOpError()
                 << "result " << i << " is a gradient shard over " << shard.getInt()
                 << " ranks (zero-reduce-micro-steps dp/stage), but "
                 << "zero-optimizer has dp=" << int64_t(world)
                 << " stage=" << int64_t(stage);
        s.reduced.insert(i - 1);
      }
      auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(i, attrs::kGradOf);
      auto g = of ? s.symbols.lookup<ml_program::GlobalOp>(of.getValue()) : nullptr;
      if (!g)
        return func.emitOpError() << "result " << i << " is not a parameter gradient "
                                     "(zero.grad_of); zero-optimizer expects "
                                     "zero-autodiff's @train_step";
      s.params.push_back({g, s.ret.getOperand(i)});
    }
    if (s.params.empty())
      return module.emitError() << "zero-optimizer: nothing to train (no parameter reaches "
                                   "the loss, or all are frozen)";
    s.anchor = s.params.back().param;
    LLVM_DEBUG(llvm::dbgs() << "zero-optimizer: " << s.params.size() << " gradients, "
                            << s.reduced.size() << " already reduce-scattered\n");
    return success();
  }

  /// Checks world, stage and bucket, records a data-parallel world and stage
  /// on the module, and lays each parameter out over the ranks.
  LogicalResult configureDataParallel(ModuleOp module, OptimizerStep &s) {
    if (!::zero::isSupportedWorldSize(world))
      return module.emitError() << "zero-optimizer: dp must be between 1 and "
                                << ::zero::kMaxWorldSize << ", got " << int64_t(world);
    if (stage < 0 || stage > 3)
      return module.emitError() << "zero-optimizer: stage must be 0, 1, 2 or 3, got "
                                << int64_t(stage);
    s.sharded = world > 1 && stage > 0;
    LLVM_DEBUG(llvm::dbgs() << "zero-optimizer: world " << int64_t(world) << ", stage "
                            << int64_t(stage) << ": "
                            << (s.sharded ? "each rank steps its shards" : "replicated")
                            << "\n");
    if (world > 1) {
      attrs::kWorldSize.set(module, s.b.getI64IntegerAttr(world));
      attrs::kStage.set(module, s.b.getI64IntegerAttr(stage));
    }
    if (bucket < 0)
      return module.emitError() << "zero-optimizer: bucket must be >= 0 elements, got "
                                << int64_t(bucket);
    for (auto &[g, grad] : s.params) {
      ParamLayout l;
      l.numel = cast<RankedTensorType>(g.getType()).getNumElements();
      l.padded = ::zero::paddedNumel(l.numel, world);
      l.shard = l.padded / world;
      s.layouts.push_back(l);
    }
    return success();
  }

  /// Records on each parameter global the gradient a rank holds over the
  /// step (`zero.grad_type`, the report's model-state bytes): as the
  /// backward produces it, whole, at stages 0 and 1 (ZeRO-1 partitions only
  /// the optimizer state: every rank sums whole gradients over its
  /// micro-batches), and the shard it is reduce-scattered into at stages 2
  /// and 3 (in the dtype the collective carries).
  void recordHeldGradients(OptimizerStep &s) {
    const bool partitioned = s.sharded && stage >= 2;
    for (auto [i, p] : llvm::enumerate(s.params)) {
      auto t = cast<RankedTensorType>(p.grad.getType());
      Type held = t;
      if (partitioned && !s.reduced.contains(unsigned(i)))
        held = RankedTensorType::get({s.layouts[i].shard}, communicationType(p.param));
      attrs::kGradType.set(p.param, TypeAttr::get(held));
    }
  }

  /// Averages every gradient over the ranks (sum, times 1/N): all-reduced
  /// (stage 0) or reduce-scattered into the rank's shard (stages 1-3), one
  /// collective per bucket (bucketGradients), right after the bucket's last
  /// gradient, so it overlaps the rest of backward. What reads a
  /// collective's result (the 1/N scaling, a bucket's slices) is placed at
  /// the optimizer step: a stream runs in order, so a reader right behind the
  /// collective would hold the rest of backward until the collective is done.
  void averageGradients(OptimizerStep &s) {
    // Gradients zero-reduce-micro-steps already reduce-scattered (every
    // micro-step, ZeRO-2) and summed: only the mean is left.
    // zero-reduce-micro-steps divided each micro-batch's gradient by N before
    // its reduce-scatter (as DeepSpeed's ZeRO-2), unless gradients are summed.
    for (unsigned i : s.reduced)
      s.params[i].grad = toF32(s.b, s.params[i].grad);
    for (ArrayRef<size_t> members : bucketGradients(s)) {
      ++numGradientCollectives;
      if (members.size() == 1)
        averageAlone(s, members.front());
      else
        averageTogether(s, members);
    }
  }

  /// The gradients still to average, taken in the order they become final in
  /// backward and grouped into buckets of at most `bucket` elements (0: each
  /// alone).
  SmallVector<SmallVector<size_t>> bucketGradients(const OptimizerStep &s) {
    SmallVector<size_t> order;
    for (size_t i = 0; i < s.params.size(); ++i)
      if (!s.reduced.contains(unsigned(i)))
        order.push_back(i);
    auto defOf = [&](size_t i) { return s.params[i].grad.getDefiningOp(); };
    llvm::stable_sort(order, [&](size_t x, size_t y) {
      Operation *a = defOf(x), *c = defOf(y);
      if (!a || !c)
        return a == nullptr && c != nullptr;
      return a != c && a->isBeforeInBlock(c);
    });
    SmallVector<SmallVector<size_t>> buckets;
    int64_t filled = 0;
    for (size_t i : order) {
      int64_t n = s.sharded ? s.layouts[i].padded : s.layouts[i].numel;
      if (buckets.empty() || bucket == 0 || filled + n > bucket) {
        buckets.push_back({});
        filled = 0;
      }
      buckets.back().push_back(i);
      filled += n;
    }
    LLVM_DEBUG(llvm::dbgs() << "zero-optimizer: " << order.size() << " gradients in "
                            << buckets.size() << " buckets (bucket=" << int64_t(bucket)
                            << ")\n");
    return buckets;
  }

  /// `sum` times 1/N, at the optimizer step (`late`); a 16-bit sum is cast
  /// to f32 first (the master weights' type), so the mean rounds once.
  Value meanOverRanks(ImplicitLocOpBuilder &late, Value sum, Type fe) {
    if (!fe.isF32() && isa<FloatType>(fe) && fe.getIntOrFloatBitWidth() == 16) {
      sum = toF32(late, sum);
      fe = late.getF32Type();
    }
    // gradient_allreduce_op "sum": the ranks' gradients summed, not averaged;
    // at stages 1-3 each rank's gradient was divided before the collective.
    if (gradientSum || preDivides)
      return sum;
    return onnx::MulOp::create(late, sum, scalar(late, 1.0 / double(world), fe)).getResult();
  }

  /// `v` as f32 (a 16-bit gradient or parameter, widened exactly).
  static Value toF32(ImplicitLocOpBuilder &b, Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getElementType().isF32())
      return v;
    return onnx::CastOp::create(b, RankedTensorType::get(t.getShape(), b.getF32Type()), v,
                                TypeAttr::get(b.getF32Type()));
  }

  /// Averages the gradient of parameter `i` on its own: all-reduced, or
  /// reduce-scattered into the rank's shard.
  /// Whether each rank's gradient is divided by N before the collective
  /// (stages 1-3 averaging: forCommunication), not the sum after.
  bool preDivides = false;

  /// The element type the collectives carry `param`'s gradient in: f32 with
  /// comm-fp32 (communication_data_type "fp32"), else the parameter's own
  /// (16 bits for a 16-bit parameter, even when its gradient was summed over
  /// the micro-batches in f32: DeepSpeed casts to communication_data_type).
  Type communicationType(ml_program::GlobalOp param) {
    Type pe = cast<RankedTensorType>(param.getType()).getElementType();
    return commF32 || !isa<FloatType>(pe) ? Float32Type::get(&getContext()) : pe;
  }

  /// `grad` as the collectives carry it (communicationType); at stages 1-3
  /// (preDivides) divided by the world size there, before the collective, as
  /// DeepSpeed's ZeRO optimizers divide each rank's gradient in the
  /// communication type (a 16-bit sum then stays in range where the halves
  /// do; stage 0 sums, then scales, as DeepSpeed's engine).
  Value forCommunication(ImplicitLocOpBuilder &cb, Value grad, ml_program::GlobalOp param) {
    auto t = cast<RankedTensorType>(grad.getType());
    Type want = communicationType(param);
    if (t.getElementType() != want)
      grad = want.isF32() ? toF32(cb, grad)
                          : onnx::CastOp::create(
                                cb, RankedTensorType::get(t.getShape(), want),
                                grad, TypeAttr::get(want))
                                .getResult();
    if (preDivides) {
      Value inverse = scalar(cb, 1.0 / double(world), want);
      grad = onnx::MulOp::create(cb, grad, inverse).getResult();
    }
    return grad;
  }

  void averageAlone(OptimizerStep &s, size_t i) {
    Value &grad = s.params[i].grad;
    const ParamLayout &l = s.layouts[i];
    ImplicitLocOpBuilder cb(grad.getLoc(), &getContext());
    cb.setInsertionPointAfterValue(grad);
    grad = forCommunication(cb, grad, s.params[i].param);
    auto gt = cast<RankedTensorType>(grad.getType());
    Type fe = gt.getElementType();
    if (!s.sharded) {
      grad = meanOverRanks(s.b, ::zero::dist::AllReduceOp::create(cb, gt, grad, int64_t(world)),
                           fe);
      return;
    }
    grad = meanOverRanks(s.b,
                         ::zero::dist::ReduceScatterOp::create(
                             cb, RankedTensorType::get({l.shard}, fe),
                             ::zero::flatPadded(cb, grad, l.padded), int64_t(world)),
                         fe);
  }

  /// Averages a bucket of several gradients with one collective on one flat
  /// buffer: concatenated (stage 0), or each padded gradient as [N, s] rows
  /// concatenated along the columns, so that rank r's block holds its shard
  /// of every gradient (stages 1-3). Each gradient is then its slice of the
  /// average.
  void averageTogether(OptimizerStep &s, ArrayRef<size_t> members) {
    Value last = s.params[members.back()].grad;
    ImplicitLocOpBuilder cb(last.getLoc(), &getContext());
    cb.setInsertionPointAfterValue(last);
    Type fe = communicationType(s.params[members.back()].param);
    SmallVector<Value> parts;
    SmallVector<int64_t> offsets;
    int64_t total = 0;
    for (size_t i : members) {
      const ParamLayout &l = s.layouts[i];
      Value g = forCommunication(cb, s.params[i].grad, s.params[i].param);
      offsets.push_back(total);
      if (!s.sharded) {
        if (cast<RankedTensorType>(g.getType()).getRank() != 1)
          g = onnx::ReshapeOp::create(cb, g, ArrayRef<int64_t>{l.numel});
        parts.push_back(g);
        total += l.numel;
      } else {
        Value rows =
            onnx::ReshapeOp::create(cb, ::zero::flatPadded(cb, g, l.padded),
                                    ArrayRef<int64_t>{int64_t(world), l.shard});
        // Each rank's slice padded to the alignment (zeros, summed and
        // sliced off): qgZ's blocks then never span two gradients.
        const int64_t width = alignedShard(l.shard);
        if (width != l.shard)
          rows = padColumns(cb, rows, width - l.shard);
        parts.push_back(rows);
        total += width;
      }
    }
    Value avg;
    if (!s.sharded) {
      Value flat = onnx::ConcatOp::create(cb, parts, uint64_t(0));
      avg = meanOverRanks(
          s.b, ::zero::dist::AllReduceOp::create(cb, flat.getType(), flat, int64_t(world)), fe);
    } else {
      Value rows = onnx::ConcatOp::create(cb, parts, uint64_t(1));
      Value flat = onnx::ReshapeOp::create(cb, rows, ArrayRef<int64_t>{int64_t(world) * total});
      avg = meanOverRanks(s.b,
                          ::zero::dist::ReduceScatterOp::create(
                              cb, RankedTensorType::get({total}, fe), flat, int64_t(world)),
                          fe);
    }
    for (auto [k, i] : llvm::enumerate(members)) {
      const ParamLayout &l = s.layouts[i];
      Value &grad = s.params[i].grad;
      int64_t n = s.sharded ? l.shard : l.numel;
      Value piece = onnx::SliceOp::create(s.b, avg, ArrayRef<int64_t>{offsets[k]},
                                          ArrayRef<int64_t>{offsets[k] + n},
                                          ArrayRef<int64_t>{1});
      auto gt = cast<RankedTensorType>(grad.getType());
      if (!s.sharded && gt.getRank() != 1)
        piece = onnx::ReshapeOp::create(s.b, piece, gt.getShape());
      grad = piece;
    }
  }

  /// A bucket member's slice of `shard` elements rounded up to bucketAlign.
  int64_t alignedShard(int64_t shard) const {
    const int64_t a = std::max<int64_t>(1, bucketAlign);
    return (shard + a - 1) / a * a;
  }

  /// `rows` ([N, s]) with `extra` zero columns after each row.
  static Value padColumns(ImplicitLocOpBuilder &b, Value rows, int64_t extra) {
    auto t = cast<RankedTensorType>(rows.getType());
    auto zeros =
        RankedTensorType::get({t.getDimSize(0), extra}, t.getElementType());
    Value z = onnx::ConstantOp::create(
        b, zeros,
        DenseElementsAttr::get(zeros, b.getZeroAttr(t.getElementType())));
    return onnx::ConcatOp::create(b, ValueRange{rows, z}, uint64_t(1));
  }

  /// The step counter: t = step + 1, stored back (by finishStep, once
  /// whether the step is skipped is known).
  void addStepCounter(OptimizerStep &s) {
    Type i64 = IntegerType::get(&getContext(), 64);
    auto i64s = RankedTensorType::get({}, i64);
    s.counter = s.addStateGlobal(s.anchor, "optimizer_step", "optimizer.step",
                                 i64s, attrs::GlobalRole::Counter);
    Value one = scalar(s.b, 1, i64);
    s.stepBefore = s.load(s.counter);
    s.t = onnx::AddOp::create(s.b, s.stepBefore, one);
    if (!s.skips)
      s.store(s.counter, s.t);
  }

  /// fp16: the gradients of loss x scale divided by the scale, in f32 (as
  /// DeepSpeed's unscale, times 1/scale).
  void unscaleGradients(OptimizerStep &s) {
    ImplicitLocOpBuilder &b = s.b;
    s.lossScale = ::zero::training::currentLossScale(b, *s.scaler);
    Value inverse = onnx::DivOp::create(b, scalar(b, 1.0, b.getF32Type()), s.lossScale);
    for (ParamGradient &p : s.params)
      p.grad = onnx::MulOp::create(b, p.grad, inverse);
  }

  /// fp16 (and bf16 that checks): a step whose gradients overflowed (a
  /// non-finite global norm: some gradient on some rank is inf or NaN;
  /// sharded, the norm is all-reduced, so every rank sees the same flag) is
  /// skipped, as DeepSpeed skips it: the parameters, the optimizer state and
  /// the step counter (so Adam's step and the schedule) keep their values;
  /// then fp16's scale is updated.
  void finishStep(OptimizerStep &s) {
    if (!s.skips)
      return;
    if (s.scaler)
      ::zero::training::updateLossScale(s.b, *s.scaler, s.lossScale,
                                        s.overflow);
    s.store(s.counter, s.t);
  }

  /// OneCycle's cycle: cycle_first_step_size, cycle_second_step_size (the
  /// first's when not given) and decay_step_size, as attributes of `op`.
  void setOneCycleShape(Operation *op, Builder &b) {
    op->setAttr("cycle_first_step_size", b.getF64FloatAttr(cycleFirstStepSize));
    op->setAttr("cycle_second_step_size",
                b.getF64FloatAttr(cycleSecondStepSize < 0 ? cycleFirstStepSize
                                                          : cycleSecondStepSize));
    op->setAttr("decay_step_size", b.getF64FloatAttr(decayStepSize));
    // Stairs (DeepSpeed 0.19): the cycle's height held flat in that many
    // steps of each half; absent, the cycle is continuous.
    const int64_t second = cycleSecondStairCount < 0 ? cycleFirstStairCount
                                                     : cycleSecondStairCount;
    if (cycleFirstStairCount > 0 || second > 0) {
      op->setAttr("cycle_first_stair_count",
                  b.getI64IntegerAttr(cycleFirstStairCount));
      op->setAttr("cycle_second_stair_count", b.getI64IntegerAttr(second));
    }
  }

  /// Whether Adam's beta1 follows OneCycle's momentum cycle (DeepSpeed's
  /// cycle_momentum, which SGD, having no betas, does not take).
  bool cyclesMomentum(StringRef kind) const {
    return schedule.getValue() == ::zero::LRSchedule::OneCycle && cycleMomentum && kind != "sgd";
  }

  /// The learning rate of step t under the schedule (DeepSpeed's schedulers).
  void buildSchedule(OptimizerStep &s) {
    ImplicitLocOpBuilder &b = s.b;
    StringRef sched = ::zero::stringifyEnum(schedule.getValue());
    auto f32s = RankedTensorType::get({}, Float32Type::get(&getContext()));
    auto lrOp = ::zero::dist::LrScheduleOp::create(b, f32s, s.t, b.getStringAttr(sched));
    if (sched == "constant") {
      lrOp->setAttr("lr", b.getF64FloatAttr(lr));
    } else {
      lrOp->setAttr("warmup_min_lr", b.getF64FloatAttr(warmupMinLr));
      lrOp->setAttr("warmup_max_lr", b.getF64FloatAttr(warmupMaxLr));
      lrOp->setAttr("warmup_num_steps", b.getI64IntegerAttr(warmupNumSteps));
      lrOp->setAttr("warmup_type", b.getStringAttr(::zero::stringifyEnum(
                                       warmupType.getValue())));
      if (sched != "WarmupLR")
        lrOp->setAttr("total_num_steps", b.getI64IntegerAttr(totalNumSteps));
      if (sched == "LRRangeTest") {
        for (StringRef a : {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps",
                            "warmup_type", "total_num_steps"})
          lrOp->removeAttr(a);
        lrOp->setAttr("lr_range_test_min_lr", b.getF64FloatAttr(lrRangeTestMinLr));
        lrOp->setAttr("lr_range_test_step_size", b.getF64FloatAttr(lrRangeTestStepSize));
        lrOp->setAttr("lr_range_test_step_rate", b.getF64FloatAttr(lrRangeTestStepRate));
        lrOp->setAttr("lr_range_test_staircase", b.getI64IntegerAttr(lrRangeTestStaircase ? 1 : 0));
      }
      if (sched == "OneCycle") {
        lrOp->removeAttr("warmup_min_lr");
        lrOp->removeAttr("warmup_max_lr");
        lrOp->removeAttr("warmup_num_steps");
        lrOp->removeAttr("warmup_type");
        lrOp->removeAttr("total_num_steps");
        setOneCycleShape(lrOp, b);
        lrOp->setAttr("cycle_min_lr", b.getF64FloatAttr(cycleMinLr));
        lrOp->setAttr("cycle_max_lr", b.getF64FloatAttr(cycleMaxLr));
        lrOp->setAttr("decay_lr_rate", b.getF64FloatAttr(decayLrRate));
      }
      if (sched == "WarmupCosineLR") {
        lrOp->setAttr("cos_min_ratio", b.getF64FloatAttr(cosMinRatio));
        lrOp->setAttr("warmup_min_ratio", b.getF64FloatAttr(warmupMinRatio));
        lrOp->setAttr("lr", b.getF64FloatAttr(lr));
      }
    }
    // DeepSpeed's scheduler built with last_batch_iteration L != -1 leaves
    // the optimizer's own lr (and betas) for the first step and resumes at
    // L + 1 after it.
    if (lastBatchIteration != -1) {
      lrOp->setAttr("last_batch_iteration",
                    b.getI64IntegerAttr(lastBatchIteration));
      lrOp->setAttr("lr", b.getF64FloatAttr(lr));
    }
    s.rate = lrOp.getResult();
  }

  /// The global gradient norm (before clipping) and the clipping coefficient
  /// (torch.nn.utils.clip_grad_norm_; 1 without clipping).
  void clipGradients(OptimizerStep &s) {
    ImplicitLocOpBuilder &b = s.b;
    Type f32 = Float32Type::get(&getContext());
    Value sumSq;
    for (auto &[g, grad] : s.params) {
      auto gt = cast<RankedTensorType>(grad.getType());
      SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, gt.getRank()));
      Value sq = gt.getRank() == 0
                     ? onnx::MulOp::create(b, grad, grad).getResult()
                     : onnx::ReduceSumSquareOp::create(b, grad, axes, 0).getResult();
      sumSq = sumSq ? onnx::AddOp::create(b, sumSq, sq).getResult() : sq;
    }
    // Sharded gradients: the ranks' local squared norms, summed by one all-reduce.
    if (s.sharded)
      sumSq = ::zero::dist::AllReduceOp::create(b, sumSq.getType(), sumSq, int64_t(world));
    s.norm = onnx::SqrtOp::create(b, sumSq);
    if (s.skips) {
      auto i1s = RankedTensorType::get({}, b.getI1Type());
      s.overflow = onnx::OrOp::create(b, i1s, onnx::IsNaNOp::create(b, i1s, sumSq),
                                      onnx::IsInfOp::create(b, i1s, sumSq));
    }
    s.scale = scalar(b, 1.0, f32);
    if (clip > 0) {
      // clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1.
      Value epsilon = scalar(b, 1e-6, f32);
      Value denominator = onnx::AddOp::create(b, s.norm, epsilon);
      Value maxNorm = scalar(b, clip, f32);
      Value coef = onnx::DivOp::create(b, maxNorm, denominator);
      s.scale = onnx::MinOp::create(b, coef, scalar(b, 1.0, f32));
    }
  }

  /// One update per parameter (`kind`: adamw, adam or sgd), stored back into
  /// the parameter and its optimizer state. The optimizers step f32 master
  /// weights only.
  LogicalResult applyUpdates(OptimizerStep &s, StringRef kind) {
    Type f32 = Float32Type::get(&getContext());
    for (auto [index, entry] : llvm::enumerate(s.params)) {
      auto &[g, grad] = entry;
      auto fullType = cast<RankedTensorType>(g.getType());
      Type elem = fullType.getElementType();
      const bool half = elem.isBF16() || (elem.isF16() && s.scaler);
      if (elem.isF16() && !s.scaler)
        return g.emitOpError() << "is " << fullType
                               << "; fp16 training needs DeepSpeed's loss scaler: export the "
                                  "model in float32 (model.float() before torch.onnx.export) "
                                  "and train with \"fp16\": {\"enabled\": true} (or in bf16 "
                                  "or fp32)";
      if (elem != f32 && !half)
        return g.emitOpError() << "is " << fullType
                               << "; the optimizers update f32 parameters, or bf16 ones "
                                  "through an fp32 master copy: export the model in float32 "
                                  "(model.float() before torch.onnx.export)";
      s.b.setLoc(g.getLoc());
      auto tensor = attrs::kTensor.get(g);
      const ParamLayout &layout = s.layouts[index];
      // Sharded: the rank steps its shard of the parameter and its state.
      auto steppedOf = [&](Type e) {
        return s.sharded ? RankedTensorType::get({layout.shard}, e)
                         : RankedTensorType::get(fullType.getShape(), e);
      };
      ParamUpdate u{g,
                    grad,
                    layout,
                    fullType,
                    tensor ? tensor.str() : g.getSymName().str(),
                    steppedOf(f32),
                    s.load(g)};
      if (s.sharded)
        u.value = ::zero::dist::LocalShardOp::create(
            s.b, steppedOf(elem), ::zero::flatPadded(s.b, u.value, layout.padded),
            int64_t(world));
      u.held = u.value;
      if (half)
        useMaster(s, u);
      if (kind == "sgd")
        applySGD(s, u);
      else
        applyAdam(s, u, /*decoupled=*/kind == "adamw");
      ++numParamsUpdated;
    }
    return success();
  }

  /// The weight decay of `u`'s parameter group: 0 when its name matches
  /// no-decay, else weight-decay.
  double decayOf(const ParamUpdate &u) const {
    if (noDecay.empty())
      return weightDecay;
    return llvm::Regex(noDecay).match(u.name) ? 0.0 : weightDecay;
  }

  /// torch.optim.SGD's update, with a momentum buffer when momentum > 0.
  void applySGD(OptimizerStep &s, ParamUpdate &u) {
    ImplicitLocOpBuilder &b = s.b;
    ml_program::GlobalOp buf;
    Value bufIn;
    if (momentum > 0) {
      buf = s.addStateGlobal(s.anchor,
                             (u.param.getSymName() + ".momentum_buffer").str(),
                             u.name + ".momentum_buffer", u.stepped,
                             attrs::GlobalRole::OptimizerState);
      markStateShard(s, u, buf);
      s.anchor = buf;
      bufIn = s.load(buf);
      numStateElements += u.stepped.getNumElements();
    }
    SmallVector<Type> types{u.stepped};
    if (buf)
      types.push_back(u.stepped);
    SmallVector<Value> operands{u.value, u.grad, s.t, s.rate, s.scale};
    if (bufIn)
      operands.push_back(bufIn);
    auto op = ::zero::dist::SGDOp::create(
        b, types, operands,
        {b.getNamedAttr("momentum", b.getF64FloatAttr(momentum)),
         b.getNamedAttr("dampening", b.getF64FloatAttr(dampening)),
         b.getNamedAttr("weight_decay", b.getF64FloatAttr(decayOf(u))),
         b.getNamedAttr("nesterov", b.getI64IntegerAttr(nesterov ? 1 : 0))});
    storeParameter(s, u, op.getResult(0));
    if (buf)
      s.store(buf, op.getResult(1));
  }

  /// torch.optim.Adam's update, or AdamW's (`decoupled` weight decay), with
  /// its exp_avg and exp_avg_sq state.
  void applyAdam(OptimizerStep &s, ParamUpdate &u, bool decoupled) {
    ImplicitLocOpBuilder &b = s.b;
    auto m = s.addStateGlobal(
        s.anchor, (u.param.getSymName() + ".exp_avg").str(),
        u.name + ".exp_avg", u.stepped, attrs::GlobalRole::OptimizerState);
    auto v = s.addStateGlobal(m, (u.param.getSymName() + ".exp_avg_sq").str(),
                              u.name + ".exp_avg_sq", u.stepped,
                              attrs::GlobalRole::OptimizerState);
    markStateShard(s, u, m);
    markStateShard(s, u, v);
    s.anchor = v;
    numStateElements += 2 * u.stepped.getNumElements();
    Value vIn = s.load(v);
    Value mIn = s.load(m);
    // OneCycle's cycle_momentum: DeepSpeed sets betas = (momentum, 0.99) at
    // every scheduler step, so beta2 is 0.99 and beta1 follows the cycle,
    // which the kernel computes from the step (attributes beta1_schedule...).
    const bool cycle = cyclesMomentum("adamw");
    auto op = ::zero::dist::AdamWOp::create(
        b, TypeRange{u.stepped, u.stepped, u.stepped}, u.value, u.grad, s.t, s.rate, s.scale,
        mIn, vIn, b.getF64FloatAttr(cycle ? cycleMinMom : beta1),
        b.getF64FloatAttr(cycle ? 0.99 : beta2), b.getF64FloatAttr(eps),
        b.getF64FloatAttr(decayOf(u)), b.getI64IntegerAttr(decoupled ? 1 : 0));
    if (!biasCorrection)
      op->setAttr("bias_correction", b.getI64IntegerAttr(0));
    if (cycle) {
      op->setAttr("beta1_schedule", b.getStringAttr("OneCycle"));
      if (lastBatchIteration != -1) {
        op->setAttr("last_batch_iteration",
                    b.getI64IntegerAttr(lastBatchIteration));
        op->setAttr("first_beta1", b.getF64FloatAttr(beta1));
        op->setAttr("first_beta2", b.getF64FloatAttr(beta2));
      }
      setOneCycleShape(op, b);
      op->setAttr("cycle_min_mom", b.getF64FloatAttr(cycleMinMom));
      op->setAttr("cycle_max_mom", b.getF64FloatAttr(cycleMaxMom));
      op->setAttr("decay_mom_rate", b.getF64FloatAttr(decayMomRate));
    }
    storeParameter(s, u, op.getParamOut());
    s.store(m, op.getExpAvgOut());
    s.store(v, op.getExpAvgSqOut());
  }

  /// Sharded: marks an optimizer-state global as the rank's shard of a
  /// tensor of the parameter's type.
  void markStateShard(OptimizerStep &s, ParamUpdate &u, ml_program::GlobalOp state) {
    if (!s.sharded)
      return;
    ImplicitLocOpBuilder &b = s.b;
    // The state's own element type (f32 beside a 16-bit parameter).
    Type elem = cast<RankedTensorType>(state.getType()).getElementType();
    attrs::kFullType.set(state,
                         TypeAttr::get(RankedTensorType::get(u.fullType.getShape(), elem)));
    attrs::kShard.set(state, ::zero::dist::ShardAttr::get(b.getContext(), world,
                                                          u.layout.numel,
                                                          u.layout.padded));
  }

  /// A 16-bit parameter is stepped through its fp32 master copy, an
  /// optimizer-state global NAME.master (the rank's shard of it, sharded)
  /// that starts as the 16-bit parameter widened (`zero.widen_from`: the
  /// runtime widens it when it loads the weights), as DeepSpeed's bf16 and
  /// fp16 optimizers make their fp32 copies from the converted model. The
  /// update reads the master; storeParameter writes it and the parameter
  /// rounded to 16 bits.
  void useMaster(OptimizerStep &s, ParamUpdate &u) {
    u.master = s.addStateGlobal(
        s.anchor, (u.param.getSymName() + ".master").str(), u.name + ".master",
        u.stepped, attrs::GlobalRole::OptimizerState);
    markStateShard(s, u, u.master);
    attrs::kWidenFrom.set(u.master, FlatSymbolRefAttr::get(u.param.getSymNameAttr()));
    s.anchor = u.master;
    numStateElements += u.stepped.getNumElements();
    u.value = s.load(u.master);
  }

  /// Erases `v`'s defining ops back through their operands while nothing
  /// reads them (what a master's parameter read left unused).
  static void eraseIfUnused(Value v) {
    Operation *op = v ? v.getDefiningOp() : nullptr;
    if (!op || !op->use_empty() || op->getNumRegions() != 0 ||
        !(isa<ml_program::GlobalLoadOp, ::zero::dist::LocalShardOp>(op) ||
          isa<::zero::onnx::ONNXDialect>(op->getDialect())))
      return;
    SmallVector<Value> operands(op->getOperands());
    op->erase();
    for (Value o : operands)
      eraseIfUnused(o);
  }

  /// Stores the updated parameter: in place, or (sharded) gathered back
  /// whole; a 16-bit parameter's master takes the update and the parameter
  /// its rounding to 16 bits (to nearest even), gathered in 16 bits.
  void storeParameter(OptimizerStep &s, ParamUpdate &u, Value updated) {
    if (u.master) {
      s.store(u.master, updated);
      Type elem = u.fullType.getElementType();
      auto shape = cast<RankedTensorType>(updated.getType()).getShape();
      updated = onnx::CastOp::create(s.b, RankedTensorType::get(shape, elem), updated,
                                     TypeAttr::get(elem));
    }
    // A skipped step (fp16 overflow) keeps what the rank held; chosen before
    // the gather, so the store stays the gather zero-partition recognizes.
    if (s.overflow)
      updated = onnx::WhereOp::create(s.b, updated.getType(), s.overflow, u.held, updated);
    if (u.master)
      eraseIfUnused(u.held); // bf16: the parameter itself is not read
    if (!s.sharded)
      return s.storeAsIs(u.param, updated);
    s.storeAsIs(u.param, ::zero::gatherWhole(s.b, updated, u.fullType, int64_t(world)));
  }

  /// The step returns loss, grad_norm and lr (the gradients are spent).
  void returnLossNormAndRate(OptimizerStep &s) {
    MLIRContext *ctx = &getContext();
    ImplicitLocOpBuilder &b = s.b;
    b.setLoc(NameLoc::get(StringAttr::get(ctx, "optimizer")));
    SmallVector<Value> results{s.ret.getOperand(0), s.norm, s.rate};
    // fp16: the step's loss scale; fp16 and bf16 that checks: whether the
    // step was skipped (1) or not (0).
    if (s.scaler)
      results.push_back(s.lossScale);
    if (s.skips)
      results.push_back(
          onnx::CastOp::create(b, RankedTensorType::get({}, b.getF32Type()),
                               s.overflow, TypeAttr::get(b.getF32Type())));
    func::ReturnOp::create(b, results);
    s.ret.erase();
    auto named = [&](StringRef n) {
      return b.getDictionaryAttr({b.getNamedAttr("onnx.name", b.getStringAttr(n))});
    };
    s.func.setType(FunctionType::get(ctx, s.func.getArgumentTypes(),
                                     ValueRange(results).getTypes()));
    SmallVector<DictionaryAttr> resAttrs{named("loss"), named("grad_norm"), named("lr")};
    if (s.scaler)
      resAttrs.push_back(named("loss_scale"));
    if (s.skips)
      resAttrs.push_back(named("skipped"));
    s.func.setAllResultAttrs(resAttrs);
  }

  /// What the runtime needs to know about the step (`zero.training`): its
  /// results, the micro-batches per step, and the optimizer described.
  void recordTrainingSettings(ModuleOp module, StringRef kind) {
    std::string desc;
    llvm::raw_string_ostream os(desc);
    os << kind << " lr=" << lr;
    if (kind == "sgd")
      os << " momentum=" << momentum << " dampening=" << dampening
         << " nesterov=" << (nesterov ? 1 : 0);
    else
      os << " betas=" << beta1 << "," << beta2 << " eps=" << eps;
    os << " weight-decay=" << weightDecay;
    if (!noDecay.empty())
      os << " no-decay=" << noDecay;
    if (clip > 0)
      os << " clip=" << clip;
    os << " schedule=" << ::zero::stringifyEnum(schedule.getValue());
    int64_t accumulation = attrs::kAccumulationSteps.getInt(module).value_or(1);
    const bool scaled = ::zero::training::findLossScaler(module).has_value();
    const bool skips = scaled || attrs::kSkipNonFinite.isSetOn(module);
    attrs::kTraining.set(
        module, ::zero::dist::TrainingAttr::get(
                    &getContext(), "loss", "grad_norm", "lr", accumulation,
                    desc, scaled ? "loss_scale" : "", skips ? "skipped" : "",
                    std::max<int64_t>(stepsPerPrint, 0), csvMonitor));
  }
};

} // namespace
