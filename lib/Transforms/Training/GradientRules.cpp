//===- GradientRules.cpp - Reverse rules of the onnx ops -------------------===//
//
// One entry per onnx op in `kRules` (the table at the end), each a function
// from the gradients of the op's results to those of its operands, written
// with onnx ops, like onnxruntime training's gradient builder registry. The
// formulas are PyTorch's autograd formulas (tools/autograd/derivatives.yaml)
// so that a trained model follows PyTorch's arithmetic closely:
//  - broadcasting: a gradient is summed over the axes its operand was
//    broadcast along (`sumTo`);
//  - normalisations recompute their statistics from the saved input rather
//    than keeping them alive from forward.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"

#include "zero/Dialect/ONNX/ONNXDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>

using namespace mlir;
namespace onnx = ::zero::onnx;

namespace zero {
namespace autodiff {
namespace {

RankedTensorType tt(Value v) { return cast<RankedTensorType>(v.getType()); }
Type elem(Value v) { return tt(v).getElementType(); }

/// A scalar constant of element type `type`.
Value scalar(ImplicitLocOpBuilder &b, double v, Type type) {
  auto t = RankedTensorType::get({}, type);
  Attribute a = isa<FloatType>(type) ? Attribute(FloatAttr::get(type, v))
                                     : Attribute(IntegerAttr::get(type, int64_t(v)));
  return onnx::ConstantOp::create(b, t, DenseElementsAttr::get(t, a));
}

/// Zeros of type `t` (the lowering turns large splats into Fill kernels).
Value zeros(ImplicitLocOpBuilder &b, RankedTensorType t) {
  Attribute z = isa<FloatType>(t.getElementType())
                    ? Attribute(FloatAttr::get(t.getElementType(), 0.0))
                    : Attribute(IntegerAttr::get(t.getElementType(), 0));
  return onnx::ConstantOp::create(b, t, DenseElementsAttr::get(t, z));
}

Value add(ImplicitLocOpBuilder &b, Value x, Value y) { return onnx::AddOp::create(b, x, y); }
Value sub(ImplicitLocOpBuilder &b, Value x, Value y) { return onnx::SubOp::create(b, x, y); }
Value mul(ImplicitLocOpBuilder &b, Value x, Value y) { return onnx::MulOp::create(b, x, y); }
Value div(ImplicitLocOpBuilder &b, Value x, Value y) { return onnx::DivOp::create(b, x, y); }
Value neg(ImplicitLocOpBuilder &b, Value x) { return onnx::NegOp::create(b, x); }
Value mulc(ImplicitLocOpBuilder &b, Value x, double c) {
  return mul(b, x, scalar(b, c, elem(x)));
}
Value reshape(ImplicitLocOpBuilder &b, Value x, ArrayRef<int64_t> shape) {
  if (tt(x).getShape() == shape)
    return x;
  return onnx::ReshapeOp::create(b, x, shape);
}
Value transpose(ImplicitLocOpBuilder &b, Value x, ArrayRef<int64_t> perm) {
  return onnx::TransposeOp::create(b, x, perm);
}
/// Swaps the last two dims.
Value transposeLast2(ImplicitLocOpBuilder &b, Value x) {
  int64_t r = tt(x).getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, r));
  std::swap(perm[r - 1], perm[r - 2]);
  return transpose(b, x, perm);
}
Value castTo(ImplicitLocOpBuilder &b, Value x, Type to) {
  auto t = RankedTensorType::get(tt(x).getShape(), to);
  return onnx::CastOp::create(b, t, x, TypeAttr::get(to));
}
Value reduceSum(ImplicitLocOpBuilder &b, Value x, ArrayRef<int64_t> axes, bool keep) {
  return onnx::ReduceSumOp::create(b, x, axes, keep ? 1 : 0);
}
Value reduceMean(ImplicitLocOpBuilder &b, Value x, ArrayRef<int64_t> axes) {
  return onnx::ReduceMeanOp::create(b, x, axes, 1);
}
SmallVector<int64_t> range(int64_t lo, int64_t hi) {
  return llvm::to_vector(llvm::seq<int64_t>(lo, hi));
}
int64_t normAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

/// `g` summed down to `target`'s shape: over the leading axes `target` lacks
/// and the axes where `target` has 1 (numpy broadcasting in reverse).
Value sumTo(ImplicitLocOpBuilder &b, Value g, RankedTensorType target) {
  ArrayRef<int64_t> gs = tt(g).getShape(), ts = target.getShape();
  if (gs == ts)
    return g;
  int64_t lead = int64_t(gs.size()) - int64_t(ts.size());
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < int64_t(gs.size()); ++i)
    if (i < lead || (ts[i - lead] == 1 && gs[i] != 1))
      axes.push_back(i);
  Value r = axes.empty() ? g : reduceSum(b, g, axes, /*keep=*/true);
  return reshape(b, r, ts);
}
Value sumTo(ImplicitLocOpBuilder &b, Value g, Value like) { return sumTo(b, g, tt(like)); }

Value result(RuleArgs &a, unsigned i = 0) { return a.op->getResult(i); }
Value operand(RuleArgs &a, unsigned i) { return a.op->getOperand(i); }
bool needs(RuleArgs &a, unsigned i) { return i < a.needs.size() && a.needs[i]; }
void set(RuleArgs &a, unsigned i, Value g) {
  if (needs(a, i))
    a.dIns[i] = g;
}

//===-- elementwise ---------------------------------------------------------===//

LogicalResult addRule(RuleArgs &a) {
  Value dy = a.dOuts[0];
  if (needs(a, 0))
    set(a, 0, sumTo(a.b, dy, operand(a, 0)));
  if (needs(a, 1))
    set(a, 1, sumTo(a.b, dy, operand(a, 1)));
  return success();
}

LogicalResult subRule(RuleArgs &a) {
  Value dy = a.dOuts[0];
  if (needs(a, 0))
    set(a, 0, sumTo(a.b, dy, operand(a, 0)));
  if (needs(a, 1))
    set(a, 1, sumTo(a.b, neg(a.b, dy), operand(a, 1)));
  return success();
}

LogicalResult mulRule(RuleArgs &a) {
  Value dy = a.dOuts[0], x = operand(a, 0), y = operand(a, 1);
  if (needs(a, 0))
    set(a, 0, sumTo(a.b, mul(a.b, dy, y), x));
  if (needs(a, 1))
    set(a, 1, sumTo(a.b, mul(a.b, dy, x), y));
  return success();
}

LogicalResult divRule(RuleArgs &a) {
  // d(x/y) = dy / y;  -dy * x / (y * y), written as PyTorch does.
  Value dy = a.dOuts[0], x = operand(a, 0), y = operand(a, 1);
  if (needs(a, 0))
    set(a, 0, sumTo(a.b, div(a.b, dy, y), x));
  if (needs(a, 1))
    set(a, 1, sumTo(a.b, div(a.b, mul(a.b, neg(a.b, dy), x), mul(a.b, y, y)), y));
  return success();
}

LogicalResult powRule(RuleArgs &a) {
  Value dy = a.dOuts[0], x = operand(a, 0), e = operand(a, 1);
  if (elem(e) != elem(x) && needs(a, 0))
    e = castTo(a.b, e, elem(x));
  if (needs(a, 0)) {
    // dy * e * x^(e - 1)
    Value em1 = sub(a.b, e, scalar(a.b, 1.0, elem(e)));
    Value d = mul(a.b, mul(a.b, dy, e), onnx::PowOp::create(a.b, x, em1));
    set(a, 0, sumTo(a.b, d, x));
  }
  if (needs(a, 1)) {
    // dy * x^e * log(x)
    Value d = mul(a.b, mul(a.b, dy, result(a)), onnx::LogOp::create(a.b, x));
    set(a, 1, sumTo(a.b, d, operand(a, 1)));
  }
  return success();
}

