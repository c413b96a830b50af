//===- IndexingKernels.h - Gathers, any backend -----------------*- C++ -*-===//
//
// The host code of Gather, GatherElements, GatherND, ScatterElements and
// ScatterND (docs/kernels.md, "Gather and scatter"): operand checks and the
// index checks (indices are read to the host, range-checked and normalised
// there, so out-of-range indices are the same error on both backends), written
// once as templates over a Loops policy with
//   readIndices(op, indices, values)        I64 / I32 operand -> host int64s
//   gather(ctx, AxisSplit, index, data, y)  Gather
//   gatherRows(ctx, rowOffsets, rowLen, data, y)   y row t = data[off_t, +len)
//   gatherElements(ctx, indexShape, dataStrides, axis, index, data, y)
//   scatterElements<T>(ctx, indexShape, dataStrides, axis, index, updates,
//                      out, reduction)
//   scatterRows<T>(ctx, rowOffsets, rowLen, updates, out, reduction)
// (after copy() of data into the output). CpuIndexingLoops (Indexing.cpp)
// and cuda::CudaIndexingLoops (cuda/IndexingKernels.cu) implement them;
// updates apply in index order on both (math/ScatterMath.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_INDEXINGKERNELS_H
#define ZRT_KERNELS_INDEXINGKERNELS_H

#include "kernels/KernelSupport.h"

#include <unordered_map>
#include "math/ScatterMath.h"

namespace zrt {
namespace kernels {
namespace indexing {

/// Reads `indices` (I64 or I32) as int64 values.
inline Status readIndices(const char *op, const TensorRef &indices,
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
template <typename Loops>
Status normalizeIndices(const char *op, const TensorRef &indices, int64_t bound,
                        std::vector<int64_t> &result) {
  ZRT_RETURN_IF_ERROR(Loops::readIndices(op, indices, result));
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

/// Checks the shared shape rules of GatherElements/ScatterElements: same
/// rank, index dims no larger than data dims, axis in range.
inline Status checkElementsShapes(const char *op, const TensorRef &data,
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

/// Gather(data, indices): attr axis; out = data[..., indices, ...].
template <typename Loops>
Status gatherKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Gather", in, out, 2, 2, 1, 1));
  const TensorRef &data = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("Gather", data, "data", y, "output"));
  AxisSplit split;
  ZRT_RETURN_IF_ERROR(
      splitAtAxis("Gather", data.shape, attrs.getInt("axis", 0), split));
  std::vector<int64_t> index;
  ZRT_RETURN_IF_ERROR(
      normalizeIndices<Loops>("Gather", in[1], split.axis, index));
  const int64_t count = int64_t(index.size());
  if (y.numel() != split.outer * count * split.inner)
    return kernelError(
        "Gather", "output size does not match", shapeString(y.shape),
        std::to_string(split.outer * count * split.inner) + " elements");
  return Loops::gather(ctx, split, index, data, y);
}

/// GatherND(data, indices [..., k]): attr batch_dims (b, default 0). Output
/// = indices.shape[:-1] + data.shape[b + k:]; the first b dims of data and
/// indices are batch dims and must match.
template <typename Loops>
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
  ZRT_RETURN_IF_ERROR(Loops::readIndices(op, indices, index));
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
  return Loops::gatherRows(ctx, offsets, slice, data, y);
}

/// GatherElements(data, indices): attr axis; output has the indices' shape.
template <typename Loops>
Status
gatherElementsKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("GatherElements", in, out, 2, 2, 1, 1));
  const TensorRef &data = in[0], &indices = in[1], &y = out[0];
  const int64_t axis = attrs.getInt("axis", 0);
  ZRT_RETURN_IF_ERROR(
      checkSameDType("GatherElements", data, "data", y, "output"));
  ZRT_RETURN_IF_ERROR(
      checkElementsShapes("GatherElements", data, indices, axis));
  ZRT_RETURN_IF_ERROR(checkShape("GatherElements", "output", y, indices.shape));
  std::vector<int64_t> index;
  ZRT_RETURN_IF_ERROR(normalizeIndices<Loops>("GatherElements", indices,
                                              data.shape[size_t(axis)], index));
  const std::vector<int64_t> strides = contiguousStrides(data.shape);
  return Loops::gatherElements(ctx, indices.shape, strides, axis, index, data,
                               y);
}

//===----------------------------------------------------------------------===//
// Scatters
//===----------------------------------------------------------------------===//

inline Status parseReduction(const char *op, const AttrMap &attrs,
                             math::ScatterReduction &reduction) {
  const std::string name = attrs.getString("reduction", "none");
  if (name == "none" || name.empty())
    reduction = math::ScatterReduction::None;
  else if (name == "add")
    reduction = math::ScatterReduction::Add;
  else if (name == "mul")
    reduction = math::ScatterReduction::Mul;
  else if (name == "max")
    reduction = math::ScatterReduction::Max;
  else if (name == "min")
    reduction = math::ScatterReduction::Min;
  else
    return kernelError(op, "bad attribute reduction", name,
                       "none, add, mul, max or min");
  return Status::ok();
}

/// Runs `fn(TypeTag<T>)` (returning a Status) for the scatter's element
/// type: any dtype (by size) without reduction, numeric dtypes with one.
template <typename Fn>
Status dispatchScatter(const char *op, DType dtype,
                       math::ScatterReduction reduction, Fn &&fn) {
  Status status;
  auto call = [&](auto tag) { status = fn(tag); };
  if (reduction == math::ScatterReduction::None) {
    dispatchBySize(dtypeSize(dtype), call);
    return status;
  }
  if (!dispatchType(NumericTypes{}, dtype, call))
    return dtypeError(op, "data (with a reduction)", dtype, NumericTypes{});
  return status;
}

/// ScatterND's rows with a reduction into f16/bf16 `out` (already data's
/// copy): each row a tuple touches widened to f32 once, every update applied
/// to it in f32 in tuple order, the row rounded back once; rows no tuple
/// touches keep their bits. The f32 kernel's result on widened operands,
/// rounded once, without widening the rest of the table (an embedding's
/// gradient).
inline Status scatterHalfRows(const std::vector<int64_t> &offsets, int64_t slice,
                              const TensorRef &updates, const TensorRef &out,
                              math::ScatterReduction reduction) {
  const DType dt = out.dtype;
  std::unordered_map<int64_t, size_t> rowOf;
  std::vector<int64_t> touched;
  std::vector<float> rows, update(static_cast<size_t>(slice));
  const uint16_t *src = updates.as<uint16_t>();
  uint16_t *dst = out.as<uint16_t>();
  for (size_t t = 0; t < offsets.size(); ++t) {
    const auto [it, fresh] = rowOf.emplace(offsets[t], touched.size());
    if (fresh) {
      touched.push_back(offsets[t]);
      rows.resize(touched.size() * size_t(slice));
      widenHalfRow(dt, dst + offsets[t], rows.data() + it->second * size_t(slice), slice);
    }
    float *row = rows.data() + it->second * size_t(slice);
    widenHalfRow(dt, src + int64_t(t) * slice, update.data(), slice);
    for (int64_t i = 0; i < slice; ++i)
      math::scatterInto(row[i], update[size_t(i)], reduction);
  }
  for (size_t r = 0; r < touched.size(); ++r)
    narrowHalfRow(dt, rows.data() + r * size_t(slice), dst + touched[r], slice);
  return Status::ok();
}

/// Copies input 0 into output 0 unless they share storage.
template <typename Loops>
Status copyData(const char *op, const TensorRef &data, const TensorRef &out) {
  ZRT_RETURN_IF_ERROR(checkSameDType(op, data, "data", out, "output"));
  ZRT_RETURN_IF_ERROR(checkShape(op, "output", out, data.shape));
  return Loops::copy(out.data, data.data, out.bytes());
}

/// ScatterElements(data, indices, updates): attrs axis, reduction.
template <typename Loops>
Status scatterElementsKernel(const KernelContext &ctx,
                             const std::vector<TensorRef> &in,
                             const std::vector<TensorRef> &out,
                             const AttrMap &attrs) {
  const char *op = "ScatterElements";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 3, 3, 1, 1));
  const TensorRef &data = in[0], &indices = in[1], &updates = in[2];
  const int64_t axis = attrs.getInt("axis", 0);
  math::ScatterReduction reduction;
  ZRT_RETURN_IF_ERROR(parseReduction(op, attrs, reduction));
  ZRT_RETURN_IF_ERROR(checkElementsShapes(op, data, indices, axis));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, data, "data", updates, "updates"));
  ZRT_RETURN_IF_ERROR(checkShape(op, "updates", updates, indices.shape));
  std::vector<int64_t> index;
  ZRT_RETURN_IF_ERROR(
      normalizeIndices<Loops>(op, indices, data.shape[size_t(axis)], index));
  ZRT_RETURN_IF_ERROR(copyData<Loops>(op, data, out[0]));
  const std::vector<int64_t> strides = contiguousStrides(data.shape);
  return dispatchScatter(op, data.dtype, reduction, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Loops::template scatterElements<T>(
        ctx, indices.shape, strides, axis, index, updates, out[0], reduction);
  });
}

