//===- LossScaler.h - DeepSpeed's fp16 loss scaler in the IR ----*- C++ -*-===//
//
// fp16 training scales the loss before backward so that small gradients do
// not flush to zero in 16 bits, as DeepSpeed's FP16 optimizers do
// (runtime/fp16/loss_scaler.py): a static scale, or the dynamic one, which
// halves after `hysteresis` overflows (a non-finite gradient anywhere), is
// floored at `min_loss_scale`, and doubles after `loss_scale_window` clean
// steps. zero-mixed-precision adds it (the settings on the module, the
// dynamic state in loss_scaler.* globals, zero-initialized as every
// optimizer state); zero-autodiff seeds the backward with the scale;
// zero-optimizer unscales the gradients, skips the update of a step that
// overflowed and updates the scale. Internal to lib/Transforms/Training.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_TRANSFORMS_TRAINING_LOSSSCALER_H
#define ZERO_LIB_TRANSFORMS_TRAINING_LOSSSCALER_H

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <optional>

namespace zero {
namespace training {

/// DeepSpeed's "fp16" settings (defaults as there).
struct LossScalerConfig {
  double staticScale = 0; ///< loss_scale; 0: dynamic
  int64_t initialScalePower = 16;
  int64_t window = 1000; ///< loss_scale_window
  int64_t hysteresis = 2;
  double minScale = 1; ///< min_loss_scale
  bool consecutiveHysteresis = false;
};

/// The scaler of a module: its settings and (dynamic) its state globals:
/// the scale, the iteration, the last overflow's iteration + 1, and the
/// hysteresis spent (hysteresis - DeepSpeed's cur_hysteresis), all zero at
/// start-up, as DeepSpeed's state starts.
struct LossScaler {
  LossScalerConfig config;
  mlir::ml_program::GlobalOp scale, iter, lastOverflow, hysteresisSpent;
};

/// Records `config` on the module and (dynamic) adds the state globals.
void addLossScaler(mlir::ModuleOp module, const LossScalerConfig &config);

/// The module's scaler, if it has one.
std::optional<LossScaler> findLossScaler(mlir::ModuleOp module);

/// This step's scale (an f32 scalar): the static one, or the state's (the
/// initial 2^power on the first iteration).
mlir::Value currentLossScale(mlir::ImplicitLocOpBuilder &b, const LossScaler &scaler);

/// DeepSpeed's update_scale(overflow) on the dynamic state: `scale` is this
/// step's, `overflow` an i1 scalar. Nothing for a static scale.
void updateLossScale(mlir::ImplicitLocOpBuilder &b, const LossScaler &scaler, mlir::Value scale,
                     mlir::Value overflow);

} // namespace training
} // namespace zero

#endif // ZERO_LIB_TRANSFORMS_TRAINING_LOSSSCALER_H
