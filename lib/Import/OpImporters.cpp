//===- OpImporters.cpp - ONNX operator -> onnx dialect op -----------------===//
//
// The importer's operator table, onnx-mlir style: one entry per ONNX op type.
// Each entry reads the node's attributes and constant inputs across opset
// versions (13 to the newest), normalises them (non-negative sorted axes, fully
// resolved shapes, full-rank slice bounds), and builds the dialect op. Ops that
// only compute shapes (Shape, Size, ConstantOfShape) become constants here.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace zero;
using namespace zero::import;

namespace {

using Ints = SmallVector<int64_t>;

LogicalResult setResult(NodeContext &ctx, FailureOr<Value> v) {
  if (failed(v))
    return failure();
  ctx.results.push_back(*v);
  return success();
}

/// Ops that map 1:1, copying the listed attributes (ONNX defaults apply when
/// the node omits them; the dialect op has the same defaults).
OpImporter direct(StringRef op, SmallVector<std::string> intAttrs = {},
                  SmallVector<std::string> floatAttrs = {},
                  SmallVector<std::string> strAttrs = {}) {
  std::string name = op.str();
  return [=](NodeContext &ctx) -> LogicalResult {
    SmallVector<NamedAttribute> attrs;
    for (const auto &a : intAttrs)
      if (ctx.attr(a))
        attrs.push_back(ctx.i64(a, ctx.attrInt(a, 0)));
    for (const auto &a : floatAttrs)
      if (ctx.attr(a))
        attrs.push_back(ctx.f32(a, ctx.attrFloat(a, 0)));
    for (const auto &a : strAttrs)
      if (ctx.attr(a))
        attrs.push_back(ctx.str(a, ctx.attrString(a, "")));
    SmallVector<Value> operands;
    for (size_t i = 0; i < ctx.numInputs(); ++i)
      operands.push_back(ctx.input(i));
    return setResult(ctx, ctx.create1(name, operands, attrs));
  };
}

/// Sum/Max/Min/Mean take any number of inputs: fold them pairwise.
OpImporter variadic(StringRef binaryOp, bool mean = false) {
  std::string name = binaryOp.str();
  return [=](NodeContext &ctx) -> LogicalResult {
    Value acc = ctx.input(0);
    for (size_t i = 1; i < ctx.numInputs(); ++i) {
      FailureOr<Value> next = ctx.create1(name, {acc, ctx.input(i)});
      if (failed(next))
        return failure();
      acc = *next;
    }
    if (mean && ctx.numInputs() > 1) {
      auto elem = ctx.inputType(0).getElementType();
      auto scalarType = RankedTensorType::get({}, elem);
      Attribute n = isa<FloatType>(elem)
                        ? Attribute(FloatAttr::get(elem, double(ctx.numInputs())))
                        : Attribute(IntegerAttr::get(elem, ctx.numInputs()));
      Value count = ctx.constant(DenseElementsAttr::get(scalarType, n));
      FailureOr<Value> div = ctx.create1("Div", {acc, count});
      if (failed(div))
        return failure();
      acc = *div;
    }
    ctx.results.push_back(acc);
    return success();
  };
}

LogicalResult importConstant(NodeContext &ctx) {
  MLIRContext *mctx = ctx.ctx();
  const auto &node = ctx.node();
  if (node.attribute_size() != 1) {
    ctx.emitError() << "expected exactly one value attribute";
    return failure();
  }
  const ::onnx::AttributeProto &a = node.attribute(0);
  DenseElementsAttr value;
  Type f32 = Float32Type::get(mctx), i64 = IntegerType::get(mctx, 64);
  if (a.name() == "value") {
    value = tensorProtoToAttr(mctx, a.t());
  } else if (a.name() == "value_float") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, f32), a.f());
  } else if (a.name() == "value_floats") {
    SmallVector<float> v(a.floats().begin(), a.floats().end());
    value = DenseElementsAttr::get(RankedTensorType::get({int64_t(v.size())}, f32),
                                   ArrayRef<float>(v));
  } else if (a.name() == "value_int") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, i64), int64_t(a.i()));
  } else if (a.name() == "value_ints") {
    Ints v(a.ints().begin(), a.ints().end());
    value = DenseElementsAttr::get(RankedTensorType::get({int64_t(v.size())}, i64),
                                   ArrayRef<int64_t>(v));
  }
  if (!value) {
    ctx.emitError() << "unsupported constant attribute '" << a.name()
                    << "' (or an unsupported data type / external data)";
    return failure();
  }
  ctx.results.push_back(ctx.constant(value));
  return success();
}

