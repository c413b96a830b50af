//===- KernelSlots.h - Wrapped kernels as plain KernelFn entries -*- C++ -*-===//
//
// A KernelFn is a plain function pointer: a wrapper around another kernel
// (the 16-bit trampolines of cpu/HalfWidening.cpp and cuda/HalfWidening.cu,
// the CUDA backend's staged CPU kernels) cannot capture which kernel it
// wraps. KernelSlots<Run, N> gives N distinct entries; entry I calls
// Run(I, ...), and the wrapper keeps what slot I wraps in its own tables.
// SlotAssigner hands out the slots, one per op name, the same one in every
// kernel table (each table gets the same kernel for an op).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_KERNELSLOTS_H
#define ZRT_KERNELS_KERNELSLOTS_H

#include "zrt/Kernel.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace zrt {

using SlotRunFn = Status (*)(size_t slot, const KernelContext &, const std::vector<TensorRef> &,
                             const std::vector<TensorRef> &, const AttrMap &);

template <SlotRunFn Run, size_t N> struct KernelSlots {
  template <size_t I>
  static Status entry(const KernelContext &ctx, const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out, const AttrMap &attrs) {
    return Run(I, ctx, in, out, attrs);
  }
  template <size_t... I>
  static constexpr std::array<KernelFn, N> make(std::index_sequence<I...>) {
    return {{&entry<I>...}};
  }
  static constexpr std::array<KernelFn, N> entries = make(std::make_index_sequence<N>());
};

/// Slots by op name, at most `max`; `where` names the wrapper for the error
/// when a kernel table outgrows them (a build error in spirit: it aborts).
class SlotAssigner {
public:
  SlotAssigner(size_t max, const char *where) : max_(max), where_(where) {}
  /// The op's slot, and whether it was new (the caller then fills it).
  std::pair<size_t, bool> slotOf(const std::string &op) {
    auto it = slots_.find(op);
    if (it != slots_.end())
      return {it->second, false};
    if (slots_.size() >= max_) {
      std::fprintf(stderr, "zrt: internal error: more kernels than the %zu slots of %s; "
                           "raise its limit\n", max_, where_);
      std::abort();
    }
    const size_t slot = slots_.size();
    slots_.emplace(op, slot);
    return {slot, true};
  }

private:
  size_t max_;
  const char *where_;
  std::map<std::string, size_t> slots_;
};

} // namespace zrt

#endif // ZRT_KERNELS_KERNELSLOTS_H