LogicalResult negRule(RuleArgs &a) {
  set(a, 0, neg(a.b, a.dOuts[0]));
  return success();
}
LogicalResult sqrtRule(RuleArgs &a) {
  set(a, 0, div(a.b, a.dOuts[0], mulc(a.b, result(a), 2.0)));
  return success();
}
LogicalResult reciprocalRule(RuleArgs &a) {
  Value y = result(a);
  set(a, 0, mul(a.b, neg(a.b, a.dOuts[0]), mul(a.b, y, y)));
  return success();
}
LogicalResult expRule(RuleArgs &a) {
  set(a, 0, mul(a.b, a.dOuts[0], result(a)));
  return success();
}
LogicalResult logRule(RuleArgs &a) {
  set(a, 0, div(a.b, a.dOuts[0], operand(a, 0)));
  return success();
}
LogicalResult tanhRule(RuleArgs &a) {
  Value y = result(a);
  Value one = scalar(a.b, 1.0, elem(y));
  set(a, 0, mul(a.b, a.dOuts[0], sub(a.b, one, mul(a.b, y, y))));
  return success();
}
LogicalResult sigmoidRule(RuleArgs &a) {
  Value y = result(a);
  Value one = scalar(a.b, 1.0, elem(y));
  set(a, 0, mul(a.b, a.dOuts[0], mul(a.b, sub(a.b, one, y), y)));
  return success();
}
LogicalResult erfRule(RuleArgs &a) {
  // 2/sqrt(pi) * exp(-x^2) * dy
  Value x = operand(a, 0);
  Value e = onnx::ExpOp::create(a.b, neg(a.b, mul(a.b, x, x)));
  set(a, 0, mul(a.b, mulc(a.b, e, 2.0 / std::sqrt(M_PI)), a.dOuts[0]));
  return success();
}
LogicalResult reluRule(RuleArgs &a) {
  Value y = result(a);
  Value pos = onnx::GreaterOp::create(a.b, y, scalar(a.b, 0.0, elem(y)));
  set(a, 0, onnx::WhereOp::create(a.b, pos, a.dOuts[0], scalar(a.b, 0.0, elem(y))));
  return success();
}
LogicalResult trainingDropoutRule(RuleArgs &a) {
  // dx = dy / (1 - ratio) where the forward kept the element, else 0: the
  // forward's own mask, so both directions drop the same elements.
  auto d = cast<onnx::TrainingDropoutOp>(a.op);
  Value dy = a.dOuts[0];
  double keep = 1.0 - d.getRatio().convertToDouble();
  set(a, 0, onnx::WhereOp::create(a.b, d.getMask(), mulc(a.b, dy, 1.0 / keep),
                                  scalar(a.b, 0.0, elem(dy))));
  return success();
}
LogicalResult leakyReluRule(RuleArgs &a) {
  Value x = operand(a, 0), dy = a.dOuts[0];
  double alpha = a.op->getAttrOfType<FloatAttr>("alpha").getValueAsDouble();
  Value pos = onnx::GreaterOp::create(a.b, x, scalar(a.b, 0.0, elem(x)));
  set(a, 0, onnx::WhereOp::create(a.b, pos, dy, mulc(a.b, dy, alpha)));
  return success();
}
/// dy * D(x) for an onnx unary op D: the rules of Abs (Sign), Sin (Cos),
/// Sinh (Cosh) and Cosh (Sinh).
template <typename D> LogicalResult timesDerivativeRule(RuleArgs &a) {
  set(a, 0, mul(a.b, a.dOuts[0], D::create(a.b, operand(a, 0))));
  return success();
}
LogicalResult cosRule(RuleArgs &a) {
  set(a, 0, mul(a.b, neg(a.b, a.dOuts[0]), onnx::SinOp::create(a.b, operand(a, 0))));
  return success();
}
LogicalResult tanRule(RuleArgs &a) {
  // 1 + tan(x)^2, from the result.
  Value y = result(a);
  set(a, 0, mul(a.b, a.dOuts[0], add(a.b, mul(a.b, y, y), scalar(a.b, 1.0, elem(y)))));
  return success();
}
/// dy / sqrt(c + s * x^2): the inverse trigonometric and hyperbolic rules.
Value overSqrt(ImplicitLocOpBuilder &b, Value dy, Value x, double c, double s) {
  Value x2 = mul(b, x, x);
  Value inner = add(b, scalar(b, c, elem(x)), s == 1.0 ? x2 : mulc(b, x2, s));
  return div(b, dy, onnx::SqrtOp::create(b, inner));
}
LogicalResult asinRule(RuleArgs &a) {
  set(a, 0, overSqrt(a.b, a.dOuts[0], operand(a, 0), 1.0, -1.0));
  return success();
}
LogicalResult acosRule(RuleArgs &a) {
  set(a, 0, overSqrt(a.b, neg(a.b, a.dOuts[0]), operand(a, 0), 1.0, -1.0));
  return success();
}
LogicalResult asinhRule(RuleArgs &a) {
  set(a, 0, overSqrt(a.b, a.dOuts[0], operand(a, 0), 1.0, 1.0));
  return success();
}
LogicalResult acoshRule(RuleArgs &a) {
  set(a, 0, overSqrt(a.b, a.dOuts[0], operand(a, 0), -1.0, 1.0));
  return success();
}
LogicalResult atanRule(RuleArgs &a) {
  Value x = operand(a, 0);
  set(a, 0, div(a.b, a.dOuts[0], add(a.b, scalar(a.b, 1.0, elem(x)), mul(a.b, x, x))));
  return success();
}
LogicalResult atanhRule(RuleArgs &a) {
  Value x = operand(a, 0);
  set(a, 0, div(a.b, a.dOuts[0], sub(a.b, scalar(a.b, 1.0, elem(x)), mul(a.b, x, x))));
  return success();
}
LogicalResult softsignRule(RuleArgs &a) {
  // 1 / (1 + |x|)^2
  Value x = operand(a, 0);
  Value d = add(a.b, scalar(a.b, 1.0, elem(x)), onnx::AbsOp::create(a.b, x));
  set(a, 0, div(a.b, a.dOuts[0], mul(a.b, d, d)));
  return success();
}
LogicalResult softplusRule(RuleArgs &a) {
  set(a, 0, mul(a.b, a.dOuts[0], onnx::SigmoidOp::create(a.b, operand(a, 0))));
  return success();
}