/// ScatterND(data, indices [..., k], updates): attr reduction.
template <typename Loops>
Status
scatterNDKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = "ScatterND";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 3, 3, 1, 1));
  const TensorRef &data = in[0], &indices = in[1], &updates = in[2];
  math::ScatterReduction reduction;
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
  ZRT_RETURN_IF_ERROR(Loops::readIndices(op, indices, index));
  const int64_t tuples = productOf(indices.shape, 0, indices.shape.size() - 1);
  const std::vector<int64_t> strides = contiguousStrides(data.shape);
  std::vector<int64_t> offsets(static_cast<size_t>(tuples), 0);
  for (int64_t t = 0; t < tuples; ++t)
    for (size_t m = 0; m < depth; ++m) {
      int64_t &v = index[size_t(t) * depth + m];
      ZRT_RETURN_IF_ERROR(normalizeIndex(op, v, data.shape[m]));
      offsets[size_t(t)] += v * strides[m];
    }
  ZRT_RETURN_IF_ERROR(copyData<Loops>(op, data, out[0]));
  const int64_t slice = productOf(data.shape, depth, data.shape.size());
  if constexpr (Loops::kHostData) {
    if ((data.dtype == DType::F16 || data.dtype == DType::BF16) &&
        reduction != math::ScatterReduction::None)
      return scatterHalfRows(offsets, slice, updates, out[0], reduction);
  }
  return dispatchScatter(op, data.dtype, reduction, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Loops::template scatterRows<T>(ctx, offsets, slice, updates, out[0],
                                          reduction);
  });
}

/// Registers the gathers and scatters with the loops of one backend.
template <typename Loops> void addIndexingKernels(KernelTable &table) {
  table.add("Gather", gatherKernel<Loops>);
  table.add("GatherND", gatherNDKernel<Loops>);
  table.add("GatherElements", gatherElementsKernel<Loops>);
  table.add("ScatterElements", scatterElementsKernel<Loops>);
  table.add("ScatterND", scatterNDKernel<Loops>);
}

} // namespace indexing
} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_INDEXINGKERNELS_H
