//===- ReduceKernels.cpp - The reduction plan both backends run -------------===//
//
// planReduction: a reduction's operand checks and its outer x reduced x inner
// layout, shared by the CPU and CUDA reduce kernels.
//
//===----------------------------------------------------------------------===//

#include "kernels/ReduceKernels.h"

namespace zrt {
namespace kernels {

Status planReduction(const char *op, const std::vector<int64_t> &shape,
                     std::vector<int64_t> axes, ReductionLayout &layout) {
  const int64_t rank = int64_t(shape.size());
  std::vector<bool> reduced(size_t(rank), axes.empty());
  for (int64_t axis : axes) {
    if (rank == 0 && (axis == 0 || axis == -1))
      continue;
    if (axis < 0 || axis >= rank)
      return kernelError(op, "axis out of range", std::to_string(axis),
                         "0 <= axis < " + std::to_string(rank));
    reduced[size_t(axis)] = true;
  }
  const std::vector<int64_t> strides = contiguousStrides(shape);
  // Collapse: drop size-1 dims, merge neighbours of the same kind.
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Group> groups;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = shape[size_t(d)];
    if (size == 1)
      continue;
    const bool isReduced = reduced[size_t(d)];
    if (!groups.empty() && groups.back().reduced == isReduced) {
      groups.back().size *= size;
      groups.back().stride = strides[size_t(d)];
    } else {
      groups.push_back({size, strides[size_t(d)], isReduced});
    }
  }
  layout = ReductionLayout{};
  if (!groups.empty()) {
    layout.inner = groups.back().size;
    layout.innerKept = !groups.back().reduced;
    groups.pop_back();
  }
  std::vector<int64_t> redDims, redStrides;
  for (const Group &g : groups) {
    if (g.reduced) {
      redDims.push_back(g.size);
      redStrides.push_back(g.stride);
    } else {
      layout.keptDims.push_back(g.size);
      layout.keptStrides.push_back(g.stride);
    }
  }
  layout.outerCount = productOf(layout.keptDims, 0, layout.keptDims.size());
  const int64_t numOffsets = productOf(redDims, 0, redDims.size());
  layout.reducedOffsets.assign(size_t(numOffsets), 0);
  std::vector<int64_t> index(redDims.size(), 0);
  for (int64_t i = 0, off = 0; i < numOffsets; ++i) {
    layout.reducedOffsets[size_t(i)] = off;
    for (size_t d = redDims.size(); d-- > 0;) {
      off += redStrides[d];
      if (++index[d] < redDims[d])
        break;
      off -= redDims[d] * redStrides[d];
      index[d] = 0;
    }
  }
  layout.count = numOffsets * (layout.innerKept ? 1 : layout.inner);
  layout.reducedDims = redDims;
  layout.reducedStrides = redStrides;
  return Status::ok();
}

} // namespace kernels
} // namespace zrt