LogicalResult eluRule(RuleArgs &a) {
  // elu_backward: dy where x > 0, else dy * alpha * exp(x).
  Value x = operand(a, 0), dy = a.dOuts[0];
  double alpha = a.op->getAttrOfType<FloatAttr>("alpha").getValueAsDouble();
  Value pos = onnx::GreaterOp::create(a.b, x, scalar(a.b, 0.0, elem(x)));
  Value neg = mul(a.b, dy, mulc(a.b, onnx::ExpOp::create(a.b, x), alpha));
  set(a, 0, onnx::WhereOp::create(a.b, pos, dy, neg));
  return success();
}
LogicalResult celuRule(RuleArgs &a) {
  // dy where x > 0, else dy * exp(x / alpha).
  Value x = operand(a, 0), dy = a.dOuts[0];
  double alpha = a.op->getAttrOfType<FloatAttr>("alpha").getValueAsDouble();
  Value pos = onnx::GreaterOp::create(a.b, x, scalar(a.b, 0.0, elem(x)));
  Value neg = mul(a.b, dy, onnx::ExpOp::create(a.b, mulc(a.b, x, 1.0 / alpha)));
  set(a, 0, onnx::WhereOp::create(a.b, pos, dy, neg));
  return success();
}
LogicalResult seluRule(RuleArgs &a) {
  // gamma * dy where x > 0, else gamma * alpha * exp(x) * dy.
  Value x = operand(a, 0), dy = a.dOuts[0];
  double alpha = a.op->getAttrOfType<FloatAttr>("alpha").getValueAsDouble();
  double gamma = a.op->getAttrOfType<FloatAttr>("gamma").getValueAsDouble();
  Value pos = onnx::GreaterOp::create(a.b, x, scalar(a.b, 0.0, elem(x)));
  Value neg = mul(a.b, dy, mulc(a.b, onnx::ExpOp::create(a.b, x), alpha * gamma));
  set(a, 0, onnx::WhereOp::create(a.b, pos, mulc(a.b, dy, gamma), neg));
  return success();
}
LogicalResult thresholdedReluRule(RuleArgs &a) {
  Value x = operand(a, 0), dy = a.dOuts[0];
  double alpha = a.op->getAttrOfType<FloatAttr>("alpha").getValueAsDouble();
  Value keep = onnx::GreaterOp::create(a.b, x, scalar(a.b, alpha, elem(x)));
  set(a, 0, onnx::WhereOp::create(a.b, keep, dy, zeros(a.b, tt(dy))));
  return success();
}
LogicalResult hardSigmoidRule(RuleArgs &a) {
  // hardsigmoid_backward: dy * alpha where 0 < alpha * x + beta < 1, else 0.
  ImplicitLocOpBuilder &b = a.b;
  Value x = operand(a, 0), dy = a.dOuts[0];
  double alpha = a.op->getAttrOfType<FloatAttr>("alpha").getValueAsDouble();
  double beta = a.op->getAttrOfType<FloatAttr>("beta").getValueAsDouble();
  Value t = add(b, mulc(b, x, alpha), scalar(b, beta, elem(x)));
  Value inside = onnx::AndOp::create(b, onnx::GreaterOp::create(b, t, scalar(b, 0.0, elem(x))),
                                     onnx::LessOp::create(b, t, scalar(b, 1.0, elem(x))));
  set(a, 0, onnx::WhereOp::create(b, inside, mulc(b, dy, alpha), scalar(b, 0.0, elem(x))));
  return success();
}
LogicalResult hardSwishRule(RuleArgs &a) {
  // hardswish_backward: 0 for x < -3, dy * (x / 3 + 1/2) up to 3, dy above.
  ImplicitLocOpBuilder &b = a.b;
  Value x = operand(a, 0), dy = a.dOuts[0];
  Type t = elem(x);
  Value mid = mul(b, dy, add(b, div(b, x, scalar(b, 3.0, t)), scalar(b, 0.5, t)));
  Value upper = onnx::WhereOp::create(
      b, onnx::LessOrEqualOp::create(b, x, scalar(b, 3.0, t)), mid, dy);
  set(a, 0, onnx::WhereOp::create(b, onnx::LessOp::create(b, x, scalar(b, -3.0, t)),
                                  scalar(b, 0.0, t), upper));
  return success();
}
LogicalResult clipRule(RuleArgs &a) {
  // clamp's backward: dy where min <= x <= max (both ends included), else 0.
  auto clip = cast<onnx::ClipOp>(a.op);
  Value x = operand(a, 0), dy = a.dOuts[0];
  Value keep;
  if (auto lo = clip.getMin())
    keep = onnx::GreaterOrEqualOp::create(a.b, x, scalar(a.b, lo->convertToDouble(), elem(x)));
  if (auto hi = clip.getMax()) {
    Value below = onnx::LessOrEqualOp::create(a.b, x, scalar(a.b, hi->convertToDouble(), elem(x)));
    keep = keep ? Value(onnx::AndOp::create(a.b, keep, below)) : below;
  }
  set(a, 0, keep ? Value(onnx::WhereOp::create(a.b, keep, dy, scalar(a.b, 0.0, elem(x))))
                 : dy);
  return success();
}
/// Floor, Ceil, Round, Sign: piecewise constant, a zero gradient (PyTorch's).
LogicalResult zeroGradientRule(RuleArgs &a) {
  set(a, 0, zeros(a.b, tt(operand(a, 0))));
  return success();
}
/// PyTorch's maximum / minimum: the gradient goes to the operand that wins,
/// half to each where they are equal.
LogicalResult maxMinRule(RuleArgs &a, bool isMax) {
  ImplicitLocOpBuilder &b = a.b;
  Value x = operand(a, 0), y = operand(a, 1), dy = a.dOuts[0];
  Value zero = scalar(b, 0.0, elem(dy));
  Value tie = onnx::EqualOp::create(b, x, y);
  Value half = mulc(b, dy, 0.5);
  Value xWins = isMax ? Value(onnx::GreaterOp::create(b, x, y)) : onnx::LessOp::create(b, x, y);
  Value yWins = isMax ? Value(onnx::LessOp::create(b, x, y)) : onnx::GreaterOp::create(b, x, y);
  if (needs(a, 0))
    set(a, 0, sumTo(b, onnx::WhereOp::create(b, tie, half, onnx::WhereOp::create(b, xWins, dy, zero)), x));
  if (needs(a, 1))
    set(a, 1, sumTo(b, onnx::WhereOp::create(b, tie, half, onnx::WhereOp::create(b, yWins, dy, zero)), y));
  return success();
}
LogicalResult maxRule(RuleArgs &a) { return maxMinRule(a, true); }
LogicalResult minRule(RuleArgs &a) { return maxMinRule(a, false); }

LogicalResult geluRule(RuleArgs &a) {
  // PyTorch's GeluBackward (aten/src/ATen/native/cpu/Activation.cpp).
  ImplicitLocOpBuilder &b = a.b;
  Value x = operand(a, 0), dy = a.dOuts[0];
  Type t = elem(x);
  StringRef approx = a.op->getAttrOfType<StringAttr>("approximate").getValue();
  if (approx == "tanh") {
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
    Value xsq = mul(b, x, x);
    Value xcube = mul(b, xsq, x);
    Value inner = mulc(b, add(b, x, mulc(b, xcube, kKappa)), kBeta);
    Value th = onnx::TanhOp::create(b, inner);
    Value left = mulc(b, x, 0.5);
    Value right = add(b, scalar(b, 1.0, t), th);
    Value leftD = mulc(b, right, 0.5);
    Value innerD = mulc(b, add(b, scalar(b, 1.0, t), mulc(b, xsq, 3.0 * kKappa)), kBeta);
    Value rightD =
        mul(b, mul(b, left, sub(b, scalar(b, 1.0, t), mul(b, th, th))), innerD);
    set(a, 0, mul(b, dy, add(b, leftD, rightD)));
    return success();
  }
  const double kAlpha = M_SQRT1_2, kBeta = M_2_SQRTPI * M_SQRT1_2 * 0.5;
  Value cdf = mulc(b, add(b, scalar(b, 1.0, t), onnx::ErfOp::create(b, mulc(b, x, kAlpha))),
                   0.5);
  Value pdf = mulc(b, onnx::ExpOp::create(b, mulc(b, mul(b, x, x), -0.5)), kBeta);
  set(a, 0, mul(b, dy, add(b, cdf, mul(b, x, pdf))));
  return success();
}

LogicalResult whereRule(RuleArgs &a) {
  Value c = operand(a, 0), dy = a.dOuts[0];
  Value zero = scalar(a.b, 0.0, elem(dy));
  if (needs(a, 1))
    set(a, 1, sumTo(a.b, onnx::WhereOp::create(a.b, c, dy, zero), operand(a, 1)));
  if (needs(a, 2))
    set(a, 2, sumTo(a.b, onnx::WhereOp::create(a.b, c, zero, dy), operand(a, 2)));
  return success();
}

LogicalResult castRule(RuleArgs &a) {
  Value x = operand(a, 0);
  if (!isa<FloatType>(elem(x)) || !isa<FloatType>(elem(result(a))))
    return a.op->emitOpError("casts between a floating-point and a non-floating-point "
                             "type on the path from the parameters to the loss; "
                             "it has no gradient");
  set(a, 0, elem(x) == elem(a.dOuts[0]) ? a.dOuts[0] : castTo(a.b, a.dOuts[0], elem(x)));
  return success();
}

//===-- linear algebra ------------------------------------------------------===//

LogicalResult matmulRule(RuleArgs &a) {
  ImplicitLocOpBuilder &b = a.b;
  Value x = operand(a, 0), w = operand(a, 1), dy = a.dOuts[0];
  RankedTensorType xt = tt(x), wt = tt(w);
  // numpy's 1-D promotion: [K] -> [1, K] on the left, [K] -> [K, 1] on the right.
  Value x2 = xt.getRank() == 1 ? reshape(b, x, {1, xt.getDimSize(0)}) : x;
  Value w2 = wt.getRank() == 1 ? reshape(b, w, {wt.getDimSize(0), 1}) : w;
  RankedTensorType x2t = tt(x2), w2t = tt(w2);
  // The product's shape with both operands promoted: broadcast batch dims,
  // then [M, N].
  ArrayRef<int64_t> xs = x2t.getShape(), ws = w2t.getShape();
  int64_t xb = xs.size() - 2, wb = ws.size() - 2, nb = std::max(xb, wb);
  SmallVector<int64_t> yShape(nb);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t dx = i - (nb - xb) >= 0 ? xs[i - (nb - xb)] : 1;
    int64_t dw = i - (nb - wb) >= 0 ? ws[i - (nb - wb)] : 1;
    yShape[i] = dx == 1 ? dw : dx;
  }
  yShape.push_back(xs[xb]);
  yShape.push_back(ws[wb + 1]);
  Value dy2 = reshape(b, dy, yShape);
  if (needs(a, 0)) {
    Value d = onnx::MatMulOp::create(b, dy2, transposeLast2(b, w2));
    set(a, 0, reshape(b, sumTo(b, d, x2t), xt.getShape()));
  }
  if (needs(a, 1)) {
    Value d;
    if (w2t.getRank() == 2 && x2t.getRank() > 2) {
      // A weight shared by every batch row: one [K, M'] x [M', N] product
      // instead of a batched product summed afterwards.
      int64_t k = x2t.getShape().back(), n = yShape.back();
      Value xf = reshape(b, x2, {x2t.getNumElements() / k, k});
      Value df = reshape(b, dy2, {tt(dy2).getNumElements() / n, n});
      d = onnx::GemmOp::create(b, xf, df, Value(), APFloat(1.0f), APFloat(1.0f), 1, 0);
    } else {
      d = sumTo(b, onnx::MatMulOp::create(b, transposeLast2(b, x2), dy2), w2t);
    }
    set(a, 1, reshape(b, d, wt.getShape()));
  }
  return success();
}

