//===- Tensor.cpp - Names and renderings of dtypes and shapes -------------===//
//
// The out-of-line helpers declared in zrt/Tensor.h: the lower-case dtype names
// ("f32", "i64", ...) and the "2x8x64" shape rendering that error messages
// across the runtime use.
//
//===----------------------------------------------------------------------===//

#include "zrt/Tensor.h"

namespace zrt {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F64:
    return "f64";
  case DType::I8:
    return "i8";
  case DType::U8:
    return "u8";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::Bool:
    return "bool";
  }
  return "unknown-dtype";
}

std::string shapeString(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      out += 'x';
    out += std::to_string(shape[i]);
  }
  return out;
}

} // namespace zrt
