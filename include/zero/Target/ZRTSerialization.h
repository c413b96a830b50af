//===- ZRTSerialization.h - zrt.program -> .zrt file ------------*- C++ -*-===//
//
// Writes a zrt.program as the FlatBuffers program file the runtime loads
// (runtime/schema/zrt.fbs, docs/program-format.md).
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_TARGET_ZRTSERIALIZATION_H
#define ZERO_TARGET_ZRTSERIALIZATION_H

#include "zero/Dialect/ZRT/ZRTDialect.h"

#include <string>

namespace zero {

/// The program format version this compiler writes.
constexpr unsigned kZRTFormatVersion = 2;

/// Serialises `program` into `out`; emits an error at the offending op and
/// returns failure for anything the format cannot express.
mlir::LogicalResult serializeZRTProgram(zrt::ProgramOp program, std::string &out);

} // namespace zero

#endif // ZERO_TARGET_ZRTSERIALIZATION_H
