//===- ConstantOperandCache.h - The executor's constant operands -*- C++
//-*-===//
//
// The executor's ConstantOperands (zrt/Kernel.h): which buffers of the
// program no instruction writes, decided once from the program (every
// instruction's outputs, on any rank, and the input bindings are written;
// every other buffer whose bytes none of those overlap is constant), and the
// prepared forms kernels keep of them (packed GEMM weights), held until a
// write from outside the program (Executor::writeBuffer) touches their source
// or the executor goes. Their bytes are the report's prepared_operand_bytes.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXECUTOR_CONSTANTOPERANDCACHE_H
#define ZRT_EXECUTOR_CONSTANTOPERANDCACHE_H

#include "zrt/Kernel.h"
#include "zrt/Program.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace zrt {

class ConstantOperandCache final : public ConstantOperands {
public:
  /// The constant buffers of `program`, whose arena `a` starts at host
  /// address `arenaBase[a]`.
  ConstantOperandCache(const Program &program,
                       const std::vector<void *> &arenaBase);
  ~ConstantOperandCache() override;

  bool isConstant(const TensorRef &t) const override;
  const void *prepared(const TensorRef &source, const std::string &layout,
                       size_t bytes,
                       const std::function<void(void *)> &prepare) override;

  /// Drops the prepared forms of every source overlapping [begin, end).
  void invalidate(const void *begin, const void *end);
  /// Bytes of the prepared forms held now.
  uint64_t preparedBytes() const { return preparedBytes_.load(); }

private:
  /// Sorted, disjoint [begin, end) host address ranges of constant buffers.
  std::vector<std::pair<uintptr_t, uintptr_t>> constant_;
  struct Prepared {
    uintptr_t sourceEnd = 0;
    void *data = nullptr;
    size_t bytes = 0;
  };
  std::mutex mutex_;
  /// By (source address, layout).
  std::map<std::pair<uintptr_t, std::string>, Prepared> prepared_;
  std::atomic<uint64_t> preparedBytes_{0};
};

} // namespace zrt

#endif // ZRT_EXECUTOR_CONSTANTOPERANDCACHE_H
