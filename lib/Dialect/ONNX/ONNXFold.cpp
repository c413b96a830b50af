//===- ONNXFold.cpp - Constant folding of onnx ops ------------------------===//
//
// Evaluates onnx ops whose operands are all constants. This is what removes the
// shape sub-graphs exporters emit (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, ConstantOfShape -> Trilu -> Where masks, Range for positions) once the
// importer has fixed every input shape. Values are computed in double (floats)
// or int64 (integers and i1); results larger than kMaxFoldElements are left to
// run time unless they are splats, which stay cheap whatever their size.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/ONNX/ONNXDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace zero::onnx;

namespace {

/// A constant tensor's elements, widened to double or int64.
struct ConstTensor {
  RankedTensorType type;
  bool isFloat = false;
  bool splat = false;
  std::vector<double> f;
  std::vector<int64_t> i;

  int64_t numel() const { return type.getNumElements(); }
  ArrayRef<int64_t> shape() const { return type.getShape(); }
  double asDouble(int64_t k) const {
    k = splat ? 0 : k;
    return isFloat ? f[k] : double(i[k]);
  }
  int64_t asInt(int64_t k) const {
    k = splat ? 0 : k;
    return isFloat ? int64_t(f[k]) : i[k];
  }
};

std::optional<ConstTensor> readConst(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  ConstTensor t;
  t.type = cast<RankedTensorType>(dense.getType());
  Type elem = t.type.getElementType();
  // An empty tensor has no splat value to read (getSplatValue would read
  // past its data); it is an ordinary tensor of no elements.
  t.splat = dense.isSplat() && t.numel() != 0;
  if (!t.splat && t.numel() > kMaxFoldElements)
    return std::nullopt;
  if (isa<FloatType>(elem)) {
    t.isFloat = true;
    if (t.splat)
      t.f.push_back(dense.getSplatValue<APFloat>().convertToDouble());
    else
      for (APFloat v : dense.getValues<APFloat>())
        t.f.push_back(v.convertToDouble());
  } else if (auto it = dyn_cast<IntegerType>(elem)) {
    bool isUnsigned = it.isUnsigned() || it.getWidth() == 1;
    auto widen = [&](const APInt &v) {
      return isUnsigned ? int64_t(v.getZExtValue()) : v.getSExtValue();
    };
    if (t.splat)
      t.i.push_back(widen(dense.getSplatValue<APInt>()));
    else
      for (APInt v : dense.getValues<APInt>())
        t.i.push_back(widen(v));
  } else {
    return std::nullopt;
  }
  return t;
}

/// Builds an attribute of `type` from computed values (`n` of them; 1 = splat).
Attribute makeConst(RankedTensorType type, int64_t n,
                    const std::function<double(int64_t)> &getF,
                    const std::function<int64_t(int64_t)> &getI) {
  Type elem = type.getElementType();
  if (auto ft = dyn_cast<FloatType>(elem)) {
    SmallVector<APFloat> vals;
    for (int64_t k = 0; k < n; ++k) {
      APFloat v(getF(k));
      bool lost;
      v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(v);
    }
    if (n == 1)
      return DenseElementsAttr::get(type, vals.front());
    return DenseElementsAttr::get(type, vals);
  }
  auto it = dyn_cast<IntegerType>(elem);
  if (!it)
    return {};
  SmallVector<APInt> vals;
  for (int64_t k = 0; k < n; ++k)
    vals.push_back(APInt(it.getWidth(), uint64_t(getI(k)), /*isSigned=*/!it.isUnsigned(),
                         /*implicitTrunc=*/true));
  if (n == 1)
    return DenseElementsAttr::get(type, vals.front());
  return DenseElementsAttr::get(type, vals);
}

/// Row-major strides of `shape`.
SmallVector<int64_t> strides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/// Maps linear index `k` of `outShape` to the broadcast source index in `inShape`.
int64_t broadcastIndex(ArrayRef<int64_t> outShape, ArrayRef<int64_t> inShape,
                       int64_t k) {
  int64_t idx = 0, stride = 1;
  int64_t offset = outShape.size() - inShape.size();
  for (int64_t d = int64_t(outShape.size()) - 1; d >= 0; --d) {
    int64_t coord = k % outShape[d];
    k /= outShape[d];
    int64_t id = d - offset;
    if (id >= 0) {
      if (inShape[id] != 1)
        idx += coord * stride;
      stride *= inShape[id];
    }
  }
  return idx;
}

/// Elementwise op: `fn` gets source values as doubles or ints.
Attribute foldElementwise(RankedTensorType resultType,
                          ArrayRef<ConstTensor> in,
                          const std::function<double(ArrayRef<double>)> &fnF,
                          const std::function<int64_t(ArrayRef<int64_t>)> &fnI,
                          bool computeInFloat) {
  bool allSplat = llvm::all_of(in, [](const ConstTensor &t) { return t.splat; });
  int64_t n = allSplat ? 1 : resultType.getNumElements();
  if (n > kMaxFoldElements)
    return {};
  auto srcIdx = [&](const ConstTensor &t, int64_t k) {
    return allSplat ? 0 : broadcastIndex(resultType.getShape(), t.shape(), k);
  };
  auto evalF = [&](int64_t k) {
    SmallVector<double> args;
    for (const ConstTensor &t : in)
      args.push_back(t.asDouble(srcIdx(t, k)));
    return computeInFloat ? fnF(args) : double(fnI(SmallVector<int64_t>(args.begin(), args.end())));
  };
  auto evalI = [&](int64_t k) {
    if (computeInFloat)
      return int64_t(evalF(k));
    SmallVector<int64_t> args;
    for (const ConstTensor &t : in)
      args.push_back(t.asInt(srcIdx(t, k)));
    return fnI(args);
  };
  return makeConst(resultType, n, evalF, evalI);
}

/// Data-movement op: output element k comes from input element `src(k)`.
Attribute foldGatherLike(RankedTensorType resultType, const ConstTensor &in,
                         const std::function<int64_t(int64_t)> &src) {
  if (in.splat)
    return makeConst(resultType, 1, [&](int64_t) { return in.asDouble(0); },
                     [&](int64_t) { return in.asInt(0); });
  int64_t n = resultType.getNumElements();
  if (n > kMaxFoldElements)
    return {};
  return makeConst(resultType, n, [&](int64_t k) { return in.asDouble(src(k)); },
                   [&](int64_t k) { return in.asInt(src(k)); });
}

/// Multi-index of linear `k` in `shape`.
SmallVector<int64_t> unravel(int64_t k, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> idx(shape.size());
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    idx[d] = k % shape[d];
    k /= shape[d];
  }
  return idx;
}

