//===- PipelineSplit.cpp - Pipeline stages over the recovered layers ------===//
//
// zero-pipeline-split: the model's layers (Layers.h) assigned to stages with
// DeepSpeed's partition methods, recorded on the module for zero-report and
// the passes that cut the function.
//
//===----------------------------------------------------------------------===//

#include "Layers.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Regex.h"

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
  }
};

} // namespace