Value i64Const(NodeContext &ctx, ArrayRef<int64_t> values, bool scalar = false) {
  auto type = RankedTensorType::get(
      scalar ? ArrayRef<int64_t>() : ArrayRef<int64_t>{int64_t(values.size())},
      IntegerType::get(ctx.ctx(), 64));
  return ctx.constant(DenseElementsAttr::get(type, values));
}

LogicalResult importShape(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  int64_t rank = shape.size();
  int64_t start = ctx.attrInt("start", 0), end = ctx.attrInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  ctx.results.push_back(i64Const(ctx, shape.slice(start, end - start)));
  return success();
}

LogicalResult importSize(NodeContext &ctx) {
  int64_t n = ctx.inputType(0).getNumElements();
  ctx.results.push_back(i64Const(ctx, {n}, /*scalar=*/true));
  return success();
}

LogicalResult importConstantOfShape(NodeContext &ctx) {
  auto shape = ctx.constIntsInput(0, "shape");
  if (failed(shape))
    return failure();
  Type elem = Float32Type::get(ctx.ctx());
  Attribute fill = FloatAttr::get(elem, 0.0);
  if (const auto *a = ctx.attr("value")) {
    DenseElementsAttr v = tensorProtoToAttr(ctx.ctx(), a->t());
    if (!v || v.getNumElements() != 1) {
      ctx.emitError() << "value must be a one-element tensor";
      return failure();
    }
    elem = v.getElementType();
    fill = v.getSplatValue<Attribute>();
  }
  auto type = RankedTensorType::get(**shape, elem);
  ctx.results.push_back(ctx.constant(DenseElementsAttr::get(type, fill)));
  return success();
}

/// Ops whose one output is the input (inference-mode Dropout, Identity).
LogicalResult importPassThrough(NodeContext &ctx) {
  if (ctx.node().op_type() == "Dropout" && ctx.input(2)) {
    DenseElementsAttr training = ctx.constInput(2);
    if (!training || training.getNumElements() != 1 ||
        training.getSplatValue<APInt>().getBoolValue()) {
      ctx.emitError() << "training_mode must be a constant false: zero-opt compiles "
                         "inference programs, where Dropout is the identity";
      return failure();
    }
  }
  ctx.results.push_back(ctx.input(0));
  if (ctx.node().op_type() == "Dropout" && ctx.outputUsed(1)) {
    auto maskType = ctx.inputType(0).clone(IntegerType::get(ctx.ctx(), 1));
    ctx.results.push_back(ctx.constant(
        DenseElementsAttr::get(maskType, BoolAttr::get(ctx.ctx(), true))));
  }
  return success();
}

LogicalResult importCast(NodeContext &ctx) {
  Type to = elementTypeFor(ctx.ctx(), int32_t(ctx.attrInt("to", 0)));
  if (!to) {
    ctx.emitError() << "unsupported target type " << ctx.attrInt("to", 0);
    return failure();
  }
  if (to == ctx.inputType(0).getElementType()) {
    ctx.results.push_back(ctx.input(0));
    return success();
  }
  return setResult(ctx, ctx.create1("Cast", {ctx.input(0)}, {ctx.type("to", to)}));
}

LogicalResult importCastLike(NodeContext &ctx) {
  Type to = ctx.inputType(1).getElementType();
  if (to == ctx.inputType(0).getElementType()) {
    ctx.results.push_back(ctx.input(0));
    return success();
  }
  return setResult(ctx, ctx.create1("Cast", {ctx.input(0)}, {ctx.type("to", to)}));
}