int64_t ravel(ArrayRef<int64_t> idx, ArrayRef<int64_t> shape) {
  int64_t k = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    k = k * shape[d] + idx[d];
  return k;
}

/// One op being folded: the op, its result type, and its operands' values.
struct FoldOperands {
  Operation *op;
  RankedTensorType resultType;
  SmallVector<ConstTensor> in;

  bool isFloat() const { return in.front().isFloat; }
};

/// Computes an op's constant result, or a null attribute to leave it be.
using FoldFn = Attribute (*)(const FoldOperands &);

using FloatArgs = ArrayRef<double>;
using IntArgs = ArrayRef<int64_t>;

/// The larger of two values (a functor, so that one template serves all the
/// two-operand arithmetic ops).
struct Maximum {
  template <typename T> T operator()(T a, T b) const { return std::max(a, b); }
};

/// The smaller of two values.
struct Minimum {
  template <typename T> T operator()(T a, T b) const { return std::min(a, b); }
};

/// Xor of two truth values.
struct LogicalXor {
  template <typename T> bool operator()(T a, T b) const {
    return bool(a) != bool(b);
  }
};

/// Add, Sub, Mul, Div, Max, Min: `Fn` applied in the operands' own type.
template <typename Fn> Attribute foldArithmetic(const FoldOperands &f) {
  return foldElementwise(
      f.resultType, f.in, [](FloatArgs a) { return Fn()(a[0], a[1]); },
      [](IntArgs a) { return Fn()(a[0], a[1]); }, f.isFloat());
}

/// Comparisons and logical ops: a truth value from two operands.
template <typename Cmp> Attribute foldComparison(const FoldOperands &f) {
  // Float operands are compared as doubles (not truncated to integers).
  return foldElementwise(
      f.resultType, f.in, [](FloatArgs a) { return double(Cmp()(a[0], a[1])); },
      [](IntArgs a) { return int64_t(Cmp()(a[0], a[1])); }, f.isFloat());
}

/// Div, except an integer division by zero.
Attribute foldDiv(const FoldOperands &f) {
  if (!f.isFloat() && llvm::is_contained(f.in[1].i, 0))
    return {};
  return foldArithmetic<std::divides<>>(f);
}

