//===- Autodiff.cpp - zero-autodiff: the training step ---------------------===//
//
// zero-autodiff turns a loss function into @train_step: for each micro-batch,
// the forward ops (cloned) and then, in reverse order, the reverse rule of
// every active op (GradientRules.cpp). An op is active when it lies on a path
// from a trainable parameter to the loss and produces floating-point values;
// other ops (masks, positions, integer index arithmetic) need no rule.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"
#include "TrainingFunction.h"
#include "zero/Transforms/Analysis/Layers.h"
#include "zero/Transforms/Analysis/ShardLayout.h"

#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

namespace zero {
#define GEN_PASS_DEF_ZEROAUTODIFFPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
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

std::string nodeDescription(Operation *op) {
  std::string node = locName(op->getLoc());
  return node.empty() ? std::string() : " (ONNX node '" + node + "')";
}

/// `sum + g` for a gradient sum over micro-batches. A `g` that is a Gather's
/// gradient (a scatter-add of the looked-up rows into zeros, zero-autodiff's
/// rule) that nothing reads yet is scattered into `sum` instead: an
/// embedding table's gradient then costs the rows the micro-batch looked up,
/// not a table of zeros, the scatter and a table-sized Add (the lowering runs
/// the scatter in place when `sum` has no other reader). The rows are added
/// into the running sum one at a time, in the scatter's order.
Value sumGradients(ImplicitLocOpBuilder &b, Value sum, Value g) {
  auto scatter = g.getDefiningOp<onnx::ScatterNDOp>();
  auto zeros = scatter ? scatter.getData().getDefiningOp<onnx::ConstantOp>() : nullptr;
  auto splat = zeros ? dyn_cast<SplatElementsAttr>(zeros.getValue()) : nullptr;
  // Gradients are floating point (only float values are active).
  auto zero = splat ? dyn_cast<FloatAttr>(splat.getSplatValue<Attribute>()) : nullptr;
  if (!scatter || !g.use_empty() || scatter.getReduction() != "add" ||
      sum.getType() != g.getType() || !zero || !zero.getValue().isPosZero())
    return onnx::AddOp::create(b, sum, g);
  Value summed = onnx::ScatterNDOp::create(b, sum, scatter.getIndices(),
                                           scatter.getUpdates(), "add");
  scatter.erase();
  if (zeros->use_empty())
    zeros.erase();
  return summed;
}


//===----------------------------------------------------------------------===//
// zero-autodiff
//===----------------------------------------------------------------------===//

struct ZeroAutodiffPass : public ::zero::impl::ZeroAutodiffPassBase<ZeroAutodiffPass> {
  using Base::Base;

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
    if (n == 1)
      return success();
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Value loss = ret.getOperand(which);
    ret->setOperands(ValueRange{loss});
    llvm::BitVector drop(n, true);
    drop.reset(which);
    return func.eraseResults(drop);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    func::FuncOp func = pickFunction(module, function, "zero-autodiff");
    if (!func)
      return signalPassFailure();
    if (accumulation < 1) {
      module.emitError() << "zero-autodiff: accumulation must be >= 1, got " << accumulation;
      return signalPassFailure();
    }
    if (failed(keepOnlyLoss(func)))
      return signalPassFailure();
    // The loss: one floating-point scalar.
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (ret.getNumOperands() != 1 ||
        !isa<FloatType>(cast<RankedTensorType>(ret.getOperand(0).getType()).getElementType()) ||
        cast<RankedTensorType>(ret.getOperand(0).getType()).getNumElements() != 1) {
      std::string types;
      llvm::raw_string_ostream os(types);
      llvm::interleaveComma(ret.getOperandTypes(), os);
      func.emitOpError() << "must return one floating-point scalar loss to be trained; "
                            "it returns ("
                         << types
                         << "). Export the model with its loss, or attach one with "
                            "--loss cross-entropy:LABELS (zero-add-loss)";
      return signalPassFailure();
    }
    llvm::Regex frozen(freeze.getValue());
    std::string regexError;
    if (!freeze.empty() && !frozen.isValid(regexError)) {
      module.emitError() << "zero-autodiff: --freeze '" << freeze
                         << "' is not a valid regular expression: " << regexError;
      return signalPassFailure();
    }
    // Trainable parameters.
    llvm::SetVector<Operation *> trainable;
    for (auto g : module.getOps<ml_program::GlobalOp>()) {
      auto t = cast<RankedTensorType>(g.getType());
      auto tensor = g->getAttrOfType<StringAttr>("zero.tensor");
      StringRef name = tensor ? tensor.getValue() : g.getSymName();
      if (!isa<FloatType>(t.getElementType()) || g->hasAttr("zero.buffer") ||
          g->hasAttr("zero.role") || (!freeze.empty() && frozen.match(name)))
        continue;
      trainable.insert(g);
    }

