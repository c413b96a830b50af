//===- OptionEnums.cpp - The passes' enum options -------------------------===//
//
// The spellings mlir-tblgen generates from OptionEnums.td.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/OptionEnums.h"

#include "zero/Transforms/OptionEnums.cpp.inc"