/// Pow, of floats only.
Attribute foldPow(const FoldOperands &f) {
  if (!f.isFloat())
    return {};
  return foldElementwise(
      f.resultType, f.in, [](FloatArgs a) { return std::pow(a[0], a[1]); },
      [](IntArgs) { return int64_t(0); }, true);
}

/// Mod of integers, with the divisor's sign unless fmod (the dividend's).
Attribute foldMod(const FoldOperands &f) {
  if (f.isFloat() || llvm::is_contained(f.in[1].i, 0))
    return {};
  bool fmod = cast<ModOp>(f.op).getFmod();
  return foldElementwise(
      f.resultType, f.in, [](FloatArgs a) { return std::fmod(a[0], a[1]); },
      [fmod](IntArgs a) {
        int64_t r = a[0] % a[1];
        if (!fmod && r != 0 && ((r < 0) != (a[1] < 0)))
          r += a[1];
        return r;
      },
      f.isFloat());
}

/// Where: the condition picks the second or third operand.
Attribute foldWhere(const FoldOperands &f) {
  bool isFloat = f.in[1].isFloat;
  return foldElementwise(
      f.resultType, f.in, [](FloatArgs a) { return a[0] != 0 ? a[1] : a[2]; },
      [](IntArgs a) { return a[0] != 0 ? a[1] : a[2]; }, isFloat);
}

/// Neg.
Attribute foldNeg(const FoldOperands &f) {
  return foldElementwise(
      f.resultType, f.in, [](FloatArgs a) { return -a[0]; },
      [](IntArgs a) { return -a[0]; }, f.isFloat());
}

/// Not.
Attribute foldNot(const FoldOperands &f) {
  return foldElementwise(
      f.resultType, f.in, [](FloatArgs a) { return double(a[0] == 0); },
      [](IntArgs a) { return int64_t(a[0] == 0); }, false);
}

/// Cast: to bool is "nonzero"; float to integer truncates.
Attribute foldCast(const FoldOperands &f) {
  bool toFloat = isa<FloatType>(f.resultType.getElementType());
  bool toBool = f.resultType.getElementType().isInteger(1);
  return foldElementwise(
      f.resultType, f.in,
      [toBool](FloatArgs a) { return toBool ? double(a[0] != 0) : a[0]; },
      [toBool](IntArgs a) { return toBool ? int64_t(a[0] != 0) : a[0]; },
      toFloat || f.isFloat());
}

/// ReduceSum and ReduceProd over the op's axes (kept as size 1).
template <typename ReduceOp> Attribute foldReduce(const FoldOperands &f) {
  const ConstTensor &t = f.in[0];
  if (t.splat && t.numel() > kMaxFoldElements)
    return {};
  bool isProd = std::is_same_v<ReduceOp, ReduceProdOp>;
  ArrayRef<int64_t> axes = cast<ReduceOp>(f.op).getAxes();
  int64_t n = f.resultType.getNumElements();
  std::vector<double> accF(n, isProd ? 1.0 : 0.0);
  std::vector<int64_t> accI(n, isProd ? 1 : 0);
  SmallVector<int64_t> outShape;
  for (int64_t d = 0; d < t.type.getRank(); ++d)
    outShape.push_back(llvm::is_contained(axes, d) ? 1 : t.shape()[d]);
  for (int64_t k = 0; k < t.numel(); ++k) {
    SmallVector<int64_t> idx = unravel(k, t.shape());
    for (int64_t a : axes)
      idx[a] = 0;
    int64_t o = ravel(idx, outShape);
    if (isProd) {
      accF[o] *= t.asDouble(k);
      accI[o] *= t.asInt(k);
    } else {
      accF[o] += t.asDouble(k);
      accI[o] += t.asInt(k);
    }
  }
  return makeConst(
      f.resultType, n, [&](int64_t k) { return accF[k]; },
      [&](int64_t k) { return accI[k]; });
}

/// Reshape, Unsqueeze, Squeeze: the elements in the same order.
Attribute foldReshape(const FoldOperands &f) {
  return foldGatherLike(f.resultType, f.in[0], [](int64_t k) { return k; });
}

/// Expand: a broadcast of the input.
Attribute foldExpand(const FoldOperands &f) {
  return foldGatherLike(f.resultType, f.in[0], [&](int64_t k) {
    return broadcastIndex(f.resultType.getShape(), f.in[0].shape(), k);
  });
}

