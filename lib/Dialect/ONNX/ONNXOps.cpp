//===- ONNXOps.cpp - Shape and type rules of the onnx ops -----------------===//
//
// Result-type inference for every onnx op, following ONNX's shape inference for
// static shapes. Because the ops use InferTypeOpAdaptor, the verifier compares
// each declared result type with the one computed here, so a wrong shape in
// hand-written IR is reported at the op. The importer builds ops through the
// same functions, which is how imported graphs get their static shapes.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/ONNX/ONNXDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace zero::onnx;

namespace {

RankedTensorType rankedType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

Type i1Type(MLIRContext *ctx) { return IntegerType::get(ctx, 1); }

bool isBool(Type t) { return t.isInteger(1); }

/// Numpy broadcast of several shapes, or failure with a message.
LogicalResult broadcastShapes(std::optional<Location> loc,
                              ArrayRef<ArrayRef<int64_t>> shapes,
                              SmallVectorImpl<int64_t> &out) {
  size_t rank = 0;
  for (auto s : shapes)
    rank = std::max(rank, s.size());
  out.assign(rank, 1);
  for (auto s : shapes) {
    size_t offset = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t &o = out[offset + i];
      if (o == 1)
        o = d;
      else if (d != 1 && d != o)
        return emitOptionalError(loc, "operand shapes are not broadcastable: "
                                      "dimension ",
                                 offset + i, " is ", o, " and ", d);
    }
  }
  return success();
}

LogicalResult broadcastOperands(std::optional<Location> loc, ValueRange values,
                                SmallVectorImpl<int64_t> &out) {
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value v : values)
    shapes.push_back(rankedType(v).getShape());
  return broadcastShapes(loc, shapes, out);
}

LogicalResult checkAxis(std::optional<Location> loc, int64_t axis, int64_t rank,
                        StringRef what = "axis") {
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, what, " ", axis,
                             " is out of range for a tensor of rank ", rank,
                             " (expected 0 <= ", what, " < rank)");
  return success();
}

LogicalResult checkSortedAxes(std::optional<Location> loc, ArrayRef<int64_t> axes,
                              int64_t rank, StringRef what) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (failed(checkAxis(loc, axes[i], rank, what)))
      return failure();
    if (i && axes[i] <= axes[i - 1])
      return emitOptionalError(loc, what,
                               " must be sorted and without duplicates");
  }
  return success();
}

LogicalResult sameElementType(std::optional<Location> loc, ValueRange values) {
  for (Value v : values.drop_front())
    if (getElementTypeOrSelf(v) != getElementTypeOrSelf(values.front()))
      return emitOptionalError(loc, "operands have different element types: ",
                               getElementTypeOrSelf(values.front()), " and ",
                               getElementTypeOrSelf(v));
  return success();
}

LogicalResult checkScatterReduction(std::optional<Location> loc, StringRef r) {
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return emitOptionalError(loc, "reduction must be none, add, mul, max or min, got \"",
                             r, "\"");
  return success();
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

} // namespace

//===----------------------------------------------------------------------===//
// Constant
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

namespace {
enum class BinaryKind { Arithmetic, Power, Compare, Logical };

LogicalResult inferBinary(MLIRContext *ctx, std::optional<Location> loc,
                          Value a, Value b, BinaryKind kind,
                          SmallVectorImpl<Type> &results) {
  if (kind != BinaryKind::Power && failed(sameElementType(loc, {a, b})))
    return failure();
  Type elem = getElementTypeOrSelf(a);
  if (kind == BinaryKind::Logical && !isBool(elem))
    return emitOptionalError(loc, "operands must be i1 tensors, got ", elem);
  SmallVector<int64_t> shape;
  if (failed(broadcastOperands(loc, {a, b}, shape)))
    return failure();
  Type resultElem =
      (kind == BinaryKind::Compare || kind == BinaryKind::Logical) ? i1Type(ctx)
                                                                   : elem;
  results.push_back(RankedTensorType::get(shape, resultElem));
  return success();
}
} // namespace

#define ZERO_BINARY_INFER(OP, KIND)                                            \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx,                         \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &results) {         \
    return inferBinary(ctx, loc, adaptor.getA(), adaptor.getB(),               \
                       BinaryKind::KIND, results);                             \
  }
