//===- ONNXOps.td - Operators of the onnx dialect ----------*- tablegen -*-===//
//
// One def per supported ONNX operator. Result types are inferred from the
// operands and attributes (InferTypeOpAdaptor), so the verifier checks every
// declared result type against ONNX's shape rules; extra verifiers check axes,
// permutations and attribute values. docs/ops.md lists the operators.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ONNX_ONNXOPS_TD
#define ZERO_DIALECT_ONNX_ONNXOPS_TD

include "zero/Dialect/ONNX/ONNXDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class ONNX_Op<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits)>;

defvar ONNX_Tensor = AnyStaticShapeTensor;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def ONNX_ConstantOp : Op<ONNX_Dialect, "Constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "output"]>]> {
  let summary = "A constant tensor (small ONNX Constant nodes and folded shapes)";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Binary ops with ONNX's multidirectional (numpy) broadcasting; the result has
// the operands' element type.
class ONNX_BinaryOp<string mnemonic, list<Trait> traits = []>
    : ONNX_Op<mnemonic, traits> {
  let arguments = (ins ONNX_Tensor:$A, ONNX_Tensor:$B);
  let results = (outs ONNX_Tensor:$C);
  let assemblyFormat = "$A `,` $B attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_AddOp : ONNX_BinaryOp<"Add", [Commutative]> { let summary = "A + B"; }
def ONNX_SubOp : ONNX_BinaryOp<"Sub"> { let summary = "A - B"; }
def ONNX_MulOp : ONNX_BinaryOp<"Mul", [Commutative]> { let summary = "A * B"; }
def ONNX_DivOp : ONNX_BinaryOp<"Div"> { let summary = "A / B (integers truncate)"; }
def ONNX_PowOp : ONNX_BinaryOp<"Pow"> { let summary = "A ^ B (result type of A)"; }
def ONNX_MaxOp : ONNX_BinaryOp<"Max", [Commutative]> { let summary = "max(A, B)"; }
def ONNX_MinOp : ONNX_BinaryOp<"Min", [Commutative]> { let summary = "min(A, B)"; }
def ONNX_ModOp : ONNX_BinaryOp<"Mod"> {
  let summary = "A mod B";
  let arguments = (ins ONNX_Tensor:$A, ONNX_Tensor:$B,
                   DefaultValuedAttr<I64Attr, "0">:$fmod);
}
// Comparisons and logic produce i1 tensors.
def ONNX_EqualOp : ONNX_BinaryOp<"Equal", [Commutative]> { let summary = "A == B"; }
def ONNX_LessOp : ONNX_BinaryOp<"Less"> { let summary = "A < B"; }
def ONNX_LessOrEqualOp : ONNX_BinaryOp<"LessOrEqual"> { let summary = "A <= B"; }
def ONNX_GreaterOp : ONNX_BinaryOp<"Greater"> { let summary = "A > B"; }
def ONNX_GreaterOrEqualOp : ONNX_BinaryOp<"GreaterOrEqual"> { let summary = "A >= B"; }
def ONNX_AndOp : ONNX_BinaryOp<"And", [Commutative]> { let summary = "A and B"; }
def ONNX_OrOp : ONNX_BinaryOp<"Or", [Commutative]> { let summary = "A or B"; }
def ONNX_XorOp : ONNX_BinaryOp<"Xor", [Commutative]> { let summary = "A xor B"; }

def ONNX_WhereOp : ONNX_Op<"Where"> {
  let summary = "condition ? X : Y, broadcast three ways";
  let arguments = (ins ONNX_Tensor:$condition, ONNX_Tensor:$X, ONNX_Tensor:$Y);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$condition `,` $X `,` $Y attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

// Unary ops whose result has the operand's type.
class ONNX_UnaryOp<string mnemonic, list<Trait> traits = []>
    : ONNX_Op<mnemonic, traits> {
  let arguments = (ins ONNX_Tensor:$X);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
}

def ONNX_NegOp : ONNX_UnaryOp<"Neg"> { let summary = "-X"; let hasFolder = 1; }
def ONNX_AbsOp : ONNX_UnaryOp<"Abs"> { let summary = "|X|"; }
def ONNX_SqrtOp : ONNX_UnaryOp<"Sqrt"> { let summary = "sqrt(X)"; }
def ONNX_ReciprocalOp : ONNX_UnaryOp<"Reciprocal"> { let summary = "1 / X"; }
def ONNX_ExpOp : ONNX_UnaryOp<"Exp"> { let summary = "exp(X)"; }
def ONNX_LogOp : ONNX_UnaryOp<"Log"> { let summary = "log(X)"; }
def ONNX_TanhOp : ONNX_UnaryOp<"Tanh"> { let summary = "tanh(X)"; }
def ONNX_ErfOp : ONNX_UnaryOp<"Erf"> { let summary = "erf(X)"; }
def ONNX_SigmoidOp : ONNX_UnaryOp<"Sigmoid"> { let summary = "1 / (1 + exp(-X))"; }
def ONNX_ReluOp : ONNX_UnaryOp<"Relu"> { let summary = "max(X, 0)"; }
def ONNX_SinOp : ONNX_UnaryOp<"Sin"> { let summary = "sin(X)"; }
def ONNX_CosOp : ONNX_UnaryOp<"Cos"> { let summary = "cos(X)"; }
def ONNX_TanOp : ONNX_UnaryOp<"Tan"> { let summary = "tan(X)"; }
def ONNX_AsinOp : ONNX_UnaryOp<"Asin"> { let summary = "asin(X)"; }
def ONNX_AcosOp : ONNX_UnaryOp<"Acos"> { let summary = "acos(X)"; }
def ONNX_AtanOp : ONNX_UnaryOp<"Atan"> { let summary = "atan(X)"; }
def ONNX_SinhOp : ONNX_UnaryOp<"Sinh"> { let summary = "sinh(X)"; }
def ONNX_CoshOp : ONNX_UnaryOp<"Cosh"> { let summary = "cosh(X)"; }
def ONNX_AsinhOp : ONNX_UnaryOp<"Asinh"> { let summary = "asinh(X)"; }
def ONNX_AcoshOp : ONNX_UnaryOp<"Acosh"> { let summary = "acosh(X)"; }
def ONNX_AtanhOp : ONNX_UnaryOp<"Atanh"> { let summary = "atanh(X)"; }
def ONNX_FloorOp : ONNX_UnaryOp<"Floor"> { let summary = "floor(X)"; }
def ONNX_CeilOp : ONNX_UnaryOp<"Ceil"> { let summary = "ceil(X)"; }
def ONNX_RoundOp : ONNX_UnaryOp<"Round"> { let summary = "round half to even"; }
def ONNX_SignOp : ONNX_UnaryOp<"Sign"> { let summary = "sign(X)"; }
def ONNX_SoftplusOp : ONNX_UnaryOp<"Softplus"> { let summary = "log(1 + exp(X))"; }
def ONNX_SoftsignOp : ONNX_UnaryOp<"Softsign"> { let summary = "X / (1 + |X|)"; }
def ONNX_NotOp : ONNX_UnaryOp<"Not"> { let summary = "logical not"; let hasFolder = 1; }
def ONNX_IdentityOp : ONNX_UnaryOp<"Identity"> { let summary = "X"; let hasFolder = 1; }
def ONNX_DropoutOp : ONNX_UnaryOp<"Dropout"> {
  let summary = "Dropout in inference mode: the identity";
  let hasFolder = 1;
}
def ONNX_TrainingDropoutOp : ONNX_Op<"TrainingDropout"> {
  let summary = "Dropout in training mode (ONNX Dropout with training_mode true)";
  let description = [{
    Zeroes each element with probability `ratio` and scales the others by
    1 / (1 - ratio); `mask` is true where the element is kept. The mask is a
    pure function of (`seed`, `stream`, `step`, element index): a counter-based
    generator, so it does not depend on the thread count, and the backward
    reads the same mask. `seed` is the ONNX attribute (0 when absent);
    `stream` tells the Dropout nodes (and zero-autodiff's micro-batch copies)
    apart; `step` is the training step (zero-autodiff feeds its `rng.step`
    counter; without it the step is 0).
  }];
  let arguments = (ins ONNX_Tensor:$X, Optional<ONNX_Tensor>:$step,
                   F64Attr:$ratio, DefaultValuedAttr<I64Attr, "0">:$seed,
                   DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs ONNX_Tensor:$Y, ONNX_Tensor:$mask);
  let assemblyFormat = "$X (`,` $step^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}
def ONNX_HardSwishOp : ONNX_UnaryOp<"HardSwish"> { let summary = "X * HardSigmoid(X)"; }
def ONNX_GeluOp : ONNX_UnaryOp<"Gelu"> {
  let summary = "GELU, exact (erf) or tanh approximation";
  let arguments = (ins ONNX_Tensor:$X,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let hasVerifier = 1;
}
def ONNX_LeakyReluOp : ONNX_UnaryOp<"LeakyRelu"> {
  let summary = "X >= 0 ? X : alpha * X";
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "0.01">:$alpha);
}
def ONNX_EluOp : ONNX_UnaryOp<"Elu"> {
  let summary = "X >= 0 ? X : alpha * (exp(X) - 1)";
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
}
def ONNX_CeluOp : ONNX_UnaryOp<"Celu"> {
  let summary = "max(0, X) + min(0, alpha * (exp(X / alpha) - 1))";
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
}
def ONNX_SeluOp : ONNX_UnaryOp<"Selu"> {
  let summary = "gamma * (X > 0 ? X : alpha * (exp(X) - 1))";
  let arguments = (ins ONNX_Tensor:$X,
                   DefaultValuedAttr<F32Attr, "1.67326319217681884765625">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.05070102214813232421875">:$gamma);
}
def ONNX_ThresholdedReluOp : ONNX_UnaryOp<"ThresholdedRelu"> {
  let summary = "X > alpha ? X : 0";
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
}
def ONNX_HardSigmoidOp : ONNX_UnaryOp<"HardSigmoid"> {
  let summary = "max(0, min(1, alpha * X + beta))";
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "0.2">:$alpha,
                   DefaultValuedAttr<F32Attr, "0.5">:$beta);
}
def ONNX_ClipOp : ONNX_UnaryOp<"Clip"> {
  let summary = "clamp X to [min, max]; a missing bound is unbounded";
  let arguments = (ins ONNX_Tensor:$X, OptionalAttr<F64Attr>:$min,
                   OptionalAttr<F64Attr>:$max);
}

// Unary predicates produce i1.
def ONNX_IsNaNOp : ONNX_UnaryOp<"IsNaN"> { let summary = "X != X"; }
def ONNX_IsInfOp : ONNX_UnaryOp<"IsInf"> {
  let summary = "X is +/- infinity";
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<I64Attr, "1">:$detect_negative,
                   DefaultValuedAttr<I64Attr, "1">:$detect_positive);
}

def ONNX_CastOp : ONNX_Op<"Cast"> {
  let summary = "Element type conversion";
  let arguments = (ins ONNX_Tensor:$input, TypeAttr:$to);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalisation
//===----------------------------------------------------------------------===//

def ONNX_MatMulOp : ONNX_Op<"MatMul"> {
  let summary = "numpy matmul (batch dimensions broadcast)";
  let arguments = (ins ONNX_Tensor:$A, ONNX_Tensor:$B);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$A `,` $B attr-dict `:` functional-type(operands, results)";
  let hasCanonicalizer = 1;
}

def ONNX_GemmOp : ONNX_Op<"Gemm"> {
  let summary = "alpha * op(A) * op(B) + beta * C";
  let arguments = (ins ONNX_Tensor:$A, ONNX_Tensor:$B, Optional<ONNX_Tensor>:$C,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0">:$beta,
                   DefaultValuedAttr<I64Attr, "0">:$transA,
                   DefaultValuedAttr<I64Attr, "0">:$transB);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$A `,` $B (`,` $C^)? attr-dict `:` functional-type(operands, results)";
}

class ONNX_AxisOp<string mnemonic> : ONNX_Op<mnemonic> {
  let arguments = (ins ONNX_Tensor:$input, I64Attr:$axis);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}
def ONNX_SoftmaxOp : ONNX_AxisOp<"Softmax"> { let summary = "softmax along one axis"; }
def ONNX_LogSoftmaxOp : ONNX_AxisOp<"LogSoftmax"> { let summary = "log-softmax along one axis"; }

def ONNX_LayerNormalizationOp : ONNX_Op<"LayerNormalization"> {
  let summary = "(X - mean) / sqrt(var + epsilon) * Scale + B over dims [axis, rank)";
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$Scale, Optional<ONNX_Tensor>:$B,
                   I64Attr:$axis, DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$X `,` $Scale (`,` $B^)? attr-dict `:` functional-type(operands, results)";
}

def ONNX_RMSNormalizationOp : ONNX_Op<"RMSNormalization"> {
  let summary = "X / sqrt(mean(X^2) + epsilon) * scale over dims [axis, rank)";
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$scale, I64Attr:$axis,
                   DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$X `,` $scale attr-dict `:` functional-type(operands, results)";
}

def ONNX_SoftmaxCrossEntropyLossOp : ONNX_Op<"SoftmaxCrossEntropyLoss"> {
  let summary = "cross entropy of softmax(scores) against integer labels";
  let arguments = (ins ONNX_Tensor:$scores, ONNX_Tensor:$labels,
                   Optional<ONNX_Tensor>:$weights,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$scores `,` $labels (`,` $weights^)? attr-dict `:` functional-type(operands, results)";
}

def ONNX_NegativeLogLikelihoodLossOp : ONNX_Op<"NegativeLogLikelihoodLoss"> {
  let summary = "negative log-likelihood of integer labels under log-probabilities";
  let arguments = (ins ONNX_Tensor:$input, ONNX_Tensor:$target,
                   Optional<ONNX_Tensor>:$weight,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs ONNX_Tensor:$loss);
  let assemblyFormat = "$input `,` $target (`,` $weight^)? attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// `axes` is sorted, non-negative and never empty (import expands "all axes").
class ONNX_ReduceOp<string mnemonic> : ONNX_Op<mnemonic> {
  let arguments = (ins ONNX_Tensor:$data, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims);
  let results = (outs ONNX_Tensor:$reduced);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
}
def ONNX_ReduceMeanOp : ONNX_ReduceOp<"ReduceMean"> { let summary = "mean over axes"; }
def ONNX_ReduceSumOp : ONNX_ReduceOp<"ReduceSum"> { let summary = "sum over axes"; let hasFolder = 1; }
def ONNX_ReduceMaxOp : ONNX_ReduceOp<"ReduceMax"> { let summary = "max over axes"; }
def ONNX_ReduceMinOp : ONNX_ReduceOp<"ReduceMin"> { let summary = "min over axes"; }
def ONNX_ReduceProdOp : ONNX_ReduceOp<"ReduceProd"> { let summary = "product over axes"; let hasFolder = 1; }
def ONNX_ReduceL2Op : ONNX_ReduceOp<"ReduceL2"> { let summary = "L2 norm over axes"; }
def ONNX_ReduceSumSquareOp : ONNX_ReduceOp<"ReduceSumSquare"> { let summary = "sum of squares over axes"; }
def ONNX_ReduceLogSumExpOp : ONNX_ReduceOp<"ReduceLogSumExp"> { let summary = "log(sum(exp)) over axes"; }

class ONNX_ArgOp<string mnemonic> : ONNX_Op<mnemonic> {
  let arguments = (ins ONNX_Tensor:$data, I64Attr:$axis,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims,
                   DefaultValuedAttr<I64Attr, "0">:$select_last_index);
  let results = (outs ONNX_Tensor:$reduced);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
}
def ONNX_ArgMaxOp : ONNX_ArgOp<"ArgMax"> { let summary = "index of the max along axis"; }
def ONNX_ArgMinOp : ONNX_ArgOp<"ArgMin"> { let summary = "index of the min along axis"; }

def ONNX_CumSumOp : ONNX_Op<"CumSum"> {
  let summary = "cumulative sum along axis";
  let arguments = (ins ONNX_Tensor:$x, I64Attr:$axis,
                   DefaultValuedAttr<I64Attr, "0">:$exclusive,
                   DefaultValuedAttr<I64Attr, "0">:$reverse);
  let results = (outs ONNX_Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def ONNX_ReshapeOp : ONNX_Op<"Reshape"> {
  let summary = "Reshape to the static `shape` (no 0 or -1 left)";
  let arguments = (ins ONNX_Tensor:$data, DenseI64ArrayAttr:$shape);
  let results = (outs ONNX_Tensor:$reshaped);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_FlattenOp : ONNX_Op<"Flatten"> {
  let summary = "Reshape to 2-D at axis";
  let arguments = (ins ONNX_Tensor:$input, DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def ONNX_UnsqueezeOp : ONNX_Op<"Unsqueeze"> {
  let summary = "Insert size-1 dims at `axes` (of the output)";
  let arguments = (ins ONNX_Tensor:$data, DenseI64ArrayAttr:$axes);
  let results = (outs ONNX_Tensor:$expanded);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_SqueezeOp : ONNX_Op<"Squeeze"> {
  let summary = "Remove size-1 dims at `axes`";
  let arguments = (ins ONNX_Tensor:$data, DenseI64ArrayAttr:$axes);
  let results = (outs ONNX_Tensor:$squeezed);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_TransposeOp : ONNX_Op<"Transpose"> {
  let summary = "Permute dims: output dim i is input dim perm[i]";
  let arguments = (ins ONNX_Tensor:$data, DenseI64ArrayAttr:$perm);
  let results = (outs ONNX_Tensor:$transposed);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_ConcatOp : ONNX_Op<"Concat"> {
  let summary = "Concatenate along axis";
  let arguments = (ins Variadic<ONNX_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs ONNX_Tensor:$concat_result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_SplitOp : ONNX_Op<"Split"> {
  let summary = "Split along axis into parts of the given sizes";
  let arguments = (ins ONNX_Tensor:$input, I64Attr:$axis, DenseI64ArrayAttr:$split);
  let results = (outs Variadic<ONNX_Tensor>:$outputs);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def ONNX_SliceOp : ONNX_Op<"Slice"> {
  let summary = "Strided slice; starts/ends/steps cover every dim, normalised";
  let description = [{
    `starts[d]` is a valid index of dim d, `steps[d]` is non-zero and
    `ends[d]` is clamped to [-1, dim] as ONNX's rules give; the output has
    ceil((ends - starts) / steps) elements on each dim.
  }];
  let arguments = (ins ONNX_Tensor:$data, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_GatherOp : ONNX_Op<"Gather"> {
  let summary = "Take entries of `data` along axis at `indices`";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_GatherElementsOp : ONNX_Op<"GatherElements"> {
  let summary = "Element-wise gather along axis";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

def ONNX_ScatterElementsOp : ONNX_Op<"ScatterElements"> {
  let summary = "Element-wise scatter of updates along axis";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices, ONNX_Tensor:$updates,
                   DefaultValuedAttr<I64Attr, "0">:$axis,
                   DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$data `,` $indices `,` $updates attr-dict `:` functional-type(operands, results)";
}

def ONNX_ScatterNDOp : ONNX_Op<"ScatterND"> {
  let summary = "Scatter slices of updates at index tuples";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices, ONNX_Tensor:$updates,
                   DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$data `,` $indices `,` $updates attr-dict `:` functional-type(operands, results)";
}

def ONNX_ExpandOp : ONNX_Op<"Expand"> {
  let summary = "Broadcast to `shape` (numpy rules, result is the broadcast shape)";
  let arguments = (ins ONNX_Tensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_TileOp : ONNX_Op<"Tile"> {
  let summary = "Repeat the input `repeats[d]` times along each dim";
  let arguments = (ins ONNX_Tensor:$input, DenseI64ArrayAttr:$repeats);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def ONNX_PadOp : ONNX_Op<"Pad"> {
  let summary = "Pad (begins then ends per dim)";
  let arguments = (ins ONNX_Tensor:$data, DenseI64ArrayAttr:$pads,
                   DefaultValuedStrAttr<StrAttr, "constant">:$mode,
                   DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
}

def ONNX_TriluOp : ONNX_Op<"Trilu"> {
  let summary = "Upper or lower triangle of the last two dims, diagonal offset k";
  let arguments = (ins ONNX_Tensor:$input, DefaultValuedAttr<I64Attr, "1">:$upper,
                   DefaultValuedAttr<I64Attr, "0">:$k);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_RangeOp : ONNX_Op<"Range"> {
  let summary = "start, start + delta, ... below limit (the result size is static)";
  let arguments = (ins ONNX_Tensor:$start, ONNX_Tensor:$limit, ONNX_Tensor:$delta,
                   I64Attr:$size);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$start `,` $limit `,` $delta attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def ONNX_GatherNDOp : ONNX_Op<"GatherND"> {
  let summary = "Gather slices of data at index tuples (last dim of indices)";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Convolution, pooling and image ops (spatial dims after [N, C])
//===----------------------------------------------------------------------===//

def ONNX_ConvOp : ONNX_Op<"Conv"> {
  let summary = "N-d convolution (cross-correlation) with groups";
  let description = [{
    X is [N, C, D1..Dk], W [M, C/group, K1..Kk], the optional B [M]. The
    importer resolves `auto_pad` and the defaults: `strides` and `dilations`
    have k entries, `pads` 2k (every begin, then every end). The result is
    [N, M, O1..Ok] with Oi = floor((Di + begin + end - ((Ki - 1) di + 1)) / si) + 1.
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$W, Optional<ONNX_Tensor>:$B,
                   DefaultValuedAttr<I64Attr, "1">:$group,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$pads);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$X `,` $W (`,` $B^)? attr-dict `:` functional-type(operands, results)";
}

def ONNX_ConvTransposeOp : ONNX_Op<"ConvTranspose"> {
  let summary = "N-d transposed convolution with groups";
  let description = [{
    X is [N, C, D1..Dk], W [C, M/group, K1..Kk], the optional B [M]. The
    importer resolves `auto_pad`, `output_shape` and `output_padding` into
    `pads` (2k entries, begins then ends; an end may be negative: output
    padding). Output [N, M, O1..Ok] with
    Oi = si (Di - 1) + (Ki - 1) di + 1 - begin - end.
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$W, Optional<ONNX_Tensor>:$B,
                   DefaultValuedAttr<I64Attr, "1">:$group,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$pads);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$X `,` $W (`,` $B^)? attr-dict `:` functional-type(operands, results)";
}

// Pools over the spatial dims of [N, C, D1..Dk]; `pads` has 2k entries
// (auto_pad resolved), `ceil_mode` only decides the result shape (a last
// window that would start in the end padding is dropped, as in ONNX 19+).
class ONNX_PoolOp<string mnemonic> : ONNX_Op<mnemonic> {
  let arguments = (ins ONNX_Tensor:$X, DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$pads,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                   DefaultValuedAttr<I64Attr, "0">:$count_include_pad);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
}
def ONNX_MaxPoolOp : ONNX_PoolOp<"MaxPool"> {
  let summary = "max over each window (padding never wins)";
}
def ONNX_AveragePoolOp : ONNX_PoolOp<"AveragePool"> {
  let summary = "mean over each window; count_include_pad counts the padding";
}
def ONNX_MaxPoolGradOp : ONNX_Op<"MaxPoolGrad"> {
  let summary = "MaxPool's backward (training): dY to each window's maximum";
  let description = [{
    The gradient of `onnx.MaxPool` of X with the same attributes: dX is X's
    shape, zero but where a window's maximum is, which receives that
    window's dY (summed over overlapping windows). The maximum is the one
    MaxPool takes: the first in row-major tap order, padding never, as
    PyTorch's max_pool backward. Made by zero-autodiff; not an ONNX op.
  }];
  let arguments = (ins ONNX_Tensor:$dY, ONNX_Tensor:$X, DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$pads,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode);
  let results = (outs ONNX_Tensor:$dX);
  let assemblyFormat = "$dY `,` $X attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def ONNX_BatchNormalizationOp : ONNX_Op<"BatchNormalization"> {
  let summary = "inference-mode batch norm: (X - mean) / sqrt(var + epsilon) * scale + B";
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$scale, ONNX_Tensor:$B,
                   ONNX_Tensor:$input_mean, ONNX_Tensor:$input_var,
                   DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$X `,` $scale `,` $B `,` $input_mean `,` $input_var attr-dict `:` functional-type(operands, results)";
}

def ONNX_ResizeOp : ONNX_Op<"Resize"> {
  let summary = "nearest / linear / cubic resampling to a static shape";
  let description = [{
    `scales` has one entry per dim: the factor the coordinate transform
    divides by (ONNX's scales, or sizes / input dims when sizes were given);
    `sizes` is the result shape, resolved by the importer (floor(dim *
    scale), or ONNX's sizes with keep_aspect_ratio_policy applied). `roi`
    (2 * rank, begins then ends) only for `tf_crop_and_resize`. The other
    attribute names and values are ONNX's.
  }];
  let arguments = (ins ONNX_Tensor:$X, DenseF64ArrayAttr:$scales,
                   DenseI64ArrayAttr:$sizes,
                   OptionalAttr<DenseF64ArrayAttr>:$roi,
                   DefaultValuedStrAttr<StrAttr, "nearest">:$mode,
                   DefaultValuedStrAttr<StrAttr, "half_pixel">:$coordinate_transformation_mode,
                   DefaultValuedStrAttr<StrAttr, "round_prefer_floor">:$nearest_mode,
                   DefaultValuedAttr<F64Attr, "-0.75">:$cubic_coeff_a,
                   DefaultValuedAttr<I64Attr, "0">:$exclude_outside,
                   DefaultValuedAttr<F64Attr, "0.0">:$extrapolation_value,
                   DefaultValuedAttr<I64Attr, "0">:$antialias);
  let results = (outs ONNX_Tensor:$Y);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Selection and encoding
//===----------------------------------------------------------------------===//

def ONNX_TopKOp : ONNX_Op<"TopK"> {
  let summary = "the k largest (or smallest) entries along axis, and their indices";
  let description = [{
    `k` is the constant K input. Values come out sorted (also for sorted = 0,
    where ONNX leaves the order open); equal values keep the lower index
    first. Indices are i64.
  }];
  let arguments = (ins ONNX_Tensor:$X, I64Attr:$k, I64Attr:$axis,
                   DefaultValuedAttr<I64Attr, "1">:$largest,
                   DefaultValuedAttr<I64Attr, "1">:$sorted);
  let results = (outs ONNX_Tensor:$Values, ONNX_Tensor:$Indices);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
}

def ONNX_OneHotOp : ONNX_Op<"OneHot"> {
  let summary = "one-hot encoding of indices: values[1] at the index, values[0] elsewhere";
  let description = [{
    `depth` is the constant depth input; `axis` (non-negative) is the new
    dim's position in the result. An index outside [-depth, depth) gives a
    row of off values. The result has values' element type.
  }];
  let arguments = (ins ONNX_Tensor:$indices, ONNX_Tensor:$values, I64Attr:$depth,
                   I64Attr:$axis);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "$indices `,` $values attr-dict `:` functional-type(operands, results)";
}

#endif // ZERO_DIALECT_ONNX_ONNXOPS_TD
