//===- Indexing.cpp - Gather and scatter kernels --------------------------===//
//
// Gather, GatherElements, GatherND, ScatterElements and ScatterND. Indices may
// be I64 or I32 and count from the end when negative; they are range-checked
// and normalised once up front so that the copy loops never read out of bounds.
// Scatters run serially so that duplicate indices behave like the ONNX
// reference (last write wins, or reductions apply in index order).
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

namespace zrt {
namespace cpu {
namespace {

/// Reads `indices` (I64 or I32) as int64 values.
Status readIndices(const char *op, const TensorRef &indices,
                   std::vector<int64_t> &values) {
  values.resize(size_t(indices.numel()));
  if (!dispatchType(IndexTypes{}, indices.dtype, [&](auto tag) {
        using I = typename decltype(tag)::type;
        std::copy(indices.as<I>(), indices.as<I>() + values.size(),
                  values.begin());
      }))
    return dtypeError(op, "indices", indices.dtype, IndexTypes{});
  return Status::ok();
}

/// Maps an index in [-bound, bound) to [0, bound); fails outside.
inline Status normalizeIndex(const char *op, int64_t &index, int64_t bound) {
  const int64_t original = index;
  if (index < 0)
    index += bound;
  if (index < 0 || index >= bound)
    return kernelError(op, "index out of range", std::to_string(original),
                       "an index in [-" + std::to_string(bound) + ", " +
                           std::to_string(bound) + ")");
  return Status::ok();
}

/// Reads `indices` into values normalised against `bound`.
Status normalizeIndices(const char *op, const TensorRef &indices, int64_t bound,
                        std::vector<int64_t> &result) {
  ZRT_RETURN_IF_ERROR(readIndices(op, indices, result));
  for (int64_t &index : result)
    ZRT_RETURN_IF_ERROR(normalizeIndex(op, index, bound));
  return Status::ok();
}

/// Data offset of element `k` of an index tensor of shape `indexShape`, with
/// the coordinate along `axis` left out (it comes from the index value).
inline int64_t offsetWithoutAxis(const std::vector<int64_t> &indexShape,
                                 const std::vector<int64_t> &dataStrides,
                                 size_t axis, int64_t k) {
  int64_t off = 0;
  for (size_t d = indexShape.size(); d-- > 0;) {
    if (d != axis)
      off += (k % indexShape[d]) * dataStrides[d];
    k /= indexShape[d];
  }
  return off;
}

/// The reduction attribute of the scatters.
enum class ScatterReduction { None, Add, Mul, Max, Min };

Status parseReduction(const char *op, const AttrMap &attrs,
                      ScatterReduction &reduction) {
  const std::string name = attrs.getString("reduction", "none");
  if (name == "none" || name.empty())
    reduction = ScatterReduction::None;
  else if (name == "add")
    reduction = ScatterReduction::Add;
  else if (name == "mul")
    reduction = ScatterReduction::Mul;
  else if (name == "max")
    reduction = ScatterReduction::Max;
  else if (name == "min")
    reduction = ScatterReduction::Min;
  else
    return kernelError(op, "bad attribute reduction", name,
                       "none, add, mul, max or min");
  return Status::ok();
}

template <typename T>
inline void scatterInto(T &dst, T value, ScatterReduction reduction) {
  switch (reduction) {
  case ScatterReduction::None:
    dst = value;
    break;
  case ScatterReduction::Add:
    dst = T(dst + value);
    break;
  case ScatterReduction::Mul:
    dst = T(dst * value);
    break;
  case ScatterReduction::Max:
    dst = value > dst ? value : dst;
    break;
  case ScatterReduction::Min:
    dst = value < dst ? value : dst;
    break;
  }
}

/// Runs `fn(TypeTag<T>)` for the scatter's element type: any dtype (by
/// size) without reduction, numeric dtypes with one.
template <typename Fn>
Status dispatchScatter(const char *op, DType dtype, ScatterReduction reduction,
                       Fn &&fn) {
  if (reduction == ScatterReduction::None) {
    dispatchBySize(dtypeSize(dtype), fn);
    return Status::ok();
  }
  if (!dispatchType(NumericTypes{}, dtype, fn))
    return dtypeError(op, "data (with a reduction)", dtype, NumericTypes{});
  return Status::ok();
}

/// Copies input 0 into output 0 unless they share storage.
Status copyData(const char *op, const TensorRef &data, const TensorRef &out) {
  ZRT_RETURN_IF_ERROR(checkSameDType(op, data, "data", out, "output"));
  ZRT_RETURN_IF_ERROR(checkShape(op, "output", out, data.shape));
  if (data.data != out.data && out.bytes() != 0)
    std::memcpy(out.data, data.data, out.bytes());
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Gather(data, indices): attr axis; out = data[..., indices, ...].
Status gatherKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Gather", in, out, 2, 2, 1, 1));
  const TensorRef &data = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("Gather", data, "data", y, "output"));
  AxisSplit split;
  ZRT_RETURN_IF_ERROR(
      splitAtAxis("Gather", data.shape, attrs.getInt("axis", 0), split));
  std::vector<int64_t> index;
  ZRT_RETURN_IF_ERROR(normalizeIndices("Gather", in[1], split.axis, index));
  const int64_t count = int64_t(index.size());
  if (y.numel() != split.outer * count * split.inner)
    return kernelError(
        "Gather", "output size does not match", shapeString(y.shape),
        std::to_string(split.outer * count * split.inner) + " elements");
  dispatchBySize(dtypeSize(data.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U *src = data.as<U>();
    U *dst = y.as<U>();
    const int64_t inner = split.inner;
    parallelRange(ctx, split.outer * count, rowGrain(inner, kElementGrain),
                  [&](int64_t b, int64_t e) {
                    for (int64_t t = b; t < e; ++t) {
                      const int64_t o = t / count, i = t % count;
                      const U *s =
                          src + (o * split.axis + index[size_t(i)]) * inner;
                      U *d = dst + t * inner;
                      if (inner == 1)
                        *d = *s;
                      else
                        std::memcpy(d, s, size_t(inner) * sizeof(U));
                    }
                  });
  });
  return Status::ok();
}

/// GatherND(data, indices [..., k]): attr batch_dims (b, default 0). Output
/// = indices.shape[:-1] + data.shape[b + k:]; the first b dims of data and
/// indices are batch dims and must match.
Status gatherNDKernel(const KernelContext &ctx,
                      const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = "GatherND";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 2, 2, 1, 1));
  const TensorRef &data = in[0], &indices = in[1], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType(op, data, "data", y, "output"));
  const int64_t batchDims = attrs.getInt("batch_dims", 0);
  if (indices.rank() < 1 || batchDims < 0 || batchDims >= indices.rank() ||
      batchDims + indices.shape.back() > data.rank())
    return kernelError(op, "bad indices shape or batch_dims",
                       shapeString(indices.shape) + " with batch_dims " +
                           std::to_string(batchDims),
                       "last dim + batch_dims <= data rank " +
                           std::to_string(data.rank()));
  const size_t b = size_t(batchDims), depth = size_t(indices.shape.back());
  for (size_t d = 0; d < b; ++d)
    if (indices.shape[d] != data.shape[d])
      return kernelError(op, "batch dims of data and indices differ",
                         shapeString(indices.shape),
                         "leading dims of " + shapeString(data.shape));
  std::vector<int64_t> expected(indices.shape.begin(), indices.shape.end() - 1);
  expected.insert(expected.end(), data.shape.begin() + int64_t(b + depth),
                  data.shape.end());
  ZRT_RETURN_IF_ERROR(checkShape(op, "output", y, expected));
  const int64_t batches = productOf(data.shape, 0, b);
  const int64_t batchSize = productOf(data.shape, b, data.shape.size());
  const int64_t tuples = productOf(indices.shape, b, indices.shape.size() - 1);
  const int64_t slice = productOf(data.shape, b + depth, data.shape.size());
  const std::vector<int64_t> strides = contiguousStrides(data.shape);
  std::vector<int64_t> index;
  ZRT_RETURN_IF_ERROR(readIndices(op, indices, index));
  // Source offset of every (batch, tuple).
  std::vector<int64_t> offsets(static_cast<size_t>(batches * tuples));
  for (int64_t t = 0; t < batches * tuples; ++t) {
    int64_t off = (t / std::max<int64_t>(tuples, 1)) * batchSize;
    for (size_t m = 0; m < depth; ++m) {
      int64_t &v = index[size_t(t) * depth + m];
      ZRT_RETURN_IF_ERROR(normalizeIndex(op, v, data.shape[b + m]));
      off += v * strides[b + m];
    }
    offsets[size_t(t)] = off;
  }
  dispatchBySize(dtypeSize(data.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U *src = data.as<U>();
    U *dst = y.as<U>();
    parallelRange(ctx, int64_t(offsets.size()), rowGrain(slice, kElementGrain),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t t = begin; t < end; ++t)
                      std::copy_n(src + offsets[size_t(t)], slice,
                                  dst + t * slice);
                  });
  });
  return Status::ok();
}

