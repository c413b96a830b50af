//===- AddLoss.cpp - zero-add-loss: a loss on a logits output --------------===//
//
// zero-add-loss attaches PyTorch's cross-entropy to a logits output, so a
// model exported without its loss can be trained: the loss becomes the
// function's output that zero-autodiff differentiates.
//
//===----------------------------------------------------------------------===//

#include "TrainingFunction.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/StringExtras.h"

namespace zero {
#define GEN_PASS_DEF_ZEROADDLOSSPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace onnx = ::zero::onnx;
using ::zero::training::pickFunction;

namespace {

struct ZeroAddLossPass : public ::zero::impl::ZeroAddLossPassBase<ZeroAddLossPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = pickFunction(module, "", "zero-add-loss");
    if (!func)
      return signalPassFailure();
    if (kind != "cross-entropy" && kind != "causal-lm") {
      module.emitError() << "zero-add-loss: unknown loss '" << kind
                         << "'; the losses are cross-entropy and causal-lm";
      return signalPassFailure();
    }
    // The logits output.
    int64_t which = -1;
    SmallVector<std::string> names;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto n = func.getResultAttrOfType<StringAttr>(i, "onnx.name");
      names.push_back(n ? n.str() : "output" + std::to_string(i));
      if (!output.empty() && names.back() == output)
        which = i;
    }
    if (output.empty() && func.getNumResults() == 1)
      which = 0;
    if (which < 0) {
      std::string list = llvm::join(names, ", ");
      if (output.empty())
        module.emitError() << "zero-add-loss: the model has " << func.getNumResults()
                           << " outputs (" << list
                           << "); name the logits with --loss KIND:LABELS@OUTPUT";
      else
        module.emitError() << "zero-add-loss: the model has no output '" << output
                           << "' (outputs: " << list << ")";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Value logits = ret.getOperand(which);
    auto lt = cast<RankedTensorType>(logits.getType());
    if (!isa<FloatType>(lt.getElementType()) || lt.getRank() < 1 ||
        (kind == "causal-lm" && lt.getRank() != 3)) {
      module.emitError() << "zero-add-loss: output '" << names[which] << "' has type "
                         << lt << "; " << kind << " needs floating-point logits "
                         << (kind == "causal-lm" ? "[batch, seq, classes]"
                                                 : "[..., classes]");
      return signalPassFailure();
    }
    ArrayRef<int64_t> ls = lt.getShape();
    int64_t classes = ls.back();
    SmallVector<int64_t> labelShape(ls.drop_back());
    // The labels input: the one named, or a new one.
    Value labelsValue;
    Block &body = func.getBody().front();
    for (auto [i, arg] : llvm::enumerate(body.getArguments()))
      if (auto n = func.getArgAttrOfType<StringAttr>(i, "onnx.name"); n && n == labels)
        labelsValue = arg;
    if (labelsValue) {
      auto t = cast<RankedTensorType>(labelsValue.getType());
      if (!t.getElementType().isInteger(64) || t.getShape() != ArrayRef<int64_t>(labelShape)) {
        module.emitError() << "zero-add-loss: input '" << labels << "' has type " << t
                           << "; labels for logits " << lt << " must be "
                           << RankedTensorType::get(labelShape,
                                                    IntegerType::get(&getContext(), 64));
        return signalPassFailure();
      }
    } else {
      auto t = RankedTensorType::get(labelShape, IntegerType::get(&getContext(), 64));
      unsigned idx = func.getNumArguments();
      if (failed(func.insertArgument(idx, t,
                                     DictionaryAttr::get(&getContext(),
                                                         {NamedAttribute(
                                                             StringAttr::get(&getContext(), "onnx.name"),
                                                             StringAttr::get(&getContext(), labels))}),
                                     func.getLoc())))
        return signalPassFailure();
      labelsValue = body.getArgument(idx);
    }
    ImplicitLocOpBuilder b(NameLoc::get(StringAttr::get(&getContext(), "loss")), ret);
    Value scores = logits, target = labelsValue;
    if (kind == "causal-lm") {
      // Hugging Face's shift: position t predicts token t + 1.
      int64_t n = ls[0], s = ls[1];
      scores = onnx::SliceOp::create(b, logits, ArrayRef<int64_t>{0, 0, 0},
                                     ArrayRef<int64_t>{n, s - 1, classes},
                                     ArrayRef<int64_t>{1, 1, 1});
      target = onnx::SliceOp::create(b, labelsValue, ArrayRef<int64_t>{0, 1},
                                     ArrayRef<int64_t>{n, s}, ArrayRef<int64_t>{1, 1});
    }
    auto st = cast<RankedTensorType>(scores.getType());
    int64_t rows = st.getNumElements() / classes;
    scores = onnx::ReshapeOp::create(b, scores, ArrayRef<int64_t>{rows, classes});
    target = onnx::ReshapeOp::create(b, target, ArrayRef<int64_t>{rows});
    Value loss = onnx::SoftmaxCrossEntropyLossOp::create(
        b, RankedTensorType::get({}, lt.getElementType()), scores, target, Value(),
        b.getStringAttr("mean"), b.getI64IntegerAttr(ignoreIndex));
    ret->setOperand(which, loss);
    // Only the loss is returned.
    SmallVector<Value> keep{loss};
    func::ReturnOp::create(b, keep);
    ret.erase();
    SmallVector<DictionaryAttr> attrs{DictionaryAttr::get(
        &getContext(), {NamedAttribute(StringAttr::get(&getContext(), "onnx.name"),
                                       StringAttr::get(&getContext(), "loss"))})};
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(), {loss.getType()}));
    func.setAllResultAttrs(attrs);
  }
};

} // namespace
