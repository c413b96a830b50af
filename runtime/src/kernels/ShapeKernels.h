//===- ShapeKernels.h - Data movement kernels, any backend ------*- C++ -*-===//
//
// The host code of Copy, LocalShard, Expand, Transpose, Concat, Split, Slice,
// Fill, Tile, Trilu, Range and Pad (docs/kernels.md, "Data movement"): operand
// checks, attributes and the collapsed layouts, written once as templates over
// a Loops policy with
//   copyBytes(ctx, dst, src, bytes)
//   broadcastCopy(ctx, op, in, out)
//   transpose(ctx, dims, inStrides, x, y)   y = x viewed as dims x inStrides
//   concatOrSplit<ToWhole>(ctx, parts, whole, axis, outer, innerBytes,
//                          wholeRow, partOffset)
//   slice(ctx, inStrides, base, x, y)       y = x[base + index . inStrides]
//   fillElements(ctx, dst, elementSize, bits, count)
//   tile(ctx, x, y)                         y = x repeated (shapes checked)
//   trilu(ctx, upper, k, rowsPerMatrix, cols, rows, x, y)
//   pad(ctx, maps, fillBits, x, y)          maps[d][o]: input index or -1
// and forEach / read for Range (math/ShapeMath.h has the element math).
// CpuShapeLoops (Shape.cpp) and cuda::CudaShapeLoops
// (cuda/ShapeKernels.cu) implement them; everything is by element size, so
// it serves every dtype.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_SHAPEKERNELS_H
#define ZRT_KERNELS_SHAPEKERNELS_H

#include "kernels/KernelSupport.h"
#include "math/ShapeMath.h"

namespace zrt {
namespace kernels {

/// The bits of attribute `name` (a float, or an int for exact i64 values;
/// 0 when absent) converted to `dtype`.
inline uint64_t scalarAttrBits(const AttrMap &attrs, const char *name,
                               DType dtype) {
  // getFloat falls back to its default only when no float is stored.
  const double lo = attrs.getFloat(name, 0.0), hi = attrs.getFloat(name, 1.0);
  if (lo == hi || lo != lo)
    return encodeScalar(dtype, lo);
  return encodeScalarInt(dtype, attrs.getInt(name, 0));
}

namespace shape {

//===----------------------------------------------------------------------===//
// Copy, LocalShard, Expand
//===----------------------------------------------------------------------===//

/// Copy: output 0's byte size from the start of input 0 (which may be
/// larger); the lowering of Reshape, Squeeze, Unsqueeze and Flatten.
template <typename Loops>
Status copyKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Copy", in, out, 1, 1, 1, 1));
  const int64_t bytes = int64_t(out[0].bytes());
  if (int64_t(in[0].bytes()) < bytes)
    return kernelError("Copy", "input smaller than output",
                       std::to_string(in[0].bytes()) + " bytes",
                       "at least " + std::to_string(bytes) + " bytes");
  if (in[0].data == out[0].data || bytes == 0)
    return Status::ok();
  return Loops::copyBytes(ctx, out[0].data, in[0].data, uint64_t(bytes));
}

/// LocalShard: this rank's block of a flat tensor of world x s elements
/// (zero.local_shard: the shard of a replicated parameter that the rank's
/// optimizer state belongs to). Attribute `world` must be the run's world.
/// With `stride` (a shard over a partitioned process group, hpZ's secondary
/// shard) the block is the rank's position in its group, (rank / stride) %
/// world, and world x stride must divide the run's world.
template <typename Loops>
Status
localShardKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = "LocalShard";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 1, 1, 1));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, in[0], "input", out[0], "output"));
  const int64_t world = attrs.getInt("world", 1);
  const bool grouped = attrs.has("stride");
  const int64_t stride = attrs.getInt("stride", 1);
  if (world < 1 || stride < 1)
    return kernelError(op, "world and stride must be >= 1", "",
                       std::to_string(world) + " and " +
                           std::to_string(stride));
  if (grouped ? ctx.worldSize % (world * stride) != 0 : world != ctx.worldSize)
    return kernelError(op, "program compiled for another world size",
                       std::to_string(ctx.worldSize) + " ranks",
                       grouped ? "a multiple of " +
                                     std::to_string(world * stride) + " ranks"
                               : std::to_string(world) + " ranks (mpirun -np " +
                                     std::to_string(world) + ")");
  if (in[0].numel() != out[0].numel() * world)
    return kernelError(
        op, "input is not world x the output", shapeString(in[0].shape),
        std::to_string(world) + " x " + shapeString(out[0].shape));
  const int64_t position = (ctx.rank / stride) % world;
  const int64_t bytes = int64_t(out[0].bytes());
  return Loops::copyBytes(ctx, out[0].data,
                          static_cast<const char *>(in[0].data) +
                              bytes * position,
                          uint64_t(bytes));
}

