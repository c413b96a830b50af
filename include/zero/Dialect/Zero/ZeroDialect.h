//===- ZeroDialect.h - ZeRO collectives and life cycle ----------*- C++ -*-===//
//
// Declares the zero dialect: the collectives and `release` markers that the
// partitioning passes insert into onnx-dialect programs, and the structured
// values of the zero.* attributes (#zero.shard<...>, ZeroAttrDefs.td).
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ZERO_ZERODIALECT_H
#define ZERO_DIALECT_ZERO_ZERODIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "zero/Dialect/Zero/ZeroOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "zero/Dialect/Zero/ZeroAttrDefs.h.inc"

#define GET_OP_CLASSES
#include "zero/Dialect/Zero/ZeroOps.h.inc"

#endif // ZERO_DIALECT_ZERO_ZERODIALECT_H
