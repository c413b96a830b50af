//===- Quantization.cpp - ZeRO++'s quantize and dequantize ops ------------===//
//
// See Quantization.h.
//
//===----------------------------------------------------------------------===//

#include "Quantization.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"

using namespace mlir;
namespace attrs = ::zero::attrs;
using ::zero::dist::DequantizeOp;
using ::zero::dist::QuantizeOp;

/// Marks an op the passes add for a collective's packing: the lowering runs
/// it on the communication stream, so compute never waits for it.
void zero::quantization::onCommStream(Operation *op) {
  attrs::kStream.set(op, attrs::StreamKind::Comm);
}

LogicalResult zero::quantization::checkBitsBlock(Operation *root, StringRef pass,
                                                 int64_t bits, int64_t block) {
  if (bits != 8 && bits != 4)
    return root->emitError() << pass << ": bits must be 8 or 4, got " << bits;
  if (block < 1)
    return root->emitError() << pass << ": block must be >= 1, got " << block;
  return success();
}

/// zero.quantize of flat f32 `x` in `chunks` chunks.
QuantizeOp zero::quantization::quantize(ImplicitLocOpBuilder &b, Value x, int64_t bits,
                                        int64_t block, int64_t chunks) {
  int64_t n = cast<RankedTensorType>(x.getType()).getNumElements();
  auto [bytes, scales] = DequantizeOp::quantizedSizes(n, bits, block, chunks);
  auto q = QuantizeOp::create(
      b, RankedTensorType::get({bytes}, b.getIntegerType(8)),
      RankedTensorType::get({scales}, b.getF32Type()), x, bits, block, chunks);
  onCommStream(q);
  return q;
}

Value zero::quantization::dequantize(ImplicitLocOpBuilder &b, Value data, Value scales,
                                     int64_t n, int64_t bits, int64_t block,
                                     int64_t chunks) {
  auto dq = DequantizeOp::create(b, RankedTensorType::get({n}, b.getF32Type()), data,
                                 scales, bits, block, chunks);
  onCommStream(dq);
  return dq;
}

bool zero::quantization::isF32(Type t) { return cast<RankedTensorType>(t).getElementType().isF32(); }
