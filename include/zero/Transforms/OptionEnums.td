//===- OptionEnums.td - The passes' enum options ---------*- tablegen -*-===//
//
// The values of the passes' enum options (Passes.td), each spelled once here:
// on the command line (the options' cl::values come from these), in a
// DeepSpeed config, and in the IR attributes that carry them. mlir-tblgen
// generates the enums, stringifyEnum and symbolize<Enum>.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_TRANSFORMS_OPTIONENUMS_TD
#define ZERO_TRANSFORMS_OPTIONENUMS_TD

include "mlir/IR/EnumAttr.td"

class Zero_OptionEnum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::zero";
  let genSpecializedAttr = 0;
}

def Zero_VerifyPhase : Zero_OptionEnum<"VerifyPhase",
    "the end of a phase that zero-verify checks", [
  I32EnumAttrCase<"Imported", 0, "imported">,
  I32EnumAttrCase<"Sharded", 1, "sharded">,
  I32EnumAttrCase<"Lowered", 2, "lowered">]>;

def Zero_PipelineSchedule : Zero_OptionEnum<"PipelineSchedule",
    "a training step's pipeline schedule (zero-pipeline-split schedule)", [
  I32EnumAttrCase<"OneFOneB", 0, "1f1b">,
  I32EnumAttrCase<"GPipe", 1, "gpipe">]>;

def Zero_TiedGrads : Zero_OptionEnum<"TiedGrads",
    "how a tied parameter's gradient is summed over its pipeline stages", [
  I32EnumAttrCase<"MicroBatch", 0, "micro-batch">,
  I32EnumAttrCase<"Step", 1, "step">]>;

def Zero_LossKind : Zero_OptionEnum<"LossKind", "zero-add-loss's loss", [
  I32EnumAttrCase<"CrossEntropy", 0, "cross-entropy">,
  I32EnumAttrCase<"CausalLM", 1, "causal-lm">]>;

def Zero_LRSchedule : Zero_OptionEnum<"LRSchedule",
    "zero-optimizer's learning-rate schedule: DeepSpeed's scheduler types", [
  I32EnumAttrCase<"Constant", 0, "constant">,
  I32EnumAttrCase<"WarmupLR", 1, "WarmupLR">,
  I32EnumAttrCase<"WarmupDecayLR", 2, "WarmupDecayLR">,
  I32EnumAttrCase<"WarmupCosineLR", 3, "WarmupCosineLR">,
  I32EnumAttrCase<"OneCycle", 4, "OneCycle">,
  I32EnumAttrCase<"LRRangeTest", 5, "LRRangeTest">]>;

def Zero_WarmupType : Zero_OptionEnum<"WarmupType", "DeepSpeed's warmup_type", [
  I32EnumAttrCase<"Log", 0, "log">,
  I32EnumAttrCase<"Linear", 1, "linear">]>;

def Zero_Precision : Zero_OptionEnum<"Precision",
    "training precision: fp32, or a 16-bit forward with fp32 master weights "
    "(DeepSpeed's bf16 and fp16 modes; zero-mixed-precision)", [
  I32EnumAttrCase<"FP32", 0, "fp32">,
  I32EnumAttrCase<"BF16", 1, "bf16">,
  I32EnumAttrCase<"FP16", 2, "fp16">]>;

#endif // ZERO_TRANSFORMS_OPTIONENUMS_TD
