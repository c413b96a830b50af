//===- MixedPrecision.cpp - zero-mixed-precision
//---------------------------===//
//
// The forward in 16 bits, as DeepSpeed's "bf16" / "fp16" modes run it after
// `module.bfloat16()` / `.half()`: every f32 global and value of the training
// function becomes 16-bit. Each kernel computes in f32 on widened operands and
// rounds its result once: the 16-bit type is what the values are stored,
// gathered and sent as. zero-optimizer keeps the fp32 master copies
// (Optimizer.cpp). See Passes.td.
//
// The loss is computed where and as the model computes it: in 16 bits on the
// 16-bit logits (a model's own torch.nn.CrossEntropyLoss under `.half()`:
// its value, and fp16's seed, the scale, are 16-bit, so 2^16 overflows), in
// f32 where the model casts first (`zero.compute_f32`, which the importer
// puts on transformers' language-model losses, whose `logits.float()` the
// export drops). f32-loss computes every loss in f32 (torch.autocast's list).
//
// The table of what computes in f32 (standing in for the casts to f32 an f32
// export drops: transformers' RMSNorm, softmax(dtype=float32)):
//   f32 losses  f32 operands (cast up), f32 loss and log-probabilities, and
//               every op with an operand computed from their results
//   zero.compute_f32  any op the source model computes in f32
//   the rest    16-bit storage; softmax, normalization statistics, exp/log and
//               reductions compute in f32 (their results cast to 16 bits for
//               16-bit ops), as every kernel accumulates in f32 on 16-bit
//               operands (runtime/src/cpu/HalfWidening.cpp)
//
//===----------------------------------------------------------------------===//

#include "LossScaler.h"
#include "TrainingFunction.h"

#include "zero/Dialect/Zero/ZeroAttributes.h"

#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

#include <cmath>

#define DEBUG_TYPE "zero-mixed-precision"

namespace zero {
#define GEN_PASS_DEF_ZEROMIXEDPRECISIONPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace onnx = ::zero::onnx;

namespace {

bool isF32Tensor(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && rt.getElementType().isF32();
}

bool isLoss(Operation *op) {
  return isa<onnx::SoftmaxCrossEntropyLossOp, onnx::NegativeLogLikelihoodLossOp>(op);
}

/// The ops that compute in f32 whatever their operands' type (their 16-bit
/// operands cast up): softmax, normalization and its statistics, reductions,
/// exp/log, powers and roots. Their results stay f32 for the f32 ops after
/// them and are cast to 16 bits for the others; their backward is f32.
bool isF32Op(Operation *op) {
  return isa<onnx::SoftmaxOp, onnx::LogSoftmaxOp, onnx::LayerNormalizationOp,
             onnx::RMSNormalizationOp, onnx::BatchNormalizationOp, onnx::ReduceMeanOp,
             onnx::ReduceSumOp, onnx::ReduceSumSquareOp, onnx::ReduceProdOp,
             onnx::ReduceLogSumExpOp, onnx::ExpOp, onnx::LogOp, onnx::PowOp, onnx::SqrtOp>(op);
}

struct ZeroMixedPrecisionPass
    : public ::zero::impl::ZeroMixedPrecisionPassBase<ZeroMixedPrecisionPass> {
  using Base::Base;

  Statistic numGlobals{this, "globals-16bit", "f32 globals made 16-bit"};
  Statistic numCasts{this, "casts", "Casts inserted (inputs down, loss operands up)"};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = ::zero::training::pickFunction(module, function, "zero-mixed-precision");
    if (!func)
      return signalPassFailure();
    half = precision == ::zero::Precision::FP16 ? Type(Float16Type::get(&getContext()))
                                                : Type(BFloat16Type::get(&getContext()));
    retypeGlobals(module);
    if (failed(retypeFunction(func)))
      return signalPassFailure();
    if (precision == ::zero::Precision::FP16) {
      // min_loss_scale floors the halved scale (max(scale / 2, min), as
      // DeepSpeed's DynamicLossScaler): any value > 0 is a floor.
      if (lossScale < 0 || minLossScale <= 0 || lossScaleWindow < 1 ||
          hysteresis < 1 || initialScalePower < 0 || initialScalePower > 120) {
        module.emitError()
            << "zero-mixed-precision: fp16's loss scaler needs loss-scale "
               ">= 0, min-loss-scale > 0, loss-scale-window >= 1, "
               "hysteresis >= 1 and initial-scale-power in [0, 120]";
        return signalPassFailure();
      }
      ::zero::training::addLossScaler(
          module, {lossScale, initialScalePower, lossScaleWindow, hysteresis, minLossScale,
                   consecutiveHysteresis});
    } else if (checkGradOverflow) {
      ::zero::attrs::kSkipNonFinite.set(module, UnitAttr::get(&getContext()));
    }
  }