    // A model without module paths, stepped through pipeline stages or
    // checkpointed: its forward's single-activation segments (Layers.h) are
    // written into the ops' locations as module paths (`segment.N`), which
    // the reverse rules' ops inherit, so the training step has layers too.
    if (tagMicroBatches) {
      ::zero::LayerStructure ls = ::zero::recoverLayers(func);
      if (ls.segments)
        for (auto [op, layer] : ls.layerOf) {
          Builder lb(ctx);
          auto meta = lb.getDictionaryAttr(
              {lb.getNamedAttr("module_scopes",
                               lb.getArrayAttr({lb.getStringAttr(ls.layers[size_t(layer)].name)})),
               lb.getNamedAttr("module_classes", lb.getArrayAttr({lb.getStringAttr("")}))});
          op->setLoc(FusedLoc::get(ctx, {op->getLoc()}, meta));
        }
    }

    // @train_step: the inputs hold `accumulation` micro-batches along dim 0.
    Block &src = func.getBody().front();
    // The config's train_micro_batch_size_per_gpu is the model's batch: its
    // inputs' largest dim 0 (an input broadcast over the batch has 1 there).
    if (const int64_t micro = microBatchSize; micro > 0) {
      int64_t batch = 0;
      BlockArgument widest;
      for (BlockArgument arg : src.getArguments())
        if (auto t = cast<RankedTensorType>(arg.getType());
            t.getRank() > 0 && t.getDimSize(0) > batch) {
          batch = t.getDimSize(0);
          widest = arg;
        }
      if (widest && batch != micro) {
        auto name = func.getArgAttrOfType<StringAttr>(widest.getArgNumber(), "onnx.name");
        std::string input = name ? name.getValue().str()
                                 : "#" + std::to_string(widest.getArgNumber());
        func.emitOpError() << "the config's train_micro_batch_size_per_gpu is "
                           << micro << " but the model's batch is " << batch
                           << " (input '" << input << "' is " << widest.getType()
                           << "): one micro-batch is one run of the model; export it "
                              "(or give --input-shape) with batch "
                           << micro << ", or set train_micro_batch_size_per_gpu to "
                           << batch;
        return signalPassFailure();
      }
    }
    SmallVector<Type> argTypes;
    for (BlockArgument arg : src.getArguments()) {
      auto t = cast<RankedTensorType>(arg.getType());
      if (accumulation > 1 && t.getRank() == 0) {
        func.emitOpError() << "input " << arg.getArgNumber()
                           << " is a scalar; gradient accumulation splits every "
                              "input along dim 0 into micro-batches";
        return signalPassFailure();
      }
      SmallVector<int64_t> shape(t.getShape());
      if (accumulation > 1)
        shape[0] *= accumulation;
      argTypes.push_back(RankedTensorType::get(shape, t.getElementType()));
    }
    OpBuilder mb(ctx);
    mb.setInsertionPointAfter(func);
    auto step = func::FuncOp::create(mb, func.getLoc(), "train_step",
                                     FunctionType::get(ctx, argTypes, {}));
    if (ArrayAttr argAttrs = func.getAllArgAttrs())
      step.setAllArgAttrs(argAttrs);
    Block *entry = step.addEntryBlock();
    ImplicitLocOpBuilder b(func.getLoc(), ctx);
    b.setInsertionPointToEnd(entry);

    // Training-mode Dropout draws its mask from (seed, stream, step): the step
    // is the `rng.step` counter, incremented once per training step, and each
    // micro-batch copy gets its own stream.
    Value rngStep;
    if (!src.getOps<onnx::TrainingDropoutOp>().empty()) {
      auto i64s = RankedTensorType::get({}, b.getI64Type());
      OpBuilder gb(ctx);
      gb.setInsertionPoint(func);
      auto counter = ml_program::GlobalOp::create(
          gb, func.getLoc(), "rng_step", i64s, /*is_mutable=*/true,
          DenseElementsAttr::get(i64s, IntegerAttr::get(b.getI64Type(), 0)),
          gb.getStringAttr("private"));
      counter->setAttr("zero.tensor", gb.getStringAttr("rng.step"));
      counter->setAttr("zero.role", gb.getStringAttr("counter"));
      SymbolTable(module).insert(counter);
      auto sym = FlatSymbolRefAttr::get(counter.getSymNameAttr());
      rngStep = onnx::AddOp::create(
          b, ml_program::GlobalLoadOp::create(b, i64s, sym),
          onnx::ConstantOp::create(
              b, i64s, DenseElementsAttr::get(i64s, IntegerAttr::get(b.getI64Type(), 1))));
      ml_program::GlobalStoreOp::create(b, sym, rngStep);
    }

