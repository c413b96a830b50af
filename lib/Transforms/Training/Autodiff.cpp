//===- Autodiff.cpp - zero-autodiff: the training step ---------------------===//
//
// zero-autodiff turns a loss function into @train_step: for each micro-batch,
// the forward ops (cloned) and then, in reverse order, the reverse rule of
// every active op (GradientRules.cpp). An op is active when it lies on a path
// from a trainable parameter to the loss and produces floating-point values;
// other ops (masks, positions, integer index arithmetic) need no rule. Each
// parameter's gradient is summed over the micro-batches; the step is one
// rank's, with no collective (zero-reduce-micro-steps and zero-optimizer add
// those).
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"
#include "LossScaler.h"
#include "TrainingFunction.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Analysis/Layers.h"

#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Regex.h"

#define DEBUG_TYPE "zero-autodiff"

namespace zero {
#define GEN_PASS_DEF_ZEROAUTODIFFPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace attrs = ::zero::attrs;
namespace onnx = ::zero::onnx;
using ::zero::training::pickFunction;

namespace {

/// The ONNX node name the importer carried on a location (a NameLoc, maybe
/// inside a FusedLoc); empty when there is none.
std::string locName(Location loc) {
  if (auto n = dyn_cast<NameLoc>(loc))
    return n.getName().str();
  if (auto f = dyn_cast<FusedLoc>(loc))
    for (Location l : f.getLocations())
      if (auto n = locName(l); !n.empty())
        return n;
  return "";
}

/// " (ONNX node 'NAME')" for a diagnostic about `op`, or nothing.
std::string nodeDescription(Operation *op) {
  std::string node = locName(op->getLoc());
  return node.empty() ? std::string() : " (ONNX node '" + node + "')";
}

/// A Gather's gradient as zero-autodiff's rule makes it (a scatter-add of the
/// looked-up rows into a splat of +0) that nothing reads yet, or null.
onnx::ScatterNDOp rowsIntoZeros(Value g) {
  auto scatter = g.getDefiningOp<onnx::ScatterNDOp>();
  auto zeros = scatter ? scatter.getData().getDefiningOp<onnx::ConstantOp>() : nullptr;
  auto splat = zeros ? dyn_cast<SplatElementsAttr>(zeros.getValue()) : nullptr;
  // Gradients are floating point (only float values are active).
  auto zero = splat ? dyn_cast<FloatAttr>(splat.getSplatValue<Attribute>()) : nullptr;
  if (!scatter || !g.use_empty() || scatter.getReduction() != "add" || !zero ||
      !zero.getValue().isPosZero())
    return nullptr;
  return scatter;
}

/// Erases a rowsIntoZeros() scatter whose rows went elsewhere, and its zeros
/// when nothing else reads them.
void eraseRowsIntoZeros(onnx::ScatterNDOp scatter) {
  auto zeros = scatter.getData().getDefiningOp<onnx::ConstantOp>();
  scatter.erase();
  if (zeros->use_empty())
    zeros.erase();
}

/// `sum + g` for a gradient sum over micro-batches. A `g` that is a Gather's
/// gradient (a scatter-add of the looked-up rows into zeros, zero-autodiff's
/// rule) that nothing reads yet is scattered into `sum` instead: an
/// embedding table's gradient then costs the rows the micro-batch looked up,
/// not a table of zeros, the scatter and a table-sized Add (the lowering runs
/// the scatter in place when `sum` has no other reader). The rows are added
/// into the running sum one at a time, in the scatter's order. The sum is
/// `sum` first, `g` second: zero-reduce-micro-steps (ZeRO-2) walks this chain
/// back from the result to each micro-batch's gradient.
Value sumGradients(ImplicitLocOpBuilder &b, Value sum, Value g) {
  onnx::ScatterNDOp scatter = rowsIntoZeros(g);
  if (!scatter || sum.getType() != g.getType())
    return onnx::AddOp::create(b, sum, g);
  Value summed = onnx::ScatterNDOp::create(b, sum, scatter.getIndices(),
                                           scatter.getUpdates(), "add");
  eraseRowsIntoZeros(scatter);
  return summed;
}

/// `g`, a 16-bit gradient, cast to `into` (f32: exactly; the other 16-bit
/// type: as DeepSpeed casts to its grad_accum_dtype) to start a sum over
/// micro-batches in that type. A Gather's gradient (a scatter-add of the
/// looked-up rows into zeros) that nothing reads yet is rebuilt in `into`
/// from its cast rows: the rows are cast, not the table.
Value widenGradient(ImplicitLocOpBuilder &b, Value g, Type into) {
  auto t = cast<RankedTensorType>(g.getType());
  auto whole = RankedTensorType::get(t.getShape(), into);
  auto widen = [&](Value v) -> Value {
    auto vt = cast<RankedTensorType>(v.getType());
    return onnx::CastOp::create(b, RankedTensorType::get(vt.getShape(), into),
                                v, TypeAttr::get(into));
  };
  onnx::ScatterNDOp scatter = rowsIntoZeros(g);
  if (!scatter)
    return widen(g);
  Value table = onnx::ConstantOp::create(
      b, whole, DenseElementsAttr::get(whole, FloatAttr::get(into, 0.0)));
  Value rebuilt = onnx::ScatterNDOp::create(b, table, scatter.getIndices(),
                                            widen(scatter.getUpdates()), "add");
  eraseRowsIntoZeros(scatter);
  return rebuilt;
}

/// Whether `v` is a floating-point tensor (only those have gradients).
bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

/// The values one micro-batch's backward differentiates: floating-point
/// values that depend on a trainable parameter (varied) and that the loss
/// depends on (useful).
struct ActiveValues {
  ActiveValues(ArrayRef<Operation *> ops, Value loss,
               const llvm::SetVector<Operation *> &trainable) {
    for (Operation *op : ops) {
      if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op)) {
        Operation *g = SymbolTable::lookupNearestSymbolFrom(op, load.getGlobalAttr());
        if (g && trainable.contains(g))
          varied.insert(load.getResult());
        continue;
      }
      if (llvm::any_of(op->getOperands(), [&](Value v) { return varied.contains(v); }))
        for (Value r : op->getResults())
          if (isFloatTensor(r))
            varied.insert(r);
    }
    useful.insert(loss);
    for (Operation *op : llvm::reverse(ops))
      if (llvm::any_of(op->getResults(), [&](Value v) { return useful.contains(v); }))
        for (Value v : op->getOperands())
          useful.insert(v);
  }

