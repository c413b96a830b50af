//===- Kernel.h - The kernel table shared by all backends -------*- C++ -*-===//
//
// A kernel implements one program op ("MatMul", "Softmax", ...) on TensorRefs.
// Shapes come from the tensors (static, checked by the loader); everything else
// comes from the instruction's attributes, which use ONNX's attribute names in the
// normalised form the compiler emits (docs/program-format.md). A backend provides a
// KernelTable; the executor looks kernels up by name once at load time.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNEL_H
#define ZRT_KERNEL_H

#include "zrt/Status.h"
#include "zrt/Tensor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace zrt {

/// One attribute value of an instruction.
struct AttrValue {
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string str;
};

/// The attributes of one instruction, by name.
class AttrMap {
public:
  void set(std::string name, AttrValue v) { map_[std::move(name)] = std::move(v); }
  bool has(const std::string &name) const { return map_.count(name) != 0; }
  int64_t getInt(const std::string &name, int64_t dflt) const {
    auto it = map_.find(name);
    return it == map_.end() || it->second.ints.empty() ? dflt : it->second.ints[0];
  }
  std::vector<int64_t> getInts(const std::string &name) const {
    auto it = map_.find(name);
    return it == map_.end() ? std::vector<int64_t>() : it->second.ints;
  }
  double getFloat(const std::string &name, double dflt) const {
    auto it = map_.find(name);
    return it == map_.end() || it->second.floats.empty() ? dflt : it->second.floats[0];
  }
  std::string getString(const std::string &name, const std::string &dflt) const {
    auto it = map_.find(name);
    return it == map_.end() ? dflt : it->second.str;
  }
  /// Every attribute, by name.
  const std::map<std::string, AttrValue> &entries() const { return map_; }

private:
  std::map<std::string, AttrValue> map_;
};

/// Runs `fn(begin, end)` over [0, n) split across the backend's worker threads.
using ParallelFor =
    std::function<void(int64_t n, const std::function<void(int64_t, int64_t)> &fn)>;

/// The operands of a program that no instruction writes (an inference
/// program's weights), and forms of them a kernel prepares once and keeps
/// across calls and runs (packed GEMM panels). The executor decides what is
/// constant from the program alone: a buffer is constant when no
/// instruction's output overlaps its bytes and it is no program input; a
/// write to it from outside the program (Executor::writeBuffer) drops its
/// prepared forms. A ZeRO-3 gather's output or a trained parameter is written
/// by an instruction, so it is never constant and never has a stale copy.
class ConstantOperands {
public:
  virtual ~ConstantOperands() = default;
  /// Whether the bytes of `t` lie in a constant buffer.
  virtual bool isConstant(const TensorRef &t) const = 0;
  /// The prepared form of constant `source` named `layout` (the preparation
  /// and every parameter it depends on, e.g. "gemm-b48 k=768 n=2304 t=0"):
  /// `bytes` bytes, 64-byte aligned, filled by `prepare` on the first call
  /// and shared by later ones (calls may come from several streams at once).
  /// Null when it cannot be allocated; the caller then uses `source` itself.
  virtual const void *prepared(const TensorRef &source,
                               const std::string &layout, size_t bytes,
                               const std::function<void(void *)> &prepare) = 0;
};

/// What a kernel may use besides its operands.
struct KernelContext {
  ParallelFor parallelFor; ///< never null; runs serially when there is one thread
  int numThreads = 1;
  int rank = 0;      ///< this process's rank in the world (LocalShard)
  int worldSize = 1; ///< ranks in the world
  /// The program's constant operands; null when unknown (kernels called
  /// outside an executor, or a backend that prepares nothing).
  ConstantOperands *constants = nullptr;
};

/// A kernel: reads `inputs`, writes `outputs` (preallocated with their final
/// shapes). Returns an error for unsupported dtypes or attribute values.
using KernelFn = Status (*)(const KernelContext &ctx,
                            const std::vector<TensorRef> &inputs,
                            const std::vector<TensorRef> &outputs,
                            const AttrMap &attrs);

/// Kernels by op name.
class KernelTable {
public:
  void add(const std::string &op, KernelFn fn) { table_[op] = fn; }
  KernelFn lookup(const std::string &op) const {
    auto it = table_.find(op);
    return it == table_.end() ? nullptr : it->second;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (auto &kv : table_)
      out.push_back(kv.first);
    return out;
  }

private:
  std::map<std::string, KernelFn> table_;
};

} // namespace zrt

#endif // ZRT_KERNEL_H
