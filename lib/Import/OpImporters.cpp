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
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/xxhash.h"

#include <cmath>
#include <limits>

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
    // The same check as for initializers, before a type is built from dims.
    if (std::string problem = tensorDimsProblem(a.t()); !problem.empty()) {
      ctx.emitError() << "value " << problem;
      return failure();
    }
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
    if (std::string problem = tensorDimsProblem(a->t()); !problem.empty()) {
      ctx.emitError() << "value " << problem;
      return failure();
    }
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

/// Dropout with training_mode true: onnx.TrainingDropout, its ratio (input 1,
/// default 0.5) a constant. The stream tells the nodes apart: a hash of the
/// node's output name, stable across imports of the same file.
LogicalResult importTrainingDropout(NodeContext &ctx) {
  double ratio = 0.5;
  if (ctx.input(1)) {
    DenseElementsAttr r = ctx.constInput(1);
    if (!r || r.getNumElements() != 1 || !isa<FloatType>(r.getElementType())) {
      ctx.emitError() << "ratio must be a constant scalar in training mode";
      return failure();
    }
    ratio = r.getSplatValue<APFloat>().convertToDouble();
  }
  if (!(ratio >= 0 && ratio < 1)) {
    ctx.emitError() << "ratio must be in [0, 1), got " << ratio;
    return failure();
  }
  if (!isa<FloatType>(ctx.inputType(0).getElementType())) {
    ctx.emitError() << "training-mode Dropout of a non-float tensor is not supported";
    return failure();
  }
  uint64_t stream = llvm::xxh3_64bits(ctx.node().output(0)) >> 1;
  SmallVector<NamedAttribute> attrs{ctx.f64("ratio", ratio),
                                    ctx.i64("seed", ctx.attrInt("seed", 0)),
                                    ctx.i64("stream", int64_t(stream))};
  auto results = ctx.create("TrainingDropout", {ctx.input(0)}, attrs, 2);
  if (failed(results))
    return failure();
  ctx.results.push_back((*results)[0]);
  if (ctx.outputUsed(1))
    ctx.results.push_back((*results)[1]);
  return success();
}