/// Expand: input 0 broadcast to the output's shape (input 1, the shape, is
/// ignored when still present).
template <typename Loops>
Status expandKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Expand", in, out, 1, 2, 1, 1));
  ZRT_RETURN_IF_ERROR(
      checkSameDType("Expand", in[0], "input", out[0], "output"));
  return Loops::broadcastCopy(ctx, "Expand", in[0], out[0]);
}

//===----------------------------------------------------------------------===//
// Transpose
//===----------------------------------------------------------------------===//

/// attr perm (default: reversed dims). Dims that stay adjacent are merged;
/// rows contiguous in the input are copied whole, otherwise 32x32 tiles of
/// the (input-contiguous dim, output-contiguous dim) plane.
template <typename Loops>
Status
transposeKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Transpose", in, out, 1, 1, 1, 1));
  const TensorRef &x = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("Transpose", x, "input", y, "output"));
  const size_t rank = x.shape.size();
  std::vector<int64_t> perm = attrs.getInts("perm");
  if (perm.empty())
    for (size_t d = rank; d-- > 0;)
      perm.push_back(int64_t(d));
  std::vector<bool> seen(rank, false);
  bool valid = perm.size() == rank;
  for (size_t i = 0; valid && i < rank; ++i) {
    valid = perm[i] >= 0 && perm[i] < int64_t(rank) && !seen[size_t(perm[i])];
    if (valid)
      seen[size_t(perm[i])] = true;
  }
  if (!valid)
    return kernelError("Transpose", "bad attribute perm",
                       "a list of " + std::to_string(perm.size()),
                       "a permutation of 0.." + std::to_string(rank) +
                           " (exclusive)");
  std::vector<int64_t> expected;
  for (int64_t p : perm)
    expected.push_back(x.shape[size_t(p)]);
  ZRT_RETURN_IF_ERROR(checkShape("Transpose", "output", y, expected));
  if (y.numel() == 0)
    return Status::ok();
  // Collapse output dims: drop 1s, merge neighbours adjacent in the input.
  const std::vector<int64_t> inStrides = contiguousStrides(x.shape);
  std::vector<int64_t> dims, strides; // output dims, input strides
  for (size_t i = 0; i < rank; ++i) {
    const int64_t size = expected[i];
    const int64_t stride = inStrides[size_t(perm[i])];
    if (size == 1)
      continue;
    if (!dims.empty() && strides.back() == stride * size) {
      dims.back() *= size;
      strides.back() = stride;
    } else {
      dims.push_back(size);
      strides.push_back(stride);
    }
  }
  return Loops::transpose(ctx, dims, strides, x, y);
}

//===----------------------------------------------------------------------===//
// Concat, Split
//===----------------------------------------------------------------------===//

/// Checks that `part` matches `whole` on every dim but `axis`.
inline Status checkAllButAxis(const char *op, const std::string &what,
                              const TensorRef &part, const TensorRef &whole,
                              int64_t axis) {
  bool same = part.rank() == whole.rank();
  for (int64_t d = 0; same && d < whole.rank(); ++d)
    same = d == axis || part.shape[size_t(d)] == whole.shape[size_t(d)];
  if (!same)
    return kernelError(
        op, "shape of " + what + " does not match", shapeString(part.shape),
        shapeString(whole.shape) + " except on axis " + std::to_string(axis));
  return Status::ok();
}