/// Transpose by the op's permutation.
Attribute foldTranspose(const FoldOperands &f) {
  ArrayRef<int64_t> perm = cast<TransposeOp>(f.op).getPerm();
  return foldGatherLike(f.resultType, f.in[0], [&](int64_t k) {
    SmallVector<int64_t> outIdx = unravel(k, f.resultType.getShape());
    SmallVector<int64_t> inIdx(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      inIdx[perm[d]] = outIdx[d];
    return ravel(inIdx, f.in[0].shape());
  });
}

/// Slice with the op's full-rank starts and steps.
Attribute foldSlice(const FoldOperands &f) {
  auto s = cast<SliceOp>(f.op);
  ArrayRef<int64_t> starts = s.getStarts(), steps = s.getSteps();
  return foldGatherLike(f.resultType, f.in[0], [&](int64_t k) {
    SmallVector<int64_t> idx = unravel(k, f.resultType.getShape());
    for (size_t d = 0; d < idx.size(); ++d)
      idx[d] = starts[d] + idx[d] * steps[d];
    return ravel(idx, f.in[0].shape());
  });
}

/// Gather along the op's axis, unless an index is out of range.
Attribute foldGather(const FoldOperands &f) {
  int64_t axis = cast<GatherOp>(f.op).getAxis();
  const ConstTensor &data = f.in[0], &indices = f.in[1];
  int64_t dim = data.shape()[axis];
  int64_t q = indices.type.getRank();
  for (int64_t k = 0; k < (indices.splat ? 1 : indices.numel()); ++k) {
    int64_t v = indices.asInt(k);
    if (v < -dim || v >= dim)
      return {};
  }
  return foldGatherLike(f.resultType, data, [&](int64_t k) {
    SmallVector<int64_t> outIdx = unravel(k, f.resultType.getShape());
    SmallVector<int64_t> idxIdx(outIdx.begin() + axis,
                                outIdx.begin() + axis + q);
    int64_t v =
        indices.asInt(indices.splat ? 0 : ravel(idxIdx, indices.shape()));
    if (v < 0)
      v += dim;
    SmallVector<int64_t> inIdx(outIdx.begin(), outIdx.begin() + axis);
    inIdx.push_back(v);
    inIdx.append(outIdx.begin() + axis + q, outIdx.end());
    return ravel(inIdx, data.shape());
  });
}

/// Concat along the op's axis.
Attribute foldConcat(const FoldOperands &f) {
  int64_t n = f.resultType.getNumElements();
  if (n > kMaxFoldElements)
    return {};
  int64_t axis = cast<ConcatOp>(f.op).getAxis();
  // Input and offset along `axis` for each output position on that axis.
  SmallVector<std::pair<int64_t, int64_t>> owner;
  for (auto [i, t] : llvm::enumerate(f.in))
    for (int64_t j = 0; j < t.shape()[axis]; ++j)
      owner.push_back({int64_t(i), j});
  auto locate = [&](int64_t k) {
    SmallVector<int64_t> idx = unravel(k, f.resultType.getShape());
    auto [i, j] = owner[idx[axis]];
    idx[axis] = j;
    return std::make_pair(i, ravel(idx, f.in[i].shape()));
  };
  return makeConst(
      f.resultType, n,
      [&](int64_t k) {
        auto [i, s] = locate(k);
        return f.in[i].asDouble(s);
      },
      [&](int64_t k) {
        auto [i, s] = locate(k);
        return f.in[i].asInt(s);
      });
}

/// Trilu: the upper or lower triangle from diagonal k, zeros elsewhere.
Attribute foldTrilu(const FoldOperands &f) {
  int64_t n = f.resultType.getNumElements();
  if (n > kMaxFoldElements)
    return {};
  auto t = cast<TriluOp>(f.op);
  bool upper = t.getUpper();
  int64_t diag = t.getK();
  auto keep = [&](int64_t k) {
    SmallVector<int64_t> idx = unravel(k, f.resultType.getShape());
    int64_t r = idx[idx.size() - 2], col = idx.back();
    return upper ? col - r >= diag : col - r <= diag;
  };
  return makeConst(
      f.resultType, n,
      [&](int64_t k) { return keep(k) ? f.in[0].asDouble(k) : 0.0; },
      [&](int64_t k) { return keep(k) ? f.in[0].asInt(k) : int64_t(0); });
}

/// Range: start + k * delta.
Attribute foldRange(const FoldOperands &f) {
  const SmallVector<ConstTensor> &in = f.in;
  int64_t n = f.resultType.getNumElements();
  if (n > kMaxFoldElements || in[0].numel() != 1 || in[2].numel() != 1)
    return {};
  // start + k * delta lies between start and limit, but k * delta
  // alone may not fit in int64: wrap-around arithmetic gives the exact
  // result without signed overflow.
  return makeConst(
      f.resultType, n,
      [&](int64_t k) { return in[0].asDouble(0) + k * in[2].asDouble(0); },
      [&](int64_t k) {
        return int64_t(uint64_t(in[0].asInt(0)) +
                       uint64_t(k) * uint64_t(in[2].asInt(0)));
      });
}

/// CumSum along the op's axis, inclusive or exclusive, forward or reversed.
Attribute foldCumSum(const FoldOperands &f) {
  const ConstTensor &t = f.in[0];
  int64_t n = f.resultType.getNumElements();
  if (n > kMaxFoldElements)
    return {};
  auto c = cast<CumSumOp>(f.op);
  int64_t axis = c.getAxis();
  bool exclusive = c.getExclusive(), reverse = c.getReverse();
  ArrayRef<int64_t> shape = f.resultType.getShape();
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t len = shape[axis], outer = n / std::max<int64_t>(1, len * inner);
  std::vector<double> sumF(n);
  std::vector<int64_t> sumI(n);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double accF = 0;
      int64_t accI = 0;
      for (int64_t step = 0; step < len; ++step) {
        int64_t j = reverse ? len - 1 - step : step;
        int64_t k = (o * len + j) * inner + i;
        if (!exclusive) {
          accF += t.asDouble(k);
          accI += t.asInt(k);
        }
        sumF[k] = accF;
        sumI[k] = accI;
        if (exclusive) {
          accF += t.asDouble(k);
          accI += t.asInt(k);
        }
      }
    }
  return makeConst(
      f.resultType, n, [&](int64_t k) { return sumF[k]; },
      [&](int64_t k) { return sumI[k]; });
}