ZERO_BINARY_INFER(AddOp, Arithmetic)
ZERO_BINARY_INFER(SubOp, Arithmetic)
ZERO_BINARY_INFER(MulOp, Arithmetic)
ZERO_BINARY_INFER(DivOp, Arithmetic)
ZERO_BINARY_INFER(MaxOp, Arithmetic)
ZERO_BINARY_INFER(MinOp, Arithmetic)
ZERO_BINARY_INFER(ModOp, Arithmetic)
ZERO_BINARY_INFER(PowOp, Power)
ZERO_BINARY_INFER(EqualOp, Compare)
ZERO_BINARY_INFER(LessOp, Compare)
ZERO_BINARY_INFER(LessOrEqualOp, Compare)
ZERO_BINARY_INFER(GreaterOp, Compare)
ZERO_BINARY_INFER(GreaterOrEqualOp, Compare)
ZERO_BINARY_INFER(AndOp, Logical)
ZERO_BINARY_INFER(OrOp, Logical)
ZERO_BINARY_INFER(XorOp, Logical)
#undef ZERO_BINARY_INFER

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  if (!isBool(getElementTypeOrSelf(adaptor.getCondition())))
    return emitOptionalError(loc, "condition must be an i1 tensor");
  if (failed(sameElementType(loc, {adaptor.getX(), adaptor.getY()})))
    return failure();
  SmallVector<int64_t> shape;
  if (failed(broadcastOperands(
          loc, {adaptor.getCondition(), adaptor.getX(), adaptor.getY()}, shape)))
    return failure();
  results.push_back(
      RankedTensorType::get(shape, getElementTypeOrSelf(adaptor.getX())));
  return success();
}

#define ZERO_UNARY_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location>,   \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &results) {         \
    results.push_back(adaptor.getX().getType());                               \
    return success();                                                          \
  }
ZERO_UNARY_INFER(NegOp)

LogicalResult TrainingDropoutOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                                  Adaptor adaptor,
                                                  SmallVectorImpl<Type> &results) {
  auto x = cast<ShapedType>(adaptor.getX().getType());
  results.push_back(x);
  results.push_back(x.clone(IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult TrainingDropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0 && ratio < 1))
    return emitOpError() << "ratio must be in [0, 1), got " << ratio;
  if (!isa<FloatType>(getElementTypeOrSelf(getX().getType())))
    return emitOpError() << "drops floating-point elements";
  if (Value step = getStep()) {
    auto t = cast<ShapedType>(step.getType());
    if (t.getRank() != 0 || !t.getElementType().isInteger(64))
      return emitOpError() << "step must be a 0-d i64 tensor";
  }
  return success();
}
ZERO_UNARY_INFER(AbsOp)
ZERO_UNARY_INFER(SqrtOp)
ZERO_UNARY_INFER(ReciprocalOp)
ZERO_UNARY_INFER(ExpOp)
ZERO_UNARY_INFER(LogOp)
ZERO_UNARY_INFER(TanhOp)
ZERO_UNARY_INFER(ErfOp)
ZERO_UNARY_INFER(SigmoidOp)
ZERO_UNARY_INFER(ReluOp)
ZERO_UNARY_INFER(SinOp)
ZERO_UNARY_INFER(CosOp)
ZERO_UNARY_INFER(TanOp)
ZERO_UNARY_INFER(AsinOp)
ZERO_UNARY_INFER(AcosOp)
ZERO_UNARY_INFER(AtanOp)
ZERO_UNARY_INFER(SinhOp)
ZERO_UNARY_INFER(CoshOp)
ZERO_UNARY_INFER(AsinhOp)
ZERO_UNARY_INFER(AcoshOp)
ZERO_UNARY_INFER(AtanhOp)
ZERO_UNARY_INFER(FloorOp)
ZERO_UNARY_INFER(CeilOp)
ZERO_UNARY_INFER(RoundOp)
ZERO_UNARY_INFER(SignOp)
ZERO_UNARY_INFER(SoftplusOp)
ZERO_UNARY_INFER(SoftsignOp)
ZERO_UNARY_INFER(NotOp)
ZERO_UNARY_INFER(IdentityOp)
ZERO_UNARY_INFER(DropoutOp)
ZERO_UNARY_INFER(HardSwishOp)
ZERO_UNARY_INFER(GeluOp)
ZERO_UNARY_INFER(LeakyReluOp)
ZERO_UNARY_INFER(EluOp)
ZERO_UNARY_INFER(CeluOp)
ZERO_UNARY_INFER(SeluOp)
ZERO_UNARY_INFER(ThresholdedReluOp)
ZERO_UNARY_INFER(HardSigmoidOp)
ZERO_UNARY_INFER(ClipOp)
#undef ZERO_UNARY_INFER

LogicalResult IsNaNOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  results.push_back(rankedType(adaptor.getX()).clone(i1Type(ctx)));
  return success();
}

LogicalResult IsInfOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  results.push_back(rankedType(adaptor.getX()).clone(i1Type(ctx)));
  return success();
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return success();
}