LogicalResult gemmRule(RuleArgs &a) {
  // Y = alpha op(A) op(B) + beta C.
  ImplicitLocOpBuilder &b = a.b;
  auto gemm = cast<onnx::GemmOp>(a.op);
  Value x = gemm.getA(), w = gemm.getB(), dy = a.dOuts[0];
  float alpha = gemm.getAlpha().convertToFloat();
  float beta = gemm.getBeta().convertToFloat();
  uint64_t ta = gemm.getTransA(), tb = gemm.getTransB();
  if (needs(a, 0)) {
    Value d = ta ? onnx::GemmOp::create(b, w, dy, Value(), APFloat(alpha), APFloat(1.0f), tb, 1)
                 : onnx::GemmOp::create(b, dy, w, Value(), APFloat(alpha), APFloat(1.0f), 0,
                                        1 - tb);
    set(a, 0, d);
  }
  if (needs(a, 1)) {
    Value d = tb ? onnx::GemmOp::create(b, dy, x, Value(), APFloat(alpha), APFloat(1.0f), 1, ta)
                 : onnx::GemmOp::create(b, x, dy, Value(), APFloat(alpha), APFloat(1.0f),
                                        1 - ta, 0);
    set(a, 1, d);
  }
  if (gemm.getC() && needs(a, 2)) {
    Value d = beta == 1.0f ? dy : mulc(b, dy, beta);
    set(a, 2, sumTo(b, d, gemm.getC()));
  }
  return success();
}

//===-- softmax, normalisation, losses -------------------------------------===//

LogicalResult softmaxRule(RuleArgs &a) {
  // y * (dy - sum(dy * y))
  Value y = result(a), dy = a.dOuts[0];
  int64_t axis = normAxis(a.op->getAttrOfType<IntegerAttr>("axis").getInt(), tt(y).getRank());
  Value s = reduceSum(a.b, mul(a.b, dy, y), {axis}, true);
  set(a, 0, mul(a.b, y, sub(a.b, dy, s)));
  return success();
}

LogicalResult logSoftmaxRule(RuleArgs &a) {
  // dy - exp(y) * sum(dy)
  Value y = result(a), dy = a.dOuts[0];
  int64_t axis = normAxis(a.op->getAttrOfType<IntegerAttr>("axis").getInt(), tt(y).getRank());
  Value s = reduceSum(a.b, dy, {axis}, true);
  set(a, 0, sub(a.b, dy, mul(a.b, onnx::ExpOp::create(a.b, y), s)));
  return success();
}

/// Shared by LayerNormalization and RMSNormalization: xhat and rstd over the
/// normalised axes, then dX from d(xhat).
LogicalResult normRule(RuleArgs &a, bool centred) {
  ImplicitLocOpBuilder &b = a.b;
  Value x = operand(a, 0), scale = operand(a, 1), dy = a.dOuts[0];
  int64_t rank = tt(x).getRank();
  int64_t axis = normAxis(a.op->getAttrOfType<IntegerAttr>("axis").getInt(), rank);
  double eps = a.op->getAttrOfType<FloatAttr>("epsilon").getValueAsDouble();
  SmallVector<int64_t> axes = range(axis, rank);
  Type t = elem(x);
  Value xc = centred ? sub(b, x, reduceMean(b, x, axes)) : x;
  Value var = reduceMean(b, mul(b, xc, xc), axes);
  Value rstd = onnx::ReciprocalOp::create(
      b, onnx::SqrtOp::create(b, add(b, var, scalar(b, eps, t))));
  Value xhat = mul(b, xc, rstd);
  if (needs(a, 1))
    set(a, 1, sumTo(b, mul(b, dy, xhat), scale));
  if (centred && a.op->getNumOperands() > 2 && needs(a, 2))
    set(a, 2, sumTo(b, dy, operand(a, 2)));
  if (needs(a, 0)) {
    Value dxhat = mul(b, dy, scale);
    Value inner = mul(b, xhat, reduceMean(b, mul(b, dxhat, xhat), axes));
    Value d = centred ? sub(b, sub(b, dxhat, reduceMean(b, dxhat, axes)), inner)
                      : sub(b, dxhat, inner);
    set(a, 0, mul(b, rstd, d));
  }
  return success();
}
LogicalResult layerNormRule(RuleArgs &a) { return normRule(a, true); }
LogicalResult rmsNormRule(RuleArgs &a) { return normRule(a, false); }

/// d scores = (softmax(scores) - onehot(labels)) * w for the cross-entropy,
/// -onehot(labels) * w for the negative log-likelihood, with w the weight of
/// each position: 0 where the label is ignore_index; for "mean" the loss
/// gradient over the number of counted positions.
LogicalResult lossRule(RuleArgs &a, bool softmax, Value scores, Value labels,
                       Value weights, StringRef reduction,
                       std::optional<int64_t> ignoreIndex) {
  ImplicitLocOpBuilder &b = a.b;
  if (weights)
    return a.op->emitOpError("with class weights has no reverse rule yet");
  Value dl = a.dOuts[0];
  RankedTensorType st = tt(scores), lt = tt(labels);
  Type f = st.getElementType(), li = lt.getElementType();
  int64_t rank = st.getRank(), classes = st.getDimSize(1);
  Value p = softmax ? Value(onnx::SoftmaxOp::create(b, scores, uint64_t(1))) : Value();
  // One-hot: labels[N, 1, d...] == [0, C) laid out along dim 1.
  SmallVector<int64_t> classShape(rank, 1);
  classShape[1] = classes;
  auto ct = RankedTensorType::get(classShape, li);
  SmallVector<APInt> ids;
  for (int64_t c = 0; c < classes; ++c)
    ids.push_back(APInt(li.getIntOrFloatBitWidth(), c, /*isSigned=*/true));
  Value classIds = onnx::ConstantOp::create(b, ct, DenseElementsAttr::get(ct, ids));
  Value onehot = castTo(b, onnx::EqualOp::create(b, onnx::UnsqueezeOp::create(b, labels, {1}),
                                               classIds),
                      f);
  Value mask;
  if (ignoreIndex)
    mask = castTo(b, onnx::NotOp::create(b, onnx::EqualOp::create(b, labels, scalar(b, double(*ignoreIndex), li))),
                f);
  Value w;
  if (reduction == "mean") {
    Value count = mask ? reduceSum(b, mask, range(0, lt.getRank()), false)
                       : scalar(b, double(lt.getNumElements()), f);
    if (lt.getRank() == 0)
      count = mask ? mask : scalar(b, 1.0, f);
    Value coef = div(b, dl, count);
    w = mask ? mul(b, mask, coef) : coef;
  } else if (reduction == "sum") {
    w = mask ? mul(b, mask, dl) : dl;
  } else if (reduction == "none") {
    w = mask ? mul(b, mask, dl) : dl;
  } else {
    return a.op->emitOpError("has an unknown reduction '") << reduction << "'";
  }
  if (tt(w).getRank() > 0)
    w = onnx::UnsqueezeOp::create(b, w, {1});
  set(a, 0, mul(b, softmax ? sub(b, p, onehot) : neg(b, onehot), w));
  return success();
}

LogicalResult softmaxCrossEntropyRule(RuleArgs &a) {
  auto sce = cast<onnx::SoftmaxCrossEntropyLossOp>(a.op);
  std::optional<int64_t> ignore;
  if (auto i = sce.getIgnoreIndexAttr())
    ignore = i.getInt();
  return lossRule(a, true, sce.getScores(), sce.getLabels(), sce.getWeights(),
                  sce.getReduction(), ignore);
}

