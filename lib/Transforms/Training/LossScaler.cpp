//===- LossScaler.cpp - DeepSpeed's fp16 loss scaler in the IR ------------===//
//
// See LossScaler.h. The update is DeepSpeed's DynamicLossScaler.update_scale,
// branch-free: both outcomes are computed and Where picks one.
//
//===----------------------------------------------------------------------===//

#include "LossScaler.h"

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Passes.h"

#include <cmath>

using namespace mlir;
namespace attrs = ::zero::attrs;
namespace onnx = ::zero::onnx;

namespace zero {
namespace training {
namespace {

constexpr StringLiteral kScale = "loss_scaler.cur_scale", kIter = "loss_scaler.cur_iter",
                        kLastOverflow = "loss_scaler.last_overflow_iter_plus_1",
                        kHysteresisSpent = "loss_scaler.hysteresis_spent";

Value scalar(ImplicitLocOpBuilder &b, double v, Type elem) {
  auto t = RankedTensorType::get({}, elem);
  Attribute a = isa<FloatType>(elem) ? Attribute(FloatAttr::get(elem, v))
                                     : Attribute(IntegerAttr::get(elem, int64_t(v)));
  return onnx::ConstantOp::create(b, t, DenseElementsAttr::get(t, a));
}

Value load(ImplicitLocOpBuilder &b, ml_program::GlobalOp g) {
  return ml_program::GlobalLoadOp::create(b, g.getType(),
                                          FlatSymbolRefAttr::get(g.getSymNameAttr()));
}

void store(ImplicitLocOpBuilder &b, ml_program::GlobalOp g, Value v) {
  ml_program::GlobalStoreOp::create(b, FlatSymbolRefAttr::get(g.getSymNameAttr()), v);
}

Value where(ImplicitLocOpBuilder &b, Value c, Value x, Value y) {
  return onnx::WhereOp::create(b, x.getType(), c, x, y);
}

Value equal(ImplicitLocOpBuilder &b, Value x, Value y) {
  return onnx::EqualOp::create(b, RankedTensorType::get({}, b.getI1Type()), x, y);
}

} // namespace

void addLossScaler(ModuleOp module, const LossScalerConfig &c) {
  Builder b(module.getContext());
  attrs::kLossScaler.set(
      module, ::zero::dist::LossScalerAttr::get(
                  module.getContext(), b.getF64FloatAttr(c.staticScale),
                  c.initialScalePower, c.window, c.hysteresis,
                  b.getF64FloatAttr(c.minScale),
                  b.getBoolAttr(c.consecutiveHysteresis)));
  if (c.staticScale > 0)
    return;
  OpBuilder mb(module.getContext());
  mb.setInsertionPointToStart(module.getBody());
  SymbolTable symbols(module);
  auto add = [&](StringRef name, Type elem, attrs::GlobalRole role) {
    auto t = RankedTensorType::get({}, elem);
    Attribute zero = isa<FloatType>(elem) ? Attribute(FloatAttr::get(elem, 0.0))
                                          : Attribute(IntegerAttr::get(elem, 0));
    auto g = ml_program::GlobalOp::create(mb, module.getLoc(), name, t, /*is_mutable=*/true,
                                          DenseElementsAttr::get(t, zero),
                                          mb.getStringAttr("private"));
    attrs::kTensor.set(g, mb.getStringAttr(name));
    attrs::kRole.set(g, role);
    attrs::kBuffer.set(g, mb.getUnitAttr()); // never trained
    symbols.insert(g);
  };
  Type i64 = mb.getI64Type();
  add(kScale, mb.getF32Type(), attrs::GlobalRole::OptimizerState);
  add(kIter, i64, attrs::GlobalRole::Counter);
  add(kLastOverflow, i64, attrs::GlobalRole::Counter);
  add(kHysteresisSpent, i64, attrs::GlobalRole::Counter);
}

std::optional<LossScaler> findLossScaler(ModuleOp module) {
  ::zero::dist::LossScalerAttr d = attrs::kLossScaler.get(module);
  if (!d)
    return std::nullopt;
  LossScaler s;
  s.config.staticScale = d.getLossScale().getValueAsDouble();
  s.config.initialScalePower = d.getInitialScalePower();
  s.config.window = d.getLossScaleWindow();
  s.config.hysteresis = d.getHysteresis();
  s.config.minScale = d.getMinLossScale().getValueAsDouble();
  s.config.consecutiveHysteresis = d.getConsecutiveHysteresis().getValue();
  if (s.config.staticScale <= 0) {
    SymbolTable symbols(module);
    s.scale = symbols.lookup<ml_program::GlobalOp>(kScale);
    s.iter = symbols.lookup<ml_program::GlobalOp>(kIter);
    s.lastOverflow = symbols.lookup<ml_program::GlobalOp>(kLastOverflow);
    s.hysteresisSpent = symbols.lookup<ml_program::GlobalOp>(kHysteresisSpent);
    if (!s.scale || !s.iter || !s.lastOverflow || !s.hysteresisSpent)
      return std::nullopt;
  }
  return s;
}

Value currentLossScale(ImplicitLocOpBuilder &b, const LossScaler &s) {
  Type f32 = b.getF32Type();
  if (s.config.staticScale > 0)
    return scalar(b, s.config.staticScale, f32);
  Value first = equal(b, load(b, s.iter), scalar(b, 0, b.getI64Type()));
  Value initial = scalar(b, std::ldexp(1.0, int(s.config.initialScalePower)), f32);
  return where(b, first, initial, load(b, s.scale));
}

void updateLossScale(ImplicitLocOpBuilder &b, const LossScaler &s, Value scale,
                     Value overflow) {
  if (s.config.staticScale > 0)
    return;
  const LossScalerConfig &c = s.config;
  Type f32 = b.getF32Type(), i64 = b.getI64Type();
  Value iter = load(b, s.iter), lastPlus1 = load(b, s.lastOverflow),
        spent = load(b, s.hysteresisSpent);
  Value one = scalar(b, 1, i64), zero = scalar(b, 0, i64);
  // Overflow: the scale halves (floored at min_loss_scale) once the
  // hysteresis is spent (cur_hysteresis == 1, or hysteresis 1), else one
  // more unit of it is spent; the iteration is the last overflow's.
  Value shift = c.hysteresis <= 1 ? equal(b, zero, zero)
                                  : equal(b, spent, scalar(b, double(c.hysteresis - 1), i64));
  Value halved = onnx::MaxOp::create(b, onnx::DivOp::create(b, scale, scalar(b, 2.0, f32)),
                                     scalar(b, c.minScale, f32));
  Value scaleO = where(b, shift, halved, scale);
  Value spentO = where(b, shift, spent, onnx::AddOp::create(b, spent, one));
  Value lastO = onnx::AddOp::create(b, iter, one);
  // A clean step: DeepSpeed 0.19's stable interval, cur_iter -
  // last_overflow_iter - 1, positive and a multiple of the window, doubles
  // the scale and (without consecutive_hysteresis) restores the hysteresis;
  // with consecutive_hysteresis every clean step restores it. (0.18 and
  // before doubled one step earlier: (cur_iter - last_overflow_iter) %
  // window == 0.)
  Value stable = onnx::SubOp::create(b, iter, lastPlus1);
  auto i1s = RankedTensorType::get({}, b.getI1Type());
  Value grow = onnx::AndOp::create(
      b, i1s, onnx::GreaterOp::create(b, i1s, stable, zero),
      equal(b, onnx::ModOp::create(b, stable, scalar(b, double(c.window), i64)),
            zero));
  Value scaleC = where(b, grow, onnx::MulOp::create(b, scale, scalar(b, 2.0, f32)), scale);
  Value spentC = c.consecutiveHysteresis ? zero : where(b, grow, zero, spent);
  store(b, s.scale, where(b, overflow, scaleO, scaleC));
  store(b, s.hysteresisSpent, where(b, overflow, spentO, spentC));
  store(b, s.lastOverflow, where(b, overflow, lastO, lastPlus1));
  store(b, s.iter, onnx::AddOp::create(b, iter, one));
}

} // namespace training
} // namespace zero