LogicalResult CastOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  results.push_back(rankedType(adaptor.getInput()).clone(adaptor.getTo()));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalisation
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  if (failed(sameElementType(loc, {adaptor.getA(), adaptor.getB()})))
    return failure();
  auto a = rankedType(adaptor.getA()), b = rankedType(adaptor.getB());
  SmallVector<int64_t> as(a.getShape()), bs(b.getShape());
  if (as.empty() || bs.empty())
    return emitOptionalError(loc, "MatMul operands must have rank >= 1");
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  int64_t k = as.back(), k2 = bs[bs.size() - 2];
  if (k != k2)
    return emitOptionalError(loc, "MatMul inner dimensions differ: A has ", k,
                             " columns, B has ", k2, " rows");
  SmallVector<int64_t> batch;
  ArrayRef<int64_t> ab = ArrayRef<int64_t>(as).drop_back(2);
  ArrayRef<int64_t> bb = ArrayRef<int64_t>(bs).drop_back(2);
  if (failed(broadcastShapes(loc, {ab, bb}, batch)))
    return failure();
  if (!aVec)
    batch.push_back(as[as.size() - 2]);
  if (!bVec)
    batch.push_back(bs.back());
  results.push_back(RankedTensorType::get(batch, a.getElementType()));
  return success();
}

namespace {
/// MatMul(X, Transpose(W)) with a 2-D W transposed ([1, 0]) is a Gemm with
/// transB = 1 on X's rows: no transposed copy of the weight is made (the
/// exporters emit this for tied LM heads and PyTorch Linear layers).
struct MatMulOfTransposedWeight : public OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rewriter) const override {
    auto transpose = op.getB().getDefiningOp<TransposeOp>();
    auto a = cast<RankedTensorType>(op.getA().getType());
    if (!transpose || a.getRank() < 2 ||
        transpose.getPerm() != ArrayRef<int64_t>{1, 0})
      return failure();
    Value w = transpose.getData();
    int64_t k = a.getShape().back();
    int64_t rows = a.getNumElements() / std::max<int64_t>(k, 1);
    Location loc = op.getLoc();
    // The new ops keep the MatMul's placement (zero.pipeline_stage,
    // zero.stream): where it ran, they run.
    auto placed = [&](Value v) {
      for (NamedAttribute attr : op->getDiscardableAttrs())
        v.getDefiningOp()->setAttr(attr.getName(), attr.getValue());
      return v;
    };
    Value x = op.getA();
    if (a.getRank() != 2)
      x = placed(ReshapeOp::create(rewriter, loc, x, ArrayRef<int64_t>{rows, k}));
    Value y = placed(GemmOp::create(rewriter, loc, x, w, Value(), rewriter.getF32FloatAttr(1.0f),
                                    rewriter.getF32FloatAttr(0.0f), rewriter.getI64IntegerAttr(0),
                                    rewriter.getI64IntegerAttr(1)));
    if (a.getRank() != 2)
      y = placed(ReshapeOp::create(rewriter, loc, y, op.getType().getShape()));
    rewriter.replaceOp(op, y);
    return success();
  }
};
} // namespace

void MatMulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<MatMulOfTransposedWeight>(context);
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  auto a = rankedType(adaptor.getA()), b = rankedType(adaptor.getB());
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOptionalError(loc, "Gemm operands A and B must be 2-D");
  int64_t m = adaptor.getTransA() ? a.getDimSize(1) : a.getDimSize(0);
  int64_t ka = adaptor.getTransA() ? a.getDimSize(0) : a.getDimSize(1);
  int64_t kb = adaptor.getTransB() ? b.getDimSize(1) : b.getDimSize(0);
  int64_t n = adaptor.getTransB() ? b.getDimSize(0) : b.getDimSize(1);
  if (ka != kb)
    return emitOptionalError(loc, "Gemm inner dimensions differ: ", ka, " vs ", kb);
  SmallVector<int64_t> shape{m, n};
  if (Value c = adaptor.getC()) {
    SmallVector<int64_t> out;
    if (failed(broadcastShapes(std::nullopt, {rankedType(c).getShape(), shape}, out)) ||
        out != shape)
      return emitOptionalError(loc, "Gemm C must broadcast to ", m, "x", n);
  }
  results.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

#define ZERO_AXIS_INFER(OP)                                                    \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &results) {         \
    auto t = rankedType(adaptor.getInput());                                   \
    if (failed(checkAxis(loc, adaptor.getAxis(), t.getRank())))                \
      return failure();                                                        \
    results.push_back(t);                                                      \
    return success();                                                          \
  }
ZERO_AXIS_INFER(SoftmaxOp)
ZERO_AXIS_INFER(LogSoftmaxOp)
#undef ZERO_AXIS_INFER

namespace {
/// Scale/bias of a normalisation must broadcast to the normalised dims.
LogicalResult inferNormalization(std::optional<Location> loc, Value x,
                                 ValueRange params, int64_t axis,
                                 SmallVectorImpl<Type> &results) {
  auto t = rankedType(x);
  if (failed(checkAxis(loc, axis, t.getRank())))
    return failure();
  ArrayRef<int64_t> normalized = t.getShape().drop_front(axis);
  for (Value p : params) {
    if (!p)
      continue;
    SmallVector<int64_t> out;
    if (failed(broadcastShapes(std::nullopt, {rankedType(p).getShape(), normalized}, out)) ||
        ArrayRef<int64_t>(out) != normalized)
      return emitOptionalError(loc, "scale/bias shape ", rankedType(p),
                               " does not broadcast to the normalised dims");
  }
  results.push_back(t);
  return success();
}
} // namespace

