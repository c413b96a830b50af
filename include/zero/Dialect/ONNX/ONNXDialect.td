//===- ONNXDialect.td - The onnx dialect -------------------*- tablegen -*-===//
//
// The dialect the importer produces: one op per supported ONNX operator, with
// ONNX semantics, static shapes, and operands that ONNX passes as constant
// inputs (axes, shapes, slice bounds, ...) normalised into attributes.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ONNX_ONNXDIALECT_TD
#define ZERO_DIALECT_ONNX_ONNXDIALECT_TD

include "mlir/IR/OpBase.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let summary = "ONNX operators with static shapes";
  let description = [{
    Forward compute as imported from an ONNX graph. Every op follows the ONNX
    operator of the same name, normalised across opsets 13 and later:
    constant inputs that select axes or shapes (ReduceMean's `axes`, Reshape's
    `shape`, Slice's bounds, ...) are attributes, negative axes are made
    non-negative, and every shape is static. Shape-computing sub-graphs
    (Shape, Gather on shapes, ConstantOfShape, ...) are folded at import.
  }];
  let cppNamespace = "::zero::onnx";
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 0;
}

#endif // ZERO_DIALECT_ONNX_ONNXDIALECT_TD
