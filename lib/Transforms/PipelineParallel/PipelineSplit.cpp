//===- PipelineSplit.cpp - Pipeline stages over the recovered layers ------===//
//
// zero-pipeline-split: the model's layers (Layers.h) assigned to stages with
// DeepSpeed's partition methods, recorded on the module for zero-report and
// the passes that cut the function.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/GatherPlan.h"
#include "zero/Transforms/Analysis/Layers.h"

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Dialect/Zero/ZeroDialect.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "zero/Dialect/ONNX/ONNXDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Regex.h"

#include <functional>
#include <map>
#include <set>
#include <tuple>

#define DEBUG_TYPE "zero-pipeline-split"

namespace zero {
#define GEN_PASS_DEF_ZEROPIPELINESPLITPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace attrs = ::zero::attrs;

namespace {

/// The layers' weights a partition method balanced (one per layer; empty for
/// `uniform`) and the stages it chose: stage s holds layers
/// [bounds[s], bounds[s+1]).
struct LayerPartition {
  std::vector<int64_t> weights, bounds;
};

/// Where a training step's op sits in the step: before the micro-batches
/// (the dropout step counter), in micro-batch k's forward or backward, or
/// after them (the optimizer).
struct Slot {
  enum Phase { Prologue, Forward, Backward, Epilogue } phase = Prologue;
  int64_t micro = 0;
};

/// A training step being cut (see `cutTraining`): where each op sits in the
/// step, the stage it goes to, and then its step in that stage's order of
/// work.
struct TrainingStepCut {
  TrainingStepCut(Block &body, int64_t m) : body(body), term(body.getTerminator()), m(m) {}

  Block &body;
  Operation *term;
  /// Micro-batches per step.
  int64_t m;
  /// Each op's slot, from the autodiff's tags. Ops the ZeRO passes added
  /// between them (gathers, gradient collectives) carry no tag and have
  /// none: they are ordered by their neighbours.
  llvm::DenseMap<Operation *, Slot> slotOf;
  /// The ops after the last tagged one (the optimizer's), in order.
  SmallVector<Operation *> epilogue;
  llvm::DenseSet<Operation *> inEpilogue;
  llvm::DenseMap<Operation *, int64_t> stageOf;
  /// The stages that use each global in the micro-batches.
  llvm::DenseMap<Attribute, std::set<int64_t>> usedOn;
  /// The ops (but the terminator) in program order before scheduling, each
  /// one's index there, and its step on its stage.
  SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, int64_t> position, stepOf;
};

/// Forward micro-batching of a cut function (see `unroll`): the body, which
/// is micro-batch 0's, copied once for each other micro-batch.
struct MicroBatchUnroll {
  MicroBatchUnroll(func::FuncOp func, int64_t m)
      : func(func), body(func.getBody().front()), term(body.getTerminator()), m(m),
        b(func.getContext()) {}

  func::FuncOp func;
  Block &body;
  Operation *term;
  /// Micro-batches.
  int64_t m;
  OpBuilder b;
  /// Micro-batch 0's ops, and the send / recv tags they use.
  SmallVector<Operation *> ops;
  int64_t tags = 0;
  /// The function's types with the micro-batches stacked along dim 0.
  SmallVector<Type> argTypes, resultTypes;
  /// (input, stage, micro-batch 0's rows there).
  SmallVector<std::tuple<BlockArgument, int64_t, Value>> first;
  /// Each output's part of every micro-batch, in order.
  SmallVector<SmallVector<Value>> outputs;
  /// The sends the copies added.
  int64_t sendsCopied = 0;

  /// Micro-batch k's ops are its forward step, F<k> (the trace's schedule
  /// track, and how zero-run's report counts M for the predicted bubble).
  void mark(Operation *op, int64_t k) {
    attrs::kPipelineStep.set(op, b.getStringAttr("F" + Twine(k)));
  }

  /// `t` with m of it stacked along dim 0; a scalar has no dim 0.
  FailureOr<RankedTensorType> stacked(Type t) {
    auto rt = cast<RankedTensorType>(t);
    if (rt.getRank() == 0)
      return failure();
    SmallVector<int64_t> shape(rt.getShape());
    shape[0] *= m;
    return RankedTensorType::get(shape, rt.getElementType());
  }

  /// Marks micro-batch 0's ops, and finds the send / recv tags they use
  /// and the stacked types of the inputs and outputs.
  LogicalResult collectFirstMicroBatch() {
    for (Operation &op : body)
      if (&op != term)
        mark(&op, 0);
    for (Operation &op : body) {
      if (&op == term)
        continue;
      ops.push_back(&op);
      if (auto t = op.getAttrOfType<IntegerAttr>("tag"))
        tags = std::max(tags, t.getInt() + 1);
    }
    for (BlockArgument arg : body.getArguments()) {
      FailureOr<RankedTensorType> t = stacked(arg.getType());
      if (failed(t))
        return func.emitError("zero-pipeline-split: micro-batches need every input to "
                              "have a batch dimension (dim 0); a scalar input has none");
      argTypes.push_back(*t);
    }
    for (Value v : term->getOperands()) {
      FailureOr<RankedTensorType> t = stacked(v.getType());
      if (failed(t))
        return func.emitError("zero-pipeline-split: micro-batches need every output to "
                              "have a batch dimension (dim 0)");
      resultTypes.push_back(*t);
    }
    return success();
  }

  /// Micro-batch k's rows of an input on stage `st`: a contiguous block, a
  /// view. Every rank binds every input, so each stage that reads an input
  /// (the embedding's ids on the first, an attention mask or ids every
  /// stage's layers read) takes its rows of it itself.
  Value rows(BlockArgument arg, int64_t k, int64_t st) {
    auto t = cast<RankedTensorType>(arg.getType());
    int64_t per = t.getDimSize(0);
    SmallVector<int64_t> starts(t.getRank(), 0), ends(t.getShape()), steps(t.getRank(), 1);
    starts[0] = k * per;
    ends[0] = (k + 1) * per;
    auto slice = ::zero::onnx::SliceOp::create(b, func.getLoc(), t, arg, starts, ends, steps);
    attrs::kPipelineStage.set(slice, b.getI64IntegerAttr(st));
    mark(slice, k);
    return slice;
  }

  /// The stage of the top-level op that holds `use`.
  int64_t stageOfUse(OpOperand &use) {
    Operation *user = use.getOwner();
    while (user->getBlock() != &body)
      user = user->getParentOp();
    return attrs::kPipelineStage.getInt(user).value_or(0);
  }

  /// Micro-batch 0 reads its rows of each input, on each stage that reads it.
  void sliceFirstMicroBatch() {
    b.setInsertionPointToStart(&body);
    outputs.resize(term->getNumOperands());
    for (BlockArgument arg : body.getArguments()) {
      std::set<int64_t> readers;
      for (OpOperand &use : arg.getUses())
        readers.insert(stageOfUse(use));
      if (readers.empty())
        readers.insert(0);
      for (int64_t st : readers) {
        Value v = rows(arg, 0, st);
        arg.replaceUsesWithIf(v, [&](OpOperand &use) {
          // Not the rows slices themselves (each on its own stage).
          return use.getOwner() != v.getDefiningOp() && stageOfUse(use) == st;
        });
        first.push_back({arg, st, v});
      }
    }
    for (auto [i, v] : llvm::enumerate(term->getOperands()))
      outputs[i].push_back(v);
  }