LogicalResult LayerNormalizationOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  return inferNormalization(loc, adaptor.getX(),
                            {adaptor.getScale(), adaptor.getB()},
                            adaptor.getAxis(), results);
}

LogicalResult RMSNormalizationOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  return inferNormalization(loc, adaptor.getX(), {adaptor.getScale()},
                            adaptor.getAxis(), results);
}

static LogicalResult inferLoss(std::optional<Location> loc, Value scoresValue,
                               Value labelsValue, StringRef reduction,
                               SmallVectorImpl<Type> &results) {
  auto scores = rankedType(scoresValue);
  auto labels = rankedType(labelsValue);
  if (scores.getRank() < 2)
    return emitOptionalError(loc, "scores must be [N, C, ...]");
  SmallVector<int64_t> expected{scores.getDimSize(0)};
  llvm::append_range(expected, scores.getShape().drop_front(2));
  if (labels.getShape() != ArrayRef<int64_t>(expected) ||
      !labels.getElementType().isInteger())
    return emitOptionalError(loc, "labels must be an integer tensor of shape [N, d...] matching scores");
  if (reduction == "none")
    results.push_back(RankedTensorType::get(expected, scores.getElementType()));
  else if (reduction == "mean" || reduction == "sum")
    results.push_back(RankedTensorType::get({}, scores.getElementType()));
  else
    return emitOptionalError(loc, "reduction must be none, mean or sum");
  return success();
}

LogicalResult SoftmaxCrossEntropyLossOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  return inferLoss(loc, adaptor.getScores(), adaptor.getLabels(), adaptor.getReduction(),
                   results);
}

LogicalResult NegativeLogLikelihoodLossOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  return inferLoss(loc, adaptor.getInput(), adaptor.getTarget(), adaptor.getReduction(),
                   results);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

namespace {
LogicalResult inferReduce(std::optional<Location> loc, Value data,
                          ArrayRef<int64_t> axes, bool keepdims, Type elem,
                          SmallVectorImpl<Type> &results,
                          StringRef what = "axes") {
  auto t = rankedType(data);
  if (axes.empty() && t.getRank() > 0)
    return emitOptionalError(loc, "axes must not be empty (list every axis to reduce all)");
  if (failed(checkSortedAxes(loc, axes, t.getRank(), what)))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    if (!llvm::is_contained(axes, d))
      shape.push_back(t.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  results.push_back(RankedTensorType::get(shape, elem ? elem : t.getElementType()));
  return success();
}
} // namespace

#define ZERO_REDUCE_INFER(OP)                                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &results) {         \
    return inferReduce(loc, adaptor.getData(), adaptor.getAxes(),              \
                       adaptor.getKeepdims(), Type(), results);                \
  }
ZERO_REDUCE_INFER(ReduceMeanOp)
ZERO_REDUCE_INFER(ReduceSumOp)
ZERO_REDUCE_INFER(ReduceMaxOp)
ZERO_REDUCE_INFER(ReduceMinOp)
ZERO_REDUCE_INFER(ReduceProdOp)
ZERO_REDUCE_INFER(ReduceL2Op)
ZERO_REDUCE_INFER(ReduceSumSquareOp)
ZERO_REDUCE_INFER(ReduceLogSumExpOp)
#undef ZERO_REDUCE_INFER

#define ZERO_ARG_INFER(OP)                                                     \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx,                         \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &results) {         \
    int64_t axis = adaptor.getAxis();                                          \
    return inferReduce(loc, adaptor.getData(), ArrayRef<int64_t>(axis),        \
                       adaptor.getKeepdims(), IntegerType::get(ctx, 64),       \
                       results, "axis");                                       \
  }
ZERO_ARG_INFER(ArgMaxOp)
ZERO_ARG_INFER(ArgMinOp)
#undef ZERO_ARG_INFER

