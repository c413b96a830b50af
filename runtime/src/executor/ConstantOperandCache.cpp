//===- ConstantOperandCache.cpp - The executor's constant operands --------===//
//
// See ConstantOperandCache.h.
//
//===----------------------------------------------------------------------===//

#include "executor/ConstantOperandCache.h"

#include <algorithm>
#include <new>

namespace zrt {

namespace {
constexpr std::align_val_t kPreparedAlign{64};

/// Sorts `ranges` and merges the overlapping or touching ones.
void mergeRanges(std::vector<std::pair<uint64_t, uint64_t>> &ranges) {
  std::sort(ranges.begin(), ranges.end());
  size_t out = 0;
  for (const auto &r : ranges) {
    if (out > 0 && r.first <= ranges[out - 1].second)
      ranges[out - 1].second = std::max(ranges[out - 1].second, r.second);
    else
      ranges[out++] = r;
  }
  ranges.resize(out);
}

/// Whether [begin, end) overlaps a range of the sorted, disjoint `ranges`.
bool overlaps(const std::vector<std::pair<uint64_t, uint64_t>> &ranges,
              uint64_t begin, uint64_t end) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(),
                             std::make_pair(begin, UINT64_MAX));
  if (it != ranges.begin() && std::prev(it)->second > begin)
    return true;
  return it != ranges.end() && it->first < end;
}
} // namespace

ConstantOperandCache::ConstantOperandCache(
    const Program &program, const std::vector<void *> &arenaBase) {
  // Per arena, the byte ranges something writes during a run.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> written(
      program.arenas.size());
  auto markWritten = [&](uint32_t buffer) {
    const BufferDesc &d = program.buffers[buffer];
    written[d.arena].push_back({d.offset, d.offset + d.bytes()});
  };
  for (const Instruction &inst : program.instructions)
    for (uint32_t b : inst.outputs)
      markWritten(b);
  for (const BindingDesc &input : program.inputs)
    markWritten(input.buffer);
  for (auto &ranges : written)
    mergeRanges(ranges);
  std::vector<std::pair<uint64_t, uint64_t>> constant;
  for (const BufferDesc &d : program.buffers) {
    const uint64_t begin = d.offset, end = d.offset + d.bytes();
    if (begin == end || overlaps(written[d.arena], begin, end) ||
        !arenaBase[d.arena])
      continue;
    const uint64_t base =
        uint64_t(reinterpret_cast<uintptr_t>(arenaBase[d.arena]));
    constant.push_back({base + begin, base + end});
  }
  mergeRanges(constant);
  for (const auto &r : constant)
    constant_.push_back({uintptr_t(r.first), uintptr_t(r.second)});
}

ConstantOperandCache::~ConstantOperandCache() {
  for (auto &entry : prepared_)
    ::operator delete(entry.second.data, kPreparedAlign);
}

bool ConstantOperandCache::isConstant(const TensorRef &t) const {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data);
  const uintptr_t end = begin + t.bytes();
  // The last range starting at or before `begin` must hold all of it.
  auto it = std::upper_bound(constant_.begin(), constant_.end(),
                             std::make_pair(begin, UINTPTR_MAX));
  return t.data && it != constant_.begin() && std::prev(it)->second >= end;
}

const void *
ConstantOperandCache::prepared(const TensorRef &source,
                               const std::string &layout, size_t bytes,
                               const std::function<void(void *)> &prepare) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(source.data);
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_pair(begin, layout);
  auto it = prepared_.find(key);
  if (it != prepared_.end())
    return it->second.data;
  void *data =
      ::operator new(std::max<size_t>(bytes, 1), kPreparedAlign, std::nothrow);
  if (!data)
    return nullptr;
  prepare(data);
  prepared_[key] = Prepared{begin + source.bytes(), data, bytes};
  preparedBytes_ += bytes;
  return data;
}

void ConstantOperandCache::invalidate(const void *begin, const void *end) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin),
                  e = reinterpret_cast<uintptr_t>(end);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = prepared_.begin(); it != prepared_.end();) {
    if (it->first.first < e && it->second.sourceEnd > b) {
      ::operator delete(it->second.data, kPreparedAlign);
      preparedBytes_ -= it->second.bytes;
      it = prepared_.erase(it);
    } else {
      ++it;
    }
  }
}

} // namespace zrt