  /// Micro-batches 1..m-1: a copy of micro-batch 0's ops each, in order,
  /// reading its own rows and with its own send / recv tags.
  void cloneMicroBatches() {
    b.setInsertionPoint(term);
    for (int64_t k = 1; k < m; ++k) {
      IRMapping map;
      for (auto [arg, st, rows0] : first)
        map.map(rows0, rows(arg, k, st));
      for (Operation *op : ops) {
        Operation *copy = b.clone(*op, map);
        mark(copy, k);
        if (auto t = copy->getAttrOfType<IntegerAttr>("tag"))
          copy->setAttr("tag", b.getI64IntegerAttr(t.getInt() + k * tags));
        if (isa<::zero::dist::SendOp>(copy))
          ++sendsCopied;
      }
      for (auto [i, v] : llvm::enumerate(term->getOperands()))
        outputs[i].push_back(map.lookup(v));
    }
  }

  /// Stage 0 stacks each output's micro-batches, and the function takes and
  /// returns the stacked types.
  void stackOutputs() {
    // Stage 0 receives the outputs after it has sent every micro-batch on.
    for (auto &parts : outputs)
      for (Value v : parts)
        if (auto recv = v.getDefiningOp<::zero::dist::RecvOp>())
          recv->moveBefore(term);
    SmallVector<Value> results;
    for (auto [i, parts] : llvm::enumerate(outputs)) {
      auto concat = ::zero::onnx::ConcatOp::create(b, func.getLoc(), resultTypes[i], parts, 0);
      attrs::kPipelineStage.set(concat, b.getI64IntegerAttr(0));
      results.push_back(concat);
    }
    term->setOperands(results);
    for (auto [arg, t] : llvm::zip(body.getArguments(), argTypes))
      arg.setType(t);
    func.setType(b.getFunctionType(argTypes, resultTypes));
  }
};

struct ZeroPipelineSplitPass
    : public ::zero::impl::ZeroPipelineSplitPassBase<ZeroPipelineSplitPass> {
  using Base::Base;
  ZeroPipelineSplitPass() = default;
  /// A clone registers statistics of its own (a Statistic is not copied).
  ZeroPipelineSplitPass(const ZeroPipelineSplitPass &other)
      : Base(other), stepIndices(other.stepIndices) {}

  Statistic numStages{this, "stages", "Pipeline stages the function is cut into"};
  Statistic numSends{this, "sends",
                     "Send / receive pairs (zero.send, zero.recv) between stages, every "
                     "micro-batch's"};
  Statistic numRepeated{this, "repeated-ops",
                        "Loads, constants and gathered parameters a later stage repeats "
                        "instead of receiving them"};
  Statistic numTiedParameters{this, "tied-parameters",
                              "Parameters a training step holds and steps on several stages"};
  Statistic numReplicatedStateUpdates{
      this, "replicated-state-updates",
      "Stores of optimizer state (the loss scaler's) copied onto another stage that reads it"};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto funcs = module.getOps<func::FuncOp>();
    if (funcs.empty() || std::next(funcs.begin()) != funcs.end()) {
      module.emitError("zero-pipeline-split: expects one function (the model's forward)");
      return signalPassFailure();
    }
    func::FuncOp func = *funcs.begin();
    // A training step (zero-autodiff's @train_step, its micro-batches
    // unrolled and tagged with tag-micro-batches): each stage runs the
    // forward and backward of its layers and steps the parameters it holds.
    const bool training = func.getSymName() == "train_step";
    FailureOr<int64_t> micro =
        training ? trainingMicroBatches(module, func) : FailureOr<int64_t>(microBatches);
    if (failed(micro))
      return signalPassFailure();
    ::zero::LayerStructure ls = ::zero::recoverLayers(func);
    if (failed(checkLayersFitStages(func, ls, training)))
      return signalPassFailure();
    FailureOr<LayerPartition> partitioned = partitionLayers(func, ls);
    if (failed(partitioned))
      return signalPassFailure();
    recordPlan(module, ls, *partitioned, *micro, training);
    if (training) {
      if (failed(cutTraining(module, func, ls, partitioned->bounds, *micro)))
        return signalPassFailure();
    } else if (failed(cut(module, func, ls, partitioned->bounds)) || failed(unroll(func))) {
      return signalPassFailure();
    }
    if (failed(outlineStages(module, func)))
      return signalPassFailure();
    numStages = unsigned(stages);
  }

  /// A training step's micro-batches are its gradient accumulation steps
  /// (zero.accumulation_steps), each one's ops tagged by zero-autodiff.
  FailureOr<int64_t> trainingMicroBatches(ModuleOp module, func::FuncOp func) {
    if (microBatches != 1)
      return func.emitError("zero-pipeline-split: a training step's micro-batches are its "
                            "gradient accumulation steps (zero-autodiff accumulation=M); "
                            "leave micro-batches=1");
    const int64_t micro = attrs::kAccumulationSteps.getInt(module).value_or(1);
    bool tagged = false;
    for (Operation &op : func.getBody().front())
      tagged |= attrs::kPhase.isSetOn(&op);
    if (!tagged)
      return func.emitError("zero-pipeline-split: the training step's ops carry no "
                            "micro-batch tags; build it with zero-autodiff "
                            "tag-micro-batches=true (zero-opt --train does)");
    return micro;
  }

  /// The model has layers to cut between, and at least one for each stage.
  LogicalResult checkLayersFitStages(func::FuncOp func, const ::zero::LayerStructure &ls,
                                     bool training) {
    const int64_t n = int64_t(ls.layers.size());
    if (n == 0) {
      // Without module paths the layers are the segments between the points
      // where a single activation crosses (Layers.h), found on the forward
      // function only.
      return func.emitError()
             << "zero-pipeline-split: the model records no module paths (neither "
                "the dynamo exporter's name_scopes metadata nor the TorchScript "
                "exporter's /module/path node names)"
             << (training ? ", and a training step is not cut at single-activation "
                            "points (only a forward function is)"
                          : ", and it has no op to cut between")
             << "; re-export it with torch.onnx.export";
    }
    if (stages < 1 || stages > n) {
      auto diag = func.emitError();
      diag << "zero-pipeline-split: " << int64_t(stages) << " stages for a model of " << n
           << (ls.segments ? " segment" : " layer") << (n == 1 ? "" : "s")
           << "; each stage needs at least one " << (ls.segments ? "segment" : "layer");
      if (ls.segments)
        diag << " (the model records no module paths: its segments lie between the points "
                "where a single activation crosses, each holding parameters; zero-opt "
                "--report lists them)";
      return failure();
    }
    return success();
  }