/// Concat (ToWhole) or Split: moves `parts` along `axis` into/out of `whole`.
template <bool ToWhole, typename Loops>
Status concatOrSplit(const KernelContext &ctx, const char *op,
                     const std::vector<TensorRef> &parts,
                     const TensorRef &whole, int64_t axis) {
  if (whole.rank() == 0 || axis < 0 || axis >= whole.rank())
    return kernelError(op, "axis out of range", std::to_string(axis),
                       "0 <= axis < " + std::to_string(whole.rank()));
  int64_t axisTotal = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string name =
        (ToWhole ? "input " : "output ") + std::to_string(i);
    ZRT_RETURN_IF_ERROR(checkSameDType(op, whole,
                                       ToWhole ? "the output" : "the input",
                                       parts[i], name.c_str()));
    ZRT_RETURN_IF_ERROR(checkAllButAxis(op, name, parts[i], whole, axis));
    axisTotal += parts[i].shape[size_t(axis)];
  }
  if (axisTotal != whole.shape[size_t(axis)])
    return kernelError(op, "sizes along the axis do not add up",
                       std::to_string(axisTotal),
                       std::to_string(whole.shape[size_t(axis)]));
  const size_t elementSize = dtypeSize(whole.dtype);
  const int64_t outer = productOf(whole.shape, 0, size_t(axis));
  const int64_t innerBytes =
      productOf(whole.shape, size_t(axis) + 1, whole.shape.size()) *
      int64_t(elementSize);
  const int64_t wholeRow = whole.shape[size_t(axis)] * innerBytes;
  std::vector<int64_t> partOffset; // byte offset of each part in a whole row
  int64_t offset = 0;
  for (const TensorRef &p : parts) {
    partOffset.push_back(offset);
    offset += p.shape[size_t(axis)] * innerBytes;
  }
  return Loops::template concatOrSplit<ToWhole>(
      ctx, parts, whole, axis, outer, innerBytes, wholeRow, partOffset);
}

/// Concat: attr axis (non-negative); any number of inputs.
template <typename Loops>
Status concatKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Concat", in, out, 1, size_t(-1), 1, 1));
  return concatOrSplit<true, Loops>(ctx, "Concat", in, out[0],
                                    attrs.getInt("axis", 0));
}

/// Split: attr axis; part sizes come from the output shapes (input 1, the
/// split sizes, is ignored when still present).
template <typename Loops>
Status splitKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Split", in, out, 1, 2, 1, size_t(-1)));
  return concatOrSplit<false, Loops>(ctx, "Split", out, in[0],
                                     attrs.getInt("axis", 0));
}

//===----------------------------------------------------------------------===//
// Slice, Fill
//===----------------------------------------------------------------------===//

/// attrs starts, steps (length rank; starts in range, steps nonzero); the
/// output shape gives the count per dim: out[i] = in[starts + i * steps].
template <typename Loops>
Status sliceKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Slice", in, out, 1, 5, 1, 1));
  const TensorRef &x = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("Slice", x, "input", y, "output"));
  const size_t rank = x.shape.size();
  const std::vector<int64_t> starts = attrs.getInts("starts");
  std::vector<int64_t> steps = attrs.getInts("steps");
  if (steps.empty())
    steps.assign(rank, 1);
  if (starts.size() != rank || steps.size() != rank || y.shape.size() != rank)
    return kernelError(
        "Slice", "starts/steps/output rank do not match the input",
        std::to_string(starts.size()) + "/" + std::to_string(steps.size()) +
            "/" + std::to_string(y.shape.size()),
        std::to_string(rank) + " each");
  if (y.numel() == 0)
    return Status::ok();
  for (size_t d = 0; d < rank; ++d) {
    const int64_t lastIndex = starts[d] + (y.shape[d] - 1) * steps[d];
    if (steps[d] == 0 || starts[d] < 0 || starts[d] >= x.shape[d] ||
        lastIndex < 0 || lastIndex >= x.shape[d])
      return kernelError("Slice",
                         "slice out of range on dim " + std::to_string(d),
                         "start " + std::to_string(starts[d]) + ", step " +
                             std::to_string(steps[d]) + ", count " +
                             std::to_string(y.shape[d]),
                         "indices within 0.." + std::to_string(x.shape[d] - 1));
  }
  if (rank == 0)
    return copyKernel<Loops>(ctx, in, out, attrs);
  const std::vector<int64_t> inStrides = contiguousStrides(x.shape);
  int64_t base = 0;
  std::vector<int64_t> strides(rank);
  for (size_t d = 0; d < rank; ++d) {
    base += starts[d] * inStrides[d];
    strides[d] = steps[d] * inStrides[d];
  }
  return Loops::slice(ctx, strides, base, x, y);
}

/// Fill: attr value (float, or int for exact i64) into every element of
/// output 0 (ConstantOfShape). Inputs, if any, are ignored.
template <typename Loops>
Status fillKernel(const KernelContext &ctx, const std::vector<TensorRef> &,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  if (out.size() != 1)
    return kernelError("Fill", "wrong number of outputs",
                       std::to_string(out.size()), "1");
  const uint64_t bits = scalarAttrBits(attrs, "value", out[0].dtype);
  return Loops::fillElements(ctx, out[0].data, dtypeSize(out[0].dtype), bits,
                             out[0].numel());
}