/// Checks the shared shape rules of GatherElements/ScatterElements: same
/// rank, index dims no larger than data dims, axis in range.
Status checkElementsShapes(const char *op, const TensorRef &data,
                           const TensorRef &indices, int64_t axis) {
  if (axis < 0 || axis >= data.rank())
    return kernelError(op, "axis out of range", std::to_string(axis),
                       "0 <= axis < " + std::to_string(data.rank()));
  bool fits = indices.rank() == data.rank();
  for (int64_t d = 0; fits && d < data.rank(); ++d)
    fits = d == axis || indices.shape[size_t(d)] <= data.shape[size_t(d)];
  if (!fits)
    return kernelError(op, "indices shape does not fit the data",
                       shapeString(indices.shape),
                       "rank " + std::to_string(data.rank()) +
                           ", dims within " + shapeString(data.shape));
  return Status::ok();
}

/// GatherElements(data, indices): attr axis; output has the indices' shape.
Status gatherElementsKernel(const KernelContext &ctx,
                            const std::vector<TensorRef> &in,
                            const std::vector<TensorRef> &out,
                            const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("GatherElements", in, out, 2, 2, 1, 1));
  const TensorRef &data = in[0], &indices = in[1], &y = out[0];
  const int64_t axis = attrs.getInt("axis", 0);
  ZRT_RETURN_IF_ERROR(
      checkSameDType("GatherElements", data, "data", y, "output"));
  ZRT_RETURN_IF_ERROR(
      checkElementsShapes("GatherElements", data, indices, axis));
  ZRT_RETURN_IF_ERROR(checkShape("GatherElements", "output", y, indices.shape));
  std::vector<int64_t> index;
  ZRT_RETURN_IF_ERROR(normalizeIndices("GatherElements", indices,
                                       data.shape[size_t(axis)], index));
  const std::vector<int64_t> strides = contiguousStrides(data.shape);
  dispatchBySize(dtypeSize(data.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U *src = data.as<U>();
    U *dst = y.as<U>();
    parallelRange(
        ctx, int64_t(index.size()), kElementGrain / 4,
        [&](int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k)
            dst[k] =
                src[offsetWithoutAxis(indices.shape, strides, size_t(axis), k) +
                    index[size_t(k)] * strides[size_t(axis)]];
        });
  });
  return Status::ok();
}