  RankedTensorType narrow(Type t) const {
    auto rt = cast<RankedTensorType>(t);
    return RankedTensorType::get(rt.getShape(), half);
  }

  /// Every f32 global (a parameter, a buffer) is stored in 16 bits.
  void retypeGlobals(ModuleOp module) {
    for (auto g : module.getOps<ml_program::GlobalOp>()) {
      if (!isF32Tensor(g.getType()))
        continue;
      RankedTensorType t = narrow(g.getType());
      g.setType(t);
      if (auto value = g.getValueAttr()) {
        if (isa<ml_program::ExternAttr>(value))
          g.setValueAttr(ml_program::ExternAttr::get(&getContext(), t));
        else if (auto dense = dyn_cast<DenseFPElementsAttr>(value))
          g.setValueAttr(convert(dense, t));
      }
      ++numGlobals;
    }
  }

  /// `dense` (f32) as a 16-bit constant of type `t` (round to nearest even).
  DenseElementsAttr convert(DenseFPElementsAttr dense, RankedTensorType t) const {
    const llvm::fltSemantics &sem = cast<FloatType>(half).getFloatSemantics();
    SmallVector<APFloat> values;
    for (APFloat v : dense.getValues<APFloat>()) {
      bool lost = false;
      v.convert(sem, APFloat::rmNearestTiesToEven, &lost);
      values.push_back(v);
    }
    return DenseElementsAttr::get(t, values);
  }

  Value castTo(OpBuilder &b, Location loc, Value v, Type elem) {
    ++numCasts;
    auto t = RankedTensorType::get(cast<RankedTensorType>(v.getType()).getShape(), elem);
    return onnx::CastOp::create(b, loc, t, v, TypeAttr::get(elem));
  }