/// GatherND with the op's batch dims, unless an index is out of range.
Attribute foldGatherND(const FoldOperands &f) {
  const ConstTensor &data = f.in[0], &indices = f.in[1];
  int64_t b = cast<GatherNDOp>(f.op).getBatchDims();
  ArrayRef<int64_t> ds = data.shape(), is = indices.shape();
  int64_t depth = is.back();
  int64_t sliceSize = 1;
  for (size_t d = b + depth; d < ds.size(); ++d)
    sliceSize *= ds[d];
  SmallVector<int64_t> dataStrides = strides(ds);
  int64_t batch = 1;
  for (int64_t d = 0; d < b; ++d)
    batch *= ds[d];
  int64_t tuples = indices.numel() / std::max<int64_t>(1, depth);
  int64_t perBatch = tuples / std::max<int64_t>(1, batch);
  // Source element of each output element.
  std::vector<int64_t> src(f.resultType.getNumElements());
  if (int64_t(src.size()) > kMaxFoldElements)
    return {};
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t bi = perBatch ? t / perBatch : 0;
    int64_t base = bi * (b ? dataStrides[b - 1] : 0);
    for (int64_t k = 0; k < depth; ++k) {
      int64_t v = indices.asInt(t * depth + k), dim = ds[b + k];
      if (v < -dim || v >= dim)
        return {};
      base += (v < 0 ? v + dim : v) * dataStrides[b + k];
    }
    for (int64_t e = 0; e < sliceSize; ++e)
      src[t * sliceSize + e] = base + e;
  }
  return foldGatherLike(f.resultType, data, [&](int64_t k) { return src[k]; });
}