  /// The layers assigned to stages by the `partition` method.
  FailureOr<LayerPartition> partitionLayers(func::FuncOp func,
                                            const ::zero::LayerStructure &ls) {
    LayerPartition p;
    StringRef method = partition;
    if (method == "parameters") {
      for (const ::zero::Layer &l : ls.layers)
        p.weights.push_back(l.params);
      p.bounds = ::zero::partitionBalanced(p.weights, stages);
    } else if (method == "uniform") {
      p.bounds = ::zero::partitionUniform(int64_t(ls.layers.size()), stages);
    } else if (method == "compute") {
      // Not DeepSpeed's: its balanced rule over each layer's multiply-
      // accumulates, so a stage's work, not its weights, is balanced (a tied
      // LM head weighs its GEMM where it runs, not on the embedding's stage).
      for (const ::zero::Layer &l : ls.layers)
        p.weights.push_back(::zero::layerMacs(l));
      p.bounds = ::zero::partitionBalanced(p.weights, stages);
    } else if (method.consume_front("type:")) {
      llvm::Regex re(method, llvm::Regex::IgnoreCase);
      std::string error;
      if (!re.isValid(error))
        return func.emitError() << "zero-pipeline-split: partition=type:" << method
                                << " is not a valid regular expression: " << error;
      bool any = false;
      for (const ::zero::Layer &l : ls.layers) {
        bool match = re.match(l.cls) || re.match(l.name);
        p.weights.push_back(match ? 1 : 0);
        any |= match;
      }
      if (!any)
        return func.emitError() << "zero-pipeline-split: partition=type:" << method
                                << " matches no layer's class or module path"
                                << (ls.segments ? " (the model records neither: its layers: "
                                                : " (the layers: ")
                                << ls.layers.front().name << " ... " << ls.layers.back().name
                                << "; zero-opt --report lists them)";
      p.bounds = ::zero::partitionBalanced(p.weights, stages);
    } else {
      return func.emitError() << "zero-pipeline-split: partition must be parameters, uniform "
                              << "or type:REGEX (DeepSpeed's partition_method), or compute, "
                                 "got '"
                              << partition << "'";
    }
    LLVM_DEBUG({
      llvm::dbgs() << "zero-pipeline-split: partition=" << partition << " over "
                   << ls.layers.size() << " layers:";
      for (size_t s = 0; s + 1 < p.bounds.size(); ++s)
        llvm::dbgs() << " stage " << s << " [" << p.bounds[s] << ", " << p.bounds[s + 1]
                     << ")";
      llvm::dbgs() << "\n";
    });
    return p;
  }

  /// The plan on the module (zero.pipeline_plan), for zero-report and the
  /// runtime: stages, the method, the layers and the first of each stage.
  void recordPlan(ModuleOp module, const ::zero::LayerStructure &ls,
                  const LayerPartition &partitioned, int64_t micro, bool training) {
    Builder b(module.getContext());
    SmallVector<Attribute> names, classes;
    SmallVector<int64_t> params;
    for (const ::zero::Layer &l : ls.layers) {
      names.push_back(b.getStringAttr(l.name));
      classes.push_back(b.getStringAttr(l.cls));
      params.push_back(l.params);
    }
    ArrayAttr layerClasses;
    if (llvm::any_of(ls.layers, [](const ::zero::Layer &l) { return !l.cls.empty(); }))
      layerClasses = b.getArrayAttr(classes);
    DenseI64ArrayAttr layerMacs;
    if (StringRef(partition) == "compute") // the multiply-accumulates balanced
      layerMacs = b.getDenseI64ArrayAttr(partitioned.weights);
    attrs::kPipelinePlan.set(
        module, ::zero::dist::PipelinePlanAttr::get(
                    b.getContext(), stages, partition, b.getArrayAttr(names),
                    b.getDenseI64ArrayAttr(params),
                    b.getDenseI64ArrayAttr(partitioned.bounds), micro, dp,
                    training ? ::zero::stringifyEnum(schedule.getValue())
                             : StringRef("fill-drain"),
                    layerClasses, layerMacs));
  }

  /// Each stage becomes its own function, @<name>_stage<s> (attribute
  /// zero.pipeline_stage = s), holding that stage's ops in its order of work;
  /// it takes every input of the model (each rank binds them all) and the
  /// stage that receives the outputs returns them. The original function
  /// becomes the pipeline's driver: one call per stage, which the stages'
  /// ranks run concurrently (their zero.send / zero.recv pairs meet by peer
  /// and tag). A stage's membership is now its function's, so no later
  /// rewrite can lose it; zero-lower-to-runtime lowers each stage's body onto
  /// its ranks.
  LogicalResult outlineStages(ModuleOp module, func::FuncOp func) {
    Block &body = func.getBody().front();
    FailureOr<int64_t> returning = returningStage(body.getTerminator());
    if (failed(returning))
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "zero-pipeline-split: stage " << *returning
                            << " returns the outputs\n");
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(func);
    SmallVector<func::FuncOp> stageFuncs = createStageFunctions(b, func, *returning);
    if (failed(moveOpsToStages(body, stageFuncs)) || failed(checkStagesReadOwnValues(stageFuncs)))
      return failure();
    buildDriver(b, func, stageFuncs, *returning);
    return success();
  }

  /// The stage an op of the cut function was assigned (zero.pipeline_stage).
  FailureOr<int64_t> assignedStage(Operation *op) {
    auto st = attrs::kPipelineStage.get(op);
    if (!st || st.getInt() < 0 || st.getInt() >= stages)
      return failure();
    return st.getInt();
  }