  LogicalResult retypeFunction(func::FuncOp func) {
    Block &body = func.getBody().front();
    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&body);
    // f32 inputs: cast to 16 bits on entry (the data stays f32 on disk).
    llvm::DenseSet<Operation *> entryCasts;
    for (BlockArgument arg : body.getArguments()) {
      if (!isF32Tensor(arg.getType()) || arg.use_empty())
        continue;
      Value down = castTo(b, arg.getLoc(), arg, half);
      arg.replaceAllUsesExcept(down, down.getDefiningOp());
      entryCasts.insert(down.getDefiningOp());
    }
    Type f32 = Float32Type::get(&getContext());
    // Which ops compute in f32 (found before anything is retyped): the f32
    // losses and every op after one; the f32 ops of the table and those the
    // model computes in f32 (zero.compute_f32); and an op
    // whose float operands all come from f32 ops (constants count for
    // neither side), as a variance's + epsilon between a reduction and its
    // square root. Every other op computes in 16 bits.
    llvm::DenseSet<Operation *> lossRegion, f32Ops;
    auto fromF32 = [&](Value v) { return f32Ops.contains(v.getDefiningOp()); };
    for (Operation &op : body) {
      if (op.getNumRegions() != 0)
        return op.emitOpError() << "zero-mixed-precision: ops with regions are not supported";
      if (isa<func::ReturnOp>(op) || entryCasts.contains(&op) || isa<onnx::ConstantOp>(op))
        continue;
      if ((isLoss(&op) &&
           (f32Loss || ::zero::attrs::kComputeF32.isSetOn(op))) ||
          llvm::any_of(op.getOperands(), [&](Value v) {
            return lossRegion.contains(v.getDefiningOp());
          })) {
        lossRegion.insert(&op);
        f32Ops.insert(&op);
        continue;
      }
      bool anyF32 = false, any16 = false;
      for (Value v : op.getOperands()) {
        auto rt = dyn_cast<RankedTensorType>(v.getType());
        if (!rt || !isa<FloatType>(rt.getElementType()) ||
            isa_and_nonnull<onnx::ConstantOp>(v.getDefiningOp()))
          continue;
        (fromF32(v) ? anyF32 : any16) = true; // the inputs' entry casts count as 16-bit
      }
      // A 16-bit loss reads 16-bit operands (its log-probabilities rounded,
      // as a half log_softmax's).
      if (isF32Op(&op) || ::zero::attrs::kComputeF32.isSetOn(op) ||
          (anyF32 && !any16 && !isLoss(&op)))
        f32Ops.insert(&op);
    }
    // A constant stays f32 when only f32 ops read it.
    llvm::DenseSet<Operation *> f32Constants;
    for (auto c : body.getOps<onnx::ConstantOp>())
      if (!c->use_empty() && llvm::all_of(c->getUsers(), [&](Operation *user) {
            return f32Ops.contains(user);
          }))
        f32Constants.insert(c);
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (entryCasts.contains(&op))
        continue;
      if (isa<onnx::ConstantOp>(op)) {
        if (!f32Constants.contains(&op))
          retypeOp(op);
        continue;
      }
      const bool inF32 = f32Ops.contains(&op);
      // Operands to the type the op computes in: 16-bit ones cast up for an
      // f32 op, f32 ones (an f32 op's results) cast down for a 16-bit op.
      b.setInsertionPoint(&op);
      for (OpOperand &use : op.getOpOperands()) {
        auto rt = dyn_cast<RankedTensorType>(use.get().getType());
        if (!rt || !isa<FloatType>(rt.getElementType()))
          continue;
        if (inF32 && rt.getElementType() == half)
          use.set(castTo(b, op.getLoc(), use.get(), f32));
        else if (!inF32 && !isa<func::ReturnOp>(op) && rt.getElementType().isF32() &&
                 use.get().getDefiningOp() && (fromF32(use.get()) ||
                 f32Constants.contains(use.get().getDefiningOp())))
          use.set(castTo(b, op.getLoc(), use.get(), half));
      }
      if (!inF32 && !isa<func::ReturnOp>(op))
        retypeOp(op);
    }
    // The function's results take their new types.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ret.getOperandTypes()));
    return success();
  }

  /// An op computed in 16 bits: its f32 results (and the f32 attributes that
  /// give their values: a Constant's, a Cast's target) become 16-bit.
  void retypeOp(Operation &op) {
    if (auto c = dyn_cast<onnx::ConstantOp>(op)) {
      if (auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
          dense && isF32Tensor(c.getType())) {
        RankedTensorType t = narrow(c.getType());
        c.setValueAttr(convert(dense, t));
        c.getResult().setType(t);
      }
      return;
    }
    if (auto c = dyn_cast<onnx::CastOp>(op)) {
      if (c.getTo().isF32()) {
        c.setToAttr(TypeAttr::get(half));
        c.getResult().setType(narrow(c.getType()));
      }
      return;
    }
    for (Value r : op.getResults())
      if (isF32Tensor(r.getType()))
        r.setType(narrow(r.getType()));
  }

  Type half;
};

} // namespace