/// The fold of each op that has one: folding a new op is a new row here.
const llvm::DenseMap<TypeID, FoldFn> &getFolders() {
  static const llvm::DenseMap<TypeID, FoldFn> folders = {
      {TypeID::get<AddOp>(), foldArithmetic<std::plus<>>},
      {TypeID::get<SubOp>(), foldArithmetic<std::minus<>>},
      {TypeID::get<MulOp>(), foldArithmetic<std::multiplies<>>},
      {TypeID::get<DivOp>(), foldDiv},
      {TypeID::get<MaxOp>(), foldArithmetic<Maximum>},
      {TypeID::get<MinOp>(), foldArithmetic<Minimum>},
      {TypeID::get<PowOp>(), foldPow},
      {TypeID::get<ModOp>(), foldMod},
      {TypeID::get<EqualOp>(), foldComparison<std::equal_to<>>},
      {TypeID::get<LessOp>(), foldComparison<std::less<>>},
      {TypeID::get<LessOrEqualOp>(), foldComparison<std::less_equal<>>},
      {TypeID::get<GreaterOp>(), foldComparison<std::greater<>>},
      {TypeID::get<GreaterOrEqualOp>(), foldComparison<std::greater_equal<>>},
      {TypeID::get<AndOp>(), foldComparison<std::logical_and<>>},
      {TypeID::get<OrOp>(), foldComparison<std::logical_or<>>},
      {TypeID::get<XorOp>(), foldComparison<LogicalXor>},
      {TypeID::get<WhereOp>(), foldWhere},
      {TypeID::get<NegOp>(), foldNeg},
      {TypeID::get<NotOp>(), foldNot},
      {TypeID::get<CastOp>(), foldCast},
      {TypeID::get<ReduceSumOp>(), foldReduce<ReduceSumOp>},
      {TypeID::get<ReduceProdOp>(), foldReduce<ReduceProdOp>},
      {TypeID::get<ReshapeOp>(), foldReshape},
      {TypeID::get<UnsqueezeOp>(), foldReshape},
      {TypeID::get<SqueezeOp>(), foldReshape},
      {TypeID::get<ExpandOp>(), foldExpand},
      {TypeID::get<TransposeOp>(), foldTranspose},
      {TypeID::get<SliceOp>(), foldSlice},
      {TypeID::get<GatherOp>(), foldGather},
      {TypeID::get<ConcatOp>(), foldConcat},
      {TypeID::get<TriluOp>(), foldTrilu},
      {TypeID::get<RangeOp>(), foldRange},
      {TypeID::get<CumSumOp>(), foldCumSum},
      {TypeID::get<GatherNDOp>(), foldGatherND},
  };
  return folders;
}

} // namespace

Attribute zero::onnx::foldONNXOp(Operation *op, ArrayRef<Attribute> operands) {
  if (op->getNumResults() != 1 || operands.empty())
    return {};
  auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!resultType)
    return {};
  FoldOperands f{op, resultType, {}};
  for (Attribute a : operands) {
    std::optional<ConstTensor> t = readConst(a);
    if (!t)
      return {};
    f.in.push_back(std::move(*t));
  }
  const llvm::DenseMap<TypeID, FoldFn> &folders = getFolders();
  auto folder = folders.find(op->getName().getTypeID());
  if (folder == folders.end())
    return {};
  return folder->second(f);
}

#define ZERO_FOLD(OP)                                                          \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldONNXOp(*this, adaptor.getOperands());                           \
  }
ZERO_FOLD(AddOp)
ZERO_FOLD(SubOp)
ZERO_FOLD(MulOp)
ZERO_FOLD(DivOp)
ZERO_FOLD(PowOp)
ZERO_FOLD(MaxOp)
ZERO_FOLD(MinOp)
ZERO_FOLD(ModOp)
ZERO_FOLD(EqualOp)
ZERO_FOLD(LessOp)
ZERO_FOLD(LessOrEqualOp)
ZERO_FOLD(GreaterOp)
ZERO_FOLD(GreaterOrEqualOp)
ZERO_FOLD(AndOp)
ZERO_FOLD(OrOp)
ZERO_FOLD(XorOp)
ZERO_FOLD(WhereOp)
ZERO_FOLD(NegOp)
ZERO_FOLD(NotOp)
ZERO_FOLD(CastOp)
ZERO_FOLD(ReduceSumOp)
ZERO_FOLD(ReduceProdOp)
ZERO_FOLD(UnsqueezeOp)
ZERO_FOLD(SqueezeOp)
ZERO_FOLD(TransposeOp)
ZERO_FOLD(ConcatOp)
ZERO_FOLD(SliceOp)
ZERO_FOLD(GatherOp)
ZERO_FOLD(ExpandOp)
ZERO_FOLD(TriluOp)
ZERO_FOLD(RangeOp)
ZERO_FOLD(CumSumOp)
ZERO_FOLD(GatherNDOp)
#undef ZERO_FOLD

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getX(); }
OpFoldResult DropoutOp::fold(FoldAdaptor) { return getX(); }

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getData().getType() == getType())
    return getData();
  return foldONNXOp(*this, adaptor.getOperands());
}