  bool contains(Value v) const {
    return varied.contains(v) && useful.contains(v) && isFloatTensor(v);
  }

  llvm::DenseSet<Value> varied, useful;
};

/// @train_step as zero-autodiff builds it from the loss function: what each
/// step of the pass leaves for the ones after it.
struct TrainStep {
  TrainStep(func::FuncOp forward, func::FuncOp step, llvm::SetVector<Operation *> trainable)
      : forward(forward), src(forward.getBody().front()),
        forwardRet(cast<func::ReturnOp>(src.getTerminator())), step(step),
        entry(&step.getBody().front()), b(forward.getLoc(), forward.getContext()),
        trainable(std::move(trainable)) {
    b.setInsertionPointToEnd(entry);
  }

  /// The last op built so far, null before the first.
  Operation *lastOp() { return entry->empty() ? nullptr : &entry->back(); }

  /// The loss function (one micro-batch's forward) and its return of the loss.
  func::FuncOp forward;
  Block &src;
  func::ReturnOp forwardRet;
  /// @train_step; its inputs hold the micro-batches along dim 0.
  func::FuncOp step;
  Block *entry;
  /// Builds @train_step's ops at the end of `entry`.
  ImplicitLocOpBuilder b;
  llvm::SetVector<Operation *> trainable;
  /// Dropout's step: the `rng.step` counter plus one (null without dropout).
  Value rngStep;
  /// parameter -> its gradient, summed over micro-batches.
  llvm::MapVector<Operation *, Value> grads;
  /// The micro-batches' losses, summed.
  Value lossSum;
};