LogicalResult CumSumOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getX());
  if (failed(checkAxis(loc, adaptor.getAxis(), t.getRank())))
    return failure();
  results.push_back(t);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getData());
  ArrayRef<int64_t> shape = adaptor.getShape();
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return emitOptionalError(loc, "shape must be fully resolved (no -1)");
  if (product(shape) != t.getNumElements())
    return emitOptionalError(loc, "cannot reshape ", t, " (", t.getNumElements(),
                             " elements) to ", product(shape), " elements");
  results.push_back(t.clone(shape));
  return success();
}

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis > t.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range [0, ", t.getRank(), "]");
  int64_t outer = product(t.getShape().take_front(axis));
  results.push_back(t.clone({outer, product(t.getShape().drop_front(axis))}));
  return success();
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getData());
  ArrayRef<int64_t> axes = adaptor.getAxes();
  int64_t outRank = t.getRank() + axes.size();
  if (failed(checkSortedAxes(loc, axes, outRank, "axes")))
    return failure();
  SmallVector<int64_t> shape;
  auto in = t.getShape().begin();
  for (int64_t d = 0; d < outRank; ++d)
    shape.push_back(llvm::is_contained(axes, d) ? 1 : *in++);
  results.push_back(t.clone(shape));
  return success();
}

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getData());
  ArrayRef<int64_t> axes = adaptor.getAxes();
  if (failed(checkSortedAxes(loc, axes, t.getRank(), "axes")))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    if (!llvm::is_contained(axes, d))
      shape.push_back(t.getDimSize(d));
    else if (t.getDimSize(d) != 1)
      return emitOptionalError(loc, "cannot squeeze dimension ", d, " of size ",
                               t.getDimSize(d));
  }
  results.push_back(t.clone(shape));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getData());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (int64_t(perm.size()) != t.getRank())
    return emitOptionalError(loc, "perm has ", perm.size(),
                             " entries for a tensor of rank ", t.getRank());
  llvm::SmallSet<int64_t, 8> seen;
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= t.getRank() || !seen.insert(p).second)
      return emitOptionalError(loc, "perm is not a permutation of [0, ", t.getRank(), ")");
    shape.push_back(t.getDimSize(p));
  }
  results.push_back(t.clone(shape));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitOptionalError(loc, "Concat needs at least one input");
  if (failed(sameElementType(loc, inputs)))
    return failure();
  auto first = rankedType(inputs.front());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : inputs) {
    auto t = rankedType(v);
    if (t.getRank() != first.getRank())
      return emitOptionalError(loc, "Concat inputs have different ranks");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "Concat inputs differ in dimension ", d);
    shape[axis] += t.getDimSize(axis);
  }
  results.push_back(first.clone(shape));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, t.getRank())))
    return failure();
  int64_t total = 0;
  for (int64_t s : adaptor.getSplit()) {
    if (s < 0)
      return emitOptionalError(loc, "split sizes must be non-negative");
    total += s;
  }
  if (total != t.getDimSize(axis))
    return emitOptionalError(loc, "split sizes sum to ", total, " but dimension ",
                             axis, " has ", t.getDimSize(axis));
  for (int64_t s : adaptor.getSplit()) {
    SmallVector<int64_t> shape(t.getShape());
    shape[axis] = s;
    results.push_back(t.clone(shape));
  }
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getData());
  ArrayRef<int64_t> starts = adaptor.getStarts(), ends = adaptor.getEnds(),
                    steps = adaptor.getSteps();
  if (int64_t(starts.size()) != t.getRank() || ends.size() != starts.size() ||
      steps.size() != starts.size())
    return emitOptionalError(loc, "starts, ends and steps must have one entry per dimension (", t.getRank(), ")");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    int64_t dim = t.getDimSize(d), s = starts[d], e = ends[d], step = steps[d];
    if (step == 0)
      return emitOptionalError(loc, "steps must be non-zero");
    if (s < 0 || s > dim || e < -1 || e > dim)
      return emitOptionalError(loc, "slice bounds [", s, ", ", e, ") of dimension ", d,
                               " are not normalised for size ", dim);
    int64_t n = step > 0 ? (e - s + step - 1) / step : (s - e - step - 1) / -step;
    shape.push_back(std::max<int64_t>(n, 0));
  }
  results.push_back(t.clone(shape));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, data.getRank())))
    return failure();
  if (!indices.getElementType().isInteger())
    return emitOptionalError(loc, "indices must be integers");
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  results.push_back(data.clone(shape));
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &results) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  if (failed(checkAxis(loc, adaptor.getAxis(), data.getRank())))
    return failure();
  if (indices.getRank() != data.getRank())
    return emitOptionalError(loc, "indices must have the rank of data");
  results.push_back(data.clone(indices.getShape()));
  return success();
}

LogicalResult ScatterElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                  Adaptor adaptor,
                                                  SmallVectorImpl<Type> &results) {
  auto data = rankedType(adaptor.getData());
  if (failed(checkAxis(loc, adaptor.getAxis(), data.getRank())))
    return failure();
  if (rankedType(adaptor.getIndices()).getShape() !=
      rankedType(adaptor.getUpdates()).getShape())
    return emitOptionalError(loc, "indices and updates must have the same shape");
  if (failed(checkScatterReduction(loc, adaptor.getReduction())))
    return failure();
  results.push_back(data);
  return success();
}

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  if (indices.getRank() < 1 || indices.getShape().back() > data.getRank())
    return emitOptionalError(loc, "indices must have rank >= 1 and a last dim <= rank of data");
  // updates = indices.shape[:-1] + data.shape[k:], k = indices.shape[-1].
  SmallVector<int64_t> expected(indices.getShape().drop_back());
  llvm::append_range(expected, data.getShape().drop_front(indices.getShape().back()));
  if (rankedType(adaptor.getUpdates()).getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(loc, "updates must have shape indices.shape[:-1] + "
                                  "data.shape[indices.shape[-1]:] (",
                             RankedTensorType::get(expected, data.getElementType()), ")");
  if (failed(checkScatterReduction(loc, adaptor.getReduction())))
    return failure();
  results.push_back(data);
  return success();
}