LogicalResult importClip(NodeContext &ctx) {
  SmallVector<NamedAttribute> attrs;
  auto bound = [&](size_t input, StringRef name) -> LogicalResult {
    if (ctx.attr(name)) // opset < 11 form, kept for robustness
      attrs.push_back(ctx.f64(name, ctx.attrFloat(name, 0)));
    if (!ctx.input(input))
      return success();
    DenseElementsAttr c = ctx.constInput(input);
    if (!c || c.getNumElements() != 1) {
      ctx.emitError() << name << " must be a constant scalar";
      return failure();
    }
    double v = isa<FloatType>(c.getElementType())
                   ? c.getSplatValue<APFloat>().convertToDouble()
                   : double(c.getSplatValue<APInt>().getSExtValue());
    attrs.push_back(ctx.f64(name, v));
    return success();
  };
  if (failed(bound(1, "min")) || failed(bound(2, "max")))
    return failure();
  return setResult(ctx, ctx.create1("Clip", {ctx.input(0)}, attrs));
}

/// Softmax/LogSoftmax/ArgMax/...: one `axis` attribute, normalised.
OpImporter withAxis(StringRef op, int64_t dflt, SmallVector<std::string> intAttrs = {}) {
  std::string name = op.str();
  return [=](NodeContext &ctx) -> LogicalResult {
    FailureOr<int64_t> axis =
        ctx.normalizeAxis(ctx.attrInt("axis", dflt), ctx.inputType(0).getRank());
    if (failed(axis))
      return failure();
    SmallVector<NamedAttribute> attrs{ctx.i64("axis", *axis)};
    for (const auto &a : intAttrs)
      if (ctx.attr(a))
        attrs.push_back(ctx.i64(a, ctx.attrInt(a, 0)));
    SmallVector<Value> operands;
    for (size_t i = 0; i < ctx.numInputs(); ++i)
      operands.push_back(ctx.input(i));
    return setResult(ctx, ctx.create1(name, operands, attrs));
  };
}

LogicalResult importLayerNorm(NodeContext &ctx) {
  if (ctx.outputUsed(1) || ctx.outputUsed(2)) {
    ctx.emitError() << "the Mean and InvStdDev outputs are not supported";
    return failure();
  }
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", -1), ctx.inputType(0).getRank());
  if (failed(axis))
    return failure();
  return setResult(ctx, ctx.create1("LayerNormalization",
                                    {ctx.input(0), ctx.input(1), ctx.input(2)},
                                    {ctx.i64("axis", *axis),
                                     ctx.f32("epsilon", ctx.attrFloat("epsilon", 1e-5f))}));
}

LogicalResult importRMSNorm(NodeContext &ctx) {
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", -1), ctx.inputType(0).getRank());
  if (failed(axis))
    return failure();
  return setResult(ctx, ctx.create1("RMSNormalization", {ctx.input(0), ctx.input(1)},
                                    {ctx.i64("axis", *axis),
                                     ctx.f32("epsilon", ctx.attrFloat("epsilon", 1e-5f))}));
}

LogicalResult importGemm(NodeContext &ctx) {
  return setResult(ctx, ctx.create1("Gemm", {ctx.input(0), ctx.input(1), ctx.input(2)},
                                    {ctx.f32("alpha", ctx.attrFloat("alpha", 1)),
                                     ctx.f32("beta", ctx.attrFloat("beta", 1)),
                                     ctx.i64("transA", ctx.attrInt("transA", 0)),
                                     ctx.i64("transB", ctx.attrInt("transB", 0))}));
}

LogicalResult importSoftmaxCrossEntropy(NodeContext &ctx) {
  if (ctx.outputUsed(1)) {
    ctx.emitError() << "the log_prob output is not supported";
    return failure();
  }
  SmallVector<NamedAttribute> attrs{ctx.str("reduction", ctx.attrString("reduction", "mean"))};
  if (ctx.attr("ignore_index"))
    attrs.push_back(ctx.i64("ignore_index", ctx.attrInt("ignore_index", 0)));
  return setResult(ctx, ctx.create1("SoftmaxCrossEntropyLoss",
                                    {ctx.input(0), ctx.input(1), ctx.input(2)}, attrs));
}

