//===- ReduceMicroSteps.cpp - ZeRO-2's micro-step gradient reduce-scatter -===//
//
// zero-reduce-micro-steps runs right after zero-autodiff when ZeRO-2 trains
// with gradient accumulation: DeepSpeed's stage 2 reduce-scatters gradients
// at every micro-step, so a rank never holds a full-size gradient beyond its
// micro-batch. zero-autodiff sums each parameter's gradient over the K
// micro-batches (`zero.accumulation_steps`) in a running sum: the k-th link
// of that chain adds micro-batch k's gradient to the sum of the ones before
// (an onnx.Add, or for an embedding an onnx.ScatterND add of the micro-batch's
// rows into the sum). For each gradient result this pass walks the chain
// back from the result, K - 1 links, to find the micro-batches' gradients;
// an embedding's is materialized again as the reverse rule made it (its rows
// scatter-added into zeros). Each is flattened, zero-padded and
// reduce-scattered right where it is final; the rank's shards are summed in
// micro-batch order at the end of the step (the same order of summation as
// the chain, so the numbers are those of reduce-scattering the sum), the
// result becomes that shard (`zero.grad_shard`) and the chain is erased.
// zero-optimizer then averages the shard without another collective.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Analysis/ShardLayout.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zero-reduce-micro-steps"