LogicalResult ExpandOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getInput());
  if (llvm::any_of(adaptor.getShape(), [](int64_t d) { return d < 0; }))
    return emitOptionalError(loc, "shape entries must be non-negative");
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(loc, {t.getShape(), adaptor.getShape()}, shape)))
    return failure();
  results.push_back(t.clone(shape));
  return success();
}

LogicalResult TileOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getInput());
  ArrayRef<int64_t> repeats = adaptor.getRepeats();
  if (int64_t(repeats.size()) != t.getRank())
    return emitOptionalError(loc, "repeats must have one entry per dimension");
  if (llvm::any_of(repeats, [](int64_t r) { return r < 0; }))
    return emitOptionalError(loc, "repeats must be non-negative");
  SmallVector<int64_t> shape;
  for (auto [d, r] : llvm::zip(t.getShape(), repeats))
    shape.push_back(d * r);
  results.push_back(t.clone(shape));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getData());
  ArrayRef<int64_t> pads = adaptor.getPads();
  if (int64_t(pads.size()) != 2 * t.getRank())
    return emitOptionalError(loc, "pads must have 2 * rank entries");
  StringRef mode = adaptor.getMode();
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    return emitOptionalError(loc, "mode \"", mode, "\" is not supported (constant, edge, reflect and wrap are)");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    int64_t n = t.getDimSize(d) + pads[d] + pads[d + t.getRank()];
    if (n < 0)
      return emitOptionalError(loc, "padding makes dimension ", d, " negative");
    shape.push_back(n);
  }
  results.push_back(t.clone(shape));
  return success();
}

LogicalResult TriluOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto t = rankedType(adaptor.getInput());
  if (t.getRank() < 2)
    return emitOptionalError(loc, "Trilu input must have rank >= 2");
  results.push_back(t);
  return success();
}

LogicalResult RangeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  for (Value v : {adaptor.getStart(), adaptor.getLimit(), adaptor.getDelta()})
    if (rankedType(v).getNumElements() != 1)
      return emitOptionalError(loc, "Range start, limit and delta must be scalars");
  if (failed(sameElementType(loc, {adaptor.getStart(), adaptor.getLimit(),
                                   adaptor.getDelta()})))
    return failure();
  int64_t size = adaptor.getSize(); // I64Attr getters return uint64_t.
  if (size < 0)
    return emitOptionalError(loc, "size must be non-negative");
  results.push_back(RankedTensorType::get(
      {size}, getElementTypeOrSelf(adaptor.getStart())));
  return success();
}

LogicalResult GatherNDOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  int64_t b = adaptor.getBatchDims();
  if (indices.getRank() < 1 || !indices.getElementType().isInteger())
    return emitOptionalError(loc, "indices must be an integer tensor of rank >= 1");
  int64_t k = indices.getShape().back();
  if (b < 0 || b >= std::min(data.getRank(), indices.getRank()) ||
      b + k > data.getRank())
    return emitOptionalError(loc, "batch_dims ", b, " and index depth ", k,
                             " do not fit data of rank ", data.getRank());
  for (int64_t d = 0; d < b; ++d)
    if (data.getDimSize(d) != indices.getDimSize(d))
      return emitOptionalError(loc, "batch dimension ", d, " differs between data and indices");
  SmallVector<int64_t> shape(indices.getShape().drop_back());
  llvm::append_range(shape, data.getShape().drop_front(b + k));
  results.push_back(data.clone(shape));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution, pooling and image ops
//===----------------------------------------------------------------------===//

namespace {
/// Checks the normalised spatial attributes of a conv or pool over `k`
/// spatial dims: strides and dilations positive with k entries, pads 2k.
LogicalResult checkWindowAttrs(std::optional<Location> loc, int64_t k,
                               ArrayRef<int64_t> strides,
                               ArrayRef<int64_t> dilations,
                               ArrayRef<int64_t> pads, bool negativePads = false) {
  if (int64_t(strides.size()) != k || int64_t(dilations.size()) != k ||
      int64_t(pads.size()) != 2 * k)
    return emitOptionalError(loc, "strides and dilations need ", k,
                             " entries and pads ", 2 * k, " (one per spatial dim), got ",
                             strides.size(), ", ", dilations.size(), " and ", pads.size());
  for (int64_t i = 0; i < k; ++i)
    if (strides[i] < 1 || dilations[i] < 1)
      return emitOptionalError(loc, "strides and dilations must be positive");
  if (!negativePads && llvm::any_of(pads, [](int64_t p) { return p < 0; }))
    return emitOptionalError(loc, "pads must be non-negative");
  return success();
}

/// The spatial output size of a window of `kernel` taps (dilated) sliding
/// by `stride` over `in` padded by `begin` and `end`; ceil_mode drops a last
/// window that would start in the end padding.
int64_t windowCount(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                    int64_t begin, int64_t end, bool ceilMode) {
  int64_t span = in + begin + end - ((kernel - 1) * dilation + 1);
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + begin)
    --out;
  return out;
}

