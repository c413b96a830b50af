//===- QuantizeLayout.cpp - Quantize and Dequantize operand checks ----------===//
//
// The operand checks and block layout of Quantize / Dequantize, and the
// error a non-finite element gives, shared by both backends.
//
//===----------------------------------------------------------------------===//

#include "kernels/QuantizeLayout.h"
#include "kernels/KernelSupport.h"
#include "math/QuantizeMath.h"

#include <algorithm>

namespace zrt {
namespace kernels {
namespace {

using Layout = QuantizeLayout;

Status readLayout(const char *op, const AttrMap &attrs, int64_t n, Layout &l) {
  const std::vector<int64_t> bits = attrs.getInts("bits");
  const std::vector<int64_t> block = attrs.getInts("block");
  const int64_t chunks = attrs.getInt("chunks", 1);
  if (bits.empty() || (bits[0] != 8 && bits[0] != 4))
    return kernelError(op, "unsupported attribute bits",
                       bits.empty() ? "none" : std::to_string(bits[0]),
                       "8 or 4");
  if (block.empty() || block[0] <= 0)
    return kernelError(op, "bad attribute block",
                       block.empty() ? "none" : std::to_string(block[0]),
                       "a positive number of elements per scale");
  if (chunks < 1)
    return kernelError(op, "bad attribute chunks", std::to_string(chunks),
                       "at least 1");
  if (n % chunks != 0)
    return kernelError(op, "the element count is not a multiple of chunks",
                       std::to_string(n) + " elements",
                       "a multiple of chunks = " + std::to_string(chunks));
  l.bits = int(bits[0]);
  l.qmax = qmath::qmax(l.bits);
  l.chunks = chunks;
  l.m = n / chunks;
  // A block longer than the chunk is the whole chunk; capping it keeps the
  // index arithmetic below from overflowing.
  l.block = std::min(block[0], std::max<int64_t>(l.m, 1));
  l.blocksPerChunk = qmath::blocksPerChunk(l.m, l.block);
  l.bytesPerChunk = qmath::bytesPerChunk(l.m, l.bits);
  l.blocksPerUnit = l.bits == 4 && l.block % 2 != 0 ? 2 : 1;
  l.unitsPerChunk = (l.blocksPerChunk + l.blocksPerUnit - 1) / l.blocksPerUnit;
  return Status::ok();
}

/// Checks the quantized operands against the layout: `data` holds chunks x D
/// bytes and `scales` chunks x B floats.
Status checkQuantized(const char *op, const Layout &l, const TensorRef &data,
                      const TensorRef &scales) {
  if (data.dtype != DType::I8)
    return dtypeError(op, "data", data.dtype, TypeList<int8_t>{});
  if (scales.dtype != DType::F32)
    return dtypeError(op, "scales", scales.dtype, TypeList<float>{});
  const std::string shape = std::to_string(l.chunks) + " chunk(s) of " +
                            std::to_string(l.m) + " elements";
  if (data.numel() != l.chunks * l.bytesPerChunk)
    return kernelError(
        op, "wrong size of data", std::to_string(data.numel()) + " bytes",
        std::to_string(l.chunks * l.bytesPerChunk) + " bytes for " + shape +
            " at " + std::to_string(l.bits) + " bits");
  if (scales.numel() != l.chunks * l.blocksPerChunk)
    return kernelError(
        op, "wrong size of scales", std::to_string(scales.numel()) + " floats",
        std::to_string(l.chunks * l.blocksPerChunk) + " floats for " + shape +
            " in blocks of " + std::to_string(l.block));
  return Status::ok();
}

} // namespace

Status prepareQuantize(const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out, const AttrMap &attrs,
                       QuantizeLayout &l) {
  const char *op = "Quantize";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 1, 2, 2));
  if (in[0].dtype != DType::F32)
    return dtypeError(op, "input", in[0].dtype, TypeList<float>{});
  ZRT_RETURN_IF_ERROR(readLayout(op, attrs, in[0].numel(), l));
  return checkQuantized(op, l, out[0], out[1]);
}

Status prepareDequantize(const std::vector<TensorRef> &in,
                         const std::vector<TensorRef> &out,
                         const AttrMap &attrs, QuantizeLayout &l) {
  const char *op = "Dequantize";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 2, 2, 1, 1));
  if (out[0].dtype != DType::F32)
    return dtypeError(op, "output", out[0].dtype, TypeList<float>{});
  ZRT_RETURN_IF_ERROR(readLayout(op, attrs, out[0].numel(), l));
  return checkQuantized(op, l, in[0], in[1]);
}

Status quantizeNonFiniteError(const QuantizeLayout &l, int64_t index,
                              float x) {
  const char *name = x != x ? "nan" : (x < 0 ? "-inf" : "inf");
  return Status::error(
      "Quantize: element " + std::to_string(index) + " (chunk " +
      std::to_string(index / l.m) + ", block " +
      std::to_string(index % l.m / l.block) + ") is " + name +
      "; quantized collectives need finite values: find the overflow or "
      "turn quantization off (zero_quantized_weights / "
      "zero_quantized_gradients)");
}

} // namespace kernels
} // namespace zrt