    Type lossType = ret.getOperand(0).getType();
    Type lossElem = cast<RankedTensorType>(lossType).getElementType();
    llvm::MapVector<Operation *, Value> grads; // global -> gradient, summed
    // ZeRO-2 with accumulation: every micro-batch's gradient reduce-scattered
    // at once; the shards are summed at the end (readers of a collective's
    // result placed right behind it would stall backward).
    const bool microScatter = world > 1 && stage == 2 && accumulation > 1;
    llvm::MapVector<Operation *, SmallVector<Value>> shards;
    Value lossSum;
    // With tag-micro-batches, each op this loop creates is marked with its
    // micro-batch and phase (zero-pipeline-split orders them per stage).
    auto tagSince = [&](Operation *before, int64_t k, StringRef phase) {
      if (!tagMicroBatches)
        return;
      for (Operation *op = before ? before->getNextNode() : &entry->front(); op;
           op = op->getNextNode()) {
        op->setAttr("zero.micro_batch", b.getI64IntegerAttr(k));
        op->setAttr("zero.phase", b.getStringAttr(phase));
      }
    };
    for (int64_t k = 0; k < accumulation; ++k) {
      Operation *beforeForward = entry->empty() ? nullptr : &entry->back();
      IRMapping map;
      for (auto [i, arg] : llvm::enumerate(src.getArguments())) {
        Value in = entry->getArgument(i);
        if (accumulation > 1) {
          auto t = cast<RankedTensorType>(arg.getType());
          int64_t rows = t.getDimSize(0);
          SmallVector<int64_t> starts(t.getRank(), 0), ends(t.getShape()),
              steps(t.getRank(), 1);
          starts[0] = k * rows;
          ends[0] = (k + 1) * rows;
          in = onnx::SliceOp::create(b, in, starts, ends, steps);
        }
        map.map(arg, in);
      }
      SmallVector<Operation *> ops;
      for (Operation &op : src.without_terminator()) {
        Operation *copy = b.clone(op, map);
        if (auto d = dyn_cast<onnx::TrainingDropoutOp>(copy)) {
          d.getStepMutable().assign(rngStep);
          uint64_t stream = uint64_t(d.getStream()) + uint64_t(k) * 0x9E3779B97F4A7C15ull;
          d.setStream(int64_t(stream & uint64_t(INT64_MAX)));
        }
        ops.push_back(copy);
      }
      tagSince(beforeForward, k, "forward");
      Operation *beforeBackward = entry->empty() ? nullptr : &entry->back();
      Value loss = map.lookup(ret.getOperand(0));
      auto seedAttr = DenseElementsAttr::get(cast<ShapedType>(lossType),
                                             FloatAttr::get(lossElem, 1.0 / accumulation));
      Value seed = onnx::ConstantOp::create(b, lossType, seedAttr);
      llvm::MapVector<Operation *, Value> micro;
      if (failed(reverse(b, ops, loss, seed, trainable, micro)))
        return signalPassFailure();
      b.setLoc(accumulationLoc());
      for (auto &[g, v] : micro) {
        if (microScatter) {
          auto t = cast<RankedTensorType>(v.getType());
          int64_t padded = ::zero::paddedNumel(t.getNumElements(), world);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointAfterValue(v);
          Value flat = ::zero::flatPadded(b, v, padded);
          shards[g].push_back(::zero::dist::ReduceScatterOp::create(
              b, RankedTensorType::get({padded / world}, t.getElementType()), flat,
              int64_t(world)));
          continue;
        }
        auto it = grads.find(g);
        if (it == grads.end())
          grads.insert({g, v});
        else
          it->second = sumGradients(b, it->second, v);
      }
      lossSum = lossSum ? onnx::AddOp::create(b, lossSum, loss).getResult() : loss;
      tagSince(beforeBackward, k, "backward");
    }
    for (auto &[g, parts] : shards) {
      Value sum = parts.front();
      for (Value p : ArrayRef<Value>(parts).drop_front())
        sum = onnx::AddOp::create(b, sum, p);
      grads.insert({g, sum});
    }
    Value loss = lossSum;
    if (accumulation > 1) {
      auto t = cast<RankedTensorType>(lossType);
      Value k = onnx::ConstantOp::create(
          b, t, DenseElementsAttr::get(t, FloatAttr::get(lossElem, double(accumulation))));
      loss = onnx::DivOp::create(b, lossSum, k);
    }

