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
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zero-add-loss"

namespace zero {
#define GEN_PASS_DEF_ZEROADDLOSSPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace onnx = ::zero::onnx;
using ::zero::training::pickFunction;

namespace {

/// Output `i`'s ONNX name, or "output<i>" when it has none.
std::string outputName(func::FuncOp func, unsigned i) {
  auto n = func.getResultAttrOfType<StringAttr>(i, "onnx.name");
  return n ? n.str() : "output" + std::to_string(i);
}

struct ZeroAddLossPass : public ::zero::impl::ZeroAddLossPassBase<ZeroAddLossPass> {
  using Base::Base;
  // A clone counts its own statistics (the options are copied by clonePass).
  ZeroAddLossPass(const ZeroAddLossPass &other) : Base(other) {}

  Statistic numLabelsAdded{this, "labels-inputs-added",
                           "Labels inputs added (the model had none of the name)"};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = pickFunction(module, "", "zero-add-loss");
    if (!func)
      return signalPassFailure();
    FailureOr<unsigned> which = findLogits(module, func);
    if (failed(which))
      return signalPassFailure();
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Value logits = ret.getOperand(*which);
    if (failed(checkLogits(module, outputName(func, *which), logits)))
      return signalPassFailure();
    FailureOr<Value> labelsValue = findOrAddLabels(module, func, logits);
    if (failed(labelsValue))
      return signalPassFailure();
    ImplicitLocOpBuilder b(NameLoc::get(StringAttr::get(&getContext(), "loss")), ret);
    Value loss = crossEntropy(b, logits, *labelsValue);
    ret->setOperand(*which, loss);
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

  /// The logits output: the one `output` names, else the only one.
  FailureOr<unsigned> findLogits(ModuleOp module, func::FuncOp func) {
    int64_t which = -1;
    SmallVector<std::string> names;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      names.push_back(outputName(func, i));
      if (!output.empty() && names.back() == output)
        which = i;
    }
    if (output.empty() && func.getNumResults() == 1)
      which = 0;
    if (which >= 0) {
      LLVM_DEBUG(llvm::dbgs() << "zero-add-loss: the logits are output " << which << " ('"
                              << names[which] << "')\n");
      return unsigned(which);
    }
    std::string list = llvm::join(names, ", ");
    if (output.empty())
      module.emitError() << "zero-add-loss: the model has " << func.getNumResults()
                         << " outputs (" << list
                         << "); name the logits with --loss KIND:LABELS@OUTPUT";
    else
      module.emitError() << "zero-add-loss: the model has no output '" << output
                         << "' (outputs: " << list << ")";
    return failure();
  }

  /// The logits are floating point with the classes last ([batch, seq,
  /// classes] for causal-lm).
  LogicalResult checkLogits(ModuleOp module, StringRef name, Value logits) {
    auto lt = cast<RankedTensorType>(logits.getType());
    if (isa<FloatType>(lt.getElementType()) && lt.getRank() >= 1 &&
        (kind != ::zero::LossKind::CausalLM || lt.getRank() == 3))
      return success();
    return module.emitError()
           << "zero-add-loss: output '" << name << "' has type " << lt << "; "
           << ::zero::stringifyEnum(kind.getValue())
           << " needs floating-point logits "
           << (kind == ::zero::LossKind::CausalLM ? "[batch, seq, classes]"
                                                  : "[..., classes]");
  }

  /// The labels input: the one named `labels`, which must be i64 of the
  /// logits' shape without the classes, or a new input of that type.
  FailureOr<Value> findOrAddLabels(ModuleOp module, func::FuncOp func, Value logits) {
    auto lt = cast<RankedTensorType>(logits.getType());
    SmallVector<int64_t> labelShape(lt.getShape().drop_back());
    auto labelType = RankedTensorType::get(labelShape, IntegerType::get(&getContext(), 64));
    Value labelsValue;
    Block &body = func.getBody().front();
    for (auto [i, arg] : llvm::enumerate(body.getArguments()))
      if (auto n = func.getArgAttrOfType<StringAttr>(i, "onnx.name"); n && n == labels)
        labelsValue = arg;
    if (labelsValue) {
      auto t = cast<RankedTensorType>(labelsValue.getType());
      if (!t.getElementType().isInteger(64) || t.getShape() != ArrayRef<int64_t>(labelShape))
        return module.emitError() << "zero-add-loss: input '" << labels << "' has type " << t
                                  << "; labels for logits " << lt << " must be " << labelType;
      return labelsValue;
    }
    unsigned idx = func.getNumArguments();
    auto name = NamedAttribute(StringAttr::get(&getContext(), "onnx.name"),
                               StringAttr::get(&getContext(), labels));
    if (failed(func.insertArgument(idx, labelType, DictionaryAttr::get(&getContext(), {name}),
                                   func.getLoc())))
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "zero-add-loss: added the labels input '" << labels << "'\n");
    ++numLabelsAdded;
    return body.getArgument(idx);
  }

  /// torch.nn.functional.cross_entropy (mean) of the logits' rows against the
  /// labels; causal-lm first shifts them as Hugging Face does.
  Value crossEntropy(ImplicitLocOpBuilder &b, Value logits, Value labelsValue) {
    auto lt = cast<RankedTensorType>(logits.getType());
    ArrayRef<int64_t> ls = lt.getShape();
    int64_t classes = ls.back();
    Value scores = logits, target = labelsValue;
    if (kind == ::zero::LossKind::CausalLM) {
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
    return onnx::SoftmaxCrossEntropyLossOp::create(
        b, RankedTensorType::get({}, lt.getElementType()), scores, target, Value(),
        b.getStringAttr("mean"), b.getI64IntegerAttr(ignoreIndex));
  }
};

} // namespace