LogicalResult nllRule(RuleArgs &a) {
  auto nll = cast<onnx::NegativeLogLikelihoodLossOp>(a.op);
  std::optional<int64_t> ignore;
  if (auto i = nll.getIgnoreIndexAttr())
    ignore = i.getInt();
  return lossRule(a, false, nll.getInput(), nll.getTarget(), nll.getWeight(),
                  nll.getReduction(), ignore);
}

//===-- reductions ----------------------------------------------------------===//

/// dy brought back to the reduced operand's rank (keepdims form).
Value keepDims(ImplicitLocOpBuilder &b, Operation *op, Value dy) {
  if (op->getAttrOfType<IntegerAttr>("keepdims").getInt())
    return dy;
  SmallVector<int64_t> shape =
      llvm::to_vector(cast<RankedTensorType>(op->getOperand(0).getType()).getShape());
  for (int64_t axis : op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef())
    shape[axis] = 1;
  return reshape(b, dy, shape);
}

LogicalResult reduceSumRule(RuleArgs &a) {
  Value x = operand(a, 0);
  set(a, 0, onnx::ExpandOp::create(a.b, keepDims(a.b, a.op, a.dOuts[0]), tt(x).getShape()));
  return success();
}

LogicalResult reduceMeanRule(RuleArgs &a) {
  Value x = operand(a, 0);
  int64_t count = 1;
  for (int64_t axis : a.op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef())
    count *= tt(x).getDimSize(axis);
  Value d = div(a.b, keepDims(a.b, a.op, a.dOuts[0]), scalar(a.b, double(count), elem(x)));
  set(a, 0, onnx::ExpandOp::create(a.b, d, tt(x).getShape()));
  return success();
}

LogicalResult reduceSumSquareRule(RuleArgs &a) {
  Value x = operand(a, 0);
  Value d = keepDims(a.b, a.op, a.dOuts[0]);
  set(a, 0, mul(a.b, mulc(a.b, x, 2.0), d));
  return success();
}

/// The reduced result brought back to the operand's rank (keepdims form).
Value keepDimsResult(ImplicitLocOpBuilder &b, Operation *op) {
  return keepDims(b, op, op->getResult(0));
}

/// amax / amin: the gradient split evenly between the elements equal to the
/// extreme (PyTorch's scale_grad_by_count).
LogicalResult reduceMaxMinRule(RuleArgs &a) {
  ImplicitLocOpBuilder &b = a.b;
  Value x = operand(a, 0);
  auto axes = a.op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  Value hit = castTo(b, onnx::EqualOp::create(b, x, keepDimsResult(b, a.op)), elem(x));
  Value count = reduceSum(b, hit, axes, /*keep=*/true);
  set(a, 0, mul(b, hit, div(b, keepDims(b, a.op, a.dOuts[0]), count)));
  return success();
}

LogicalResult reduceLogSumExpRule(RuleArgs &a) {
  // dy * exp(x - y)
  Value x = operand(a, 0);
  Value e = onnx::ExpOp::create(a.b, sub(a.b, x, keepDimsResult(a.b, a.op)));
  set(a, 0, mul(a.b, e, keepDims(a.b, a.op, a.dOuts[0])));
  return success();
}

LogicalResult reduceL2Rule(RuleArgs &a) {
  // PyTorch's norm backward: x * dy / y, and 0 where the norm is 0.
  ImplicitLocOpBuilder &b = a.b;
  Value x = operand(a, 0), y = keepDimsResult(b, a.op);
  Value zero = scalar(b, 0.0, elem(x));
  Value scale = div(b, keepDims(b, a.op, a.dOuts[0]), y);
  scale = onnx::WhereOp::create(b, onnx::EqualOp::create(b, y, zero), zero, scale);
  set(a, 0, mul(b, x, scale));
  return success();
}

LogicalResult cumSumRule(RuleArgs &a) {
  auto cs = cast<onnx::CumSumOp>(a.op);
  auto op = onnx::CumSumOp::create(a.b, a.dOuts[0], cs.getAxis(), cs.getExclusive(),
                                   cs.getReverse() ? 0 : 1);
  set(a, 0, op);
  return success();
}

//===-- data movement -------------------------------------------------------===//

/// Reshape-like ops: the gradient is dy in the operand's shape.
LogicalResult reshapeRule(RuleArgs &a) {
  set(a, 0, reshape(a.b, a.dOuts[0], tt(operand(a, 0)).getShape()));
  return success();
}

LogicalResult transposeRule(RuleArgs &a) {
  ArrayRef<int64_t> perm = a.op->getAttrOfType<DenseI64ArrayAttr>("perm").asArrayRef();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  set(a, 0, transpose(a.b, a.dOuts[0], inverse));
  return success();
}

LogicalResult expandRule(RuleArgs &a) {
  set(a, 0, sumTo(a.b, a.dOuts[0], operand(a, 0)));
  return success();
}

LogicalResult tileRule(RuleArgs &a) {
  // dy seen as [r0, d0, r1, d1, ...], summed over the repeats.
  ArrayRef<int64_t> repeats = cast<onnx::TileOp>(a.op).getRepeats();
  ArrayRef<int64_t> dims = tt(operand(a, 0)).getShape();
  SmallVector<int64_t> split, axes;
  for (auto [i, r] : llvm::enumerate(repeats)) {
    if (r != 1) {
      axes.push_back(int64_t(split.size()));
      split.push_back(r);
    }
    split.push_back(dims[i]);
  }
  Value g = reshape(a.b, a.dOuts[0], split);
  set(a, 0, axes.empty() ? g : reduceSum(a.b, g, axes, /*keep=*/false));
  return success();
}

LogicalResult sliceRule(RuleArgs &a) {
  ImplicitLocOpBuilder &b = a.b;
  auto slice = cast<onnx::SliceOp>(a.op);
  RankedTensorType in = tt(slice.getData()), out = slice.getType();
  ArrayRef<int64_t> starts = slice.getStarts(), steps = slice.getSteps();
  int64_t rank = in.getRank();
  if (llvm::all_of(steps, [](int64_t s) { return s == 1; })) {
    // Unit steps: the slice's gradient padded back with zeros.
    SmallVector<int64_t> pads(2 * rank);
    for (int64_t d = 0; d < rank; ++d) {
      pads[d] = starts[d];
      pads[rank + d] = in.getDimSize(d) - starts[d] - out.getDimSize(d);
    }
    set(a, 0, onnx::PadOp::create(b, a.dOuts[0], pads, "constant", APFloat(0.0)));
    return success();
  }
  // Strided or reversed: scatter each element to its input position (every
  // position is hit at most once).
  int64_t n = out.getNumElements();
  SmallVector<int64_t> index(n * rank);
  SmallVector<int64_t> pos(rank, 0);
  for (int64_t e = 0; e < n; ++e) {
    for (int64_t d = 0; d < rank; ++d)
      index[e * rank + d] = starts[d] + pos[d] * steps[d];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++pos[d] < out.getDimSize(d))
        break;
      pos[d] = 0;
    }
  }
  auto it = RankedTensorType::get({n, rank}, b.getI64Type());
  Value idx = onnx::ConstantOp::create(
      b, it, DenseElementsAttr::get(it, ArrayRef<int64_t>(index)));
  Value upd = reshape(b, a.dOuts[0], {n});
  set(a, 0, onnx::ScatterNDOp::create(b, zeros(b, in), idx, upd, "none"));
  return success();
}

LogicalResult concatRule(RuleArgs &a) {
  auto concat = cast<onnx::ConcatOp>(a.op);
  int64_t rank = tt(result(a)).getRank();
  int64_t axis = normAxis(concat.getAxis(), rank);
  SmallVector<int64_t> sizes;
  SmallVector<Type> types;
  for (Value v : concat.getInputs()) {
    sizes.push_back(tt(v).getDimSize(axis));
    types.push_back(v.getType());
  }
  auto split = onnx::SplitOp::create(a.b, types, a.dOuts[0], uint64_t(axis), sizes);
  for (unsigned i = 0; i < concat.getInputs().size(); ++i)
    set(a, i, split.getResult(i));
  return success();
}

