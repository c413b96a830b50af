//===- ZeroBase.td - The zero dialect ----------------------*- tablegen -*-===//
//
// The zero dialect's definition, shared by its ops (ZeroOps.td) and its
// attributes (ZeroAttrDefs.td).
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ZERO_ZEROBASE_TD
#define ZERO_DIALECT_ZERO_ZEROBASE_TD

include "mlir/IR/OpBase.td"

def Zero_Dialect : Dialect {
  let name = "zero";
  let summary = "ZeRO collectives and parameter life cycle";
  let cppNamespace = "::zero::dist";
  // The zero.* attributes the passes put on ops and function results
  // (ZeroAttributes.h): each has a known name and value type.
  let hasOperationAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  // The structured zero.* values (ZeroAttrDefs.td): #zero.shard<...> etc.
  let useDefaultAttributePrinterParser = 1;
}

#endif // ZERO_DIALECT_ZERO_ZEROBASE_TD