/// ScatterElements(data, indices, updates): attrs axis, reduction.
Status scatterElementsKernel(const KernelContext &,
                             const std::vector<TensorRef> &in,
                             const std::vector<TensorRef> &out,
                             const AttrMap &attrs) {
  const char *op = "ScatterElements";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 3, 3, 1, 1));
  const TensorRef &data = in[0], &indices = in[1], &updates = in[2];
  const int64_t axis = attrs.getInt("axis", 0);
  ScatterReduction reduction;
  ZRT_RETURN_IF_ERROR(parseReduction(op, attrs, reduction));
  ZRT_RETURN_IF_ERROR(checkElementsShapes(op, data, indices, axis));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, data, "data", updates, "updates"));
  ZRT_RETURN_IF_ERROR(checkShape(op, "updates", updates, indices.shape));
  std::vector<int64_t> index;
  ZRT_RETURN_IF_ERROR(
      normalizeIndices(op, indices, data.shape[size_t(axis)], index));
  ZRT_RETURN_IF_ERROR(copyData(op, data, out[0]));
  const std::vector<int64_t> strides = contiguousStrides(data.shape);
  return dispatchScatter(op, data.dtype, reduction, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *src = updates.as<T>();
    T *dst = out[0].as<T>();
    for (size_t k = 0; k < index.size(); ++k)
      scatterInto(dst[offsetWithoutAxis(indices.shape, strides, size_t(axis),
                                        int64_t(k)) +
                      index[k] * strides[size_t(axis)]],
                  src[k], reduction);
  });
}

