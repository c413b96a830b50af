//===- OptionEnums.h - The passes' enum options -----------------*- C++ -*-===//
//
// The enums of the passes' options, generated from OptionEnums.td with their
// spellings: stringifyEnum(value) and symbolize<Enum>(name) (std::nullopt for
// a name that is none of them). ZERO_ENUM_VALUE makes an option's cl::values
// entry from the same spelling (Passes.td).
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_TRANSFORMS_OPTIONENUMS_H
#define ZERO_TRANSFORMS_OPTIONENUMS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <optional>

#include "zero/Transforms/OptionEnums.h.inc"

/// One value of an enum option, spelled as OptionEnums.td spells it.
#define ZERO_ENUM_VALUE(VALUE, DESC)                                           \
  clEnumValN(VALUE, ::zero::stringifyEnum(VALUE), DESC)

#endif // ZERO_TRANSFORMS_OPTIONENUMS_H