//===----------------------------------------------------------------------===//
// zero-autodiff
//===----------------------------------------------------------------------===//

struct ZeroAutodiffPass : public ::zero::impl::ZeroAutodiffPassBase<ZeroAutodiffPass> {
  using Base::Base;
  // A clone counts its own statistics (the options are copied by clonePass).
  ZeroAutodiffPass(const ZeroAutodiffPass &other) : Base(other) {}

  Statistic numTrainable{this, "trainable-parameters",
                         "Parameters trained (those the loss depends on)"};
  Statistic numFrozen{this, "frozen-parameters", "Parameters --freeze keeps from training"};
  Statistic numOpsDifferentiated{this, "ops-differentiated",
                                 "Forward ops whose reverse rule was applied (all "
                                 "micro-batches)"};
  Statistic numMicroBatches{this, "micro-batches",
                            "Micro-batch copies (forward and backward) built"};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = pickFunction(module, function, "zero-autodiff");
    if (!func)
      return signalPassFailure();
    if (accumulation < 1) {
      module.emitError() << "zero-autodiff: accumulation must be >= 1, got " << accumulation;
      return signalPassFailure();
    }
    if (!accumDtype.empty() && accumDtype != "fp32" && accumDtype != "fp16" &&
        accumDtype != "bf16") {
      module.emitError()
          << "zero-autodiff: accum-dtype must be fp32, fp16 or bf16, got '"
          << accumDtype << "'";
      return signalPassFailure();
    }
    if (failed(keepOnlyLoss(func)) || failed(checkLoss(func)))
      return signalPassFailure();
    FailureOr<llvm::SetVector<Operation *>> trainable = chooseTrainableParameters(module);
    if (failed(trainable))
      return signalPassFailure();
    if (tagMicroBatches)
      nameSegmentsAsLayers(func);
    if (failed(checkMicroBatchSize(func)))
      return signalPassFailure();
    FailureOr<SmallVector<Type>> argTypes = stepInputTypes(func);
    if (failed(argTypes))
      return signalPassFailure();
    TrainStep s(func, createTrainStep(func, *argTypes), std::move(*trainable));
    addDropoutStepCounter(module, s);
    for (int64_t k = 0; k < accumulation; ++k)
      if (failed(differentiateMicroBatch(s, k)))
        return signalPassFailure();
    returnLossAndGradients(s, meanLoss(s));
    attrs::kAccumulationSteps.set(module, s.b.getI64IntegerAttr(accumulation));
    func.erase();
  }

  /// A model exported with its loss often returns more than the loss
  /// (Hugging Face's (loss, logits)): the loss is `loss-output`'s result, else
  /// the one named "loss", else the only floating-point scalar; the function
  /// then returns it alone (the other outputs are not part of a training step).
  LogicalResult keepOnlyLoss(func::FuncOp func) {
    unsigned n = func.getNumResults();
    if (n <= 1 && lossOutput.empty())
      return success();
    SmallVector<std::string> names;
    int64_t named = -1, wanted = -1;
    SmallVector<unsigned> scalars;
    for (unsigned i = 0; i < n; ++i) {
      auto a = func.getResultAttrOfType<StringAttr>(i, "onnx.name");
      names.push_back(a ? a.str() : "output" + std::to_string(i));
      auto t = cast<RankedTensorType>(func.getResultTypes()[i]);
      bool scalar = isa<FloatType>(t.getElementType()) && t.getNumElements() == 1;
      if (scalar)
        scalars.push_back(i);
      if (!lossOutput.empty() && names.back() == lossOutput)
        wanted = i;
      if (scalar && names.back() == "loss")
        named = i;
    }
    std::string list = llvm::join(names, ", ");
    int64_t which = wanted;
    if (!lossOutput.empty() && wanted < 0)
      return func.emitOpError() << "has no output '" << lossOutput
                                << "' to train on (--loss-output); its outputs: " << list;
    if (which < 0)
      which = named >= 0 ? named : scalars.size() == 1 ? int64_t(scalars.front()) : -1;
    if (which < 0)
      return func.emitOpError()
             << "returns " << n << " outputs (" << list << "), "
             << (scalars.empty() ? "none of them a floating-point scalar"
                                 : std::to_string(scalars.size()) +
                                       " of them floating-point scalars")
             << "; name the loss with --loss-output NAME "
                "(zero-autodiff{loss-output=NAME}), or attach one to the logits with "
                "--loss KIND:LABELS@OUTPUT";
    LLVM_DEBUG(llvm::dbgs() << "zero-autodiff: the loss is output " << which << " of " << n
                            << " (" << list << ")\n");
    if (n == 1)
      return success();
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Value loss = ret.getOperand(which);
    ret->setOperands(ValueRange{loss});
    llvm::BitVector drop(n, true);
    drop.reset(which);
    return func.eraseResults(drop);
  }

  /// The loss: the function returns one floating-point scalar.
  LogicalResult checkLoss(func::FuncOp func) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (ret.getNumOperands() == 1 &&
        isa<FloatType>(cast<RankedTensorType>(ret.getOperand(0).getType()).getElementType()) &&
        cast<RankedTensorType>(ret.getOperand(0).getType()).getNumElements() == 1)
      return success();
    std::string types;
    llvm::raw_string_ostream os(types);
    llvm::interleaveComma(ret.getOperandTypes(), os);
    return func.emitOpError() << "must return one floating-point scalar loss to be trained; "
                                 "it returns ("
                              << types
                              << "). Export the model with its loss, or attach one with "
                                 "--loss cross-entropy:LABELS (zero-add-loss)";
  }

  /// The parameters to train, in module order: the floating-point globals
  /// but model buffers, the state passes add (`zero.role`) and those whose
  /// ONNX name --freeze matches.
  FailureOr<llvm::SetVector<Operation *>> chooseTrainableParameters(ModuleOp module) {
    llvm::Regex frozen(freeze.getValue());
    std::string regexError;
    if (!freeze.empty() && !frozen.isValid(regexError)) {
      module.emitError() << "zero-autodiff: --freeze '" << freeze
                         << "' is not a valid regular expression: " << regexError;
      return failure();
    }
    llvm::SetVector<Operation *> trainable;
    for (auto g : module.getOps<ml_program::GlobalOp>()) {
      auto t = cast<RankedTensorType>(g.getType());
      auto tensor = attrs::kTensor.get(g);
      StringRef name = tensor ? tensor.getValue() : g.getSymName();
      if (!isa<FloatType>(t.getElementType()) || attrs::kBuffer.isSetOn(g) ||
          attrs::kRole.isSetOn(g))
        continue;
      if (!freeze.empty() && frozen.match(name)) {
        LLVM_DEBUG(llvm::dbgs() << "zero-autodiff: '" << name << "' is frozen\n");
        ++numFrozen;
        continue;
      }
      trainable.insert(g);
    }
    return trainable;
  }

  /// A model without module paths, stepped through pipeline stages or
  /// checkpointed: its forward's single-activation segments (Layers.h) are
  /// written into the ops' locations as module paths (`segment.N`), which
  /// the reverse rules' ops inherit, so the training step has layers too.
  void nameSegmentsAsLayers(func::FuncOp func) {
    MLIRContext *ctx = &getContext();
    ::zero::LayerStructure ls = ::zero::recoverLayers(func);
    if (!ls.segments)
      return;
    LLVM_DEBUG(llvm::dbgs() << "zero-autodiff: no module paths; " << ls.layers.size()
                            << " segments named as layers\n");
    for (auto [op, layer] : ls.layerOf) {
      Builder lb(ctx);
      auto meta = lb.getDictionaryAttr(
          {lb.getNamedAttr("module_scopes",
                           lb.getArrayAttr({lb.getStringAttr(ls.layers[size_t(layer)].name)})),
           lb.getNamedAttr("module_classes", lb.getArrayAttr({lb.getStringAttr("")}))});
      op->setLoc(FusedLoc::get(ctx, {op->getLoc()}, meta));
    }
  }

  /// The config's train_micro_batch_size_per_gpu is the model's batch: its
  /// inputs' largest dim 0 (an input broadcast over the batch has 1 there).
  LogicalResult checkMicroBatchSize(func::FuncOp func) {
    const int64_t micro = microBatchSize;
    if (micro <= 0)
      return success();
    int64_t batch = 0;
    BlockArgument widest;
    for (BlockArgument arg : func.getBody().front().getArguments())
      if (auto t = cast<RankedTensorType>(arg.getType());
          t.getRank() > 0 && t.getDimSize(0) > batch) {
        batch = t.getDimSize(0);
        widest = arg;
      }
    if (!widest || batch == micro)
      return success();
    auto name = func.getArgAttrOfType<StringAttr>(widest.getArgNumber(), "onnx.name");
    std::string input =
        name ? name.getValue().str() : "#" + std::to_string(widest.getArgNumber());
    const std::string origin =
        microBatchOrigin.empty() ? "the config's train_micro_batch_size_per_gpu"
                                 : std::string(microBatchOrigin);
    return func.emitOpError()
           << origin << " is " << micro << " but the model's batch is " << batch
           << " (input '" << input << "' is " << widest.getType()
           << "): one micro-batch is one run of the model; export it "
              "(or give --input-shape) with batch "
           << micro << ", or set train_micro_batch_size_per_gpu to " << batch;
  }

  /// @train_step's input types: the model's, with `accumulation`
  /// micro-batches along dim 0.
  FailureOr<SmallVector<Type>> stepInputTypes(func::FuncOp func) {
    SmallVector<Type> argTypes;
    for (BlockArgument arg : func.getBody().front().getArguments()) {
      auto t = cast<RankedTensorType>(arg.getType());
      if (accumulation > 1 && t.getRank() == 0) {
        func.emitOpError() << "input " << arg.getArgNumber()
                           << " is a scalar; gradient accumulation splits every "
                              "input along dim 0 into micro-batches";
        return failure();
      }
      SmallVector<int64_t> shape(t.getShape());
      if (accumulation > 1)
        shape[0] *= accumulation;
      argTypes.push_back(RankedTensorType::get(shape, t.getElementType()));
    }
    return argTypes;
  }

  /// An empty @train_step after `func`, with its inputs' names.
  func::FuncOp createTrainStep(func::FuncOp func, ArrayRef<Type> argTypes) {
    MLIRContext *ctx = &getContext();
    OpBuilder mb(ctx);
    mb.setInsertionPointAfter(func);
    auto step = func::FuncOp::create(mb, func.getLoc(), "train_step",
                                     FunctionType::get(ctx, argTypes, {}));
    if (ArrayAttr argAttrs = func.getAllArgAttrs())
      step.setAllArgAttrs(argAttrs);
    step.addEntryBlock();
    return step;
  }

  /// Training-mode Dropout draws its mask from (seed, stream, step): the step
  /// is the `rng.step` counter, incremented once per training step, and each
  /// micro-batch copy gets its own stream.
  void addDropoutStepCounter(ModuleOp module, TrainStep &s) {
    if (s.src.getOps<onnx::TrainingDropoutOp>().empty())
      return;
    ImplicitLocOpBuilder &b = s.b;
    auto i64s = RankedTensorType::get({}, b.getI64Type());
    OpBuilder gb(&getContext());
    gb.setInsertionPoint(s.forward);
    auto counter = ml_program::GlobalOp::create(
        gb, s.forward.getLoc(), "rng_step", i64s, /*is_mutable=*/true,
        DenseElementsAttr::get(i64s, IntegerAttr::get(b.getI64Type(), 0)),
        gb.getStringAttr("private"));
    attrs::kTensor.set(counter, gb.getStringAttr("rng.step"));
    attrs::kRole.set(counter, attrs::GlobalRole::Counter);
    SymbolTable(module).insert(counter);
    auto sym = FlatSymbolRefAttr::get(counter.getSymNameAttr());
    Value one = onnx::ConstantOp::create(
        b, i64s, DenseElementsAttr::get(i64s, IntegerAttr::get(b.getI64Type(), 1)));
    Value step = ml_program::GlobalLoadOp::create(b, i64s, sym);
    s.rngStep = onnx::AddOp::create(b, step, one);
    ml_program::GlobalStoreOp::create(b, sym, s.rngStep);
  }

  /// With tag-micro-batches, marks each op built after `before` with its
  /// micro-batch and phase (zero-pipeline-split orders them per stage).
  void tagSince(TrainStep &s, Operation *before, int64_t k,
                attrs::Phase phase) {
    if (!tagMicroBatches)
      return;
    for (Operation *op = before ? before->getNextNode() : &s.entry->front(); op;
         op = op->getNextNode()) {
      attrs::kMicroBatch.set(op, s.b.getI64IntegerAttr(k));
      attrs::kPhase.set(op, phase);
    }
  }

  /// Micro-batch `k`: the forward cloned on its slice of the inputs, then the
  /// backward sweep from its loss, seeded with 1/accumulation; its gradients
  /// go into the step's sums.
  LogicalResult differentiateMicroBatch(TrainStep &s, int64_t k) {
    ++numMicroBatches;
    ImplicitLocOpBuilder &b = s.b;
    Operation *beforeForward = s.lastOp();
    IRMapping map;
    SmallVector<Operation *> ops = cloneForward(s, k, map);
    tagSince(s, beforeForward, k, attrs::Phase::Forward);
    Operation *beforeBackward = s.lastOp();
    Value loss = map.lookup(s.forwardRet.getOperand(0));
    Type lossType = s.forwardRet.getOperand(0).getType();
    Type lossElem = cast<RankedTensorType>(lossType).getElementType();
    auto seedAttr = DenseElementsAttr::get(cast<ShapedType>(lossType),
                                           FloatAttr::get(lossElem, 1.0 / accumulation));
    Value seed = onnx::ConstantOp::create(b, lossType, seedAttr);
    // fp16 (zero-mixed-precision): the backward of loss x scale, as
    // DeepSpeed's scaled_loss.backward().
    if (auto scaler = ::zero::training::findLossScaler(b.getBlock()->getParentOp()
                                                           ->getParentOfType<ModuleOp>())) {
      Value scale = ::zero::training::currentLossScale(b, *scaler);
      if (lossElem != b.getF32Type())
        scale = onnx::CastOp::create(b, RankedTensorType::get({}, lossElem), scale,
                                     TypeAttr::get(lossElem));
      seed = onnx::MulOp::create(b, seed, scale);
    }
    llvm::MapVector<Operation *, Value> micro;
    if (failed(reverse(b, ops, loss, seed, s.trainable, micro)))
      return failure();
    b.setLoc(accumulationLoc());
    for (auto &[g, v] : micro) {
      // grad_accum_dtype fp32: 16-bit gradients summed over the micro-batches
      // in f32 (DeepSpeed's BF16_Optimizer adds each micro-batch's bf16
      // gradient into fp32 ones).
      auto et = cast<RankedTensorType>(v.getType()).getElementType();
      Type into = accumulationType(b);
      const bool widen = into && accumulation > 1 && isa<FloatType>(et) &&
                         et.getIntOrFloatBitWidth() == 16 && et != into;
      auto it = s.grads.find(g);
      if (it == s.grads.end())
        s.grads.insert({g, widen ? widenGradient(b, v, into) : v});
      else
        it->second =
            sumGradients(b, it->second, widen ? widenGradient(b, v, into) : v);
    }
    // The step's loss is logged in f32: a 16-bit loss (zero-mixed-precision
    // keeps the model's) widened, exactly, before the micro-batches' mean.
    if (auto lt = cast<RankedTensorType>(loss.getType());
        isa<FloatType>(lt.getElementType()) &&
        lt.getElementType().getIntOrFloatBitWidth() == 16)
      loss = onnx::CastOp::create(
          b, RankedTensorType::get(lt.getShape(), b.getF32Type()), loss,
          TypeAttr::get(b.getF32Type()));
    s.lossSum = s.lossSum ? onnx::AddOp::create(b, s.lossSum, loss).getResult() : loss;
    tagSince(s, beforeBackward, k, attrs::Phase::Backward);
    return success();
  }

  /// The type 16-bit gradients are summed in over the micro-batches (accum-f32,
  /// accum-dtype); null: their own.
  Type accumulationType(Builder &b) {
    if (accumF32 || accumDtype == "fp32")
      return b.getF32Type();
    if (accumDtype == "fp16")
      return b.getF16Type();
    if (accumDtype == "bf16")
      return b.getBF16Type();
    return {};
  }

  /// Micro-batch `k`'s forward: the loss function's ops cloned, reading the
  /// k-th slice of each input along dim 0, each Dropout on its own stream.
  SmallVector<Operation *> cloneForward(TrainStep &s, int64_t k, IRMapping &map) {
    ImplicitLocOpBuilder &b = s.b;
    for (auto [i, arg] : llvm::enumerate(s.src.getArguments())) {
      Value in = s.entry->getArgument(i);
      if (accumulation > 1) {
        auto t = cast<RankedTensorType>(arg.getType());
        int64_t rows = t.getDimSize(0);
        SmallVector<int64_t> starts(t.getRank(), 0), ends(t.getShape()), steps(t.getRank(), 1);
        starts[0] = k * rows;
        ends[0] = (k + 1) * rows;
        in = onnx::SliceOp::create(b, in, starts, ends, steps);
      }
      map.map(arg, in);
    }
    SmallVector<Operation *> ops;
    for (Operation &op : s.src.without_terminator()) {
      Operation *copy = b.clone(op, map);
      if (auto d = dyn_cast<onnx::TrainingDropoutOp>(copy)) {
        d.getStepMutable().assign(s.rngStep);
        uint64_t stream = uint64_t(d.getStream()) + uint64_t(k) * 0x9E3779B97F4A7C15ull;
        d.setStream(int64_t(stream & uint64_t(INT64_MAX)));
      }
      ops.push_back(copy);
    }
    return ops;
  }

  /// The step's loss: the micro-batches' mean.
  Value meanLoss(TrainStep &s) {
    if (accumulation <= 1)
      return s.lossSum;
    auto t = cast<RankedTensorType>(s.lossSum.getType());
    Value k = onnx::ConstantOp::create(
        s.b, t,
        DenseElementsAttr::get(t, FloatAttr::get(t.getElementType(), double(accumulation))));
    return onnx::DivOp::create(s.b, s.lossSum, k);
  }

  /// Results: the loss, then one gradient per trained parameter in module
  /// order. A parameter the loss does not depend on gets no gradient and is
  /// not trained (PyTorch leaves its .grad None and its optimizers skip it).
  void returnLossAndGradients(TrainStep &s, Value loss) {
    ImplicitLocOpBuilder &b = s.b;
    SmallVector<Value> results{loss};
    SmallVector<Attribute> resAttrs{
        b.getDictionaryAttr({b.getNamedAttr("onnx.name", b.getStringAttr("loss"))})};
    for (Operation *gop : s.trainable) {
      auto g = cast<ml_program::GlobalOp>(gop);
      auto tensor = attrs::kTensor.get(g);
      StringRef name = tensor ? tensor.getValue() : g.getSymName();
      auto it = s.grads.find(gop);
      if (it == s.grads.end()) {
        g.emitWarning() << "parameter '" << name
                        << "' does not affect the loss; it gets no gradient and is "
                           "not trained";
        continue;
      }
      ++numTrainable;
      g.setIsMutable(true);
      attrs::kTrainable.set(g, b.getUnitAttr());
      results.push_back(it->second);
      resAttrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("onnx.name", b.getStringAttr(("grad." + name).str())),
           b.getNamedAttr(attrs::kGradOf, FlatSymbolRefAttr::get(g.getSymNameAttr()))}));
    }
    func::ReturnOp::create(b, results);
    s.step.setType(FunctionType::get(&getContext(), s.step.getArgumentTypes(),
                                     ValueRange(results).getTypes()));
    s.step.setAllResultAttrs(resAttrs);
  }

  /// The location of the gradient sums over uses and micro-batches.
  Location accumulationLoc() {
    return NameLoc::get(StringAttr::get(&getContext(), "gradient_accumulation"));
  }

  /// The backward sweep of one micro-batch: `grads` gets, for every trainable
  /// global the loss depends on, the sum of the gradients of its loads.
  LogicalResult reverse(ImplicitLocOpBuilder &b, ArrayRef<Operation *> ops, Value loss,
                        Value seed, const llvm::SetVector<Operation *> &trainable,
                        llvm::MapVector<Operation *, Value> &grads) {
    ActiveValues active(ops, loss, trainable);
    if (!active.contains(loss)) {
      LLVM_DEBUG(llvm::dbgs() << "zero-autodiff: no trainable parameter reaches the loss\n");
      return success();
    }
    llvm::DenseMap<Value, Value> adjoint;
    adjoint[loss] = seed;
    for (Operation *op : llvm::reverse(ops)) {
      auto load = dyn_cast<ml_program::GlobalLoadOp>(op);
      if (!load) {
        if (failed(applyReverseRule(b, op, active, adjoint)))
          return failure();
        continue;
      }
      Value g = adjoint.lookup(load.getResult());
      if (!g)
        continue;
      Operation *global = SymbolTable::lookupNearestSymbolFrom(op, load.getGlobalAttr());
      auto [it, inserted] = grads.insert({global, g});
      // The sum over a parameter's uses belongs to no layer: it runs where
      // the contributions are (zero-pipeline-split places it by its uses).
      b.setLoc(accumulationLoc());
      if (!inserted)
        it->second = onnx::AddOp::create(b, it->second, g);
    }
    return success();
  }

  /// `op`'s reverse rule (GradientRules.cpp), when a gradient reaches one of
  /// its results and one of its operands needs one: the operands' gradients
  /// are added into `adjoint`.
  LogicalResult applyReverseRule(ImplicitLocOpBuilder &b, Operation *op,
                                 const ActiveValues &active,
                                 llvm::DenseMap<Value, Value> &adjoint) {
    SmallVector<Value> dOuts;
    bool any = false;
    for (Value r : op->getResults()) {
      Value g = active.contains(r) ? adjoint.lookup(r) : Value();
      dOuts.push_back(g);
      any |= bool(g);
    }
    if (!any)
      return success();
    SmallVector<bool> needs;
    bool needAny = false;
    for (Value v : op->getOperands()) {
      needs.push_back(active.contains(v));
      needAny |= needs.back();
    }
    if (!needAny)
      return success();
    ::zero::autodiff::RuleFn rule = ::zero::autodiff::lookupRule(op->getName().getStringRef());
    if (!rule)
      return op->emitOpError() << "has no reverse rule" << nodeDescription(op)
                               << ", but it lies between a trained parameter and "
                                  "the loss; freeze the parameters that reach it "
                                  "(--freeze REGEX) or ask for a rule";
    SmallVector<Value> dIns(op->getNumOperands());
    b.setLoc(op->getLoc());
    ::zero::autodiff::RuleArgs args{b, op, dOuts, needs, dIns};
    if (failed(rule(args)))
      return failure();
    ++numOpsDifferentiated;
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      if (!needs[i] || !dIns[i])
        continue;
      if (dIns[i].getType() != v.getType())
        return op->emitOpError() << "reverse rule produced " << dIns[i].getType()
                                 << " for operand " << i << " of type " << v.getType()
                                 << nodeDescription(op);
      auto [it, inserted] = adjoint.try_emplace(v, dIns[i]);
      if (!inserted)
        it->second = onnx::AddOp::create(b, it->second, dIns[i]);
    }
    return success();
  }
};

} // namespace