LogicalResult splitRule(RuleArgs &a) {
  auto split = cast<onnx::SplitOp>(a.op);
  int64_t rank = tt(operand(a, 0)).getRank();
  int64_t axis = normAxis(split.getAxis(), rank);
  SmallVector<Value> parts;
  for (auto [i, r] : llvm::enumerate(split.getResults()))
    parts.push_back(a.dOuts[i] ? a.dOuts[i] : zeros(a.b, tt(r)));
  set(a, 0, onnx::ConcatOp::create(a.b, parts, uint64_t(axis)));
  return success();
}

LogicalResult padRule(RuleArgs &a) {
  auto pad = cast<onnx::PadOp>(a.op);
  if (pad.getMode() != "constant")
    return a.op->emitOpError("in mode '") << pad.getMode() << "' has no reverse rule";
  RankedTensorType in = tt(pad.getData());
  int64_t rank = in.getRank();
  ArrayRef<int64_t> pads = pad.getPads();
  SmallVector<int64_t> starts(rank), ends(rank), steps(rank, 1);
  for (int64_t d = 0; d < rank; ++d) {
    if (pads[d] < 0 || pads[rank + d] < 0)
      return a.op->emitOpError("with negative pads has no reverse rule");
    starts[d] = pads[d];
    ends[d] = pads[d] + in.getDimSize(d);
  }
  set(a, 0, onnx::SliceOp::create(a.b, a.dOuts[0], starts, ends, steps));
  return success();
}

LogicalResult gatherRule(RuleArgs &a) {
  // The embedding gradient: rows of dy scatter-added at their indices, in
  // index order (repeated tokens add up deterministically).
  ImplicitLocOpBuilder &b = a.b;
  auto gather = cast<onnx::GatherOp>(a.op);
  Value data = gather.getData(), indices = gather.getIndices(), dy = a.dOuts[0];
  RankedTensorType dt = tt(data), it = tt(indices);
  int64_t rank = dt.getRank(), irank = it.getRank();
  int64_t axis = normAxis(gather.getAxis(), rank);
  int64_t n = it.getNumElements(), dim = dt.getDimSize(axis);
  Type ie = it.getElementType();
  // Negative indices count from the end.
  Value negative = onnx::LessOp::create(b, indices, scalar(b, 0.0, ie));
  Value idx = onnx::WhereOp::create(b, negative, add(b, indices, scalar(b, double(dim), ie)),
                                    indices);
  idx = reshape(b, idx, {n, 1});
  // dy: data[:axis] ++ indices ++ data[axis+1:]; move the index dims first.
  SmallVector<int64_t> rest;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      rest.push_back(dt.getDimSize(d));
  Value g = dy;
  if (axis != 0) {
    SmallVector<int64_t> perm = range(axis, axis + irank);
    llvm::append_range(perm, range(0, axis));
    llvm::append_range(perm, range(axis + irank, tt(dy).getRank()));
    g = transpose(b, g, perm);
  }
  SmallVector<int64_t> updShape{n};
  llvm::append_range(updShape, rest);
  g = reshape(b, g, updShape);
  SmallVector<int64_t> accShape{dim};
  llvm::append_range(accShape, rest);
  Value acc = onnx::ScatterNDOp::create(
      b, zeros(b, RankedTensorType::get(accShape, dt.getElementType())), idx, g, "add");
  if (axis != 0) {
    SmallVector<int64_t> back = range(1, axis + 1);
    back.push_back(0);
    llvm::append_range(back, range(axis + 1, rank));
    acc = transpose(b, acc, back);
  }
  set(a, 0, acc);
  return success();
}

LogicalResult gatherElementsRule(RuleArgs &a) {
  auto ge = cast<onnx::GatherElementsOp>(a.op);
  Value data = ge.getData();
  int64_t axis = normAxis(ge.getAxis(), tt(data).getRank());
  set(a, 0, onnx::ScatterElementsOp::create(a.b, zeros(a.b, tt(data)), ge.getIndices(),
                                            a.dOuts[0], uint64_t(axis), "add"));
  return success();
}

LogicalResult gatherNDRule(RuleArgs &a) {
  // dy's slices scatter-added at their index tuples (in index order). With
  // batch_dims b, the b leading dims become one more index coordinate.
  ImplicitLocOpBuilder &b = a.b;
  auto gather = cast<onnx::GatherNDOp>(a.op);
  Value data = gather.getData(), indices = gather.getIndices(), dy = a.dOuts[0];
  RankedTensorType dt = tt(data), it = tt(indices);
  int64_t batch = int64_t(gather.getBatchDims());
  if (batch == 0) {
    set(a, 0, onnx::ScatterNDOp::create(b, zeros(b, dt), indices, dy, "add"));
    return success();
  }
  ArrayRef<int64_t> is = it.getShape();
  int64_t outer = 1;
  for (int64_t d = 0; d < batch; ++d)
    outer *= dt.getDimSize(d);
  int64_t k = is.back(), per = 1; // index tuples per batch entry
  for (int64_t d = batch; d + 1 < int64_t(is.size()); ++d)
    per *= is[d];
  // [outer, per, 1 + k]: the flat batch entry, then the tuple.
  SmallVector<int64_t> coord(outer * per);
  for (int64_t i = 0; i < outer * per; ++i)
    coord[i] = i / per;
  auto ct = RankedTensorType::get({outer, per, 1}, b.getI64Type());
  Value first = onnx::ConstantOp::create(b, ct, DenseElementsAttr::get(ct, ArrayRef<int64_t>(coord)));
  if (it.getElementType() != b.getI64Type())
    first = castTo(b, first, it.getElementType());
  Value idx = onnx::ConcatOp::create(b, ValueRange{first, reshape(b, indices, {outer, per, k})},
                                     uint64_t(2));
  SmallVector<int64_t> flat{outer};
  llvm::append_range(flat, dt.getShape().drop_front(batch));
  SmallVector<int64_t> upd{outer, per};
  llvm::append_range(upd, dt.getShape().drop_front(batch + k));
  Value acc = onnx::ScatterNDOp::create(b, zeros(b, RankedTensorType::get(flat, dt.getElementType())),
                                        idx, reshape(b, dy, upd), "add");
  set(a, 0, reshape(b, acc, dt.getShape()));
  return success();
}

LogicalResult scatterNDRule(RuleArgs &a) {
  ImplicitLocOpBuilder &b = a.b;
  auto scatter = cast<onnx::ScatterNDOp>(a.op);
  StringRef reduction = scatter.getReduction();
  if (reduction != "none" && reduction != "add")
    return a.op->emitOpError("with reduction '") << reduction << "' has no reverse rule";
  Value indices = scatter.getIndices(), updates = scatter.getUpdates(), dy = a.dOuts[0];
  // Overwritten elements take nothing from data; added ones pass dy on.
  if (needs(a, 0))
    set(a, 0, reduction == "add"
                  ? dy
                  : Value(onnx::ScatterNDOp::create(b, dy, indices, zeros(b, tt(updates)),
                                                    "none")));
  if (needs(a, 2))
    set(a, 2, onnx::GatherNDOp::create(b, dy, indices, uint64_t(0)));
  return success();
}

LogicalResult topKRule(RuleArgs &a) {
  // The values' gradient back at their indices (distinct within a row);
  // the indices have none.
  auto topk = cast<onnx::TopKOp>(a.op);
  Value x = topk.getX(), dv = a.dOuts[0];
  if (!dv)
    return success();
  int64_t axis = normAxis(topk.getAxis(), tt(x).getRank());
  set(a, 0, onnx::ScatterElementsOp::create(a.b, zeros(a.b, tt(x)), topk.getIndices(), dv,
                                            uint64_t(axis), "add"));
  return success();
}

LogicalResult triluRule(RuleArgs &a) {
  auto t = cast<onnx::TriluOp>(a.op);
  set(a, 0, onnx::TriluOp::create(a.b, a.dOuts[0], t.getUpper(), t.getK()));
  return success();
}

//===-- convolution, pooling, batch norm -------------------------------------===//

