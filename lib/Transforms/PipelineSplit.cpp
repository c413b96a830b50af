//===- PipelineSplit.cpp - Pipeline stages over the recovered layers ------===//
//
// zero-pipeline-split: the model's layers (Layers.h) assigned to stages with
// DeepSpeed's partition methods, recorded on the module for zero-report and
// the passes that cut the function.
//
//===----------------------------------------------------------------------===//

#include "Layers.h"

#include "zero/Dialect/Zero/ZeroDialect.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/Support/Regex.h"

#include <map>

namespace zero {
#define GEN_PASS_DEF_ZEROPIPELINESPLITPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;

namespace {

struct ZeroPipelineSplitPass
    : public ::zero::impl::ZeroPipelineSplitPassBase<ZeroPipelineSplitPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto funcs = module.getOps<func::FuncOp>();
    if (funcs.empty() || std::next(funcs.begin()) != funcs.end()) {
      module.emitError("zero-pipeline-split: expects one function (the model's forward)");
      return signalPassFailure();
    }
    func::FuncOp func = *funcs.begin();
    ::zero::LayerStructure ls = ::zero::recoverLayers(func);
    const int64_t n = int64_t(ls.layers.size());
    if (n == 0) {
      func.emitError("zero-pipeline-split: the model records no module paths (neither "
                     "the dynamo exporter's name_scopes metadata nor the TorchScript "
                     "exporter's /module/path node names), so it has no layers to "
                     "split between; re-export it with torch.onnx.export");
      return signalPassFailure();
    }
    if (stages < 1 || stages > n) {
      func.emitError() << "zero-pipeline-split: " << int64_t(stages)
                       << " stages for a model of " << n
                       << " layers; each stage needs at least one layer";
      return signalPassFailure();
    }
    std::vector<int64_t> weights, bounds;
    StringRef method = partition;
    if (method == "parameters") {
      for (const ::zero::Layer &l : ls.layers)
        weights.push_back(l.params);
      bounds = ::zero::partitionBalanced(weights, stages);
    } else if (method == "uniform") {
      bounds = ::zero::partitionUniform(n, stages);
    } else if (method.consume_front("type:")) {
      llvm::Regex re(method, llvm::Regex::IgnoreCase);
      std::string error;
      if (!re.isValid(error)) {
        func.emitError() << "zero-pipeline-split: partition=type:" << method
                         << " is not a valid regular expression: " << error;
        return signalPassFailure();
      }
      bool any = false;
      for (const ::zero::Layer &l : ls.layers) {
        bool match = re.match(l.cls) || re.match(l.name);
        weights.push_back(match ? 1 : 0);
        any |= match;
      }
      if (!any) {
        func.emitError() << "zero-pipeline-split: partition=type:" << method
                         << " matches no layer's class or module path (the layers: "
                         << ls.layers.front().name << " ... " << ls.layers.back().name
                         << "; zero-opt --report lists them)";
        return signalPassFailure();
      }
      bounds = ::zero::partitionBalanced(weights, stages);
    } else {
      func.emitError() << "zero-pipeline-split: partition must be parameters, uniform "
                       << "or type:REGEX (DeepSpeed's partition_method), got '"
                       << partition << "'";
      return signalPassFailure();
    }
    Builder b(module.getContext());
    SmallVector<Attribute> names;
    SmallVector<int64_t> params;
    for (const ::zero::Layer &l : ls.layers) {
      names.push_back(b.getStringAttr(l.name));
      params.push_back(l.params);
    }
    module->setAttr("zero.pipeline_plan",
                    b.getDictionaryAttr(
                        {b.getNamedAttr("stages", b.getI64IntegerAttr(stages)),
                         b.getNamedAttr("partition", b.getStringAttr(partition)),
                         b.getNamedAttr("layers", b.getArrayAttr(names)),
                         b.getNamedAttr("layer_params", b.getDenseI64ArrayAttr(params)),
                         b.getNamedAttr("parts", b.getDenseI64ArrayAttr(bounds))}));
    if (failed(cut(module, func, ls, bounds)))
      return signalPassFailure();
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
    if (auto w = module->getAttrOfType<IntegerAttr>("zero.world_size");
        w && w.getInt() != 1) {
      return module.emitError("zero-pipeline-split: the program is already compiled for "
                              "data parallelism; pipeline x data parallel is not "
                              "implemented yet (split first, on the unsharded model)");
    }
    Block &body = func.getBody().front();
    Operation *term = body.getTerminator();
    std::vector<int64_t> stageOfLayer(ls.layers.size(), 0);
    for (size_t st = 0; st + 1 < bounds.size(); ++st)
      for (int64_t k = bounds[st]; k < bounds[st + 1]; ++k)
        stageOfLayer[size_t(k)] = int64_t(st);
    llvm::DenseMap<Operation *, int64_t> stageOf;
    auto topLevel = [&](Operation *op) {
      while (op->getBlock() != &body)
        op = op->getParentOp();
      return op;
    };
    SmallVector<Operation *> pending;
    for (Operation &op : llvm::reverse(body)) {
      if (&op == term)
        continue;
      if (auto it = ls.layerOf.find(&op); it != ls.layerOf.end()) {
        stageOf[&op] = stageOfLayer[size_t(it->second)];
        continue;
      }
      std::optional<int64_t> first;
      for (Operation *user : op.getUsers()) {
        auto it = stageOf.find(topLevel(user));
        if (it != stageOf.end())
          first = std::min(first.value_or(it->second), it->second);
      }
      if (first)
        stageOf[&op] = *first;
      else
        pending.push_back(&op);
    }
    for (Operation *op : llvm::reverse(pending)) {
      int64_t last = 0;
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp())
          last = std::max(last, stageOf.lookup(d));
      stageOf[op] = last;
    }
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
      op->setAttr("zero.pipeline_stage", b.getI64IntegerAttr(own));
      const bool free = isa<ml_program::GlobalLoadOp>(op) ||
                        op->getName().getStringRef() == "onnx.Constant";
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
            Operation *copy = b.clone(*op);
            copy->setAttr("zero.pipeline_stage", b.getI64IntegerAttr(st));
            stageOf[copy] = st;
            there = copy->getResult(cast<OpResult>(v).getResultNumber());
          } else {
            b.setInsertionPointAfter(lastSend);
            lastSend = ::zero::dist::SendOp::create(b, op->getLoc(), v, st, tag);
            lastSend->setAttr("zero.pipeline_stage", b.getI64IntegerAttr(own));
            stageOf[lastSend] = own;
            b.setInsertionPoint(user);
            auto recv = ::zero::dist::RecvOp::create(b, op->getLoc(), v.getType(), own, tag);
            recv->setAttr("zero.pipeline_stage", b.getI64IntegerAttr(st));
            stageOf[recv] = st;
            there = recv.getResult();
            ++tag;
          }
          v.replaceUsesWithIf(there, [&](OpOperand &use) {
            return stageOfUser(use.getOwner()) == st;
          });
        }
      }
    }
    module->setAttr("zero.world_size", b.getI64IntegerAttr(stages));
    return success();
  }
};

} // namespace