namespace zero {
#define GEN_PASS_DEF_ZEROREDUCEMICROSTEPSPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace attrs = ::zero::attrs;
namespace onnx = ::zero::onnx;

namespace {

/// One parameter's gradient in @train_step: its result and, per micro-batch,
/// the gradient that micro-batch contributes.
struct MicroStepGradient {
  unsigned result;
  /// The micro-batches' gradients, in micro-batch order (null where a
  /// ScatterND link added the rows straight into the sum: see `links`).
  SmallVector<Value> parts;
  /// The running sum, from the result back: links[0] adds the last
  /// micro-batch's gradient, links[K-2] the second's.
  SmallVector<Operation *> links;
  /// Each micro-batch's gradient shard, in micro-batch order.
  SmallVector<Value> shards;
};

struct ZeroReduceMicroStepsPass
    : public ::zero::impl::ZeroReduceMicroStepsPassBase<
          ZeroReduceMicroStepsPass> {
  using Base::Base;
  // A clone counts its own statistics (the options are copied by clonePass).
  ZeroReduceMicroStepsPass(const ZeroReduceMicroStepsPass &other)
      : Base(other) {}

  Statistic numReduceScatters{
      this, "micro-step-reduce-scatters",
      "Gradient reduce-scatters after each micro-batch"};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!::zero::isSupportedWorldSize(world)) {
      module.emitError()
          << "zero-reduce-micro-steps: dp must be between 1 and "
          << ::zero::kMaxWorldSize << ", got " << int64_t(world);
      return signalPassFailure();
    }
    if (stage < 0 || stage > 3) {
      module.emitError()
          << "zero-reduce-micro-steps: stage must be 0, 1, 2 or 3, got "
          << int64_t(stage);
      return signalPassFailure();
    }
    // Only stage 2 reduces every micro-step; stage 1 (and stage 0's
    // all-reduce) reduce the summed gradient once, in zero-optimizer.
    if (world == 1 || stage != 2)
      return;
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError()
          << "zero-reduce-micro-steps: no @train_step; the pass runs on "
             "zero-autodiff's training step";
      return signalPassFailure();
    }
    auto accumulation = attrs::kAccumulationSteps.getInt(module);
    if (!accumulation) {
      step.emitOpError()
          << "has no micro-batch count (the module's zero.accumulation_steps, "
             "which zero-autodiff records)";
      return signalPassFailure();
    }
    if (*accumulation <= 1)
      return;
    FailureOr<SmallVector<MicroStepGradient>> grads =
        findMicroStepGradients(step, *accumulation);
    if (failed(grads))
      return signalPassFailure();
    ImplicitLocOpBuilder b(step.getLoc(), &getContext());
    for (MicroStepGradient &g : *grads)
      reduceScatterParts(b, g);
    sumShards(b, step, *grads);
  }

  /// Every gradient result of `step` (zero.grad_of) with its micro-batches'
  /// gradients, walked back through the running sum zero-autodiff built.
  FailureOr<SmallVector<MicroStepGradient>>
  findMicroStepGradients(func::FuncOp step, int64_t accumulation) {
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    SmallVector<MicroStepGradient> grads;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      if (!step.getResultAttr(i, attrs::kGradOf))
        continue;
      if (step.getResultAttr(i, attrs::kGradShard))
        return step.emitOpError() << describeResult(step, i)
                                  << " is already a gradient shard "
                                     "(zero.grad_shard)";
      MicroStepGradient g{i, SmallVector<Value>(accumulation), {}, {}};
      Value sum = ret.getOperand(i);
      for (int64_t k = accumulation - 1; k >= 1; --k) {
        Operation *link = sum.getDefiningOp();
        if (failed(checkLink(step, i, k, link)))
          return failure();
        g.links.push_back(link);
        if (isa<onnx::AddOp>(link))
          g.parts[k] = link->getOperand(1);
        sum = link->getOperand(0);
      }
      g.parts[0] = sum;
      grads.push_back(std::move(g));
    }
    if (grads.empty())
      return step.emitOpError()
             << "returns no gradient (zero.grad_of); "
                "zero-reduce-micro-steps runs between zero-autodiff and "
                "zero-optimizer";
    return grads;
  }

  /// "result I (NAME)" for a diagnostic about result `i` of `step`.
  static std::string describeResult(func::FuncOp step, unsigned i) {
    std::string result = "result " + std::to_string(i);
    if (auto name = step.getResultAttrOfType<StringAttr>(i, "onnx.name"))
      result += " (" + name.str() + ")";
    return result;
  }

  /// Whether `link`, found k links back from result `i`, adds micro-batch k's
  /// gradient to the running sum: an elementwise onnx.Add of the sum and
  /// the gradient, or an onnx.ScatterND adding rows into the sum, read by
  /// the next link (or the return) alone; on a tagged step, one of micro-batch
  /// k's ops.
  LogicalResult checkLink(func::FuncOp step, unsigned i, int64_t k,
                          Operation *link) {
    std::string result = describeResult(step, i);
    if (!link)
      return step.emitOpError()
             << result << " is not a sum over the micro-batches: micro-batch "
             << k << "'s gradient would be added to a block argument";
    auto fail = [&]() {
      return link->emitOpError()
             << "should add micro-batch " << k
             << "'s gradient to the running sum of " << result << ", but ";
    };
    Type type = link->getResult(0).getType();
    auto scatter = dyn_cast<onnx::ScatterNDOp>(link);
    bool add = isa<onnx::AddOp>(link) &&
               link->getOperand(0).getType() == type &&
               link->getOperand(1).getType() == type;
    if (!add && !(scatter && scatter.getReduction() == "add" &&
                  scatter.getData().getType() == type))
      return fail()
             << "it is not an elementwise onnx.Add or an onnx.ScatterND add "
                "(zero-reduce-micro-steps runs on zero-autodiff's @train_step)";
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t || !isa<FloatType>(t.getElementType()))
      return fail() << "its result is not a floating-point tensor";
    if (!link->getResult(0).hasOneUse())
      return fail() << "its sum has other readers";
    if (auto micro = attrs::kMicroBatch.getInt(link); micro && *micro != k)
      return fail() << "it is tagged micro-batch " << *micro;
    return success();
  }

  /// Copies `from`'s micro-batch and phase tags (a step zero-autodiff built
  /// with tag-micro-batches) onto the ops from `first` to `last`.
  static void copyTags(Operation *from, Operation *first, Operation *last) {
    std::optional<attrs::Phase> phase =
        from ? attrs::kPhase.get(from) : std::nullopt;
    if (!phase)
      return;
    for (Operation *op = first;; op = op->getNextNode()) {
      attrs::kMicroBatch.set(op, attrs::kMicroBatch.get(from));
      attrs::kPhase.set(op, *phase);
      if (op == last)
        break;
    }
  }

  /// The op that defines the last of `values` in their block, null when all
  /// are block arguments.
  static Operation *lastDefinition(ValueRange values) {
    Operation *last = nullptr;
    for (Value v : values)
      if (Operation *def = v.getDefiningOp();
          def && (!last || last->isBeforeInBlock(def)))
        last = def;
    return last;
  }

  /// Micro-batch k's gradient that a ScatterND link added into the running
  /// sum, as the reverse rule made it: its rows scatter-added into zeros,
  /// right after the rows and their indices.
  Value materializeScatter(ImplicitLocOpBuilder &b, onnx::ScatterNDOp link) {
    auto t = cast<RankedTensorType>(link.getType());
    Operation *after = lastDefinition({link.getIndices(), link.getUpdates()});
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPointToStart(link->getBlock());
    Value zeros = onnx::ConstantOp::create(
        b, t,
        DenseElementsAttr::get(t, FloatAttr::get(t.getElementType(), 0.0)));
    Value g = onnx::ScatterNDOp::create(b, zeros, link.getIndices(),
                                        link.getUpdates(), "add");
    copyTags(link, zeros.getDefiningOp(), g.getDefiningOp());
    return g;
  }

  /// Reduce-scatters each micro-batch's gradient of `g` right where it is
  /// final: flattened, padded to a multiple of the world, rank r keeping
  /// elements [r*s, (r+1)*s).
  void reduceScatterParts(ImplicitLocOpBuilder &b, MicroStepGradient &g) {
    OpBuilder::InsertionGuard guard(b);
    // zero-autodiff's accumulation location (a running sum belongs to no
    // layer).
    b.setLoc(g.links.front()->getLoc());
    auto scatterLink = [&](int64_t k) {
      return cast<onnx::ScatterNDOp>(g.links[g.links.size() - size_t(k)]);
    };
    for (size_t k = 0; k < g.parts.size(); ++k) {
      Value part = g.parts[k] ? g.parts[k]
                              : materializeScatter(b, scatterLink(int64_t(k)));
      auto t = cast<RankedTensorType>(part.getType());
      int64_t padded = ::zero::paddedNumel(t.getNumElements(), world);
      b.setInsertionPointAfterValue(part);
      Value flat = ::zero::flatPadded(b, part, padded);
      // Averaged gradients are divided by N before the collective, in their
      // own type, as DeepSpeed's ZeRO-2 divides each micro-step's bucket.
      if (!gradientSum) {
        Type elem = t.getElementType();
        Value inverse = onnx::ConstantOp::create(
            b, RankedTensorType::get({}, elem),
            DenseElementsAttr::get(RankedTensorType::get({}, elem),
                                   FloatAttr::get(elem, 1.0 / double(world))));
        flat = onnx::MulOp::create(b, flat, inverse).getResult();
      }
      auto shard = ::zero::dist::ReduceScatterOp::create(
          b, RankedTensorType::get({padded / world}, t.getElementType()), flat,
          int64_t(world));
      // The new ops sit right after the gradient's definition.
      if (Operation *def = part.getDefiningOp())
        copyTags(def, def->getNextNode(), shard);
      g.shards.push_back(shard);
      ++numReduceScatters;
    }
  }

  /// Each gradient result becomes the sum of its shards over the
  /// micro-batches, built at the end of the step in the order the first
  /// micro-batch's backward finalized the gradients; the running sums go.
  void sumShards(ImplicitLocOpBuilder &b, func::FuncOp step,
                 MutableArrayRef<MicroStepGradient> grads) {
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    SmallVector<MicroStepGradient *> order =
        llvm::map_to_vector(grads, [](MicroStepGradient &g) { return &g; });
    llvm::stable_sort(order, [](MicroStepGradient *x, MicroStepGradient *y) {
      return x->shards.front().getDefiningOp()->isBeforeInBlock(
          y->shards.front().getDefiningOp());
    });
    b.setInsertionPoint(ret);
    for (MicroStepGradient *g : order) {
      b.setLoc(g->links.front()->getLoc());
      Value sum = g->shards.front();
      for (Value shard : ArrayRef<Value>(g->shards).drop_front())
        sum = onnx::AddOp::create(b, sum, shard);
      ret.setOperand(g->result, sum);
      step.setResultAttr(g->result, attrs::kGradShard,
                         b.getI64IntegerAttr(world));
      for (Operation *link : g->links)
        link->erase();
    }
    step.setType(FunctionType::get(&getContext(), step.getArgumentTypes(),
                                   ret.getOperandTypes()));
    LLVM_DEBUG(llvm::dbgs()
               << "zero-reduce-micro-steps: " << grads.size()
               << " gradients reduce-scattered every micro-step over "
               << int64_t(world) << " ranks\n");
  }
};

} // namespace