/// [N, G*A, S...] -> [A, G*N, S...]: the channels of one group become the
/// batch, the images of every group the channels (group-major).
Value imagesAsChannels(ImplicitLocOpBuilder &b, Value v, int64_t groups) {
  ArrayRef<int64_t> s = tt(v).getShape();
  int64_t n = s[0], a = s[1] / groups, rank = int64_t(s.size());
  if (groups == 1)
    return transpose(b, v, [&] {
      SmallVector<int64_t> perm{1, 0};
      llvm::append_range(perm, range(2, rank));
      return perm;
    }());
  SmallVector<int64_t> split{n, groups, a};
  llvm::append_range(split, s.drop_front(2));
  SmallVector<int64_t> perm{2, 1, 0};
  llvm::append_range(perm, range(3, rank + 1));
  SmallVector<int64_t> merged{a, groups * n};
  llvm::append_range(merged, s.drop_front(2));
  return reshape(b, transpose(b, reshape(b, v, split), perm), merged);
}

/// The weight gradient shared by Conv and ConvTranspose: with `src` [N, G*A,
/// S...] and `dst` [N, G*B, T...],
///   R[g*B + j, a, k] = sum_n sum_t src[n, g*A + a, t*stride + k*dilation - begin]
///                                  * dst[n, g*B + j, t]
/// for k over `kernel` (taps in the padding read zero): a convolution of the
/// images-as-channels `src` by `dst`'s images, stride and dilation swapped.
/// R is [G*B, A, K...].
Value convWeightGrad(ImplicitLocOpBuilder &b, Value src, Value dst, int64_t groups,
                     ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                     ArrayRef<int64_t> dilations, ArrayRef<int64_t> begins) {
  RankedTensorType st = tt(src), dt = tt(dst);
  int64_t k = int64_t(kernel.size());
  // End pads that make the result exactly `kernel` long; a negative one
  // (input the forward never read: the floor of its output size) crops.
  SmallVector<int64_t> pads(2 * k), starts(st.getRank(), 0),
      ends(st.getShape().begin(), st.getShape().end()), steps(st.getRank(), 1);
  bool crop = false;
  for (int64_t d = 0; d < k; ++d) {
    int64_t in = st.getDimSize(2 + d), out = dt.getDimSize(2 + d);
    int64_t end = (kernel[d] - 1) * dilations[d] + (out - 1) * strides[d] + 1 - in - begins[d];
    pads[d] = begins[d];
    if (end < 0) {
      ends[2 + d] = in + end;
      crop = true;
      end = 0;
    }
    pads[k + d] = end;
  }
  if (crop)
    src = onnx::SliceOp::create(b, src, starts, ends, steps);
  Value input = imagesAsChannels(b, src, groups);
  SmallVector<int64_t> perm{1, 0};
  llvm::append_range(perm, range(2, dt.getRank()));
  Value weights = transpose(b, dst, perm); // [G*B, N, T...]
  Value r = onnx::ConvOp::create(b, input, weights, Value(), uint64_t(groups),
                                 dilations, strides, pads);
  return transpose(b, r, perm);
}

/// Bias gradient of a convolution: dy summed over the images and positions.
Value channelSum(ImplicitLocOpBuilder &b, Value dy) {
  SmallVector<int64_t> axes{0};
  llvm::append_range(axes, range(2, tt(dy).getRank()));
  return reduceSum(b, dy, axes, /*keep=*/false);
}

/// End pads of a ConvTranspose of `in` positions that give `out` positions
/// (negative: output padding, as the dialect allows).
SmallVector<int64_t> transposedPads(ArrayRef<int64_t> in, ArrayRef<int64_t> out,
                                    ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                                    ArrayRef<int64_t> dilations, ArrayRef<int64_t> begins) {
  int64_t k = int64_t(kernel.size());
  SmallVector<int64_t> pads(begins.begin(), begins.end());
  for (int64_t d = 0; d < k; ++d)
    pads.push_back(strides[d] * (in[d] - 1) + (kernel[d] - 1) * dilations[d] + 1 -
                   begins[d] - out[d]);
  return pads;
}

/// Conv (Transposed false) and ConvTranspose: each one's input gradient is
/// the other op applied to dy with the same W, and the weight gradients are
/// convWeightGrad with the roles of input and dy swapped.
template <typename ConvOp, bool Transposed> LogicalResult convRule(RuleArgs &a) {
  ImplicitLocOpBuilder &b = a.b;
  auto conv = cast<ConvOp>(a.op);
  Value x = conv.getX(), w = conv.getW(), dy = a.dOuts[0];
  int64_t k = tt(x).getRank() - 2, groups = int64_t(conv.getGroup());
  ArrayRef<int64_t> strides = conv.getStrides(), dilations = conv.getDilations();
  ArrayRef<int64_t> pads = conv.getPads(), begins = pads.take_front(k);
  ArrayRef<int64_t> kernel = tt(w).getShape().drop_front(2);
  ArrayRef<int64_t> xs = tt(x).getShape();
  if (needs(a, 0)) {
    if constexpr (!Transposed) {
      // dy through the transposed convolution ([M, C/G, K...] is
      // ConvTranspose's [in, out/G, K...]).
      SmallVector<int64_t> tpads = transposedPads(tt(dy).getShape().drop_front(2),
                                                  xs.drop_front(2), kernel, strides,
                                                  dilations, begins);
      set(a, 0, onnx::ConvTransposeOp::create(b, dy, w, Value(), uint64_t(groups), strides,
                                              dilations, tpads));
    } else {
      // dy through the convolution. Output padding (a negative end) adds
      // positions no window reached: the convolution may then see one more
      // position than X has; keep X's.
      SmallVector<int64_t> convPads(begins.begin(), begins.end());
      for (int64_t d = 0; d < k; ++d)
        convPads.push_back(std::max<int64_t>(0, pads[k + d]));
      Value dx = onnx::ConvOp::create(b, dy, w, Value(), uint64_t(groups), strides,
                                      dilations, convPads);
      if (tt(dx).getShape() != xs) {
        SmallVector<int64_t> starts(xs.size(), 0), steps(xs.size(), 1);
        dx = onnx::SliceOp::create(b, dx, starts, SmallVector<int64_t>(xs), steps);
      }
      set(a, 0, dx);
    }
  }
  if (needs(a, 1))
    set(a, 1, Transposed
                  ? convWeightGrad(b, dy, x, groups, kernel, strides, dilations, begins)
                  : convWeightGrad(b, x, dy, groups, kernel, strides, dilations, begins));
  if (conv.getB() && needs(a, 2))
    set(a, 2, channelSum(b, dy));
  return success();
}

LogicalResult averagePoolRule(RuleArgs &a) {
  // dy divided by each window's divisor, then spread over the window's taps
  // by a depthwise transposed convolution with a kernel of ones (taps in the
  // padding fall outside the result).
  ImplicitLocOpBuilder &b = a.b;
  auto pool = cast<onnx::AveragePoolOp>(a.op);
  Value x = pool.getX(), dy = a.dOuts[0];
  RankedTensorType xt = tt(x), yt = tt(dy);
  int64_t k = xt.getRank() - 2, channels = xt.getDimSize(1);
  ArrayRef<int64_t> kernel = pool.getKernelShape(), strides = pool.getStrides(),
                    dilations = pool.getDilations(), pads = pool.getPads();
  ArrayRef<int64_t> in = xt.getShape().drop_front(2), out = yt.getShape().drop_front(2);
  bool includePad = pool.getCountIncludePad() != 0;
  // Divisors per output position (as the kernel counts them: taps inside
  // the input, or inside the padded extent).
  SmallVector<int64_t> divShape{1, 1};
  llvm::append_range(divShape, out);
  int64_t positions = 1;
  for (int64_t o : out)
    positions *= o;
  SmallVector<double> divisors(positions);
  bool uniform = true;
  for (int64_t p = 0; p < positions; ++p) {
    int64_t count = 1, rest = p;
    for (int64_t d = k - 1; d >= 0; --d) {
      int64_t start = (rest % out[d]) * strides[d] - pads[d];
      rest /= out[d];
      int64_t lo = includePad ? -pads[d] : 0, hi = includePad ? in[d] + pads[k + d] : in[d];
      int64_t taps = 0;
      for (int64_t t = 0; t < kernel[d]; ++t) {
        int64_t pos = start + t * dilations[d];
        taps += pos >= lo && pos < hi;
      }
      count *= taps;
    }
    divisors[p] = double(count);
    uniform &= divisors[p] == divisors[0];
  }
  Type et = xt.getElementType();
  Value g;
  if (uniform) {
    g = mulc(b, dy, 1.0 / divisors[0]);
  } else {
    auto dt = RankedTensorType::get(divShape, et);
    SmallVector<Attribute> values;
    for (double v : divisors)
      values.push_back(FloatAttr::get(et, v));
    g = div(b, dy, onnx::ConstantOp::create(b, dt, DenseElementsAttr::get(dt, values)));
  }
  SmallVector<int64_t> wShape{channels, 1};
  llvm::append_range(wShape, kernel);
  auto wt = RankedTensorType::get(wShape, et);
  Value ones = onnx::ConstantOp::create(
      b, wt, DenseElementsAttr::get(wt, Attribute(FloatAttr::get(et, 1.0))));
  SmallVector<int64_t> tpads =
      transposedPads(out, in, kernel, strides, dilations, pads.take_front(k));
  set(a, 0, onnx::ConvTransposeOp::create(b, g, ones, Value(), uint64_t(channels), strides,
                                          dilations, tpads));
  return success();
}