/// Axes given as an attribute (older opsets) or as input 1 (newer ones).
FailureOr<std::optional<Ints>> axesOf(NodeContext &ctx, size_t input,
                                      StringRef attrName = "axes") {
  if (auto a = ctx.attrInts(attrName))
    return std::optional<Ints>(*a);
  return ctx.constIntsInput(input, attrName);
}

FailureOr<Ints> normalizeAxes(NodeContext &ctx, ArrayRef<int64_t> axes, int64_t rank) {
  Ints out;
  for (int64_t a : axes) {
    FailureOr<int64_t> n = ctx.normalizeAxis(a, rank, "axes entry");
    if (failed(n))
      return failure();
    out.push_back(*n);
  }
  llvm::sort(out);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

OpImporter reduce(StringRef op) {
  std::string name = op.str();
  return [=](NodeContext &ctx) -> LogicalResult {
    int64_t rank = ctx.inputType(0).getRank();
    FailureOr<std::optional<Ints>> axes = axesOf(ctx, 1);
    if (failed(axes))
      return failure();
    Ints list;
    if (*axes && !(**axes).empty()) {
      FailureOr<Ints> n = normalizeAxes(ctx, **axes, rank);
      if (failed(n))
        return failure();
      list = *n;
    } else if (ctx.attrInt("noop_with_empty_axes", 0)) {
      ctx.results.push_back(ctx.input(0));
      return success();
    } else {
      for (int64_t d = 0; d < rank; ++d)
        list.push_back(d);
    }
    return setResult(ctx, ctx.create1(name, {ctx.input(0)},
                                      {ctx.i64s("axes", list),
                                       ctx.i64("keepdims", ctx.attrInt("keepdims", 1))}));
  };
}

LogicalResult importReshape(NodeContext &ctx) {
  auto shape = ctx.constIntsInput(1, "shape");
  if (failed(shape))
    return failure();
  ArrayRef<int64_t> in = ctx.inputType(0).getShape();
  bool allowZero = ctx.attrInt("allowzero", 0);
  Ints out = **shape;
  int64_t known = 1, inferIdx = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allowZero) {
      if (i >= in.size()) {
        ctx.emitError() << "shape entry " << i << " is 0 (copy) but the input has rank "
                        << in.size();
        return failure();
      }
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (inferIdx >= 0) {
        ctx.emitError() << "shape has more than one -1";
        return failure();
      }
      inferIdx = i;
      continue;
    }
    known *= out[i];
  }
  if (inferIdx >= 0) {
    int64_t total = ctx.inputType(0).getNumElements();
    if (known == 0 || total % known) {
      ctx.emitError() << "cannot infer the -1 entry of shape: " << total
                      << " elements are not a multiple of " << known;
      return failure();
    }
    out[inferIdx] = total / known;
  }
  return setResult(ctx, ctx.create1("Reshape", {ctx.input(0)}, {ctx.i64s("shape", out)}));
}

LogicalResult importFlatten(NodeContext &ctx) {
  int64_t rank = ctx.inputType(0).getRank();
  int64_t axis = ctx.attrInt("axis", 1);
  if (axis < 0)
    axis += rank;
  return setResult(ctx, ctx.create1("Flatten", {ctx.input(0)}, {ctx.i64("axis", axis)}));
}

LogicalResult importUnsqueeze(NodeContext &ctx) {
  FailureOr<std::optional<Ints>> axes = axesOf(ctx, 1);
  if (failed(axes) || !*axes) {
    if (succeeded(axes))
      ctx.emitError() << "axes are required";
    return failure();
  }
  int64_t outRank = ctx.inputType(0).getRank() + (**axes).size();
  FailureOr<Ints> list = normalizeAxes(ctx, **axes, outRank);
  if (failed(list))
    return failure();
  return setResult(ctx, ctx.create1("Unsqueeze", {ctx.input(0)}, {ctx.i64s("axes", *list)}));
}

