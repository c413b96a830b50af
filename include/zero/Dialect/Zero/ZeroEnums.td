//===- ZeroEnums.td - The values of the zero.* string attributes -*- tablegen -*-===//
//
// The string-valued zero.* attributes (ZeroAttributes.h) take one of these
// spellings, each written once here: the dialect's verifier refuses any
// other, and the passes set and read them through the generated enums
// (stringifyEnum, symbolize<Enum>).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_ZEROENUMS_TD
#define ZERO_DIALECT_ZERO_ZEROENUMS_TD

include "mlir/IR/EnumAttr.td"

class Zero_AttrEnum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::zero::attrs";
  let genSpecializedAttr = 0;
}

def Zero_StreamKind : Zero_AttrEnum<"StreamKind",
    "zero.stream: the stream an op runs on", [
  I32EnumAttrCase<"Compute", 0, "compute">,
  I32EnumAttrCase<"Comm", 1, "comm">]>;

def Zero_OffloadDevice : Zero_AttrEnum<"OffloadDevice",
    "zero.offload: where a global lives (ZeRO-Offload)", [
  I32EnumAttrCase<"Cpu", 0, "cpu">,
  I32EnumAttrCase<"Nvme", 1, "nvme">]>;

def Zero_Phase : Zero_AttrEnum<"Phase",
    "zero.phase: the part of a training step an op belongs to", [
  I32EnumAttrCase<"Forward", 0, "forward">,
  I32EnumAttrCase<"Backward", 1, "backward">]>;

def Zero_GlobalRole : Zero_AttrEnum<"GlobalRole",
    "zero.role: what a global that is not a model parameter holds", [
  I32EnumAttrCase<"OptimizerState", 0, "optimizer_state">,
  I32EnumAttrCase<"Counter", 1, "counter">]>;

#endif // ZERO_DIALECT_ZERO_ZEROENUMS_TD
