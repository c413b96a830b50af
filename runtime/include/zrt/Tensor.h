//===- Tensor.h - Typed views of runtime memory -----------------*- C++ -*-===//
//
// The element types a program can use, and TensorRef, the non-owning typed view
// through which kernels and collectives see buffers. Shapes are static: the
// compiler fixed them, the runtime only checks them.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TENSOR_H
#define ZRT_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

/// Element types; the numeric values match `zrt.fb.DType` in schema/zrt.fbs.
enum class DType : uint8_t { F32 = 0, F16, BF16, F64, I8, U8, I32, I64, Bool };

/// Bytes per element of `t` (Bool is one byte).
inline size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32: case DType::I32: return 4;
  case DType::F16: case DType::BF16: return 2;
  case DType::F64: case DType::I64: return 8;
  case DType::I8: case DType::U8: case DType::Bool: return 1;
  }
  return 0;
}

/// Lower-case name as used in safetensors headers' spirit ("f32", "i64", ...).
const char *dtypeName(DType t);

/// A non-owning view: pointer, element type and shape (row-major, contiguous).
struct TensorRef {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return size_t(numel()) * dtypeSize(dtype); }
  int64_t rank() const { return int64_t(shape.size()); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// "2x8x64" style rendering of a shape, for messages.
std::string shapeString(const std::vector<int64_t> &shape);

} // namespace zrt

#endif // ZRT_TENSOR_H