//===----------------------------------------------------------------------===//
// Tile, Trilu, Range
//===----------------------------------------------------------------------===//

/// Tile: repeats = out dim / in dim (input 1, the repeats, is ignored when
/// still present).
template <typename Loops>
Status tileKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Tile", in, out, 1, 2, 1, 1));
  const TensorRef &x = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("Tile", x, "input", y, "output"));
  const size_t rank = x.shape.size();
  bool valid = y.shape.size() == rank;
  for (size_t d = 0; valid && d < rank; ++d)
    valid = x.shape[d] == 0 ? y.shape[d] == 0 : y.shape[d] % x.shape[d] == 0;
  if (!valid)
    return kernelError("Tile", "output shape is not a multiple of the input's",
                       shapeString(y.shape),
                       "multiples of " + shapeString(x.shape));
  if (y.numel() == 0)
    return Status::ok();
  if (rank == 0)
    return copyKernel<Loops>(ctx, in, out, {});
  return Loops::tile(ctx, x, y);
}

/// attrs upper (1), k (0), over the last two dims; other elements are zeroed.
template <typename Loops>
Status triluKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Trilu", in, out, 1, 2, 1, 1));
  const TensorRef &x = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("Trilu", x, "input", y, "output"));
  ZRT_RETURN_IF_ERROR(checkShape("Trilu", "output", y, x.shape));
  if (x.rank() < 2)
    return kernelError("Trilu", "input rank too small", shapeString(x.shape),
                       "rank >= 2");
  const bool upper = attrs.getInt("upper", 1) != 0;
  const int64_t k = attrs.getInt("k", 0);
  const int64_t rowsPerMatrix = x.shape[x.shape.size() - 2];
  const int64_t cols = x.shape.back();
  const int64_t rows = x.numel() / std::max<int64_t>(cols, 1);
  if (x.numel() == 0)
    return Status::ok();
  return Loops::trilu(ctx, upper, k, rowsPerMatrix, cols, rows, x, y);
}