/// Ops whose one output is the input (inference-mode Dropout, Identity).
LogicalResult importPassThrough(NodeContext &ctx) {
  if (ctx.node().op_type() == "Dropout" && ctx.input(2)) {
    DenseElementsAttr training = ctx.constInput(2);
    if (!training || training.getNumElements() != 1) {
      ctx.emitError() << "training_mode must be a constant scalar (true or false)";
      return failure();
    }
    if (training.getSplatValue<APInt>().getBoolValue())
      return importTrainingDropout(ctx);
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
    ctx.emitError() << "unsupported target type "
                    << dataTypeName(int32_t(ctx.attrInt("to", 0)))
                    << "; docs/ops.md lists the supported types";
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
  // Constant bounds become attributes. A bound computed at run time (T5 in
  // float16 clamps to a value chosen by isinf(x).any()) becomes Max / Min:
  // clip(x) = min(max(x, min), max), the lower bound first, so that min > max
  // still gives max as ONNX says.
  SmallVector<NamedAttribute> attrs;
  Value runtimeMin, runtimeMax;
  auto bound = [&](size_t input, StringRef name, Value &runtime) -> LogicalResult {
    if (ctx.attr(name)) // opset < 11 form, kept for robustness
      attrs.push_back(ctx.f64(name, ctx.attrFloat(name, 0)));
    if (!ctx.input(input))
      return success();
    DenseElementsAttr c = ctx.constInput(input);
    if (!c) {
      if (ctx.inputType(input).getNumElements() != 1 ||
          ctx.inputType(input).getElementType() != ctx.inputType(0).getElementType()) {
        ctx.emitError() << name << " must be a scalar of the input's element type, got "
                        << ctx.inputType(input);
        return failure();
      }
      runtime = ctx.input(input);
      if (ctx.inputType(input).getRank() != 0) { // float[1]: keep the result's rank
        FailureOr<Value> scalar =
            ctx.create1("Reshape", {runtime}, {ctx.i64s("shape", {})});
        if (failed(scalar))
          return failure();
        runtime = *scalar;
      }
      return success();
    }
    if (c.getNumElements() != 1) {
      ctx.emitError() << name << " must be a constant scalar";
      return failure();
    }
    double v = isa<FloatType>(c.getElementType())
                   ? c.getSplatValue<APFloat>().convertToDouble()
                   : double(c.getSplatValue<APInt>().getSExtValue());
    attrs.push_back(ctx.f64(name, v));
    return success();
  };
  if (failed(bound(1, "min", runtimeMin)) || failed(bound(2, "max", runtimeMax)))
    return failure();
  Value x = ctx.input(0);
  if (runtimeMin) {
    FailureOr<Value> v = ctx.create1("Max", {x, runtimeMin});
    if (failed(v))
      return failure();
    x = *v;
  }
  if (!attrs.empty() || (!runtimeMin && !runtimeMax)) {
    FailureOr<Value> v = ctx.create1("Clip", {x}, attrs);
    if (failed(v))
      return failure();
    x = *v;
  }
  if (runtimeMax) {
    FailureOr<Value> v = ctx.create1("Min", {x, runtimeMax});
    if (failed(v))
      return failure();
    x = *v;
  }
  ctx.results.push_back(x);
  return success();
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

LogicalResult importNegativeLogLikelihood(NodeContext &ctx) {
  SmallVector<NamedAttribute> attrs{ctx.str("reduction", ctx.attrString("reduction", "mean"))};
  if (ctx.attr("ignore_index"))
    attrs.push_back(ctx.i64("ignore_index", ctx.attrInt("ignore_index", 0)));
  return setResult(ctx, ctx.create1("NegativeLogLikelihoodLoss",
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

/// Like NodeContext::constIntsInput, for inputs that may also be an empty
/// tensor standing for "absent" (Resize's scales and sizes).
FailureOr<std::optional<Ints>> constIntsInputOrEmpty(NodeContext &ctx, size_t i,
                                                     StringRef what) {
  if (ctx.input(i) && ctx.inputType(i).getNumElements() == 0)
    return std::optional<Ints>(Ints());
  return ctx.constIntsInput(i, what);
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
    // Zero-sized tensors are supported, but a -1 next to a 0 entry fits any
    // size (ONNX and onnxruntime refuse it too). Exporters write such shapes
    // for batch or sequence dims, so this is where a zero-sized input (from
    // --input-shape, typically) first fails: name the input.
    if (known == 0) {
      InFlightDiagnostic diag = ctx.emitError();
      diag << "cannot infer the -1 entry of shape [";
      llvm::interleaveComma(**shape, diag);
      diag << "]: its other entries multiply to 0, so any size fits (the data is "
           << ctx.inputType(0) << ")";
      std::string zeroSized = ctx.zeroSizedGraphInputs();
      if (!zeroSized.empty())
        diag << "; the zero-sized data comes from " << zeroSized
             << ": give --input-shape non-zero dimensions";
      return failure();
    }
    if (total % known) {
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
    // ONNX: as many outputs as the node declares, at most one per element.
    if (n < 1 || n != int64_t(parts) || (dim > 0 && n > dim)) {
      mlir::emitError(ctx.loc())
          << "Split: num_outputs " << n << " must be between 1 and the split "
          << "dimension (" << dim << ") and equal the node's " << parts
          << " output(s)";
      return failure();
    }
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
    // getSplatValue reads past the data of an empty (or any non-scalar) tensor.
    if (c.getNumElements() != 1) {
      ctx.emitError() << "constant_value (input 2, '" << ctx.node().input(2)
                      << "') must be a scalar, got " << c.getType();
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
  // ONNX wants scalars; an empty tensor gets here from shape arithmetic (a
  // Shape whose start/end clamp to nothing), and getSplatValue would read
  // past its data.
  static const char *const names[] = {"start", "limit", "delta"};
  DenseElementsAttr operands[] = {start, limit, delta};
  for (int i = 0; i < 3; ++i) {
    if (operands[i].getNumElements() != 1) {
      ctx.emitError() << names[i] << " (input " << i << ", '" << ctx.node().input(i)
                      << "') must be a scalar, got " << operands[i].getType();
      return failure();
    }
  }
  if (limit.getElementType() != start.getElementType() ||
      delta.getElementType() != start.getElementType()) {
    ctx.emitError() << "start, limit and delta must have the same element type, got "
                    << start.getElementType() << ", " << limit.getElementType()
                    << " and " << delta.getElementType();
    return failure();
  }
  // The result's byte size must fit in int64 for its type to make sense;
  // larger counts (or ones int64 cannot hold) are errors, not wrapped sizes.
  Type elem = start.getElementType();
  uint64_t maxCount = uint64_t(std::numeric_limits<int64_t>::max()) /
                      std::max(1u, elem.getIntOrFloatBitWidth() / 8);
  auto tooLarge = [&](const auto &count) {
    ctx.emitError() << "the result would have " << count
                    << " elements, more than a tensor can hold";
    return failure();
  };
  int64_t size;
  if (isa<FloatType>(elem)) {
    auto asDouble = [](DenseElementsAttr a) {
      return a.getSplatValue<APFloat>().convertToDouble();
    };
    double d = asDouble(delta);
    if (d == 0) {
      ctx.emitError() << "delta must be non-zero";
      return failure();
    }
    double count = std::ceil((asDouble(limit) - asDouble(start)) / d);
    if (std::isnan(count)) {
      ctx.emitError() << "start, limit and delta give no element count (NaN)";
      return failure();
    }
    // Compared as doubles: converting a count past int64 (or +-inf) is UB.
    if (count >= double(maxCount))
      return tooLarge(count);
    size = count > 0 ? int64_t(count) : 0;
  } else {
    // Exact integer arithmetic: limit - start of two int64 needs 65 bits, and
    // a double loses the low bits and overflows int64 on the conversion.
    APInt s = start.getSplatValue<APInt>(), l = limit.getSplatValue<APInt>(),
          d = delta.getSplatValue<APInt>();
    bool isUnsigned = cast<IntegerType>(elem).isUnsigned();
    auto wide = [&](const APInt &v) {
      return isUnsigned ? v.zext(130) : v.sext(130);
    };
    if (d.isZero()) {
      ctx.emitError() << "delta must be non-zero";
      return failure();
    }
    APInt diff = wide(l) - wide(s), step = wide(d);
    // ceil(diff / step) for any signs: truncating division, plus one when
    // the exact quotient is positive and not whole (the remainder has
    // diff's sign, so that is when it has step's sign too).
    APInt q = diff.sdiv(step), r = diff.srem(step);
    if (!r.isZero() && (r.isNegative() == step.isNegative()))
      q += 1;
    if (q.isNegative())
      q = APInt(130, 0);
    if (q.ugt(APInt(130, maxCount))) {
      SmallString<40> text;
      q.toStringUnsigned(text);
      return tooLarge(text.str());
    }
    size = int64_t(q.getZExtValue());
  }
  // Up to the folding limit the op folds to a constant; above it, it stays
  // an onnx.Range of static size.
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

//===----------------------------------------------------------------------===//
// Convolution, pooling, normalisation and resampling over [N, C, D1, ...]
//===----------------------------------------------------------------------===//

/// The normalised window attributes of a conv or pool: strides and dilations
/// with one entry per spatial dim, pads with two (begins, then ends), auto_pad
/// resolved.
struct Window {
  Ints strides, dilations, pads;
};

/// An ints attribute with `n` entries, or `n` copies of `dflt` when absent.
FailureOr<Ints> spatialInts(NodeContext &ctx, StringRef name, size_t n, int64_t dflt) {
  std::optional<Ints> v = ctx.attrInts(name);
  if (!v)
    return Ints(n, dflt);
  if (v->size() != n) {
    ctx.emitError() << name << " has " << v->size() << " entries, expected " << n
                    << " (one per spatial dim"
                    << (name == "pads" ? ", begins then ends)" : ")");
    return failure();
  }
  return *v;
}

/// Reads strides, dilations, pads and auto_pad for a window of `kernel` taps
/// sliding over the spatial dims `in` (convolution and pooling: SAME pads so
/// that the output is ceil(in / stride)).
FailureOr<Window> windowAttrs(NodeContext &ctx, ArrayRef<int64_t> in,
                              ArrayRef<int64_t> kernel) {
  size_t k = in.size();
  Window w;
  FailureOr<Ints> strides = spatialInts(ctx, "strides", k, 1);
  FailureOr<Ints> dilations = spatialInts(ctx, "dilations", k, 1);
  FailureOr<Ints> pads = spatialInts(ctx, "pads", 2 * k, 0);
  if (failed(strides) || failed(dilations) || failed(pads))
    return failure();
  w.strides = *strides;
  w.dilations = *dilations;
  for (size_t i = 0; i < k; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1) {
      ctx.emitError() << "strides and dilations must be positive";
      return failure();
    }
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    w.pads = *pads;
  } else if (autoPad == "VALID") {
    w.pads.assign(2 * k, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    w.pads.assign(2 * k, 0);
    for (size_t i = 0; i < k; ++i) {
      int64_t out = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t extent = (kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + extent - in[i]);
      int64_t small = total / 2, large = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : large;
      w.pads[k + i] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else {
    ctx.emitError() << "auto_pad \"" << autoPad
                    << "\" is not NOTSET, SAME_UPPER, SAME_LOWER or VALID";
    return failure();
  }
  if (llvm::any_of(w.pads, [](int64_t p) { return p < 0; })) {
    ctx.emitError() << "pads must be non-negative";
    return failure();
  }
  return w;
}

/// X's spatial dims, or an error when X is not [N, C, D1, ...].
FailureOr<Ints> spatialDims(NodeContext &ctx) {
  RankedTensorType xt = ctx.inputType(0);
  if (xt.getRank() < 3) {
    ctx.emitError() << "X must be [N, C, D1, ...] with at least one spatial dim, got "
                    << xt;
    return failure();
  }
  return Ints(xt.getShape().drop_front(2));
}

/// W's kernel dims, checked against a kernel_shape attribute when given.
FailureOr<Ints> convKernel(NodeContext &ctx, size_t k) {
  RankedTensorType wt = ctx.inputType(1);
  if (size_t(wt.getRank()) != k + 2) {
    ctx.emitError() << "W must have rank " << k + 2 << " like X, got " << wt;
    return failure();
  }
  Ints kernel(wt.getShape().drop_front(2));
  if (auto ks = ctx.attrInts("kernel_shape"); ks && *ks != kernel) {
    InFlightDiagnostic d = ctx.emitError();
    d << "kernel_shape [";
    llvm::interleaveComma(*ks, d);
    d << "] differs from W's kernel dims " << wt;
    return failure();
  }
  return kernel;
}

LogicalResult importConv(NodeContext &ctx) {
  FailureOr<Ints> in = spatialDims(ctx);
  if (failed(in))
    return failure();
  FailureOr<Ints> kernel = convKernel(ctx, in->size());
  if (failed(kernel))
    return failure();
  FailureOr<Window> w = windowAttrs(ctx, *in, *kernel);
  if (failed(w))
    return failure();
  return setResult(ctx, ctx.create1("Conv", {ctx.input(0), ctx.input(1), ctx.input(2)},
                                    {ctx.i64("group", ctx.attrInt("group", 1)),
                                     ctx.i64s("strides", w->strides),
                                     ctx.i64s("dilations", w->dilations),
                                     ctx.i64s("pads", w->pads)}));
}

/// ConvTranspose: output_shape, auto_pad and output_padding all become pads
/// (an end pad less the output padding, which may go negative).
LogicalResult importConvTranspose(NodeContext &ctx) {
  FailureOr<Ints> in = spatialDims(ctx);
  if (failed(in))
    return failure();
  size_t k = in->size();
  FailureOr<Ints> kernel = convKernel(ctx, k);
  FailureOr<Ints> strides = spatialInts(ctx, "strides", k, 1);
  FailureOr<Ints> dilations = spatialInts(ctx, "dilations", k, 1);
  FailureOr<Ints> pads = spatialInts(ctx, "pads", 2 * k, 0);
  FailureOr<Ints> outputPadding = spatialInts(ctx, "output_padding", k, 0);
  if (failed(kernel) || failed(strides) || failed(dilations) || failed(pads) ||
      failed(outputPadding))
    return failure();
  for (size_t i = 0; i < k; ++i)
    if ((*strides)[i] < 1 || (*dilations)[i] < 1) {
      ctx.emitError() << "strides and dilations must be positive";
      return failure();
    }
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER") {
    ctx.emitError() << "auto_pad \"" << autoPad
                    << "\" is not NOTSET, SAME_UPPER, SAME_LOWER or VALID";
    return failure();
  }
  std::optional<Ints> outputShape = ctx.attrInts("output_shape");
  if (outputShape && outputShape->size() == k + 2)
    outputShape = Ints(ArrayRef<int64_t>(*outputShape).drop_front(2));
  if (outputShape && outputShape->size() != k) {
    ctx.emitError() << "output_shape has " << outputShape->size() << " entries, expected "
                    << k << " (the spatial dims)";
    return failure();
  }
  if (!outputShape && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")) {
    outputShape = Ints();
    for (size_t i = 0; i < k; ++i)
      outputShape->push_back((*in)[i] * (*strides)[i]);
  }
  Ints p = autoPad == "VALID" ? Ints(2 * k, 0) : *pads;
  if (outputShape) {
    // The total padding that gives output_shape. SAME_UPPER / SAME_LOWER
    // split it (the odd one at the end / the begin, rounding down as ONNX's
    // reference does); otherwise the begin pads stay and the end absorbs
    // the rest (output_shape cuts or extends the end, as the reference).
    bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
    for (size_t i = 0; i < k; ++i) {
      int64_t total = (*strides)[i] * ((*in)[i] - 1) + (*outputPadding)[i] +
                      ((*kernel)[i] - 1) * (*dilations)[i] + 1 - (*outputShape)[i];
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); // floor
      if (same)
        p[i] = autoPad == "SAME_UPPER" ? half : total - half;
      p[k + i] = total - p[i];
    }
  }
  for (size_t i = 0; i < k; ++i)
    p[k + i] -= (*outputPadding)[i];
  return setResult(ctx, ctx.create1("ConvTranspose",
                                    {ctx.input(0), ctx.input(1), ctx.input(2)},
                                    {ctx.i64("group", ctx.attrInt("group", 1)),
                                     ctx.i64s("strides", *strides),
                                     ctx.i64s("dilations", *dilations),
                                     ctx.i64s("pads", p)}));
}

/// MaxPool and AveragePool (output Y only; MaxPool's Indices are not
/// supported).
OpImporter pool(StringRef op) {
  std::string name = op.str();
  return [=](NodeContext &ctx) -> LogicalResult {
    FailureOr<Ints> in = spatialDims(ctx);
    if (failed(in))
      return failure();
    std::optional<Ints> kernel = ctx.attrInts("kernel_shape");
    if (!kernel || kernel->size() != in->size() ||
        llvm::any_of(*kernel, [](int64_t v) { return v < 1; })) {
      ctx.emitError() << "kernel_shape needs " << in->size()
                      << " positive entries (one per spatial dim)";
      return failure();
    }
    FailureOr<Window> w = windowAttrs(ctx, *in, *kernel);
    if (failed(w))
      return failure();
    SmallVector<NamedAttribute> attrs{ctx.i64s("kernel_shape", *kernel),
                                      ctx.i64s("strides", w->strides),
                                      ctx.i64s("dilations", w->dilations),
                                      ctx.i64s("pads", w->pads)};
    if (ctx.attrInt("ceil_mode", 0))
      attrs.push_back(ctx.i64("ceil_mode", 1));
    if (name == "AveragePool" && ctx.attrInt("count_include_pad", 0))
      attrs.push_back(ctx.i64("count_include_pad", 1));
    return setResult(ctx, ctx.create1(name, {ctx.input(0)}, attrs));
  };
}

/// GlobalAveragePool / GlobalMaxPool: ReduceMean / ReduceMax over the spatial
/// dims, kept as size 1.
OpImporter globalPool(StringRef reduceOp) {
  std::string name = reduceOp.str();
  return [=](NodeContext &ctx) -> LogicalResult {
    FailureOr<Ints> in = spatialDims(ctx);
    if (failed(in))
      return failure();
    Ints axes;
    for (size_t d = 0; d < in->size(); ++d)
      axes.push_back(int64_t(d) + 2);
    return setResult(ctx, ctx.create1(name, {ctx.input(0)},
                                      {ctx.i64s("axes", axes), ctx.i64("keepdims", 1)}));
  };
}

LogicalResult importBatchNormalization(NodeContext &ctx) {
  if (ctx.attrInt("training_mode", 0)) {
    ctx.emitError() << "training_mode=1 (normalising with the batch's own statistics and "
                       "updating the running ones) is not supported; export the model "
                       "in eval mode (model.eval()) for the inference form";
    return failure();
  }
  for (size_t i = 1; i < ctx.numOutputs(); ++i)
    if (ctx.outputUsed(i)) {
      ctx.emitError() << "output " << i << " ('" << ctx.node().output(int(i))
                      << "') exists only in training mode; only Y is supported";
      return failure();
    }
  return setResult(ctx, ctx.create1("BatchNormalization",
                                    {ctx.input(0), ctx.input(1), ctx.input(2),
                                     ctx.input(3), ctx.input(4)},
                                    {ctx.f32("epsilon", ctx.attrFloat("epsilon", 1e-5f))}));
}

/// A constant float input as doubles (absent: nullopt); an error naming the
/// input when it is computed at run time.
FailureOr<std::optional<SmallVector<double>>> constFloatsInput(NodeContext &ctx, size_t i,
                                                               StringRef what) {
  if (!ctx.input(i))
    return std::optional<SmallVector<double>>();
  DenseElementsAttr attr = ctx.constInput(i);
  if (!attr) {
    ctx.emitError() << what << " (input " << i << ", '" << ctx.node().input(int(i))
                    << "') must be a constant tensor once input shapes are fixed; it is "
                       "computed from run-time data";
    return failure();
  }
  SmallVector<double> out;
  if (isa<FloatType>(attr.getElementType())) {
    for (APFloat v : attr.getValues<APFloat>())
      out.push_back(v.convertToDouble());
  } else {
    for (APInt v : attr.getValues<APInt>())
      out.push_back(double(v.getSExtValue()));
  }
  return std::optional<SmallVector<double>>(std::move(out));
}

/// The dims Resize's scales, sizes and roi entries refer to: opset 18's
/// axes, normalized, or every dim.
FailureOr<Ints> resizeAxes(NodeContext &ctx, int64_t rank) {
  Ints axes;
  if (auto a = ctx.attrInts("axes")) {
    FailureOr<Ints> n = normalizeAxes(ctx, *a, rank);
    if (failed(n))
      return failure();
    if (n->size() != a->size()) {
      ctx.emitError() << "axes has duplicates";
      return failure();
    }
    axes = *a;
    for (int64_t &v : axes)
      v = v < 0 ? v + rank : v;
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  return axes;
}

/// Resize's output sizes and scales from its `given` sizes of the `axes`
/// dims of `in`, by keep_aspect_ratio_policy (stretch, not_larger,
/// not_smaller).
LogicalResult resizeFromSizes(NodeContext &ctx, ArrayRef<int64_t> in, ArrayRef<int64_t> axes,
                              ArrayRef<int64_t> given, StringRef policy,
                              SmallVector<double> &scales, Ints &sizes) {
  const size_t n = axes.size();
  for (size_t i = 0; i < n; ++i)
    if (given[i] < 1 || in[axes[i]] < 1) {
      ctx.emitError() << "sizes must be positive (and the resized dims non-empty)";
      return failure();
    }
  if (policy == "stretch") {
    for (size_t i = 0; i < n; ++i) {
      sizes[axes[i]] = given[i];
      scales[axes[i]] = double(given[i]) / double(in[axes[i]]);
    }
  } else {
    // One scale for every resized dim: the largest that fits (not_larger)
    // or the smallest that covers (not_smaller).
    double common = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0;
    for (size_t i = 0; i < n; ++i) {
      double r = double(given[i]) / double(in[axes[i]]);
      common = policy == "not_larger" ? std::min(common, r) : std::max(common, r);
    }
    for (size_t i = 0; i < n; ++i) {
      scales[axes[i]] = common;
      sizes[axes[i]] = int64_t(common * double(in[axes[i]]) + 0.5); // half up
    }
  }
  return success();
}

LogicalResult importResize(NodeContext &ctx) {
  RankedTensorType xt = ctx.inputType(0);
  int64_t rank = xt.getRank();
  ArrayRef<int64_t> in = xt.getShape();
  std::string mode = ctx.attrString("mode", "nearest");
  if (ctx.attrInt("antialias", 0) && mode == "nearest") {
    ctx.emitError() << "antialias=1 applies to linear and cubic modes, not nearest";
    return failure();
  }
  std::string ctm = ctx.attrString("coordinate_transformation_mode", "half_pixel");
  std::string policy = ctx.attrString("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
    ctx.emitError() << "keep_aspect_ratio_policy \"" << policy
                    << "\" is not stretch, not_larger or not_smaller";
    return failure();
  }
  // The dims the scales/sizes/roi entries refer to (opset 18's axes).
  FailureOr<Ints> axesOr = resizeAxes(ctx, rank);
  if (failed(axesOr))
    return failure();
  const Ints &axes = *axesOr;
  // roi only matters to tf_crop_and_resize; scales and sizes may be empty
  // tensors standing for "absent".
  auto absentIfEmpty = [&](size_t i, StringRef what)
      -> FailureOr<std::optional<SmallVector<double>>> {
    if (ctx.input(i) && ctx.inputType(i).getNumElements() == 0)
      return std::optional<SmallVector<double>>(SmallVector<double>());
    return constFloatsInput(ctx, i, what);
  };
  FailureOr<std::optional<SmallVector<double>>> roiIn =
      ctm == "tf_crop_and_resize" ? absentIfEmpty(1, "roi")
                                  : std::optional<SmallVector<double>>();
  auto scalesIn = absentIfEmpty(2, "scales");
  auto sizesIn = constIntsInputOrEmpty(ctx, 3, "sizes");
  if (failed(roiIn) || failed(scalesIn) || failed(sizesIn))
    return failure();
  bool haveScales = *scalesIn && !(**scalesIn).empty();
  bool haveSizes = *sizesIn && !(**sizesIn).empty();
  if (haveScales == haveSizes) {
    ctx.emitError() << "exactly one of scales and sizes must be given (non-empty)";
    return failure();
  }
  size_t n = axes.size();
  if ((haveScales && (**scalesIn).size() != n) || (haveSizes && (**sizesIn).size() != n)) {
    ctx.emitError() << (haveScales ? "scales" : "sizes") << " has "
                    << (haveScales ? (**scalesIn).size() : (**sizesIn).size())
                    << " entries, expected " << n;
    return failure();
  }
  SmallVector<double> roi;
  if (ctm == "tf_crop_and_resize") {
    if (!*roiIn || (**roiIn).size() != 2 * n) {
      ctx.emitError() << "tf_crop_and_resize needs a constant roi of " << 2 * n
                      << " entries";
      return failure();
    }
    roi.assign(rank, 0.0);
    roi.append(rank, 1.0);
    for (size_t i = 0; i < n; ++i) {
      roi[axes[i]] = (**roiIn)[i];
      roi[rank + axes[i]] = (**roiIn)[n + i];
    }
  }
  SmallVector<double> scales(rank, 1.0);
  Ints sizes(in.begin(), in.end());
  if (haveScales) {
    for (size_t i = 0; i < n; ++i) {
      double sc = (**scalesIn)[i];
      if (!(sc > 0)) {
        ctx.emitError() << "scales must be positive, got " << sc;
        return failure();
      }
      int64_t a = axes[i];
      double extent = roi.empty() ? 1.0 : roi[rank + a] - roi[a];
      scales[a] = sc;
      sizes[a] = int64_t(std::floor(double(in[a]) * extent * sc));
    }
  } else if (failed(resizeFromSizes(ctx, in, axes, **sizesIn, policy, scales, sizes))) {
    return failure();
  }
  SmallVector<NamedAttribute> attrs{
      ctx.builder().getNamedAttr("scales", ctx.builder().getDenseF64ArrayAttr(scales)),
      ctx.i64s("sizes", sizes),
      ctx.str("mode", mode),
      ctx.str("coordinate_transformation_mode", ctm),
      ctx.str("nearest_mode", ctx.attrString("nearest_mode", "round_prefer_floor")),
      ctx.f64("cubic_coeff_a", ctx.attrFloat("cubic_coeff_a", -0.75f)),
      ctx.i64("exclude_outside", ctx.attrInt("exclude_outside", 0)),
      ctx.f64("extrapolation_value", ctx.attrFloat("extrapolation_value", 0.0f))};
  if (ctx.attrInt("antialias", 0))
    attrs.push_back(ctx.i64("antialias", 1));
  if (!roi.empty())
    attrs.push_back(ctx.builder().getNamedAttr("roi", ctx.builder().getDenseF64ArrayAttr(roi)));
  return setResult(ctx, ctx.create1("Resize", {ctx.input(0)}, attrs));
}

//===----------------------------------------------------------------------===//
// Selection and encoding
//===----------------------------------------------------------------------===//

LogicalResult importTopK(NodeContext &ctx) {
  auto k = ctx.constIntsInput(1, "K");
  if (failed(k))
    return failure();
  if (!*k || (**k).size() != 1) {
    ctx.emitError() << "K must be a constant with one element";
    return failure();
  }
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", -1), ctx.inputType(0).getRank());
  if (failed(axis))
    return failure();
  FailureOr<SmallVector<Value>> results =
      ctx.create("TopK", {ctx.input(0)},
                 {ctx.i64("k", (**k)[0]), ctx.i64("axis", *axis),
                  ctx.i64("largest", ctx.attrInt("largest", 1)),
                  ctx.i64("sorted", ctx.attrInt("sorted", 1))},
                 2);
  if (failed(results))
    return failure();
  ctx.results = *results;
  return success();
}

LogicalResult importOneHot(NodeContext &ctx) {
  auto depth = constFloatsInput(ctx, 1, "depth");
  if (failed(depth))
    return failure();
  if ((**depth).size() != 1) {
    ctx.emitError() << "depth must be a constant with one element";
    return failure();
  }
  double d = (**depth)[0];
  if (!(d >= 1) || d > double(std::numeric_limits<int32_t>::max())) {
    ctx.emitError() << "depth must be at least 1, got " << d;
    return failure();
  }
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", -1), ctx.inputType(0).getRank() + 1);
  if (failed(axis))
    return failure();
  return setResult(ctx, ctx.create1("OneHot", {ctx.input(0), ctx.input(2)},
                                    {ctx.i64("depth", int64_t(d)), ctx.i64("axis", *axis)}));
}

/// NonZero's result shape is the number of nonzero elements: only a constant
/// input (folded here) gives a static shape.
LogicalResult importNonZero(NodeContext &ctx) {
  DenseElementsAttr data = ctx.constInput(0);
  if (!data) {
    ctx.emitError() << dataDependentShapeMessage(ctx.node());
    return failure();
  }
  ArrayRef<int64_t> shape = data.getType().getShape();
  Ints strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  SmallVector<int64_t> flat;
  int64_t i = 0;
  auto record = [&](bool nonzero) {
    if (nonzero)
      flat.push_back(i);
    ++i;
  };
  if (isa<FloatType>(data.getElementType()))
    for (APFloat v : data.getValues<APFloat>())
      record(!v.isZero());
  else
    for (APInt v : data.getValues<APInt>())
      record(!v.isZero());
  int64_t rank = std::max<int64_t>(1, shape.size()), count = flat.size();
  Ints coords(rank * count, 0);
  for (int64_t j = 0; j < count; ++j)
    for (size_t d = 0; d < shape.size(); ++d)
      coords[d * count + j] = (flat[j] / strides[d]) % shape[d];
  auto type = RankedTensorType::get({int64_t(shape.size()), count},
                                    IntegerType::get(ctx.ctx(), 64));
  if (shape.empty()) // a scalar: [0, 1] or [0, 0] (ONNX's reference)
    coords.clear();
  ctx.results.push_back(ctx.constant(DenseElementsAttr::get(type, ArrayRef<int64_t>(coords))));
  return success();
}

//===----------------------------------------------------------------------===//
// Sequences: resolved at import time (see Sequence in ImporterImpl.h).
//===----------------------------------------------------------------------===//

/// A constant scalar position into a sequence of `size` tensors (negative
/// counts from the end); `size` itself is allowed when inserting.
FailureOr<int64_t> sequencePosition(NodeContext &ctx, size_t input, int64_t size,
                                    int64_t dflt, bool inserting = false) {
  if (!ctx.input(input))
    return dflt;
  auto pos = ctx.constIntsInput(input, "position");
  if (failed(pos))
    return failure();
  if ((**pos).size() != 1) {
    ctx.emitError() << "position must be a scalar";
    return failure();
  }
  int64_t p = (**pos)[0];
  int64_t limit = inserting ? size : size - 1;
  if (p < -size || p > limit) {
    ctx.emitError() << "position " << p << " is out of range for a sequence of " << size
                    << " tensor(s)";
    return failure();
  }
  return p < 0 ? p + size : p;
}

LogicalResult importSplitToSequence(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  FailureOr<int64_t> axis = ctx.normalizeAxis(ctx.attrInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = type.getDimSize(*axis);
  Ints sizes;
  bool squeeze = false;
  if (ctx.input(1)) {
    auto split = ctx.constIntsInput(1, "split");
    if (failed(split))
      return failure();
    if (ctx.inputType(1).getRank() == 0) { // chunks of this size, the last smaller
      int64_t chunk = (**split)[0];
      if (chunk <= 0) {
        ctx.emitError() << "split must be positive, got " << chunk;
        return failure();
      }
      for (int64_t at = 0; at < dim; at += chunk)
        sizes.push_back(std::min(chunk, dim - at));
    } else {
      sizes = **split;
    }
  } else { // one tensor per index, keepdims decides whether the axis stays
    sizes.assign(dim, 1);
    squeeze = ctx.attrInt("keepdims", 1) == 0;
  }
  int64_t total = 0;
  for (int64_t n : sizes) {
    if (n < 0) {
      ctx.emitError() << "split sizes must be non-negative";
      return failure();
    }
    total += n;
  }
  if (total != dim) {
    ctx.emitError() << "split sizes add up to " << total << ", not the size " << dim
                    << " of axis " << *axis;
    return failure();
  }
  Sequence seq;
  if (!sizes.empty()) {
    FailureOr<SmallVector<Value>> parts =
        ctx.create("Split", {ctx.input(0)},
                   {ctx.i64("axis", *axis), ctx.i64s("split", sizes)}, sizes.size());
    if (failed(parts))
      return failure();
    seq = *parts;
  }
  if (squeeze)
    for (Value &v : seq) {
      FailureOr<Value> s = ctx.create1("Squeeze", {v}, {ctx.i64s("axes", {*axis})});
      if (failed(s))
        return failure();
      v = *s;
    }
  ctx.sequenceResults[0] = std::move(seq);
  return success();
}

LogicalResult importSequenceAt(NodeContext &ctx) {
  const Sequence &seq = *ctx.sequenceInput(0);
  if (!ctx.input(1)) {
    ctx.emitError() << "position is required";
    return failure();
  }
  FailureOr<int64_t> pos = sequencePosition(ctx, 1, seq.size(), 0);
  if (failed(pos))
    return failure();
  ctx.results.push_back(seq[*pos]);
  return success();
}

LogicalResult importSequenceLength(NodeContext &ctx) {
  ctx.results.push_back(i64Const(ctx, {int64_t(ctx.sequenceInput(0)->size())},
                                 /*scalar=*/true));
  return success();
}

LogicalResult importSequenceConstruct(NodeContext &ctx) {
  Sequence seq;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    seq.push_back(ctx.input(i));
  ctx.sequenceResults[0] = std::move(seq);
  return success();
}

LogicalResult importSequenceEmpty(NodeContext &ctx) {
  ctx.sequenceResults[0] = Sequence();
  return success();
}

LogicalResult importSequenceInsert(NodeContext &ctx) {
  Sequence seq = *ctx.sequenceInput(0);
  FailureOr<int64_t> pos = sequencePosition(ctx, 2, seq.size(), seq.size(), true);
  if (failed(pos))
    return failure();
  seq.insert(seq.begin() + *pos, ctx.input(1));
  ctx.sequenceResults[0] = std::move(seq);
  return success();
}

LogicalResult importSequenceErase(NodeContext &ctx) {
  Sequence seq = *ctx.sequenceInput(0);
  if (seq.empty()) {
    ctx.emitError() << "cannot erase from an empty sequence";
    return failure();
  }
  FailureOr<int64_t> pos = sequencePosition(ctx, 1, seq.size(), seq.size() - 1);
  if (failed(pos))
    return failure();
  seq.erase(seq.begin() + *pos);
  ctx.sequenceResults[0] = std::move(seq);
  return success();
}

LogicalResult importConcatFromSequence(NodeContext &ctx) {
  Sequence seq = *ctx.sequenceInput(0);
  if (seq.empty()) {
    ctx.emitError() << "the sequence is empty";
    return failure();
  }
  bool newAxis = ctx.attrInt("new_axis", 0);
  int64_t rank = cast<RankedTensorType>(seq[0].getType()).getRank();
  FailureOr<int64_t> axis = ctx.normalizeAxis(ctx.attrInt("axis", 0), rank + newAxis);
  if (failed(axis))
    return failure();
  if (newAxis)
    for (Value &v : seq) {
      FailureOr<Value> u = ctx.create1("Unsqueeze", {v}, {ctx.i64s("axes", {*axis})});
      if (failed(u))
        return failure();
      v = *u;
    }
  return setResult(ctx, ctx.create1("Concat", seq, {ctx.i64("axis", *axis)}));
}

//===----------------------------------------------------------------------===//
// Decompositions: ONNX ops without a dialect op of their own, expanded into
// supported ops (shapes are static, so masks and shape arithmetic are
// compile-time constants).
//===----------------------------------------------------------------------===//

/// Builds a chain of ops through NodeContext::create1; after the first failure
/// (already reported at the node) every call returns null.
class Emitter {
public:
  explicit Emitter(NodeContext &ctx) : ctx_(ctx) {}
  bool failed() const { return failed_; }

  Value op(StringRef name, ArrayRef<Value> operands, ArrayRef<NamedAttribute> attrs = {}) {
    if (failed_ || llvm::any_of(operands, [](Value v) { return !v; })) {
      failed_ = true;
      return {};
    }
    FailureOr<Value> v = ctx_.create1(name, operands, attrs);
    if (mlir::failed(v)) {
      failed_ = true;
      return {};
    }
    return *v;
  }
  RankedTensorType type(Value v) { return cast<RankedTensorType>(v.getType()); }
  /// v[..., start:end:step, ...] on one axis.
  Value slice(Value v, int64_t axis, int64_t start, int64_t end, int64_t step = 1) {
    if (!v)
      return op("Slice", {v});
    ArrayRef<int64_t> shape = type(v).getShape();
    Ints s(shape.size(), 0), e(shape.begin(), shape.end()), st(shape.size(), 1);
    s[axis] = start;
    e[axis] = end;
    st[axis] = step;
    return op("Slice", {v}, {ctx_.i64s("starts", s), ctx_.i64s("ends", e),
                             ctx_.i64s("steps", st)});
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    return op("Reshape", {v}, {ctx_.i64s("shape", shape)});
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    return op("Transpose", {v}, {ctx_.i64s("perm", perm)});
  }
  Value unsqueeze(Value v, ArrayRef<int64_t> axes) {
    return op("Unsqueeze", {v}, {ctx_.i64s("axes", axes)});
  }
  Value concat(ArrayRef<Value> vs, int64_t axis) {
    return op("Concat", vs, {ctx_.i64("axis", axis)});
  }
  /// A 0-d constant of a float element type.
  Value scalar(Type elem, double v) {
    auto t = RankedTensorType::get({}, elem);
    return ctx_.constant(DenseElementsAttr::get(t, FloatAttr::get(elem, v)));
  }

private:
  NodeContext &ctx_;
  bool failed_ = false;
};

/// RotaryEmbedding (opset 23): rotates the first rotary_embedding_dim entries
/// of each head, as halves (x1 = first half, x2 = second) or interleaved pairs
/// (x1 = even, x2 = odd entries): (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2).
/// X is [B, H, S, D], or [B, S, H*D] with num_heads; the caches are
/// [B|1, S, R/2], or [max_pos, R/2] indexed by position_ids [B|1, S].
LogicalResult importRotaryEmbedding(NodeContext &ctx) {
  Emitter e(ctx);
  RankedTensorType xt = ctx.inputType(0);
  int64_t rank = xt.getRank();
  if (rank != 3 && rank != 4) {
    ctx.emitError() << "X must have rank 3 or 4, got " << xt;
    return failure();
  }
  Value x = ctx.input(0);
  int64_t b = xt.getDimSize(0);
  if (rank == 3) {
    int64_t heads = ctx.attrInt("num_heads", 0);
    if (heads <= 0 || xt.getDimSize(2) % heads) {
      ctx.emitError() << "a 3-D X needs num_heads dividing its last dimension ("
                      << xt.getDimSize(2) << "), got " << heads;
      return failure();
    }
    // [B, S, H*D] -> [B, S, H, D]: the caches broadcast over axis 2.
    x = e.reshape(x, {b, xt.getDimSize(1), heads, xt.getDimSize(2) / heads});
  }
  int64_t headSize = e.type(x).getDimSize(3);
  int64_t rot = ctx.attrInt("rotary_embedding_dim", 0);
  if (rot == 0)
    rot = headSize;
  if (rot < 0 || rot > headSize || rot % 2) {
    ctx.emitError() << "rotary_embedding_dim " << rot
                    << " must be even and at most the head size " << headSize;
    return failure();
  }
  Value cosv = ctx.input(1), sinv = ctx.input(2);
  if (ctx.input(3)) {
    FailureOr<Value> c = ctx.create1("Gather", {cosv, ctx.input(3)}, {ctx.i64("axis", 0)});
    if (failed(c))
      return failure();
    FailureOr<Value> s = ctx.create1("Gather", {sinv, ctx.input(3)}, {ctx.i64("axis", 0)});
    if (failed(s))
      return failure();
    cosv = *c;
    sinv = *s;
  }
  for (Value c : {cosv, sinv}) {
    RankedTensorType ct = e.type(c);
    if (ct.getRank() != 3 || ct.getDimSize(2) != rot / 2 ||
        ct.getElementType() != xt.getElementType()) {
      ctx.emitError() << "cos/sin caches (after position_ids) must be [batch, sequence, "
                      << rot / 2 << "] of the element type of X, got " << ct;
      return failure();
    }
  }
  // [B|1, S, R/2] -> [B|1, 1, S, R/2] against [B, H, S, .], or [B|1, S, 1, R/2]
  // against [B, S, H, .].
  int64_t headAxis = rank == 4 ? 1 : 2;
  cosv = e.unsqueeze(cosv, {headAxis});
  sinv = e.unsqueeze(sinv, {headAxis});
  bool interleaved = ctx.attrInt("interleaved", 0);
  Value xr = rot == headSize ? x : e.slice(x, 3, 0, rot);
  Value x1 = interleaved ? e.slice(xr, 3, 0, rot, 2) : e.slice(xr, 3, 0, rot / 2);
  Value x2 = interleaved ? e.slice(xr, 3, 1, rot, 2) : e.slice(xr, 3, rot / 2, rot);
  Value real = e.op("Sub", {e.op("Mul", {cosv, x1}), e.op("Mul", {sinv, x2})});
  Value imag = e.op("Add", {e.op("Mul", {sinv, x1}), e.op("Mul", {cosv, x2})});
  Value rotated;
  if (interleaved) {
    Value pairs = e.concat({e.unsqueeze(real, {4}), e.unsqueeze(imag, {4})}, 4);
    if (e.failed())
      return failure();
    SmallVector<int64_t> shape(e.type(xr).getShape());
    rotated = e.reshape(pairs, shape);
  } else {
    rotated = e.concat({real, imag}, 3);
  }
  Value y = rot == headSize ? rotated
                            : e.concat({rotated, e.slice(x, 3, rot, headSize)}, 3);
  if (rank == 3)
    y = e.reshape(y, xt.getShape());
  if (e.failed())
    return failure();
  if (e.type(y) != xt) {
    ctx.emitError() << "the caches do not broadcast against X: result " << e.type(y)
                    << ", X " << xt;
    return failure();
  }
  ctx.results.push_back(y);
  return success();
}

/// The Attention features this importer does not expand, as errors; and the
/// ranks and element type it needs.
LogicalResult checkAttentionSupported(NodeContext &ctx) {
  if (ctx.input(6)) {
    ctx.emitError()
        << "the nonpad_kv_seqlen input (external KV cache) is not supported";
    return failure();
  }
  if (ctx.outputUsed(3)) {
    ctx.emitError() << "the qk_matmul_output output is not supported";
    return failure();
  }
  if (bool(ctx.input(4)) != bool(ctx.input(5))) {
    ctx.emitError() << "past_key and past_value must be given together";
    return failure();
  }
  RankedTensorType qt = ctx.inputType(0);
  int64_t rank = qt.getRank();
  if ((rank != 3 && rank != 4) || ctx.inputType(1).getRank() != rank ||
      ctx.inputType(2).getRank() != rank) {
    ctx.emitError() << "Q, K and V must all have rank 3 or all rank 4";
    return failure();
  }
  if (!isa<FloatType>(qt.getElementType())) {
    ctx.emitError() << "Q must be a floating-point tensor, got " << qt;
    return failure();
  }
  return success();
}

/// A 3-D Attention input [B, S, H*D] as [B, H, S, D]; null (with an error)
/// when `heads` does not divide the hidden size.
Value splitAttentionHeads(NodeContext &ctx, Emitter &e, Value t, int64_t heads,
                          int64_t batch) {
  RankedTensorType tt = e.type(t);
  if (heads <= 0 || tt.getDimSize(2) % heads) {
    ctx.emitError()
        << "3-D inputs need q_num_heads and kv_num_heads dividing the "
           "hidden sizes; got "
        << heads << " heads for " << tt;
    return {};
  }
  // [B, S, H*D] -> [B, H, S, D]
  Value split =
      e.reshape(t, {batch, tt.getDimSize(1), heads, tt.getDimSize(2) / heads});
  return e.transpose(split, {0, 2, 1, 3});
}

/// Grouped-query attention: K or V [B, kvHeads, S, D] with each head repeated
/// for `groups` query heads, as [B, kvHeads * groups, S, D].
Value repeatKVHeads(NodeContext &ctx, Emitter &e, Value t, int64_t batch,
                    int64_t kvHeads, int64_t groups) {
  // Each KV head serves `groups` consecutive query heads:
  // [h0, h0, h1, h1, ...].
  RankedTensorType tt = e.type(t);
  Value u = e.unsqueeze(t, {2});
  Ints shape{batch, kvHeads, groups, tt.getDimSize(2), tt.getDimSize(3)};
  Value x = e.op("Expand", {u}, {ctx.i64s("shape", shape)});
  return e.reshape(
      x, {batch, kvHeads * groups, tt.getDimSize(2), tt.getDimSize(3)});
}

/// Attention scores from Q and K, softcapped when the node asks.
Value attentionScores(NodeContext &ctx, Emitter &e, Value q, Value k, Type elem,
                      int64_t headSize) {
  // Scores: (Q * sqrt(scale)) @ (K * sqrt(scale))^T, as the reference scales.
  double scale = ctx.attr("scale") ? double(ctx.attrFloat("scale", 1))
                                   : 1.0 / std::sqrt(double(headSize));
  Value root = e.scalar(elem, std::sqrt(scale));
  Value scores =
      e.op("MatMul", {e.op("Mul", {q, root}),
                      e.transpose(e.op("Mul", {k, root}), {0, 1, 3, 2})});
  if (float cap = ctx.attrFloat("softcap", 0); cap > 0) {
    Value c = e.scalar(elem, cap);
    scores = e.op("Mul", {e.op("Tanh", {e.op("Div", {scores, c})}), c});
  }
  return scores;
}

/// The run-time part of the bias, from attn_mask: a bool mask as 0 / -inf,
/// padded with -inf up to kvLen keys. Null when the node has no mask.
FailureOr<Value> attentionMaskBias(NodeContext &ctx, Emitter &e, Type elem,
                                   int64_t kvLen) {
  Value mask = ctx.input(3);
  if (!mask)
    return Value();
  double negInf = -std::numeric_limits<double>::infinity();
  RankedTensorType mt = ctx.inputType(3);
  if (mt.getElementType().isInteger(1)) {
    mask = e.op("Where", {mask, e.scalar(elem, 0), e.scalar(elem, negInf)});
  } else if (mt.getElementType() != elem) {
    ctx.emitError() << "attn_mask must be bool or the element type of Q, got "
                    << mt;
    return failure();
  }
  int64_t maskLen = mt.getRank() ? mt.getDimSize(mt.getRank() - 1) : 1;
  if (mt.getRank() && maskLen < kvLen) { // shorter masks are padded with -inf
    Ints pads(2 * mt.getRank(), 0);
    pads[2 * mt.getRank() - 1] = kvLen - maskLen;
    mask = e.op("Pad", {mask},
                {ctx.i64s("pads", pads), ctx.str("mode", "constant"),
                 ctx.f64("value", negInf)});
  }
  return mask;
}

/// The constant part of the bias, from is_causal and the window ([qLen, kvLen],
/// query i at position i + past): null when the node has neither. Sets
/// `rowMasked[i]` when it masks every key of query row i.
Value attentionWindowBias(NodeContext &ctx, Type elem, int64_t qLen,
                          int64_t kvLen, int64_t past,
                          SmallVector<bool> &rowMasked) {
  int64_t left = ctx.attrInt("left_window_size", -1);
  int64_t right = ctx.attrInt("right_window_size", -1);
  bool causal = ctx.attrInt("is_causal", 0);
  if (!causal && left < 0 && right < 0)
    return {};
  SmallVector<APFloat> vals;
  const auto &sem = cast<FloatType>(elem).getFloatSemantics();
  for (int64_t i = 0; i < qLen; ++i) {
    bool any = false;
    for (int64_t j = 0; j < kvLen; ++j) {
      int64_t diff = i + past - j;
      bool ok = (!causal || diff >= 0) && (left < 0 || diff <= left) &&
                (right < 0 || -diff <= right);
      any |= ok;
      vals.push_back(APFloat::getZero(sem));
      if (!ok)
        vals.back() = APFloat::getInf(sem, /*Negative=*/true);
    }
    rowMasked[i] = !any;
  }
  auto biasType = RankedTensorType::get({qLen, kvLen}, elem);
  return ctx.constant(DenseElementsAttr::get(biasType, vals));
}

/// Softmax over the keys, in softmax_precision when that differs from the
/// input type.
FailureOr<Value> attentionSoftmax(NodeContext &ctx, Emitter &e, Value scores,
                                  Type elem) {
  Type softmaxType = elem;
  if (ctx.attr("softmax_precision")) {
    softmaxType =
        elementTypeFor(ctx.ctx(), int32_t(ctx.attrInt("softmax_precision", 0)));
    if (!softmaxType || !isa<FloatType>(softmaxType)) {
      ctx.emitError() << "unsupported softmax_precision "
                      << dataTypeName(
                             int32_t(ctx.attrInt("softmax_precision", 0)));
      return failure();
    }
  }
  if (softmaxType != elem)
    scores = e.op("Cast", {scores}, {ctx.type("to", softmaxType)});
  Value probs = e.op("Softmax", {scores}, {ctx.i64("axis", 3)});
  if (softmaxType != elem)
    probs = e.op("Cast", {probs}, {ctx.type("to", elem)});
  return probs;
}

/// Rows whose bias is -inf everywhere give zeros (not NaN): found at run time
/// when attn_mask is part of the bias, else known from `rowMasked`.
Value zeroMaskedRows(NodeContext &ctx, Emitter &e, Value probs, Value bias,
                     ArrayRef<bool> rowMasked) {
  Type elem = ctx.inputType(0).getElementType();
  if (bias && ctx.input(3)) {
    int64_t last = e.type(bias).getRank() - 1;
    Value rowMax = e.op("ReduceMax", {bias},
                        {ctx.i64s("axes", {last}), ctx.i64("keepdims", 1)});
    Value none = e.op("IsInf", {rowMax}, {ctx.i64("detect_positive", 0)});
    return e.op("Where", {none, e.scalar(elem, 0), probs});
  }
  if (llvm::is_contained(rowMasked, true)) {
    int64_t qLen = rowMasked.size();
    auto condType =
        RankedTensorType::get({qLen, 1}, IntegerType::get(ctx.ctx(), 1));
    Value none = ctx.constant(DenseElementsAttr::get(condType, rowMasked));
    return e.op("Where", {none, e.scalar(elem, 0), probs});
  }
  return probs;
}

/// Attention (opsets 23-25): softmax((Q*sqrt(s)) (K*sqrt(s))^T [softcapped] +
/// bias) V with the spec's bias (attn_mask, offset-aware causal frontier,
/// sliding window), GQA head repetition, past key/value concatenation, and
/// zero output rows where the bias masks every key.
LogicalResult importAttention(NodeContext &ctx) {
  if (failed(checkAttentionSupported(ctx)))
    return failure();
  Emitter e(ctx);
  int64_t rank = ctx.inputType(0).getRank();
  Type elem = ctx.inputType(0).getElementType();
  Value q = ctx.input(0), k = ctx.input(1), v = ctx.input(2);
  int64_t batch = ctx.inputType(0).getDimSize(0);
  if (rank == 3) {
    int64_t qHeads = ctx.attrInt("q_num_heads", 0);
    int64_t kvHeads = ctx.attrInt("kv_num_heads", 0);
    q = splitAttentionHeads(ctx, e, q, qHeads, batch);
    k = q ? splitAttentionHeads(ctx, e, k, kvHeads, batch) : Value();
    v = k ? splitAttentionHeads(ctx, e, v, kvHeads, batch) : Value();
    if (!v)
      return failure();
  }
  RankedTensorType q4 = e.type(q);
  int64_t qHeads = q4.getDimSize(1), qLen = q4.getDimSize(2),
          headSize = q4.getDimSize(3);
  if (ctx.input(4)) {
    k = e.concat({ctx.input(4), k}, 2);
    v = e.concat({ctx.input(5), v}, 2);
    if (e.failed())
      return failure();
  }
  Value presentK = k, presentV = v;
  int64_t past = ctx.input(4) ? ctx.inputType(4).getDimSize(2) : 0;
  int64_t kvHeads = e.type(k).getDimSize(1), kvLen = e.type(k).getDimSize(2);
  if (e.type(v).getDimSize(1) != kvHeads || qHeads % kvHeads) {
    ctx.emitError()
        << "K and V must have the same number of heads, dividing Q's ("
        << qHeads << "); got K " << e.type(k) << ", V " << e.type(v);
    return failure();
  }
  if (int64_t groups = qHeads / kvHeads; groups > 1) {
    k = repeatKVHeads(ctx, e, k, batch, kvHeads, groups);
    v = repeatKVHeads(ctx, e, v, batch, kvHeads, groups);
  }
  Value scores = attentionScores(ctx, e, q, k, elem, headSize);

  // The bias: a run-time part from attn_mask, a constant part from is_causal
  // and the window (offset = the past length; shapes are static).
  FailureOr<Value> maskBias = attentionMaskBias(ctx, e, elem, kvLen);
  if (failed(maskBias))
    return failure();
  Value bias = *maskBias;
  SmallVector<bool> rowMasked(qLen, false);
  if (Value c = attentionWindowBias(ctx, elem, qLen, kvLen, past, rowMasked))
    bias = bias ? e.op("Add", {bias, c}) : c;
  if (bias)
    scores = e.op("Add", {scores, bias});
  FailureOr<Value> probs = attentionSoftmax(ctx, e, scores, elem);
  if (failed(probs))
    return failure();
  Value weights = zeroMaskedRows(ctx, e, *probs, bias, rowMasked);
  Value y = e.op("MatMul", {weights, v});
  if (rank == 3 && !e.failed()) {
    RankedTensorType yt = e.type(y);
    y = e.reshape(e.transpose(y, {0, 2, 1, 3}),
                  {batch, qLen, yt.getDimSize(1) * yt.getDimSize(3)});
  }
  if (e.failed())
    return failure();
  ctx.results.push_back(y);
  ctx.results.push_back(presentK);
  ctx.results.push_back(presentV);
  return success();
}

/// PRelu: Where(X < 0, X * slope, X), slope broadcast to X (ONNX's
/// unidirectional broadcast); the slope is a trainable parameter like any
/// float initializer, its gradient that of the Mul.
LogicalResult importPRelu(NodeContext &ctx) {
  RankedTensorType xt = ctx.inputType(0);
  if (!isa<FloatType>(xt.getElementType())) {
    ctx.emitError() << "X must be a floating-point tensor, got " << xt;
    return failure();
  }
  if (ctx.inputType(1).getElementType() != xt.getElementType()) {
    ctx.emitError() << "slope must have X's element type " << xt.getElementType() << ", got "
                    << ctx.inputType(1);
    return failure();
  }
  Emitter e(ctx);
  Value x = ctx.input(0);
  Value negative = e.op("Less", {x, e.scalar(xt.getElementType(), 0.0)});
  Value y = e.op("Where", {negative, e.op("Mul", {x, ctx.input(1)}), x});
  if (e.failed())
    return failure();
  if (e.type(y).getShape() != xt.getShape()) {
    ctx.emitError() << "slope " << ctx.inputType(1) << " does not broadcast to X " << xt
                    << " (PRelu broadcasts the slope to X only)";
    return failure();
  }
  ctx.results.push_back(y);
  return success();
}

/// Shrink: X + bias where X < -lambd, X - bias where X > lambd, else 0
/// (attributes lambd 0.5, bias 0), as Where over Less and Greater.
LogicalResult importShrink(NodeContext &ctx) {
  RankedTensorType xt = ctx.inputType(0);
  if (!isa<FloatType>(xt.getElementType())) {
    ctx.emitError() << "input must be a floating-point tensor, got " << xt;
    return failure();
  }
  const double lambd = ctx.attrFloat("lambd", 0.5f), bias = ctx.attrFloat("bias", 0.0f);
  Emitter e(ctx);
  Type elem = xt.getElementType();
  Value x = ctx.input(0);
  Value zero = e.scalar(elem, 0.0), b = e.scalar(elem, bias);
  Value above = e.op("Greater", {x, e.scalar(elem, lambd)});
  Value below = e.op("Less", {x, e.scalar(elem, -lambd)});
  // Where broadcasts the scalar 0 to X's shape.
  Value y = e.op("Where", {below, e.op("Add", {x, b}),
                           e.op("Where", {above, e.op("Sub", {x, b}), zero})});
  if (e.failed())
    return failure();
  ctx.results.push_back(y);
  return success();
}

/// Mish (opset 18): X * tanh(softplus(X)).
LogicalResult importMish(NodeContext &ctx) {
  if (!isa<FloatType>(ctx.inputType(0).getElementType())) {
    ctx.emitError() << "X must be a floating-point tensor, got " << ctx.inputType(0);
    return failure();
  }
  Emitter e(ctx);
  Value x = ctx.input(0);
  Value y = e.op("Mul", {x, e.op("Tanh", {e.op("Softplus", {x})})});
  if (e.failed())
    return failure();
  ctx.results.push_back(y);
  return success();
}

/// InstanceNormalization: LayerNormalization over the spatial dims [2, rank)
/// of X [N, C, D1, ...] (unit scale, no bias: its statistics are exactly the
/// per-instance, per-channel ones), then the per-channel scale and B as
/// [C, 1, ..., 1] broadcasts.
LogicalResult importInstanceNormalization(NodeContext &ctx) {
  RankedTensorType xt = ctx.inputType(0);
  int64_t rank = xt.getRank();
  Type elem = xt.getElementType();
  if (rank < 3 || !isa<FloatType>(elem)) {
    ctx.emitError() << "X must be a floating-point tensor [N, C, D1, ...] with at least "
                       "one spatial dimension (the dims each instance and channel is "
                       "normalised over), got "
                    << xt;
    return failure();
  }
  int64_t channels = xt.getDimSize(1);
  for (size_t i : {1, 2}) {
    RankedTensorType pt = ctx.inputType(i);
    if (pt.getRank() != 1 || pt.getDimSize(0) != channels || pt.getElementType() != elem) {
      ctx.emitError() << (i == 1 ? "scale" : "B") << " must be [" << channels
                      << "] (one value per channel of X " << xt << "), got " << pt;
      return failure();
    }
  }
  Emitter e(ctx);
  auto unitType = RankedTensorType::get({1}, elem);
  Value unit = ctx.constant(DenseElementsAttr::get(unitType, FloatAttr::get(elem, 1.0)));
  Value normed = e.op("LayerNormalization", {ctx.input(0), unit},
                      {ctx.i64("axis", 2),
                       ctx.f32("epsilon", ctx.attrFloat("epsilon", 1e-5f))});
  Ints perChannel(rank - 1, 1);
  perChannel[0] = channels;
  Value y = e.op("Mul", {normed, e.reshape(ctx.input(1), perChannel)});
  y = e.op("Add", {y, e.reshape(ctx.input(2), perChannel)});
  if (e.failed())
    return failure();
  ctx.results.push_back(y);
  return success();
}

/// An Einsum operand or partial product: its value and the index of each of
/// its dims (a letter's character code; 256 + k for the k-th dim the
/// ellipsis stands for, counted over the ellipsis of the widest operand).
struct EinsumTerm {
  Value value;
  SmallVector<int> labels;
};

/// How an Einsum index reads in messages.
std::string einsumLabelName(int label) {
  if (label < 256)
    return std::string("'") + char(label) + "'";
  return "ellipsis dim " + std::to_string(label - 256);
}

/// An Einsum term's subscripts: the letters before and after its ellipsis.
struct EinsumSubscripts {
  SmallVector<int> before, after;
  bool ellipsis = false;
};

/// How the indices of two Einsum operands meet: in both and still needed
/// (batch), in both and needed by nothing after (contract), or in the first
/// only (m) or the second only (n).
struct EinsumPairIndices {
  SmallVector<int> batch, contract, m, n;

  /// The product's indices: batch, then m, then n.
  SmallVector<int> productLabels() const {
    SmallVector<int> labels = batch;
    llvm::append_range(labels, m);
    llvm::append_range(labels, n);
    return labels;
  }
};

/// One Einsum node being expanded: its equation, parsed; its operands as the
/// steps rewrite them; and the output's indices.
class EinsumDecomposition {
public:
  explicit EinsumDecomposition(NodeContext &node) : ctx(node), e(node) {}
  LogicalResult run();

private:
  LogicalResult malformed(const Twine &why);
  LogicalResult parseSubscripts(StringRef text, EinsumSubscripts &p);
  LogicalResult parseInputTerms();
  void widenEllipses();
  LogicalResult resolveOutput();
  LogicalResult checkIndexSizes();
  LogicalResult takeDiagonals();
  LogicalResult takeDiagonal(EinsumTerm &t, size_t p, int64_t qi);
  void sumOutLoneIndices();
  EinsumTerm multiplyTerms();
  void multiplyPair(EinsumTerm &acc, EinsumTerm &b,
                    const llvm::SmallDenseSet<int> &keep);
  EinsumPairIndices classifyPair(const EinsumTerm &acc, const EinsumTerm &b,
                                 const llvm::SmallDenseSet<int> &keep);
  void broadcastContracted(EinsumTerm &acc, EinsumTerm &b,
                           ArrayRef<int> contract);
  void multiplyBroadcast(EinsumTerm &acc, EinsumTerm &b,
                         const EinsumPairIndices &ix);
  void multiplyByMatMul(EinsumTerm &acc, EinsumTerm &b,
                        const EinsumPairIndices &ix);

  void transposeTo(EinsumTerm &t, ArrayRef<int> order);
  Value reshapeTo(Value v, ArrayRef<int64_t> shape);
  int64_t sizeOf(const EinsumTerm &t, int label);
  int64_t bothSize(const EinsumTerm &a, const EinsumTerm &b, int label);
  void sumOut(EinsumTerm &t, function_ref<bool(int)> drop);

  NodeContext &ctx;
  Emitter e;
  /// The equation without whitespace; termText and rhs point into it.
  std::string equation;
  SmallVector<StringRef> termText;
  std::optional<StringRef> rhs;
  SmallVector<EinsumSubscripts> parsed;
  int64_t ellipsisRank = 0;
  SmallVector<EinsumTerm> terms;
  SmallVector<int> output;
};

/// Reports a malformed equation, with what a well-formed one looks like.
LogicalResult EinsumDecomposition::malformed(const Twine &why) {
  ctx.emitError()
      << "equation '" << ctx.attrString("equation", "") << "': " << why
      << "; an equation is like 'bij,bjk->bik' (letters, at most one "
         "'...' per term, one term per input)";
  return failure();
}

/// Reads one term's letters and the ellipsis position.
LogicalResult EinsumDecomposition::parseSubscripts(StringRef text,
                                                   EinsumSubscripts &p) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i).starts_with("...")) {
      if (p.ellipsis)
        return malformed("'...' twice in the term '" + text + "'");
      p.ellipsis = true;
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(text[i]))) {
      (p.ellipsis ? p.after : p.before).push_back(int(text[i]));
    } else {
      return malformed("unexpected character '" + Twine(text[i]) +
                       "' in the term '" + text + "'");
    }
  }
  return success();
}

/// Splits the equation into its input terms and output, parses the input
/// terms against the inputs' ranks, and finds the widest ellipsis.
LogicalResult EinsumDecomposition::parseInputTerms() {
  for (char c : ctx.attrString("equation", ""))
    if (!std::isspace(static_cast<unsigned char>(c)))
      equation.push_back(c);
  size_t arrow = equation.find("->");
  StringRef lhs = StringRef(equation).take_front(arrow);
  if (arrow != std::string::npos)
    rhs = StringRef(equation).drop_front(arrow + 2);
  lhs.split(termText, ',');
  if (termText.size() != ctx.numInputs())
    return malformed(Twine(termText.size()) + " input term(s) for " +
                     Twine(ctx.numInputs()) + " input(s)");

  parsed.resize(termText.size());
  for (size_t i = 0; i < termText.size(); ++i) {
    if (failed(parseSubscripts(termText[i], parsed[i])))
      return failure();
    int64_t letters = parsed[i].before.size() + parsed[i].after.size();
    int64_t rank = ctx.inputType(i).getRank();
    if (rank < letters || (!parsed[i].ellipsis && rank != letters))
      return malformed("the term '" + termText[i] + "' does not match input " +
                       Twine(i) + " of rank " + Twine(rank));
    if (parsed[i].ellipsis)
      ellipsisRank = std::max(ellipsisRank, rank - letters);
  }
  return success();
}

/// The operands, each ellipsis widened to ellipsisRank dims (size 1 where
/// the operand has fewer: they broadcast, as numpy's einsum does).
void EinsumDecomposition::widenEllipses() {
  for (size_t i = 0; i < parsed.size(); ++i) {
    EinsumTerm t{ctx.input(i), parsed[i].before};
    if (parsed[i].ellipsis) {
      int64_t own = ctx.inputType(i).getRank() - parsed[i].before.size() -
                    parsed[i].after.size();
      Ints missing;
      for (int64_t k = 0; k < ellipsisRank - own; ++k)
        missing.push_back(int64_t(t.labels.size()) + k);
      if (!missing.empty())
        t.value = e.unsqueeze(t.value, missing);
      for (int64_t k = 0; k < ellipsisRank; ++k)
        t.labels.push_back(256 + int(k));
      llvm::append_range(t.labels, parsed[i].after);
    }
    terms.push_back(std::move(t));
  }
}

/// The output's indices: given, or (implicit form) the ellipsis dims, then
/// the letters used once, in alphabetical order.
LogicalResult EinsumDecomposition::resolveOutput() {
  llvm::SmallDenseMap<int, int> uses;
  for (const EinsumTerm &t : terms)
    for (int l : t.labels)
      ++uses[l];
  if (rhs) {
    EinsumSubscripts out;
    if (failed(parseSubscripts(*rhs, out)))
      return failure();
    output = out.before;
    if (out.ellipsis)
      for (int64_t k = 0; k < ellipsisRank; ++k)
        output.push_back(256 + int(k));
    llvm::append_range(output, out.after);
    for (auto [i, l] : llvm::enumerate(output)) {
      if (!uses.count(l))
        return malformed("the output index " + einsumLabelName(l) +
                         " is in no input term");
      if (llvm::is_contained(ArrayRef<int>(output).take_front(i), l))
        return malformed("the output index " + einsumLabelName(l) +
                         " is repeated");
    }
    return success();
  }
  for (int64_t k = 0; k < ellipsisRank; ++k)
    output.push_back(256 + int(k));
  SmallVector<int> once;
  for (auto [l, n] : uses)
    if (n == 1 && l < 256)
      once.push_back(l);
  llvm::sort(once);
  llvm::append_range(output, once);
  return success();
}

/// Each index has one size over all operands (or 1, broadcast).
LogicalResult EinsumDecomposition::checkIndexSizes() {
  llvm::SmallDenseMap<int, int64_t> sizes;
  for (auto [i, t] : llvm::enumerate(terms))
    for (auto [d, l] : llvm::enumerate(t.labels)) {
      int64_t n = e.type(t.value).getDimSize(d);
      auto [it, fresh] = sizes.try_emplace(l, n);
      if (!fresh && it->second != n && n != 1 && it->second != 1) {
        ctx.emitError()
            << "equation '" << ctx.attrString("equation", "") << "': the index "
            << einsumLabelName(l) << " has size " << it->second
            << " in an earlier input and " << n << " in input " << i << " ("
            << e.type(t.value)
            << "); an index's dims must have one size (or 1, broadcast)";
        return failure();
      }
      if (n != 1)
        it->second = n;
    }
  return success();
}

/// Diagonals: an index repeated within one operand.
LogicalResult EinsumDecomposition::takeDiagonals() {
  for (EinsumTerm &t : terms) {
    for (size_t p = 0; p < t.labels.size(); ++p) {
      int l = t.labels[p];
      auto q = llvm::find(ArrayRef<int>(t.labels).drop_front(p + 1), l);
      if (q == t.labels.end())
        continue;
      if (failed(takeDiagonal(t, p, q - t.labels.begin())))
        return failure();
      p = size_t(-1); // look again from the start
    }
  }
  if (e.failed())
    return failure();
  return success();
}

/// The diagonal of the dims p and qi of `t` (the same index), as its last dim.
LogicalResult EinsumDecomposition::takeDiagonal(EinsumTerm &t, size_t p,
                                                int64_t qi) {
  int l = t.labels[p];
  ArrayRef<int64_t> shape = e.type(t.value).getShape();
  int64_t n = shape[p];
  if (shape[qi] != n) {
    ctx.emitError() << "equation '" << ctx.attrString("equation", "")
                    << "': the repeated index " << einsumLabelName(l)
                    << " spans dims of sizes " << n << " and " << shape[qi]
                    << " in one operand; a diagonal needs equal sizes";
    return failure();
  }
  // [..., n, n] -> [..., n * n] -> every (n + 1)-th element.
  SmallVector<int> rest;
  Ints perm;
  for (auto [d, other] : llvm::enumerate(t.labels))
    if (int64_t(d) != int64_t(p) && int64_t(d) != qi) {
      rest.push_back(other);
      perm.push_back(int64_t(d));
    }
  perm.push_back(int64_t(p));
  perm.push_back(qi);
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    t.value = e.transpose(t.value, perm);
  Ints flat;
  for (size_t d = 0; d + 2 < perm.size(); ++d)
    flat.push_back(shape[perm[d]]);
  flat.push_back(n * n);
  t.value = e.slice(e.reshape(t.value, flat), int64_t(flat.size()) - 1, 0,
                    n * n, n + 1);
  if (e.failed())
    return failure();
  rest.push_back(l);
  t.labels = rest;
  return success();
}

/// Indices one operand alone has and the output does not: summed first.
void EinsumDecomposition::sumOutLoneIndices() {
  for (auto [i, t] : llvm::enumerate(terms))
    sumOut(t, [&](int l) {
      if (llvm::is_contained(output, l))
        return false;
      for (auto [j, other] : llvm::enumerate(terms))
        if (j != i && llvm::is_contained(other.labels, l))
          return false;
      return true;
    });
}

/// The operands' product, from left to right, keeping the indices the output
/// or a later operand needs.
EinsumTerm EinsumDecomposition::multiplyTerms() {
  EinsumTerm acc = terms[0];
  for (size_t k = 1; k < terms.size() && !e.failed(); ++k) {
    EinsumTerm b = terms[k];
    llvm::SmallDenseSet<int> keep(output.begin(), output.end());
    for (size_t j = k + 1; j < terms.size(); ++j)
      keep.insert(terms[j].labels.begin(), terms[j].labels.end());
    multiplyPair(acc, b, keep);
  }
  return acc;
}

/// acc * b into acc, summing over the indices they share that `keep` lacks.
void EinsumDecomposition::multiplyPair(EinsumTerm &acc, EinsumTerm &b,
                                       const llvm::SmallDenseSet<int> &keep) {
  // Indices of one side that neither the other side nor anything after needs.
  sumOut(acc, [&](int l) {
    return !keep.contains(l) && !llvm::is_contained(b.labels, l);
  });
  sumOut(b, [&](int l) {
    return !keep.contains(l) && !llvm::is_contained(acc.labels, l);
  });
  if (e.failed())
    return;
  EinsumPairIndices ix = classifyPair(acc, b, keep);
  broadcastContracted(acc, b, ix.contract);
  if (e.failed())
    return;
  if (ix.contract.empty())
    multiplyBroadcast(acc, b, ix);
  else
    multiplyByMatMul(acc, b, ix);
  acc.labels = ix.productLabels();
}

/// Sorts the indices of acc and b into batch, contract, m and n.
EinsumPairIndices
EinsumDecomposition::classifyPair(const EinsumTerm &acc, const EinsumTerm &b,
                                  const llvm::SmallDenseSet<int> &keep) {
  EinsumPairIndices ix;
  for (int l : acc.labels) {
    if (!llvm::is_contained(b.labels, l))
      ix.m.push_back(l);
    else
      (keep.contains(l) ? ix.batch : ix.contract).push_back(l);
  }
  for (int l : b.labels)
    if (!llvm::is_contained(acc.labels, l))
      ix.n.push_back(l);
  return ix;
}

/// A contracted index of size 1 on one side only: broadcast it first.
void EinsumDecomposition::broadcastContracted(EinsumTerm &acc, EinsumTerm &b,
                                              ArrayRef<int> contract) {
  for (EinsumTerm *t : {&acc, &b}) {
    Ints shape(e.type(t->value).getShape());
    bool expand = false;
    for (int l : contract) {
      int64_t d = llvm::find(t->labels, l) - t->labels.begin();
      int64_t size = bothSize(acc, b, l);
      if (shape[d] != size) {
        shape[d] = size;
        expand = true;
      }
    }
    if (expand)
      t->value = e.op("Expand", {t->value}, {ctx.i64s("shape", shape)});
  }
}

/// No index to contract: a broadcast product [batch, m, 1..] * [batch, 1.., n].
void EinsumDecomposition::multiplyBroadcast(EinsumTerm &acc, EinsumTerm &b,
                                            const EinsumPairIndices &ix) {
  SmallVector<int> orderA = ix.batch, orderB = ix.batch;
  llvm::append_range(orderA, ix.m);
  llvm::append_range(orderB, ix.n);
  transposeTo(acc, orderA);
  transposeTo(b, orderB);
  size_t productRank = ix.batch.size() + ix.m.size() + ix.n.size();
  if (!ix.n.empty())
    acc.value = e.unsqueeze(acc.value, llvm::to_vector(llvm::seq<int64_t>(
                                           orderA.size(), productRank)));
  if (!ix.m.empty())
    b.value = e.unsqueeze(b.value,
                          llvm::to_vector(llvm::seq<int64_t>(
                              ix.batch.size(), ix.batch.size() + ix.m.size())));
  acc.value = e.op("Mul", {acc.value, b.value});
}

/// [batch, M, K] x [batch, K, N] -> [batch, M, N] -> [batch, m..., n...].
void EinsumDecomposition::multiplyByMatMul(EinsumTerm &acc, EinsumTerm &b,
                                           const EinsumPairIndices &ix) {
  int64_t kSize = 1;
  for (int l : ix.contract)
    kSize *= bothSize(acc, b, l);
  Ints batchA, batchB, resultShape;
  for (int l : ix.batch) {
    batchA.push_back(sizeOf(acc, l));
    batchB.push_back(sizeOf(b, l));
    resultShape.push_back(bothSize(acc, b, l));
  }
  int64_t mSize = 1, nSize = 1;
  for (int l : ix.m) {
    mSize *= sizeOf(acc, l);
    resultShape.push_back(sizeOf(acc, l));
  }
  for (int l : ix.n) {
    nSize *= sizeOf(b, l);
    resultShape.push_back(sizeOf(b, l));
  }
  SmallVector<int> orderA = ix.batch, orderB = ix.batch;
  llvm::append_range(orderA, ix.m);
  llvm::append_range(orderA, ix.contract);
  llvm::append_range(orderB, ix.contract);
  llvm::append_range(orderB, ix.n);
  transposeTo(acc, orderA);
  transposeTo(b, orderB);
  Ints shapeA = batchA, shapeB = batchB;
  shapeA.append({mSize, kSize});
  shapeB.append({kSize, nSize});
  Value y = e.op("MatMul",
                 {reshapeTo(acc.value, shapeA), reshapeTo(b.value, shapeB)});
  acc.value = reshapeTo(y, resultShape);
}

/// Puts the dims of `t` in the order of `order` (a permutation of its labels).
void EinsumDecomposition::transposeTo(EinsumTerm &t, ArrayRef<int> order) {
  Ints perm;
  for (int l : order)
    perm.push_back(llvm::find(t.labels, l) - t.labels.begin());
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    t.value = e.transpose(t.value, perm);
  t.labels.assign(order.begin(), order.end());
}

/// `v` reshaped to `shape`, unless it has that shape already.
Value EinsumDecomposition::reshapeTo(Value v, ArrayRef<int64_t> shape) {
  if (!v || e.type(v).getShape() == shape)
    return v;
  return e.reshape(v, shape);
}

/// The size of an index in one operand.
int64_t EinsumDecomposition::sizeOf(const EinsumTerm &t, int label) {
  return e.type(t.value).getDimSize(llvm::find(t.labels, label) -
                                    t.labels.begin());
}

/// The size of an index two operands have (one of them may be 1).
int64_t EinsumDecomposition::bothSize(const EinsumTerm &a, const EinsumTerm &b,
                                      int label) {
  int64_t n = sizeOf(a, label);
  return n == 1 ? sizeOf(b, label) : n;
}

/// Sums `t` over the indices `drop` selects.
void EinsumDecomposition::sumOut(EinsumTerm &t, function_ref<bool(int)> drop) {
  Ints axes;
  SmallVector<int> kept;
  for (auto [i, l] : llvm::enumerate(t.labels)) {
    if (drop(l))
      axes.push_back(int64_t(i));
    else
      kept.push_back(l);
  }
  if (axes.empty() || !t.value)
    return;
  t.value = e.op("ReduceSum", {t.value},
                 {ctx.i64s("axes", axes), ctx.i64("keepdims", 0)});
  t.labels = kept;
}

/// Runs the steps in order; after a failure (already reported) it stops.
LogicalResult EinsumDecomposition::run() {
  if (failed(parseInputTerms()))
    return failure();
  widenEllipses();
  if (e.failed())
    return failure();
  if (failed(resolveOutput()) || failed(checkIndexSizes()) ||
      failed(takeDiagonals()))
    return failure();
  sumOutLoneIndices();
  EinsumTerm acc = multiplyTerms();
  if (e.failed())
    return failure();
  sumOut(acc, [&](int l) { return !llvm::is_contained(output, l); });
  transposeTo(acc, output);
  if (e.failed())
    return failure();
  ctx.results.push_back(acc.value);
  return success();
}

/// Einsum (opset 12+), for static shapes: an index repeated within one operand
/// takes that operand's diagonal (Transpose, Reshape, strided Slice); an index
/// only one operand has and the output does not is summed (ReduceSum); then
/// the operands are combined from left to right, each pair by one MatMul over
/// the indices both have and nothing after needs (the indices both have that
/// are still needed are its batch dims), or by a broadcast Mul when they
/// share no such index; a Transpose puts the result in the output's order.
LogicalResult importEinsum(NodeContext &ctx) {
  return EinsumDecomposition(ctx).run();
}

} // namespace

std::string zero::import::dataDependentShapeMessage(const ::onnx::NodeProto &node) {
  std::string input = node.input_size() ? node.input(0) : std::string();
  return "its output shape depends on the values of its input '" + input +
         "' (how many are nonzero), and data-dependent shapes are unsupported: a "
         "program's shapes are fixed when it is compiled. Only a constant input is "
         "folded at import; this one is computed at run time. Export the model "
         "without NonZero, e.g. a mixture-of-experts router with dense dispatch "
         "(every expert applied to every token, weighted by gates built with TopK and "
         "OneHot or ScatterElements) instead of torch.nonzero / torch.where(mask) "
         "token dispatch";
}

const llvm::StringMap<OpImporter> &zero::import::getOpImporters() {
  static const llvm::StringMap<OpImporter> table = [] {
    llvm::StringMap<OpImporter> t;
    for (const char *op : {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less",
                           "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or",
                           "Xor", "Where", "Neg", "Abs", "Sqrt", "Reciprocal", "Exp",
                           "Log", "Tanh", "Erf", "Sigmoid", "Relu", "Sin", "Cos",
                           "Floor", "Ceil", "Round", "Sign", "Softplus", "Not",
                           "HardSwish", "IsNaN", "MatMul", "Tan", "Asin", "Acos",
                           "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                           "Softsign"})
      t[op] = direct(op);
    t["Celu"] = direct("Celu", {}, {"alpha"});
    t["Selu"] = direct("Selu", {}, {"alpha", "gamma"});
    t["ThresholdedRelu"] = direct("ThresholdedRelu", {}, {"alpha"});
    t["Mish"] = importMish;
    t["Shrink"] = importShrink;
    t["PRelu"] = importPRelu;
    t["Einsum"] = importEinsum;
    t["InstanceNormalization"] = importInstanceNormalization;
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
    t["NegativeLogLikelihoodLoss"] = importNegativeLogLikelihood;
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
    t["SplitToSequence"] = importSplitToSequence;
    t["SequenceAt"] = importSequenceAt;
    t["SequenceLength"] = importSequenceLength;
    t["SequenceConstruct"] = importSequenceConstruct;
    t["SequenceEmpty"] = importSequenceEmpty;
    t["SequenceInsert"] = importSequenceInsert;
    t["SequenceErase"] = importSequenceErase;
    t["ConcatFromSequence"] = importConcatFromSequence;
    t["Conv"] = importConv;
    t["ConvTranspose"] = importConvTranspose;
    t["MaxPool"] = pool("MaxPool");
    t["AveragePool"] = pool("AveragePool");
    t["GlobalAveragePool"] = globalPool("ReduceMean");
    t["GlobalMaxPool"] = globalPool("ReduceMax");
    t["BatchNormalization"] = importBatchNormalization;
    t["Resize"] = importResize;
    t["TopK"] = importTopK;
    t["OneHot"] = importOneHot;
    t["NonZero"] = importNonZero;
    t["RotaryEmbedding"] = importRotaryEmbedding;
    t["Attention"] = importAttention;
    return t;
  }();
  return table;
}
