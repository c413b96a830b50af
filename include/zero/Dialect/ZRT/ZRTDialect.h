//===- ZRTDialect.h - The runtime program dialect ---------------*- C++ -*-===//
//
// Declares the zrt dialect: the compiler's image of a .zrt program file.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ZRT_ZRTDIALECT_H
#define ZERO_DIALECT_ZRT_ZRTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#include "zero/Dialect/ZRT/ZRTOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "zero/Dialect/ZRT/ZRTOps.h.inc"

#endif // ZERO_DIALECT_ZRT_ZRTDIALECT_H