/// ScatterND(data, indices [..., k], updates): attr reduction.
Status scatterNDKernel(const KernelContext &, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out,
                       const AttrMap &attrs) {
  const char *op = "ScatterND";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 3, 3, 1, 1));
  const TensorRef &data = in[0], &indices = in[1], &updates = in[2];
  ScatterReduction reduction;
  ZRT_RETURN_IF_ERROR(parseReduction(op, attrs, reduction));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, data, "data", updates, "updates"));
  if (indices.rank() == 0 || indices.shape.back() > data.rank())
    return kernelError(op, "bad indices shape", shapeString(indices.shape),
                       "rank >= 1 with last dim <= " +
                           std::to_string(data.rank()));
  const size_t depth = size_t(indices.shape.back());
  std::vector<int64_t> expected(indices.shape.begin(), indices.shape.end() - 1);
  expected.insert(expected.end(), data.shape.begin() + int64_t(depth),
                  data.shape.end());
  ZRT_RETURN_IF_ERROR(checkShape(op, "updates", updates, expected));
  // Index tuples, each component normalised against its own dim.
  std::vector<int64_t> index;
  ZRT_RETURN_IF_ERROR(readIndices(op, indices, index));
  const int64_t tuples = productOf(indices.shape, 0, indices.shape.size() - 1);
  const std::vector<int64_t> strides = contiguousStrides(data.shape);
  std::vector<int64_t> offsets(static_cast<size_t>(tuples), 0);
  for (int64_t t = 0; t < tuples; ++t)
    for (size_t m = 0; m < depth; ++m) {
      int64_t &v = index[size_t(t) * depth + m];
      ZRT_RETURN_IF_ERROR(normalizeIndex(op, v, data.shape[m]));
      offsets[size_t(t)] += v * strides[m];
    }
  ZRT_RETURN_IF_ERROR(copyData(op, data, out[0]));
  const int64_t slice = productOf(data.shape, depth, data.shape.size());
  return dispatchScatter(op, data.dtype, reduction, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *src = updates.as<T>();
    T *dst = out[0].as<T>();
    for (int64_t t = 0; t < tuples; ++t)
      for (int64_t i = 0; i < slice; ++i)
        scatterInto(dst[offsets[size_t(t)] + i], src[t * slice + i], reduction);
  });
}

} // namespace

void registerIndexingKernels(KernelTable &table) {
  table.add("Gather", gatherKernel);
  table.add("GatherElements", gatherElementsKernel);
  table.add("GatherND", gatherNDKernel);
  table.add("ScatterElements", scatterElementsKernel);
  table.add("ScatterND", scatterNDKernel);
}

} // namespace cpu
} // namespace zrt