    // Results: the loss, then one gradient per trained parameter in module
    // order. A parameter the loss does not depend on gets no gradient and is
    // not trained (PyTorch leaves its .grad None and its optimizers skip it).
    SmallVector<Value> results{loss};
    SmallVector<Attribute> resAttrs{b.getDictionaryAttr(
        {b.getNamedAttr("onnx.name", b.getStringAttr("loss"))})};
    for (Operation *gop : trainable) {
      auto g = cast<ml_program::GlobalOp>(gop);
      auto tensor = g->getAttrOfType<StringAttr>("zero.tensor");
      StringRef name = tensor ? tensor.getValue() : g.getSymName();
      auto it = grads.find(gop);
      if (it == grads.end()) {
        g.emitWarning() << "parameter '" << name
                        << "' does not affect the loss; it gets no gradient and is "
                           "not trained";
        continue;
      }
      g.setIsMutable(true);
      g->setAttr("zero.trainable", b.getUnitAttr());
      results.push_back(it->second);
      SmallVector<NamedAttribute> attrs{
          b.getNamedAttr("onnx.name", b.getStringAttr(("grad." + name).str())),
          b.getNamedAttr("zero.grad_of", FlatSymbolRefAttr::get(g.getSymNameAttr()))};
      if (microScatter)
        attrs.push_back(b.getNamedAttr("zero.grad_shard", b.getI64IntegerAttr(world)));
      resAttrs.push_back(b.getDictionaryAttr(attrs));
    }
    func::ReturnOp::create(b, results);
    step.setType(FunctionType::get(ctx, argTypes, ValueRange(results).getTypes()));
    step.setAllResultAttrs(resAttrs);
    module->setAttr("zero.accumulation_steps", b.getI64IntegerAttr(accumulation));
    func.erase();
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
    auto isFloat = [](Value v) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      return t && isa<FloatType>(t.getElementType());
    };
    // Varied: depends on a trainable parameter. Useful: the loss depends on it.
    llvm::DenseSet<Value> varied, useful;
    for (Operation *op : ops) {
      if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op)) {
        Operation *g = SymbolTable::lookupNearestSymbolFrom(op, load.getGlobalAttr());
        if (g && trainable.contains(g))
          varied.insert(load.getResult());
        continue;
      }
      if (llvm::any_of(op->getOperands(), [&](Value v) { return varied.contains(v); }))
        for (Value r : op->getResults())
          if (isFloat(r))
            varied.insert(r);
    }
    useful.insert(loss);
    for (Operation *op : llvm::reverse(ops))
      if (llvm::any_of(op->getResults(), [&](Value v) { return useful.contains(v); }))
        for (Value v : op->getOperands())
          useful.insert(v);
    auto active = [&](Value v) {
      return varied.contains(v) && useful.contains(v) && isFloat(v);
    };
    if (!active(loss))
      return success(); // no parameter reaches the loss

    llvm::DenseMap<Value, Value> adjoint;
    adjoint[loss] = seed;
    auto accumulate = [&](Value v, Value g) {
      auto [it, inserted] = adjoint.try_emplace(v, g);
      if (!inserted)
        it->second = onnx::AddOp::create(b, it->second, g);
    };
    for (Operation *op : llvm::reverse(ops)) {
      if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op)) {
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
        continue;
      }
      SmallVector<Value> dOuts;
      bool any = false;
      for (Value r : op->getResults()) {
        Value g = active(r) ? adjoint.lookup(r) : Value();
        dOuts.push_back(g);
        any |= bool(g);
      }
      if (!any)
        continue;
      SmallVector<bool> needs;
      bool needAny = false;
      for (Value v : op->getOperands()) {
        needs.push_back(active(v));
        needAny |= needs.back();
      }
      if (!needAny)
        continue;
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
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        if (!needs[i] || !dIns[i])
          continue;
        if (dIns[i].getType() != v.getType())
          return op->emitOpError() << "reverse rule produced " << dIns[i].getType()
                                   << " for operand " << i << " of type " << v.getType()
                                   << nodeDescription(op);
        accumulate(v, dIns[i]);
      }
    }
    return success();
  }
};

} // namespace