LogicalResult importSqueeze(NodeContext &ctx) {
  FailureOr<std::optional<Ints>> axes = axesOf(ctx, 1);
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  Ints list;
  if (*axes) {
    FailureOr<Ints> n = normalizeAxes(ctx, **axes, shape.size());
    if (failed(n))
      return failure();
    list = *n;
  } else {
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] == 1)
        list.push_back(d);
  }
  return setResult(ctx, ctx.create1("Squeeze", {ctx.input(0)}, {ctx.i64s("axes", list)}));
}

LogicalResult importTranspose(NodeContext &ctx) {
  int64_t rank = ctx.inputType(0).getRank();
  Ints perm;
  if (auto p = ctx.attrInts("perm")) {
    perm = *p;
  } else {
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  }
  return setResult(ctx, ctx.create1("Transpose", {ctx.input(0)}, {ctx.i64s("perm", perm)}));
}

LogicalResult importConcat(NodeContext &ctx) {
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", 0), ctx.inputType(0).getRank());
  if (failed(axis))
    return failure();
  // Inputs without elements add nothing (exporters emit them for empty
  // caches) and are dropped, unless all are empty: then all are kept so the
  // result keeps the sum of their sizes along axis.
  SmallVector<Value> operands, all;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.input(i))
      continue;
    all.push_back(ctx.input(i));
    if (ctx.inputType(i).getNumElements() != 0)
      operands.push_back(ctx.input(i));
  }
  if (operands.empty())
    operands = all;
  return setResult(ctx, ctx.create1("Concat", operands, {ctx.i64("axis", *axis)}));
}

LogicalResult importSplit(NodeContext &ctx) {
  auto type = ctx.inputType(0);
  FailureOr<int64_t> axis = ctx.normalizeAxis(ctx.attrInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = type.getDimSize(*axis);
  Ints sizes;
  FailureOr<std::optional<Ints>> split = axesOf(ctx, 1, "split");
  if (failed(split))
    return failure();
  size_t parts = ctx.numOutputs();
  if (*split) {
    sizes = **split;
  } else {
    int64_t n = ctx.attr("num_outputs") ? ctx.attrInt("num_outputs", 1) : int64_t(parts);
    int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  FailureOr<SmallVector<Value>> results =
      ctx.create("Split", {ctx.input(0)},
                 {ctx.i64("axis", *axis), ctx.i64s("split", sizes)}, sizes.size());
  if (failed(results))
    return failure();
  ctx.results = *results;
  return success();
}

LogicalResult importSlice(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  int64_t rank = shape.size();
  auto starts = ctx.constIntsInput(1, "starts");
  auto ends = ctx.constIntsInput(2, "ends");
  auto axes = ctx.constIntsInput(3, "axes");
  auto steps = ctx.constIntsInput(4, "steps");
  if (failed(starts) || failed(ends) || failed(axes) || failed(steps))
    return failure();
  Ints s(rank, 0), e(shape.begin(), shape.end()), st(rank, 1);
  size_t n = (**starts).size();
  if ((**ends).size() != n || (*axes && (**axes).size() != n) ||
      (*steps && (**steps).size() != n)) {
    ctx.emitError() << "starts, ends, axes and steps must have the same length";
    return failure();
  }
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = *axes ? (**axes)[i] : int64_t(i);
    FailureOr<int64_t> a = ctx.normalizeAxis(axis, rank, "axes entry");
    if (failed(a))
      return failure();
    int64_t dim = shape[*a];
    int64_t step = *steps ? (**steps)[i] : 1;
    if (step == 0) {
      ctx.emitError() << "steps must be non-zero";
      return failure();
    }
    int64_t start = (**starts)[i], end = (**ends)[i];
    // ONNX: negative values count from the end, then clamp.
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    } else {
      start = end = 0; // An empty dim slices to nothing, whatever the step.
    }
    s[*a] = start;
    e[*a] = end;
    st[*a] = step;
  }
  return setResult(ctx, ctx.create1("Slice", {ctx.input(0)},
                                    {ctx.i64s("starts", s), ctx.i64s("ends", e),
                                     ctx.i64s("steps", st)}));
}

LogicalResult importExpand(NodeContext &ctx) {
  auto shape = ctx.constIntsInput(1, "shape");
  if (failed(shape))
    return failure();
  return setResult(ctx, ctx.create1("Expand", {ctx.input(0)}, {ctx.i64s("shape", **shape)}));
}

