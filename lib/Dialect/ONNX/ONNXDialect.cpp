//===- ONNXDialect.cpp - The onnx dialect ---------------------------------===//
//
// Registers the onnx ops and materialises folded constants as onnx.Constant.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/ONNX/ONNXDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace zero::onnx;

#include "zero/Dialect/ONNX/ONNXOpsDialect.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zero/Dialect/ONNX/ONNXOps.cpp.inc"
      >();
}

Operation *ONNXDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