LogicalResult maxPoolRule(RuleArgs &a) {
  auto pool = cast<onnx::MaxPoolOp>(a.op);
  if (!isa<FloatType>(elem(pool.getX())))
    return a.op->emitOpError("of integers has no gradient");
  set(a, 0, onnx::MaxPoolGradOp::create(a.b, a.dOuts[0], pool.getX(), pool.getKernelShape(),
                                        pool.getStrides(), pool.getDilations(),
                                        pool.getPads(), pool.getCeilMode()));
  return success();
}

LogicalResult batchNormRule(RuleArgs &a) {
  // Inference form: y = (x - mean) * rsqrt(var + eps) * scale + B, with the
  // statistics given (running_mean / running_var).
  ImplicitLocOpBuilder &b = a.b;
  auto bn = cast<onnx::BatchNormalizationOp>(a.op);
  Value x = bn.getX(), scale = bn.getScale(), mean = bn.getInputMean(),
        var = bn.getInputVar(), dy = a.dOuts[0];
  int64_t rank = tt(x).getRank(), channels = tt(x).getDimSize(1);
  SmallVector<int64_t> bshape{channels};
  bshape.append(size_t(rank - 2), 1);
  auto perChannel = [&](Value v) { return reshape(b, v, bshape); };
  Type t = elem(x);
  Value rstd = onnx::ReciprocalOp::create(
      b, onnx::SqrtOp::create(b, add(b, var, scalar(b, bn.getEpsilon().convertToDouble(), t))));
  Value xc = sub(b, x, perChannel(mean));
  Value gain = mul(b, scale, rstd); // [C]
  if (needs(a, 0))
    set(a, 0, mul(b, dy, perChannel(gain)));
  if (needs(a, 1))
    set(a, 1, channelSum(b, mul(b, mul(b, dy, xc), perChannel(rstd))));
  if (needs(a, 2))
    set(a, 2, channelSum(b, dy));
  if (needs(a, 3))
    set(a, 3, neg(b, channelSum(b, mul(b, dy, perChannel(gain)))));
  if (needs(a, 4)) {
    // d/dvar of (var + eps)^-1/2 is -1/2 (var + eps)^-3/2.
    Value r3 = mul(b, rstd, mul(b, rstd, rstd));
    set(a, 4, mul(b, channelSum(b, mul(b, dy, xc)), mulc(b, mul(b, scale, r3), -0.5)));
  }
  return success();
}

//===-- the table -----------------------------------------------------------===//

struct Rule {
  const char *op;
  RuleFn fn;
};

const Rule kRules[] = {
    {"onnx.Abs", timesDerivativeRule<onnx::SignOp>},
    {"onnx.Acos", acosRule},
    {"onnx.Acosh", acoshRule},
    {"onnx.Add", addRule},
    {"onnx.Asin", asinRule},
    {"onnx.Asinh", asinhRule},
    {"onnx.Atan", atanRule},
    {"onnx.Atanh", atanhRule},
    {"onnx.AveragePool", averagePoolRule},
    {"onnx.BatchNormalization", batchNormRule},
    {"onnx.Cast", castRule},
    {"onnx.Ceil", zeroGradientRule},
    {"onnx.Celu", celuRule},
    {"onnx.Clip", clipRule},
    {"onnx.Concat", concatRule},
    {"onnx.Conv", convRule<onnx::ConvOp, false>},
    {"onnx.ConvTranspose", convRule<onnx::ConvTransposeOp, true>},
    {"onnx.Cos", cosRule},
    {"onnx.Cosh", timesDerivativeRule<onnx::SinhOp>},
    {"onnx.CumSum", cumSumRule},
    {"onnx.Div", divRule},
    {"onnx.Dropout", reshapeRule}, // inference mode: the identity
    {"onnx.Elu", eluRule},
    {"onnx.Erf", erfRule},
    {"onnx.Exp", expRule},
    {"onnx.Expand", expandRule},
    {"onnx.Flatten", reshapeRule},
    {"onnx.Floor", zeroGradientRule},
    {"onnx.Gather", gatherRule},
    {"onnx.GatherElements", gatherElementsRule},
    {"onnx.GatherND", gatherNDRule},
    {"onnx.Gelu", geluRule},
    {"onnx.Gemm", gemmRule},
    {"onnx.HardSigmoid", hardSigmoidRule},
    {"onnx.HardSwish", hardSwishRule},
    {"onnx.Identity", reshapeRule},
    {"onnx.LayerNormalization", layerNormRule},
    {"onnx.LeakyRelu", leakyReluRule},
    {"onnx.Log", logRule},
    {"onnx.LogSoftmax", logSoftmaxRule},
    {"onnx.MatMul", matmulRule},
    {"onnx.Max", maxRule},
    {"onnx.MaxPool", maxPoolRule},
    {"onnx.Min", minRule},
    {"onnx.Mul", mulRule},
    {"onnx.Neg", negRule},
    {"onnx.NegativeLogLikelihoodLoss", nllRule},
    {"onnx.Pad", padRule},
    {"onnx.Pow", powRule},
    {"onnx.RMSNormalization", rmsNormRule},
    {"onnx.Reciprocal", reciprocalRule},
    {"onnx.ReduceL2", reduceL2Rule},
    {"onnx.ReduceLogSumExp", reduceLogSumExpRule},
    {"onnx.ReduceMax", reduceMaxMinRule},
    {"onnx.ReduceMean", reduceMeanRule},
    {"onnx.ReduceMin", reduceMaxMinRule},
    {"onnx.ReduceSum", reduceSumRule},
    {"onnx.ReduceSumSquare", reduceSumSquareRule},
    {"onnx.Relu", reluRule},
    {"onnx.Reshape", reshapeRule},
    {"onnx.Round", zeroGradientRule},
    {"onnx.ScatterND", scatterNDRule},
    {"onnx.Selu", seluRule},
    {"onnx.Sigmoid", sigmoidRule},
    {"onnx.Sign", zeroGradientRule},
    {"onnx.Sin", timesDerivativeRule<onnx::CosOp>},
    {"onnx.Sinh", timesDerivativeRule<onnx::CoshOp>},
    {"onnx.Slice", sliceRule},
    {"onnx.Softmax", softmaxRule},
    {"onnx.SoftmaxCrossEntropyLoss", softmaxCrossEntropyRule},
    {"onnx.Softplus", softplusRule},
    {"onnx.Softsign", softsignRule},
    {"onnx.Split", splitRule},
    {"onnx.Sqrt", sqrtRule},
    {"onnx.Squeeze", reshapeRule},
    {"onnx.Sub", subRule},
    {"onnx.Tan", tanRule},
    {"onnx.Tanh", tanhRule},
    {"onnx.ThresholdedRelu", thresholdedReluRule},
    {"onnx.Tile", tileRule},
    {"onnx.TopK", topKRule},
    {"onnx.TrainingDropout", trainingDropoutRule},
    {"onnx.Transpose", transposeRule},
    {"onnx.Trilu", triluRule},
    {"onnx.Unsqueeze", reshapeRule},
    {"onnx.Where", whereRule},
};

} // namespace

RuleFn lookupRule(StringRef opName) {
  static const llvm::StringMap<RuleFn> table = [] {
    llvm::StringMap<RuleFn> m;
    for (const Rule &r : kRules)
      m[r.op] = r.fn;
    return m;
  }();
  auto it = table.find(opName);
  return it == table.end() ? nullptr : it->second;
}

std::vector<StringRef> ruleNames() {
  std::vector<StringRef> out;
  for (const Rule &r : kRules)
    out.push_back(r.op);
  return out;
}

} // namespace autodiff
} // namespace zero