LogicalResult inferConv(std::optional<Location> loc, Value xv, Value wv, Value bv,
                        int64_t group, ArrayRef<int64_t> strides,
                        ArrayRef<int64_t> dilations, ArrayRef<int64_t> pads,
                        bool transposed, SmallVectorImpl<Type> &results) {
  auto x = rankedType(xv), w = rankedType(wv);
  if (x.getRank() < 3 || w.getRank() != x.getRank())
    return emitOptionalError(loc, "X must be [N, C, D1, ...] (rank >= 3) and W of "
                                  "the same rank, got ",
                             x, " and ", w);
  if (failed(sameElementType(loc, {xv, wv})))
    return failure();
  int64_t k = x.getRank() - 2;
  if (failed(checkWindowAttrs(loc, k, strides, dilations, pads, transposed)))
    return failure();
  int64_t c = x.getDimSize(1);
  if (group < 1 || c % group)
    return emitOptionalError(loc, "group ", group, " must be positive and divide the ",
                             c, " input channels");
  int64_t m;
  if (transposed) {
    if (w.getDimSize(0) != c)
      return emitOptionalError(loc, "W must have the input's ", c,
                               " channels as its first dim, got ", w);
    m = w.getDimSize(1) * group;
  } else {
    if (w.getDimSize(1) * group != c || w.getDimSize(0) % group)
      return emitOptionalError(loc, "W must be [M, C/group, ...] with M divisible by group ",
                               group, "; got ", w, " for ", c, " input channels");
    m = w.getDimSize(0);
  }
  if (bv) {
    auto b = rankedType(bv);
    if (b.getRank() != 1 || b.getDimSize(0) != m || b.getElementType() != x.getElementType())
      return emitOptionalError(loc, "B must be a vector of the ", m,
                               " output channels of X's element type, got ", b);
  }
  SmallVector<int64_t> shape{x.getDimSize(0), m};
  for (int64_t i = 0; i < k; ++i) {
    int64_t in = x.getDimSize(2 + i), kern = w.getDimSize(2 + i);
    int64_t extent = (kern - 1) * dilations[i] + 1;
    int64_t out = transposed
                      ? strides[i] * (in - 1) + extent - pads[i] - pads[k + i]
                      : windowCount(in, kern, strides[i], dilations[i], pads[i],
                                    pads[k + i], false);
    if (out < 1)
      return emitOptionalError(loc, "spatial dim ", i, " has no output: input ", in,
                               ", kernel ", kern, ", dilation ", dilations[i],
                               ", pads ", pads[i], "+", pads[k + i]);
    shape.push_back(out);
  }
  results.push_back(x.clone(shape));
  return success();
}
} // namespace

LogicalResult ConvOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &results) {
  return inferConv(loc, adaptor.getX(), adaptor.getW(), adaptor.getB(), adaptor.getGroup(),
                   adaptor.getStrides(), adaptor.getDilations(), adaptor.getPads(),
                   /*transposed=*/false, results);
}

LogicalResult ConvTransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &results) {
  return inferConv(loc, adaptor.getX(), adaptor.getW(), adaptor.getB(), adaptor.getGroup(),
                   adaptor.getStrides(), adaptor.getDilations(), adaptor.getPads(),
                   /*transposed=*/true, results);
}

namespace {
template <typename Adaptor>
LogicalResult inferPool(std::optional<Location> loc, Adaptor adaptor,
                        SmallVectorImpl<Type> &results) {
  auto x = rankedType(adaptor.getX());
  if (x.getRank() < 3)
    return emitOptionalError(loc, "X must be [N, C, D1, ...] (rank >= 3), got ", x);
  int64_t k = x.getRank() - 2;
  ArrayRef<int64_t> kernel = adaptor.getKernelShape();
  if (int64_t(kernel.size()) != k || llvm::any_of(kernel, [](int64_t v) { return v < 1; }))
    return emitOptionalError(loc, "kernel_shape needs ", k, " positive entries");
  ArrayRef<int64_t> strides = adaptor.getStrides(), dilations = adaptor.getDilations(),
                    pads = adaptor.getPads();
  if (failed(checkWindowAttrs(loc, k, strides, dilations, pads)))
    return failure();
  SmallVector<int64_t> shape{x.getDimSize(0), x.getDimSize(1)};
  for (int64_t i = 0; i < k; ++i) {
    if (pads[i] >= (kernel[i] - 1) * dilations[i] + 1 ||
        pads[k + i] >= (kernel[i] - 1) * dilations[i] + 1)
      return emitOptionalError(loc, "pads must be smaller than the (dilated) kernel");
    int64_t out = windowCount(x.getDimSize(2 + i), kernel[i], strides[i], dilations[i],
                              pads[i], pads[k + i], adaptor.getCeilMode() != 0);
    if (out < 1)
      return emitOptionalError(loc, "spatial dim ", i, " (", x.getDimSize(2 + i),
                               ") is smaller than the window");
    shape.push_back(out);
  }
  results.push_back(x.clone(shape));
  return success();
}
} // namespace

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &results) {
  return inferPool(loc, adaptor, results);
}