LogicalResult importTile(NodeContext &ctx) {
  auto repeats = ctx.constIntsInput(1, "repeats");
  if (failed(repeats))
    return failure();
  return setResult(ctx, ctx.create1("Tile", {ctx.input(0)}, {ctx.i64s("repeats", **repeats)}));
}

LogicalResult importPad(NodeContext &ctx) {
  int64_t rank = ctx.inputType(0).getRank();
  auto pads = ctx.constIntsInput(1, "pads");
  auto axes = ctx.constIntsInput(3, "axes");
  if (failed(pads) || failed(axes))
    return failure();
  if (!*pads) {
    ctx.emitError() << "pads are required";
    return failure();
  }
  Ints full(2 * rank, 0);
  if (*axes) {
    size_t n = (**axes).size();
    for (size_t i = 0; i < n; ++i) {
      FailureOr<int64_t> a = ctx.normalizeAxis((**axes)[i], rank, "axes entry");
      if (failed(a))
        return failure();
      full[*a] = (**pads)[i];
      full[*a + rank] = (**pads)[i + n];
    }
  } else {
    full = **pads;
  }
  double value = 0;
  if (ctx.input(2)) {
    DenseElementsAttr c = ctx.constInput(2);
    if (!c) {
      ctx.emitError() << "constant_value must be a constant";
      return failure();
    }
    value = isa<FloatType>(c.getElementType())
                ? c.getSplatValue<APFloat>().convertToDouble()
                : double(c.getSplatValue<APInt>().getSExtValue());
  }
  return setResult(ctx, ctx.create1("Pad", {ctx.input(0)},
                                    {ctx.i64s("pads", full),
                                     ctx.str("mode", ctx.attrString("mode", "constant")),
                                     ctx.f64("value", value)}));
}

LogicalResult importTrilu(NodeContext &ctx) {
  auto k = ctx.constIntsInput(1, "k");
  if (failed(k))
    return failure();
  int64_t kv = *k && !(**k).empty() ? (**k)[0] : 0;
  return setResult(ctx, ctx.create1("Trilu", {ctx.input(0)},
                                    {ctx.i64("upper", ctx.attrInt("upper", 1)),
                                     ctx.i64("k", kv)}));
}

LogicalResult importRange(NodeContext &ctx) {
  DenseElementsAttr start = ctx.constInput(0), limit = ctx.constInput(1),
                    delta = ctx.constInput(2);
  if (!start || !limit || !delta) {
    ctx.emitError() << "start, limit and delta must be constants once input shapes "
                       "are fixed";
    return failure();
  }
  auto asDouble = [](DenseElementsAttr a) {
    return isa<FloatType>(a.getElementType())
               ? a.getSplatValue<APFloat>().convertToDouble()
               : double(a.getSplatValue<APInt>().getSExtValue());
  };
  double d = asDouble(delta);
  if (d == 0) {
    ctx.emitError() << "delta must be non-zero";
    return failure();
  }
  int64_t size = std::max<int64_t>(
      0, int64_t(std::ceil((asDouble(limit) - asDouble(start)) / d)));
  return setResult(ctx, ctx.create1("Range", {ctx.input(0), ctx.input(1), ctx.input(2)},
                                    {ctx.i64("size", size)}));
}

LogicalResult importCumSum(NodeContext &ctx) {
  auto axis = ctx.constIntsInput(1, "axis");
  if (failed(axis))
    return failure();
  if (!*axis || (**axis).size() != 1) {
    ctx.emitError() << "axis must be a constant scalar";
    return failure();
  }
  FailureOr<int64_t> a = ctx.normalizeAxis((**axis)[0], ctx.inputType(0).getRank());
  if (failed(a))
    return failure();
  return setResult(ctx, ctx.create1("CumSum", {ctx.input(0)},
                                    {ctx.i64("axis", *a),
                                     ctx.i64("exclusive", ctx.attrInt("exclusive", 0)),
                                     ctx.i64("reverse", ctx.attrInt("reverse", 0))}));
}