/// Range(start, limit, delta), 0-d scalars: out[i] = start + i * delta for
/// the output's length (limit is implied by the output shape).
template <typename Loops>
Status rangeKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &) {
  ZRT_RETURN_IF_ERROR(checkArity("Range", in, out, 3, 3, 1, 1));
  for (size_t i = 0; i < 3; ++i) {
    static const char *names[] = {"start", "limit", "delta"};
    ZRT_RETURN_IF_ERROR(
        checkSameDType("Range", out[0], "the output", in[i], names[i]));
    if (in[i].numel() != 1)
      return kernelError("Range", std::string(names[i]) + " is not a scalar",
                         shapeString(in[i].shape), "one element");
  }
  if (out[0].rank() != 1)
    return kernelError("Range", "output is not 1-D", shapeString(out[0].shape),
                       "rank 1");
  Status status;
  if (!dispatchType(NumericTypes{}, out[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T start{}, delta{};
        status = Loops::read(in[0].as<T>(), start);
        if (status.isOk())
          status = Loops::read(in[2].as<T>(), delta);
        if (status.isOk())
          status =
              Loops::forEach(ctx, out[0].numel(), kElementGrain,
                             math::RangeFn<T>{start, delta, out[0].as<T>()});
      }))
    return dtypeError("Range", "output", out[0].dtype, NumericTypes{});
  return status;
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

enum class PadMode { Constant, Edge, Reflect, Wrap };

/// For one dim: the input index of each output index, or -1 for the
/// constant. Negative pads crop first; edge/reflect/wrap then use the
/// cropped range.
inline Status padDimMap(int64_t inLen, int64_t outLen, int64_t begin,
                        int64_t end, PadMode mode, std::vector<int64_t> &map) {
  const int64_t cropBegin = std::max<int64_t>(-begin, 0);
  const int64_t kept = inLen - cropBegin - std::max<int64_t>(-end, 0);
  const int64_t padBegin = std::max<int64_t>(begin, 0);
  if (outLen != inLen + begin + end || kept < 0)
    return kernelError("Pad", "output length does not match the pads",
                       std::to_string(outLen),
                       std::to_string(inLen) + " + " + std::to_string(begin) +
                           " + " + std::to_string(end));
  map.resize(size_t(outLen));
  for (int64_t o = 0; o < outLen; ++o) {
    int64_t j = o - padBegin;
    if (j < 0 || j >= kept) {
      if (mode == PadMode::Constant) {
        map[size_t(o)] = -1;
        continue;
      }
      if (kept == 0)
        return kernelError("Pad", "cannot pad an empty dim in this mode",
                           "empty input dim",
                           "a nonempty dim or mode constant");
      if (mode == PadMode::Edge) {
        j = std::min(std::max<int64_t>(j, 0), kept - 1);
      } else if (mode == PadMode::Wrap) {
        j = ((j % kept) + kept) % kept;
      } else if (kept == 1) {
        j = 0;
      } else {
        const int64_t period = 2 * (kept - 1);
        j = ((j % period) + period) % period;
        if (j >= kept)
          j = period - j;
      }
    }
    map[size_t(o)] = j + cropBegin;
  }
  return Status::ok();
}

/// attrs pads (2*rank: begins then ends, may be negative; or 2*len(axes)
/// with axes), mode ("constant" | "edge" | "reflect" | "wrap"), value or
/// constant_value (default 0).
template <typename Loops>
Status padKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("Pad", in, out, 1, 4, 1, 1));
  const TensorRef &x = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("Pad", x, "input", y, "output"));
  const size_t rank = x.shape.size();
  std::vector<int64_t> pads = attrs.getInts("pads");
  const std::vector<int64_t> axes = attrs.getInts("axes");
  if (!axes.empty() && pads.size() == 2 * axes.size()) {
    // Pads for the listed axes only: expand to every dim.
    std::vector<int64_t> full(2 * rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < 0 || axes[i] >= int64_t(rank))
        return kernelError("Pad", "axis out of range", std::to_string(axes[i]),
                           "0 <= axis < " + std::to_string(rank));
      full[size_t(axes[i])] = pads[i];
      full[rank + size_t(axes[i])] = pads[axes.size() + i];
    }
    pads = full;
  }
  if (pads.size() != 2 * rank || y.shape.size() != rank)
    return kernelError("Pad", "pads/output rank do not match the input",
                       std::to_string(pads.size()) + " pads, output rank " +
                           std::to_string(y.shape.size()),
                       std::to_string(2 * rank) + " pads, output rank " +
                           std::to_string(rank));
  const std::string modeName = attrs.getString("mode", "constant");
  PadMode mode;
  if (modeName == "constant" || modeName.empty())
    mode = PadMode::Constant;
  else if (modeName == "edge")
    mode = PadMode::Edge;
  else if (modeName == "reflect")
    mode = PadMode::Reflect;
  else if (modeName == "wrap")
    mode = PadMode::Wrap;
  else
    return kernelError("Pad", "bad attribute mode", modeName,
                       "constant, edge, reflect or wrap");
  std::vector<std::vector<int64_t>> maps(rank);
  for (size_t d = 0; d < rank; ++d)
    ZRT_RETURN_IF_ERROR(padDimMap(x.shape[d], y.shape[d], pads[d],
                                  pads[rank + d], mode, maps[d]));
  if (y.numel() == 0)
    return Status::ok();
  if (rank == 0)
    return copyKernel<Loops>(ctx, in, out, attrs);
  const char *valueName =
      attrs.has("constant_value") ? "constant_value" : "value";
  const uint64_t fill = scalarAttrBits(attrs, valueName, y.dtype);
  return Loops::pad(ctx, maps, fill, x, y);
}

/// Registers the data movement kernels above with the loops of one backend.
template <typename Loops> void addShapeKernels(KernelTable &table) {
  table.add("Copy", copyKernel<Loops>);
  table.add("LocalShard", localShardKernel<Loops>);
  table.add("Expand", expandKernel<Loops>);
  table.add("Transpose", transposeKernel<Loops>);
  table.add("Concat", concatKernel<Loops>);
  table.add("Split", splitKernel<Loops>);
  table.add("Slice", sliceKernel<Loops>);
  table.add("Fill", fillKernel<Loops>);
  table.add("Tile", tileKernel<Loops>);
  table.add("Trilu", triluKernel<Loops>);
  table.add("Range", rangeKernel<Loops>);
  table.add("Pad", padKernel<Loops>);
}

} // namespace shape
} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_SHAPEKERNELS_H