LogicalResult AveragePoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  return inferPool(loc, adaptor, results);
}

LogicalResult MaxPoolGradOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  results.push_back(adaptor.getX().getType());
  return success();
}

LogicalResult MaxPoolGradOp::verify() {
  // dY must be what MaxPool makes of X with these attributes.
  SmallVector<Type> pooled;
  if (failed(inferPool(getLoc(), Adaptor(*this), pooled)))
    return failure();
  if (pooled[0] != getDY().getType())
    return emitOpError() << "dY is " << getDY().getType() << " but MaxPool of X gives "
                         << pooled[0];
  return success();
}

LogicalResult BatchNormalizationOp::inferReturnTypes(MLIRContext *,
                                                     std::optional<Location> loc,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type> &results) {
  auto x = rankedType(adaptor.getX());
  if (x.getRank() < 2)
    return emitOptionalError(loc, "X must be [N, C, ...] (rank >= 2), got ", x);
  for (Value p : {adaptor.getScale(), adaptor.getB(), adaptor.getInputMean(),
                  adaptor.getInputVar()}) {
    auto t = rankedType(p);
    if (t.getRank() != 1 || t.getDimSize(0) != x.getDimSize(1))
      return emitOptionalError(loc, "scale, B, mean and var must be vectors of the ",
                               x.getDimSize(1), " channels, got ", t);
  }
  results.push_back(x);
  return success();
}

LogicalResult ResizeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto x = rankedType(adaptor.getX());
  ArrayRef<double> scales = adaptor.getScales();
  ArrayRef<int64_t> sizes = adaptor.getSizes();
  if (int64_t(scales.size()) != x.getRank() || int64_t(sizes.size()) != x.getRank())
    return emitOptionalError(loc, "scales and sizes need one entry per dim (", x.getRank(),
                             "), got ", scales.size(), " and ", sizes.size());
  if (llvm::any_of(scales, [](double s) { return !(s > 0); }) ||
      llvm::any_of(sizes, [](int64_t s) { return s < 0; }))
    return emitOptionalError(loc, "scales must be positive and sizes non-negative");
  StringRef mode = adaptor.getMode(), ctm = adaptor.getCoordinateTransformationMode(),
            nearest = adaptor.getNearestMode();
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return emitOptionalError(loc, "mode \"", mode, "\" is not nearest, linear or cubic");
  if (!llvm::is_contained({"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                           "align_corners", "asymmetric", "tf_crop_and_resize"},
                          ctm))
    return emitOptionalError(loc, "coordinate_transformation_mode \"", ctm,
                             "\" is not supported");
  if (!llvm::is_contained({"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"},
                          nearest))
    return emitOptionalError(loc, "nearest_mode \"", nearest, "\" is not supported");
  if (auto roi = adaptor.getRoi(); roi && int64_t(roi->size()) != 2 * x.getRank())
    return emitOptionalError(loc, "roi needs 2 * rank entries");
  if (ctm == "tf_crop_and_resize" && !adaptor.getRoi())
    return emitOptionalError(loc, "tf_crop_and_resize needs roi");
  if (!isa<FloatType>(x.getElementType()) && mode != "nearest")
    return emitOptionalError(loc, "mode \"", mode, "\" needs a floating-point X, got ", x);
  results.push_back(x.clone(sizes));
  return success();
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto x = rankedType(adaptor.getX());
  int64_t axis = adaptor.getAxis(), k = adaptor.getK();
  if (failed(checkAxis(loc, axis, x.getRank())))
    return failure();
  if (k < 0 || k > x.getDimSize(axis))
    return emitOptionalError(loc, "k ", k, " must be in [0, ", x.getDimSize(axis),
                             "] (the size of axis ", axis, ")");
  SmallVector<int64_t> shape(x.getShape());
  shape[axis] = k;
  results.push_back(x.clone(shape));
  results.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult OneHotOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto indices = rankedType(adaptor.getIndices());
  auto values = rankedType(adaptor.getValues());
  if (values.getNumElements() != 2)
    return emitOptionalError(loc, "values must hold two elements (off, on), got ", values);
  int64_t depth = adaptor.getDepth(), axis = adaptor.getAxis();
  if (depth < 1)
    return emitOptionalError(loc, "depth must be positive, got ", depth);
  if (failed(checkAxis(loc, axis, indices.getRank() + 1)))
    return failure();
  SmallVector<int64_t> shape(indices.getShape());
  shape.insert(shape.begin() + axis, depth);
  results.push_back(RankedTensorType::get(shape, values.getElementType()));
  return success();
}

#define GET_OP_CLASSES
#include "zero/Dialect/ONNX/ONNXOps.cpp.inc"