LogicalResult importGelu(NodeContext &ctx) {
  return setResult(ctx, ctx.create1("Gelu", {ctx.input(0)},
                                    {ctx.str("approximate",
                                             ctx.attrString("approximate", "none"))}));
}

} // namespace

const llvm::StringMap<OpImporter> &zero::import::getOpImporters() {
  static const llvm::StringMap<OpImporter> table = [] {
    llvm::StringMap<OpImporter> t;
    for (const char *op : {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less",
                           "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or",
                           "Xor", "Where", "Neg", "Abs", "Sqrt", "Reciprocal", "Exp",
                           "Log", "Tanh", "Erf", "Sigmoid", "Relu", "Sin", "Cos",
                           "Floor", "Ceil", "Round", "Sign", "Softplus", "Not",
                           "HardSwish", "IsNaN", "MatMul"})
      t[op] = direct(op);
    t["Mod"] = direct("Mod", {"fmod"});
    t["IsInf"] = direct("IsInf", {"detect_negative", "detect_positive"});
    t["LeakyRelu"] = direct("LeakyRelu", {}, {"alpha"});
    t["Elu"] = direct("Elu", {}, {"alpha"});
    t["HardSigmoid"] = direct("HardSigmoid", {}, {"alpha", "beta"});
    t["Gelu"] = importGelu;
    t["Sum"] = variadic("Add");
    t["Mean"] = variadic("Add", /*mean=*/true);
    t["Max"] = variadic("Max");
    t["Min"] = variadic("Min");
    t["Constant"] = importConstant;
    t["Shape"] = importShape;
    t["Size"] = importSize;
    t["ConstantOfShape"] = importConstantOfShape;
    t["Identity"] = importPassThrough;
    t["Dropout"] = importPassThrough;
    t["Cast"] = importCast;
    t["CastLike"] = importCastLike;
    t["Clip"] = importClip;
    t["Gemm"] = importGemm;
    t["Softmax"] = withAxis("Softmax", -1);
    t["LogSoftmax"] = withAxis("LogSoftmax", -1);
    t["ArgMax"] = withAxis("ArgMax", 0, {"keepdims", "select_last_index"});
    t["ArgMin"] = withAxis("ArgMin", 0, {"keepdims", "select_last_index"});
    t["Gather"] = withAxis("Gather", 0);
    t["GatherElements"] = withAxis("GatherElements", 0);
    t["ScatterElements"] = [](NodeContext &ctx) -> LogicalResult {
      FailureOr<int64_t> axis =
          ctx.normalizeAxis(ctx.attrInt("axis", 0), ctx.inputType(0).getRank());
      if (failed(axis))
        return failure();
      return setResult(ctx, ctx.create1("ScatterElements",
                                        {ctx.input(0), ctx.input(1), ctx.input(2)},
                                        {ctx.i64("axis", *axis),
                                         ctx.str("reduction", ctx.attrString("reduction", "none"))}));
    };
    t["ScatterND"] = direct("ScatterND", {}, {}, {"reduction"});
    t["GatherND"] = direct("GatherND", {"batch_dims"});
    t["LayerNormalization"] = importLayerNorm;
    t["RMSNormalization"] = importRMSNorm;
    t["SoftmaxCrossEntropyLoss"] = importSoftmaxCrossEntropy;
    for (const char *op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                           "ReduceProd", "ReduceL2", "ReduceSumSquare",
                           "ReduceLogSumExp"})
      t[op] = reduce(op);
    t["Reshape"] = importReshape;
    t["Flatten"] = importFlatten;
    t["Unsqueeze"] = importUnsqueeze;
    t["Squeeze"] = importSqueeze;
    t["Transpose"] = importTranspose;
    t["Concat"] = importConcat;
    t["Split"] = importSplit;
    t["Slice"] = importSlice;
    t["Expand"] = importExpand;
    t["Tile"] = importTile;
    t["Pad"] = importPad;
    t["Trilu"] = importTrilu;
    t["Range"] = importRange;
    t["CumSum"] = importCumSum;
    return t;
  }();
  return table;
}