  /// The stage whose ops compute the outputs returns them (stage 0 when none
  /// does: the outputs are inputs).
  FailureOr<int64_t> returningStage(Operation *term) {
    int64_t returning = -1;
    for (Value v : term->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def)
        continue;
      FailureOr<int64_t> st = assignedStage(def);
      if (failed(st) || (returning >= 0 && returning != *st))
        return def->emitOpError("zero-pipeline-split: the outputs must be computed by one "
                                "stage (the one that receives them)");
      returning = *st;
    }
    if (returning < 0)
      returning = 0;
    return returning;
  }

  /// One empty private function per stage, after `func`, taking its inputs;
  /// the `returning` stage's returns its results.
  SmallVector<func::FuncOp> createStageFunctions(OpBuilder &b, func::FuncOp func,
                                                 int64_t returning) {
    SmallVector<func::FuncOp> stageFuncs;
    SmallVector<Type> argTypes(func.getBody().front().getArgumentTypes());
    for (int64_t s = 0; s < stages; ++s) {
      SmallVector<Type> results;
      if (s == returning)
        results = llvm::to_vector(func.getFunctionType().getResults());
      auto f = func::FuncOp::create(b, func.getLoc(),
                                    (func.getSymName() + "_stage" + Twine(s)).str(),
                                    b.getFunctionType(argTypes, results));
      f.setPrivate();
      attrs::kPipelineStage.set(f, b.getI64IntegerAttr(s));
      if (ArrayAttr args = func.getAllArgAttrs())
        f.setAllArgAttrs(args);
      if (s == returning)
        if (ArrayAttr res = func.getAllResultAttrs())
          f.setAllResultAttrs(res);
      f.addEntryBlock();
      stageFuncs.push_back(f);
      b.setInsertionPointAfter(f);
    }
    return stageFuncs;
  }

  /// Moves each op, in order, to its stage's function, reading that
  /// function's arguments for the inputs.
  LogicalResult moveOpsToStages(Block &body, MutableArrayRef<func::FuncOp> stageFuncs) {
    Operation *term = body.getTerminator();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (&op == term)
        continue;
      FailureOr<int64_t> st = assignedStage(&op);
      if (failed(st))
        return op.emitOpError("zero-pipeline-split: has no pipeline stage after the cut");
      attrs::kPipelineStage.remove(&op);
      op.moveBefore(&stageFuncs[size_t(*st)].getBody().front(),
                    stageFuncs[size_t(*st)].getBody().front().end());
    }
    for (auto [i, arg] : llvm::enumerate(body.getArguments()))
      for (func::FuncOp f : stageFuncs)
        arg.replaceUsesWithIf(f.getArgument(unsigned(i)), [&](OpOperand &use) {
          return use.getOwner()->getParentOfType<func::FuncOp>() == f;
        });
    return success();
  }

  /// Every value a stage reads is its own (a send / recv pair carries the
  /// rest): checked here, since a use across functions would not verify.
  static LogicalResult checkStagesReadOwnValues(MutableArrayRef<func::FuncOp> stageFuncs) {
    for (func::FuncOp f : stageFuncs) {
      WalkResult crossed = f.walk([&](Operation *op) {
        for (Value v : op->getOperands()) {
          Region *home = v.getParentRegion();
          if (home && home->getParentOfType<func::FuncOp>() != f &&
              home->getParentOp() != f.getOperation()) {
            op->emitOpError("zero-pipeline-split: reads a value of another stage without "
                            "a zero.recv");
            return WalkResult::interrupt();
          }
        }
        return WalkResult::advance();
      });
      if (crossed.wasInterrupted())
        return failure();
    }
    return success();
  }

  /// Ends each stage function with its return, and turns `func` into the
  /// driver: one call per stage, returning what the `returning` stage's
  /// call does.
  static void buildDriver(OpBuilder &b, func::FuncOp func,
                          MutableArrayRef<func::FuncOp> stageFuncs, int64_t returning) {
    Block &body = func.getBody().front();
    Operation *term = body.getTerminator();
    SmallVector<Value> outputs(term->getOperands());
    for (auto [s, f] : llvm::enumerate(stageFuncs)) {
      b.setInsertionPointToEnd(&f.getBody().front());
      SmallVector<Value> returned;
      if (int64_t(s) == returning)
        for (Value v : outputs)
          returned.push_back(isa<BlockArgument>(v) && v.getParentBlock() == &body
                                 ? Value(f.getArgument(cast<BlockArgument>(v).getArgNumber()))
                                 : v);
      func::ReturnOp::create(b, func.getLoc(), returned);
    }
    // The driver: one call per stage.
    b.setInsertionPoint(term);
    SmallVector<Value> results;
    for (auto [s, f] : llvm::enumerate(stageFuncs)) {
      auto call = func::CallOp::create(b, func.getLoc(), f, body.getArguments());
      if (int64_t(s) == returning)
        results.assign(call.getResults().begin(), call.getResults().end());
    }
    term->setOperands(results);
  }

  /// The position of a slot in stage `st`'s order of work (pipelineSchedule):
  /// the prologue first, the optimizer step last.
  int64_t stepIndex(const Slot &slot, int64_t st, int64_t m) {
    if (slot.phase == Slot::Prologue)
      return -1;
    if (slot.phase == Slot::Epilogue)
      return 2 * m;
    std::vector<int64_t> &index = stepIndices[st];
    if (index.empty()) {
      index.assign(size_t(2 * m), 0);
      for (auto [i, step] : llvm::enumerate(::zero::pipelineSchedule(
               ::zero::stringifyEnum(schedule.getValue()), stages, st, m)))
        index[size_t(step.micro * 2 + (step.forward ? 0 : 1))] = int64_t(i);
    }
    return index[size_t(slot.micro * 2 + (slot.phase == Slot::Forward ? 0 : 1))];
  }
  /// Per stage: the position of (micro-batch k, forward | backward) at 2k | 2k+1.
  std::map<int64_t, std::vector<int64_t>> stepIndices;

  /// tied-grads=step (DeepSpeed's reduction of tied gradients): the sum that
  /// makes a tied parameter's gradient (the Adds over its micro-batches and
  /// over its uses) is regrouped so that each stage adds up its own terms, in
  /// their order, as its backwards produce them, and the stages' partial sums
  /// are added once, in stage order, on the first holder (which sends the
  /// total to the others with the update). A stage sends its part once per
  /// step instead of once per micro-batch; the sum's rounding differs from
  /// the 1-rank step's.
  void sumTiedPerStage(TrainingStepCut &step) {
    Block &body = step.body;
    llvm::DenseMap<Operation *, int64_t> &stageOf = step.stageOf;
    llvm::DenseMap<Operation *, Slot> &slotOf = step.slotOf;
    OpBuilder b(body.getParentOp()->getContext());
    for (Operation *update : step.epilogue) {
      if (!isa<::zero::dist::AdamWOp, ::zero::dist::SGDOp>(update))
        continue;
      auto load = update->getOperand(0).getDefiningOp<ml_program::GlobalLoadOp>();
      if (!load)
        continue; // a sharded step's parameter: its gradient is reduced first
      auto used = step.usedOn.find(load.getGlobalAttr());
      if (used == step.usedOn.end() || used->second.size() < 2)
        continue;
      auto root = update->getOperand(1).getDefiningOp<::zero::onnx::AddOp>();
      if (!root)
        continue;
      // The terms of the sum, left to right, and the Adds that combine them.
      SmallVector<Value> terms;
      SmallVector<Operation *> adds;
      std::function<void(Value)> collect = [&](Value v) {
        auto add = v.getDefiningOp<::zero::onnx::AddOp>();
        if (add && (add == root || v.hasOneUse()) && add->getBlock() == &body &&
            add.getA().getType() == add.getType() && add.getB().getType() == add.getType() &&
            slotOf.count(add) && slotOf[add].phase == Slot::Backward) {
          adds.push_back(add);
          collect(add.getA());
          collect(add.getB());
          return;
        }
        terms.push_back(v);
      };
      collect(root.getResult());
      auto termStage = [&](Value v) -> std::optional<int64_t> {
        Operation *d = v.getDefiningOp();
        if (!d || !stageOf.count(d) || !slotOf.count(d))
          return std::nullopt;
        return stageOf.lookup(d);
      };
      std::map<int64_t, SmallVector<Value>> byStage;
      bool known = true;
      for (Value t : terms) {
        std::optional<int64_t> st = termStage(t);
        known &= st.has_value();
        if (st)
          byStage[*st].push_back(t);
      }
      if (!known || byStage.size() < 2)
        continue;
      LLVM_DEBUG(llvm::dbgs() << "zero-pipeline-split: tied-grads=step: " << load.getGlobal()
                              << "'s gradient summed on " << byStage.size()
                              << " stages, then on stage " << *used->second.begin() << "\n");
      // A new Add after both operands, on `st`, in the later operand's slot.
      auto later = [&](Value x, Value y) {
        Operation *dx = x.getDefiningOp(), *dy = y.getDefiningOp();
        return dx->isBeforeInBlock(dy) ? dy : dx;
      };
      auto laterSlot = [&](Value x, Value y) {
        Slot sx = slotOf.lookup(x.getDefiningOp()), sy = slotOf.lookup(y.getDefiningOp());
        auto key = [](const Slot &sl) { return std::make_pair(int(sl.phase), sl.micro); };
        return key(sx) < key(sy) ? sy : sx;
      };
      auto makeAdd = [&](Value x, Value y, int64_t st, Slot slot) -> Value {
        b.setInsertionPointAfter(later(x, y));
        auto add = ::zero::onnx::AddOp::create(b, root.getLoc(), root.getType(), x, y);
        attrs::kPhase.set(add, attrs::Phase::Backward);
        attrs::kMicroBatch.set(add, b.getI64IntegerAttr(slot.micro));
        stageOf[add] = st;
        slotOf[add] = slot;
        return add.getResult();
      };
      SmallVector<Value> partials;
      for (auto &[st, list] : byStage) {
        Value acc = list.front();
        for (Value t : ArrayRef<Value>(list).drop_front())
          acc = makeAdd(acc, t, st, laterSlot(acc, t));
        partials.push_back(acc);
      }
      const int64_t holder = *used->second.begin();
      Value total = partials.front();
      for (Value p : ArrayRef<Value>(partials).drop_front())
        total = makeAdd(total, p, holder, laterSlot(total, p));
      root.getResult().replaceAllUsesWith(total);
      for (Operation *add : adds) {
        stageOf.erase(add);
        slotOf.erase(add);
      }
      // Root first: each Add's user is erased before it.
      for (Operation *add : adds)
        add->erase();
    }
  }

  /// The program's data-parallel world (zero.world_size, 1 when unsharded)
  /// is the split's dp: the ZeRO passes ran over each stage's replicas.
  LogicalResult checkWorld(ModuleOp module, StringRef what) {
    if (dp < 1)
      return module.emitError() << "zero-pipeline-split: dp must be >= 1, got " << int64_t(dp);
    const int64_t world = attrs::kWorldSize.getInt(module).value_or(1);
    if (world != dp)
      return module.emitError()
             << "zero-pipeline-split: the " << what << " is compiled for " << world
             << " data-parallel ranks but the split has dp=" << int64_t(dp)
             << "; give the split dp=" << world << ", or use --zero-pipeline=\"pp=S dp="
             << world << " stage=Z\", which runs the ZeRO passes and the split together";
    return success();
  }

  /// Cuts a training step: forward and backward ops of a layer go to its
  /// stage (a reverse rule's ops carry the location of the op they
  /// differentiate), glue by the forward rule of `assignStages`; each
  /// parameter's update runs on every stage that uses the parameter (a tied
  /// parameter, on both of its stages, from one summed gradient, so the
  /// copies stay identical), its squared norm where its gradient is. Then
  /// every stage's ops are ordered by the schedule.
  LogicalResult cutTraining(ModuleOp module, func::FuncOp func,
                            const ::zero::LayerStructure &ls,
                            const std::vector<int64_t> &bounds, int64_t m) {
    if (failed(checkWorld(module, "training step")))
      return failure();
    if (failed(groupCollectives(module, func)))
      return failure();
    Block &body = func.getBody().front();
    TrainingStepCut step(body, m);
    slotByTags(step);
    // The micro-batches' ops (and the prologue), by the layers.
    step.inEpilogue.insert(step.epilogue.begin(), step.epilogue.end());
    assignStages(body, ls, bounds, step.stageOf, step.inEpilogue);
    findParameterStages(step);
    if (tiedGrads == ::zero::TiedGrads::Step)
      sumTiedPerStage(step);
    if (failed(placeEpilogue(module, step)))
      return failure();
    connect(module, func, step.stageOf);
    if (schedule == ::zero::PipelineSchedule::OneFOneB &&
        failed(checkForwardRunsDownstream(step)))
      return failure();
    if (failed(assignSteps(step)))
      return failure();
    orderBySteps(module.getContext(), step);
    return success();
  }

  /// Slots, from the autodiff's tags: the ops before the first tagged one
  /// are the prologue, those after the last the epilogue; the untagged ones
  /// in between get none.
  static void slotByTags(TrainingStepCut &step) {
    Operation *lastTagged = nullptr;
    for (Operation &op : step.body)
      if (attrs::kPhase.isSetOn(&op))
        lastTagged = &op;
    bool seenTagged = false, pastLast = false;
    for (Operation &op : step.body) {
      if (&op == step.term)
        continue;
      if (auto phase = attrs::kPhase.get(&op)) {
        seenTagged = true;
        Slot slot;
        slot.phase =
            *phase == attrs::Phase::Forward ? Slot::Forward : Slot::Backward;
        slot.micro = attrs::kMicroBatch.get(&op).getInt();
        step.slotOf[&op] = slot;
      } else if (!seenTagged) {
        step.slotOf[&op] = Slot{Slot::Prologue, 0};
      } else if (pastLast) {
        step.slotOf[&op] = Slot{Slot::Epilogue, 0};
        step.epilogue.push_back(&op);
      }
      pastLast |= &op == lastTagged;
    }
  }

  /// The stages that use each global in the micro-batches: those of the ops
  /// reading its load, and, for a ZeRO-3 parameter, those of the ops reading
  /// it through the transfers that bring it in (a quantization, the gather,
  /// its views). A gather shared by layers of several stages sits on the
  /// first; every stage that computes with the parameter holds a copy and
  /// steps it.
  static void findParameterStages(TrainingStepCut &step) {
    for (Operation &op : step.body) {
      auto load = dyn_cast<ml_program::GlobalLoadOp>(&op);
      if (!load || step.inEpilogue.count(&op))
        continue;
      std::set<int64_t> stages;
      SmallVector<Value> reach{load.getResult()};
      llvm::DenseSet<Value> seen;
      while (!reach.empty()) {
        Value v = reach.pop_back_val();
        if (!seen.insert(v).second)
          continue;
        for (OpOperand &use : v.getUses()) {
          Operation *user = use.getOwner();
          if (step.inEpilogue.count(user))
            continue;
          if (auto it = step.stageOf.find(user); it != step.stageOf.end())
            stages.insert(it->second);
          if (isa<::zero::dist::QuantizeOp>(user) || ::zero::isQuantizedShardGather(user) ||
              ::zero::isGather(user) || ::zero::isParameterView(user)) {
            // A bucket's result i is its operand i; other transfers carry
            // the parameter in all their results.
            if (isa<::zero::dist::BucketAllGatherOp>(user) &&
                user->getNumResults() == user->getNumOperands())
              reach.push_back(user->getResult(use.getOperandNumber()));
            else
              llvm::append_range(reach, user->getResults());
          }
        }
      }
      if (!stages.empty())
        step.usedOn[load.getGlobalAttr()].insert(stages.begin(), stages.end());
    }
  }

  /// The epilogue: updates on their parameters' stages (cloned, with their
  /// stores, for a parameter held by several), squared norms where their
  /// gradients are; the rest by the forward rule.
  LogicalResult placeEpilogue(ModuleOp module, TrainingStepCut &step) {
    llvm::DenseMap<Operation *, int64_t> fixed;
    if (failed(placeUpdates(module, step, fixed)))
      return failure();
    for (Operation &op : step.body)
      if (auto rss = dyn_cast<::zero::onnx::ReduceSumSquareOp>(&op);
          rss && step.inEpilogue.count(&op))
        if (Operation *d = rss->getOperand(0).getDefiningOp())
          if (auto it = step.stageOf.find(d); it != step.stageOf.end())
            fixed[&op] = it->second;
    // The epilogue's remaining ops: earliest stage of their users, else the
    // last stage of their operands.
    SmallVector<Operation *> rest;
    for (Operation &op : step.body)
      if (&op != step.term && !step.stageOf.count(&op))
        rest.push_back(&op);
    placeByUses(
        rest,
        [&](Operation *op) -> std::optional<int64_t> {
          if (auto it = fixed.find(op); it != fixed.end())
            return it->second;
          return std::nullopt;
        },
        [](Operation *op) { return op; }, step.stageOf);
    replicateStateUpdates(module, step);
    return success();
  }

  /// Optimizer state that several stages read (fp16's loss scaler: the last
  /// stage seeds the backward with the scale, the stages with parameters
  /// unscale their gradients with it) is updated on each of them, as a tied
  /// parameter is, so that every stage's copy holds the same values: each
  /// store to such a global, with the ops computing its value from state
  /// alone (loads of state globals, constants), is copied onto every other
  /// stage that loads the global; what else the value needs (the step's
  /// overflow flag) the cut sends there.
  void replicateStateUpdates(ModuleOp module, TrainingStepCut &step) {
    SymbolTable symbols(module);
    auto isState = [&](Attribute sym) {
      auto g = symbols.lookup<ml_program::GlobalOp>(cast<SymbolRefAttr>(sym).getLeafReference());
      return g && attrs::kRole.isSetOn(g);
    };
    llvm::DenseMap<Attribute, std::set<int64_t>> loadedOn;
    for (Operation &op : step.body)
      if (auto load = dyn_cast<ml_program::GlobalLoadOp>(&op))
        if (auto it = step.stageOf.find(&op); it != step.stageOf.end())
          loadedOn[load.getGlobalAttr()].insert(it->second);
    // Ops of the epilogue whose results depend on state and constants only.
    llvm::DenseMap<Operation *, bool> stateOnly;
    std::function<bool(Operation *)> fromState = [&](Operation *op) -> bool {
      if (auto it = stateOnly.find(op); it != stateOnly.end())
        return it->second;
      bool only = step.inEpilogue.count(op) && op->getNumRegions() == 0 &&
                  op->getNumResults() == 1;
      if (only) {
        if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op))
          only = isState(load.getGlobalAttr());
        else if (!isa<::zero::onnx::ConstantOp>(op))
          for (Value v : op->getOperands()) {
            Operation *d = v.getDefiningOp();
            if (!d || !fromState(d)) {
              only = false;
              break;
            }
          }
      }
      return stateOnly[op] = only;
    };
    OpBuilder b(module.getContext());
    SmallVector<ml_program::GlobalStoreOp> stores;
    for (Operation *op : step.epilogue)
      if (auto store = dyn_cast<ml_program::GlobalStoreOp>(op))
        if (isState(store.getGlobalAttr()))
          stores.push_back(store);
    for (ml_program::GlobalStoreOp store : stores) {
      const int64_t home = step.stageOf.lookup(store);
      auto it = loadedOn.find(store.getGlobalAttr());
      if (it == loadedOn.end())
        continue;
      // The store and the state-only ops its value needs, in program order.
      llvm::SetVector<Operation *> slice;
      SmallVector<Operation *> work{store};
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (!slice.insert(op))
          continue;
        for (Value v : op->getOperands())
          if (Operation *d = v.getDefiningOp(); d && fromState(d))
            work.push_back(d);
      }
      SmallVector<Operation *> ordered(slice.begin(), slice.end());
      llvm::sort(ordered, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
      for (int64_t st : it->second) {
        if (st == home)
          continue;
        ++numReplicatedStateUpdates;
        b.setInsertionPointAfter(store);
        IRMapping map;
        for (Operation *c : ordered) {
          Operation *copy = b.clone(*c, map);
          step.stageOf[copy] = st;
          step.slotOf[copy] = Slot{Slot::Epilogue, 0};
          step.inEpilogue.insert(copy);
          b.setInsertionPointAfter(copy);
        }
      }
    }
  }

  /// Each update (and what it feeds) on every stage that uses its parameter:
  /// on the first, in place; on each other, a copy after it. Records the
  /// stages in `fixed`.
  LogicalResult placeUpdates(ModuleOp module, TrainingStepCut &step,
                             llvm::DenseMap<Operation *, int64_t> &fixed) {
    OpBuilder b(module.getContext());
    for (Operation *op : step.epilogue) {
      if (!isa<::zero::dist::AdamWOp, ::zero::dist::SGDOp>(op))
        continue;
      // The parameter: a load of its global (through the flatten, pad and
      // local-shard ops of a sharded step), or of a 16-bit parameter's master.
      Operation *def = op->getOperand(0).getDefiningOp();
      while (def && !isa<ml_program::GlobalLoadOp>(def) && def->getNumOperands() >= 1)
        def = (isa<::zero::onnx::WhereOp>(def) ? def->getOperand(1) : def->getOperand(0))
                  .getDefiningOp();
      auto load = dyn_cast_or_null<ml_program::GlobalLoadOp>(def);
      if (!load)
        return op->emitOpError("zero-pipeline-split: cannot find the global this "
                               "update steps");
      // A 16-bit parameter's fp32 master: the stages of that parameter.
      Attribute stepped = load.getGlobalAttr();
      if (auto g = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
              load, load.getGlobalAttr()))
        if (FlatSymbolRefAttr of = attrs::kWidenFrom.get(g))
          stepped = of;
      auto it = step.usedOn.find(stepped);
      if (it == step.usedOn.end() || it->second.empty())
        return op->emitOpError("zero-pipeline-split: no stage uses the parameter this "
                               "update steps");
      if (it->second.size() > 1) {
        ++numTiedParameters;
        LLVM_DEBUG(llvm::dbgs() << "zero-pipeline-split: " << load.getGlobal() << " is stepped on "
                                << it->second.size() << " stages\n");
      }
      // The update and what it feeds (the stores, and for a sharded step the
      // gather of the updated shards): on each stage that holds the parameter.
      llvm::SetVector<Operation *> chain;
      chain.insert(op);
      for (size_t i = 0; i < chain.size(); ++i)
        for (Operation *user : chain[i]->getUsers())
          if (user != step.term)
            chain.insert(user);
      SmallVector<Operation *> ordered(chain.begin(), chain.end());
      llvm::sort(ordered, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
      bool first = true;
      for (int64_t st : it->second) {
        if (first) {
          for (Operation *c : ordered)
            fixed[c] = st;
          first = false;
          continue;
        }
        b.setInsertionPointAfter(ordered.back());
        IRMapping map;
        for (Operation *c : ordered) {
          Operation *copy = b.clone(*c, map);
          fixed[copy] = st;
          step.slotOf[copy] = Slot{Slot::Epilogue, 0};
        }
      }
    }
    return success();
  }

  /// 1F1B interleaves a stage's forwards with its backwards on the
  /// assumption that activations flow to later stages and gradients to
  /// earlier ones; a forward value sent back to an earlier stage (a
  /// parameter's functional use outside its module, placed with that
  /// parameter's layer) would leave two stages each waiting for the other.
  static LogicalResult checkForwardRunsDownstream(TrainingStepCut &step) {
    for (Operation &op : step.body) {
      auto recv = dyn_cast<::zero::dist::RecvOp>(&op);
      if (!recv || recv.getPeer() <= step.stageOf.lookup(recv))
        continue;
      for (Operation *user : recv->getUsers()) {
        auto slot = step.slotOf.find(user);
        if (slot == step.slotOf.end() || slot->second.phase != Slot::Forward)
          continue;
        return user->emitError()
               << "zero-pipeline-split: schedule=1f1b needs the forward to run from "
                  "each stage to the next, but this op (stage "
               << step.stageOf.lookup(recv) << ") reads a value of stage " << recv.getPeer()
               << " in the forward of micro-batch " << slot->second.micro
               << " (an op outside the modules is placed with the layer whose "
                  "parameter it reads, e.g. a head multiplying by a tied embedding's "
                  "weight); use schedule=gpipe, or give that op a module of its own";
      }
    }
    return success();
  }

  /// Each op's step on its stage. Tagged ops: their slot's position in the
  /// stage's schedule; before the first tagged op: first; after the last:
  /// last. An untagged op in between (a gather, a gradient collective, a
  /// send or receive the cut added) keeps the step of the tagged op that
  /// follows it, kept after its operands' steps and before its users'; a
  /// send goes as early as its value allows, a receive (or a repeated load)
  /// as late as its first user.
  LogicalResult assignSteps(TrainingStepCut &step) {
    auto floating = [&](Operation *op) {
      return op->getNumOperands() == 0 && op->getNumRegions() == 0 &&
             !step.slotOf.count(op) && isa<::zero::onnx::ConstantOp>(op);
    };
    SmallVector<Operation *> &ops = step.ops;
    llvm::DenseMap<Operation *, int64_t> &position = step.position, &stepOf = step.stepOf;
    for (Operation &op : step.body)
      if (&op != step.term) {
        position[&op] = int64_t(ops.size());
        ops.push_back(&op);
      }
    const int64_t m = step.m, last = 2 * m;
    for (Operation *op : ops)
      if (auto it = step.slotOf.find(op); it != step.slotOf.end())
        stepOf[op] = stepIndex(it->second, step.stageOf.lookup(op), m);
    llvm::DenseMap<Operation *, int64_t> hi;
    for (Operation *op : llvm::reverse(ops)) {
      if (stepOf.count(op))
        continue;
      int64_t bound = last;
      for (Operation *user : op->getUsers()) {
        if (user == step.term)
          continue;
        auto known = stepOf.find(user);
        bound = std::min(bound, known != stepOf.end() ? known->second : hi.lookup(user));
      }
      hi[op] = bound;
    }
    std::optional<Slot> next;
    SmallVector<std::optional<Slot>> nextSlot(ops.size());
    for (Operation *op : llvm::reverse(ops)) {
      nextSlot[size_t(position[op])] = next;
      if (attrs::kPhase.isSetOn(op))
        next = step.slotOf.lookup(op);
    }
    for (Operation *op : ops) {
      if (stepOf.count(op))
        continue;
      const int64_t st = step.stageOf.lookup(op);
      int64_t lo = -1;
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp(); d && !floating(d))
          lo = std::max(lo, stepOf.lookup(d));
      int64_t at;
      if (isa<::zero::dist::SendOp>(op))
        at = lo;
      else if (op->getNumOperands() == 0)
        at = hi[op];
      else {
        const std::optional<Slot> &n = nextSlot[size_t(position[op])];
        at = std::clamp(n ? stepIndex(*n, st, m) : last, lo, std::max(lo, hi[op]));
      }
      if (at > hi[op])
        return op->emitOpError("zero-pipeline-split: its operands come later in the "
                               "stage's schedule than its users");
      stepOf[op] = at;
    }
    // An untagged op without operands (a constant) runs in the step of its
    // earliest user: it does not hold its users back (above), nor comes after.
    for (Operation *op : ops)
      if (floating(op))
        for (Operation *user : op->getUsers())
          if (auto it = stepOf.find(user); it != stepOf.end())
            stepOf[op] = std::min(stepOf[op], it->second);
    return success();
  }

  /// Orders the ops by step (then stage, then program order) and names each
  /// one's step (zero.pipeline_step: "F3", "B1", or "prologue" /
  /// "optimizer"), for the reader and for the runtime's trace.
  void orderBySteps(MLIRContext *ctx, TrainingStepCut &step) {
    auto key = [&](Operation *op) {
      return std::make_tuple(step.stepOf.lookup(op), step.stageOf.lookup(op),
                             step.position[op]);
    };
    llvm::stable_sort(step.ops, [&](Operation *x, Operation *y) { return key(x) < key(y); });
    std::map<int64_t, std::vector<::zero::PipelineStep>> orders;
    for (Operation *op : step.ops) {
      op->moveBefore(step.term);
      attrs::kPhase.remove(op);
      attrs::kMicroBatch.remove(op);
      const int64_t st = step.stageOf.lookup(op), at = step.stepOf.lookup(op);
      std::string name = at < 0 ? "prologue" : "optimizer";
      if (at >= 0 && at < 2 * step.m) {
        auto [it, inserted] = orders.try_emplace(st);
        if (inserted)
          it->second = ::zero::pipelineSchedule(
              ::zero::stringifyEnum(schedule.getValue()), stages, st, step.m);
        const ::zero::PipelineStep &ps = it->second[size_t(at)];
        name = (ps.forward ? "F" : "B") + std::to_string(ps.micro);
      }
      attrs::kPipelineStep.set(op, StringAttr::get(ctx, name));
    }
  }

  /// Forward micro-batching (fill/drain): the function was imported at the
  /// micro-batch shape; the program takes `microBatches` of them stacked along
  /// dim 0, runs one copy of the stages per micro-batch in program order (so
  /// stage s works on micro-batch m while stage s+1 works on m-1), and stacks
  /// the outputs the same way on stage 0.
  LogicalResult unroll(func::FuncOp func) {
    const int64_t m = microBatches;
    if (m < 1)
      return func.emitError() << "zero-pipeline-split: micro-batches must be >= 1, got " << m;
    if (m == 1)
      return success();
    MicroBatchUnroll unrolled(func, m);
    if (failed(unrolled.collectFirstMicroBatch()))
      return failure();
    unrolled.sliceFirstMicroBatch();
    unrolled.cloneMicroBatches();
    unrolled.stackOutputs();
    numSends += uint64_t(unrolled.sendsCopied);
    return success();
  }

  /// Assigns every op to a stage (zero.pipeline_stage) and connects the
  /// stages with zero.send / zero.recv. A layer's ops go to its layer's stage;
  /// any other op to the earliest stage that uses it, or, when only the
  /// outputs use it, to the last stage its operands come from. Loads and
  /// constants are repeated on every stage that reads them (each rank holds
  /// the weights); every other value a later stage reads is sent to it once.
  /// The outputs are received by stage 0 (rank 0 writes them).
  LogicalResult cut(ModuleOp module, func::FuncOp func, const ::zero::LayerStructure &ls,
                    const std::vector<int64_t> &bounds) {
    if (failed(checkWorld(module, "forward program")) || failed(groupCollectives(module, func)))
      return failure();
    llvm::DenseMap<Operation *, int64_t> stageOf;
    assignStages(func.getBody().front(), ls, bounds, stageOf, {});
    connect(module, func, stageOf);
    return success();
  }

  /// The stage of every op of `body` but those in `skip` (which are not
  /// looked at as users either): a layer's ops go to its layer's stage; any
  /// other op to the earliest stage that uses it, or, when only the outputs
  /// (or skipped ops) use it, to the last stage its operands come from.
  void assignStages(Block &body, const ::zero::LayerStructure &ls,
                    const std::vector<int64_t> &bounds,
                    llvm::DenseMap<Operation *, int64_t> &stageOf,
                    const llvm::DenseSet<Operation *> &skip) {
    Operation *term = body.getTerminator();
    std::vector<int64_t> stageOfLayer(ls.layers.size(), 0);
    for (size_t st = 0; st + 1 < bounds.size(); ++st)
      for (int64_t k = bounds[st]; k < bounds[st + 1]; ++k)
        stageOfLayer[size_t(k)] = int64_t(st);
    auto topLevel = [&](Operation *op) {
      while (op->getBlock() != &body)
        op = op->getParentOp();
      return op;
    };
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      if (&op != term && !skip.contains(&op))
        ops.push_back(&op);
    placeByUses(
        ops,
        [&](Operation *op) -> std::optional<int64_t> {
          if (auto it = ls.layerOf.find(op); it != ls.layerOf.end())
            return stageOfLayer[size_t(it->second)];
          return std::nullopt;
        },
        topLevel, stageOf);
  }

  /// Places `ops` (in program order): where `preset` says, else on the
  /// earliest stage among its users already placed (walking backwards), else
  /// (users unplaced, or only the outputs) on the last stage its operands
  /// come from.
  static void placeByUses(ArrayRef<Operation *> ops,
                          function_ref<std::optional<int64_t>(Operation *)> preset,
                          function_ref<Operation *(Operation *)> topLevel,
                          llvm::DenseMap<Operation *, int64_t> &stageOf) {
    SmallVector<Operation *> pending;
    for (Operation *op : llvm::reverse(ops)) {
      if (std::optional<int64_t> st = preset(op)) {
        stageOf[op] = *st;
        continue;
      }
      std::optional<int64_t> first;
      for (Operation *user : op->getUsers()) {
        auto it = stageOf.find(topLevel(user));
        if (it != stageOf.end())
          first = std::min(first.value_or(it->second), it->second);
      }
      if (first)
        stageOf[op] = *first;
      else
        pending.push_back(op);
    }
    for (Operation *op : llvm::reverse(pending)) {
      int64_t last = 0;
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp())
          last = std::max(last, stageOf.lookup(d));
      stageOf[op] = last;
    }
  }

  /// True for an op every stage can repeat rather than receive: a load, a
  /// constant, or a gathered parameter (the all-gather of loaded shards over
  /// the stage's replicas, and its views), which each stage's ranks gather
  /// from the shards they hold.
  static bool repeatable(Operation *op) {
    if (isa<ml_program::GlobalLoadOp>(op) || op->getName().getStringRef() == "onnx.Constant")
      return true;
    if (!::zero::isGather(op) && !::zero::isParameterView(op))
      return false;
    return llvm::all_of(op->getOperands(), [](Value v) {
      Operation *d = v.getDefiningOp();
      return d && repeatable(d);
    });
  }

  /// Marks every op with its stage (zero.pipeline_stage) and connects the
  /// stages with zero.send / zero.recv (see `cut`).
  void connect(ModuleOp module, func::FuncOp func,
               llvm::DenseMap<Operation *, int64_t> &stageOf) {
    Block &body = func.getBody().front();
    Operation *term = body.getTerminator();
    auto topLevel = [&](Operation *op) {
      while (op->getBlock() != &body)
        op = op->getParentOp();
      return op;
    };
    auto stageOfUser = [&](Operation *user) {
      user = topLevel(user);
      return user == term ? 0 : stageOf.lookup(user);
    };
    OpBuilder b(module.getContext());
    int64_t tag = 0;
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      if (&op != term)
        ops.push_back(&op);
    for (Operation *op : ops) {
      const int64_t own = stageOf.lookup(op);
      attrs::kPipelineStage.set(op, b.getI64IntegerAttr(own));
      const bool free = repeatable(op);
      Operation *lastSend = op;
      for (Value v : op->getResults()) {
        // The first user on each other stage, in program order.
        std::map<int64_t, Operation *> firstUser;
        for (Operation *user : v.getUsers()) {
          int64_t st = stageOfUser(user);
          Operation *top = topLevel(user);
          if (st != own && (!firstUser.count(st) || top->isBeforeInBlock(firstUser[st])))
            firstUser[st] = top;
        }
        for (auto [st, user] : firstUser) {
          Value there;
          b.setInsertionPoint(user);
          if (free) {
            // The op and what it is made of (a gathered parameter's gather
            // and loads), on stage `st`.
            IRMapping map;
            std::function<void(Operation *)> copy = [&](Operation *o) {
              for (Value in : o->getOperands())
                if (Operation *d = in.getDefiningOp(); d && !map.contains(in))
                  copy(d);
              Operation *c = b.clone(*o, map);
              attrs::kPipelineStage.set(c, b.getI64IntegerAttr(st));
              stageOf[c] = st;
              ++numRepeated;
            };
            copy(op);
            there = map.lookup(v);
          } else {
            b.setInsertionPointAfter(lastSend);
            lastSend = ::zero::dist::SendOp::create(b, op->getLoc(), v, st, tag);
            attrs::kPipelineStage.set(lastSend, b.getI64IntegerAttr(own));
            stageOf[lastSend] = own;
            b.setInsertionPoint(user);
            auto recv = ::zero::dist::RecvOp::create(b, op->getLoc(), v.getType(), own, tag);
            attrs::kPipelineStage.set(recv, b.getI64IntegerAttr(st));
            stageOf[recv] = st;
            there = recv.getResult();
            LLVM_DEBUG(llvm::dbgs() << "zero-pipeline-split: " << op->getName() << " result "
                                    << cast<OpResult>(v).getResultNumber() << " sent from stage "
                                    << own << " to stage " << st << ", tag " << tag << "\n");
            ++tag;
            ++numSends;
          }
          v.replaceUsesWithIf(there, [&](OpOperand &use) {
            return stageOfUser(use.getOwner()) == st;
          });
        }
      }
    }
    attrs::kWorldSize.set(module, b.getI64IntegerAttr(stages * dp));
  }

  /// With dp > 1: every collective of the data-parallel step runs over its
  /// stage's replicas, the partitioned group @dp (world ranks in groups of
  /// dp consecutive ranks, one group per stage). A collective already over a
  /// process group of the dp ranks (ZeRO++: hpZ's nodes, qgZ's two levels)
  /// keeps it, and the group is laid over every stage: replica rank r of the
  /// group's list becomes world rank s * dp + r on stage s, so each stage's
  /// ranks form the same groups among themselves.
  LogicalResult groupCollectives(ModuleOp module, func::FuncOp func) {
    if (dp == 1)
      return success();
    MLIRContext *ctx = module.getContext();
    auto group = FlatSymbolRefAttr::get(ctx, ::zero::kStageReplicasGroup);
    if (SymbolTable::lookupSymbolIn(module, ::zero::kStageReplicasGroup))
      return module.emitError("zero-pipeline-split: the module already has a symbol @dp");
    llvm::SmallPtrSet<Operation *, 4> laidOver;
    WalkResult walked = func.walk([&](Operation *op) {
      if (!isa<::zero::dist::AllGatherOp, ::zero::dist::BucketAllGatherOp,
               ::zero::dist::ReduceScatterOp, ::zero::dist::AllReduceOp,
               ::zero::dist::AllToAllOp, ::zero::dist::LocalShardOp,
               ::zero::dist::BroadcastOp>(op))
        return WalkResult::advance();
      if (isa<::zero::dist::BroadcastOp>(op)) {
        op->emitOpError("zero-pipeline-split: a broadcast cannot be split into pipeline "
                        "stages yet");
        return WalkResult::interrupt();
      }
      auto named = op->getAttrOfType<FlatSymbolRefAttr>("group");
      if (!named) {
        op->setAttr("group", group);
        return WalkResult::advance();
      }
      auto pg = SymbolTable::lookupNearestSymbolFrom<::zero::dist::ProcessGroupOp>(op, named);
      if (!pg) {
        op->emitOpError() << "zero-pipeline-split: no process group " << named;
        return WalkResult::interrupt();
      }
      if (!laidOver.insert(pg).second)
        return WalkResult::advance();
      ArrayRef<int64_t> ranks = pg.getRanks();
      if (int64_t(ranks.size()) != dp || llvm::any_of(ranks, [&](int64_t r) { return r >= dp; })) {
        op->emitOpError() << "zero-pipeline-split: process group " << named
                          << " does not list the " << dp
                          << " data-parallel ranks of one stage";
        return WalkResult::interrupt();
      }
      SmallVector<int64_t> world;
      for (int64_t s = 0; s < stages; ++s)
        for (int64_t r : ranks)
          world.push_back(s * dp + r);
      pg.setRanks(world);
      return WalkResult::advance();
    });
    if (walked.wasInterrupted())
      return failure();
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    ::zero::dist::ProcessGroupOp::create(
        b, module.getLoc(), "dp", llvm::to_vector(llvm::seq<int64_t>(0, stages * dp)), dp);
    return success();
  }
};

} // namespace
