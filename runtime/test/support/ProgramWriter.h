//===- ProgramWriter.h - Serialise test programs to .zrt bytes --*- C++ -*-===//
//
// Tests describe programs as zrt::Program values (the loader's own structs, so a
// test reads like the program it builds) and serialise them with the FlatBuffers
// builder API. Nothing is validated on the way out: tests write broken programs
// on purpose to check that the loader rejects them. Also the small example
// programs shared by the executor tests, the end-to-end tests and zrt-testgen.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TEST_PROGRAMWRITER_H
#define ZRT_TEST_PROGRAMWRITER_H

#include "zrt/Program.h"
#include "zrt/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {
namespace test {

/// The .zrt bytes of `program` (any version, any indices).
std::vector<uint8_t> serializeProgram(const Program &program);

/// Writes `bytes` to `path`.
Status writeFile(const std::string &path, const std::vector<uint8_t> &bytes);

/// An instruction with the common fields set.
Instruction makeInstruction(const std::string &op, uint32_t stream,
                            std::vector<uint32_t> inputs,
                            std::vector<uint32_t> outputs,
                            const std::string &loc = "");
/// A Record or Wait instruction.
Instruction makeEventOp(OpKind kind, uint32_t stream, int event);

/// The ZeRO-3 linear layer used by the end-to-end tests, for `world` ranks:
///   comm:    AllGather(w shard -> w padded); Record e0; Wait e1; AllReduce(y -> y_sum)
///   compute: Wait e0; h = MatMul(x, w viewed as [K, N]); y = Add(h, b); Record e1
/// x: f32[4x6] input, w: f32[6x5] global sharded over `world`, b: f32[5]
/// replicated global; outputs y and y_sum (= world * y).
struct LinearModel {
  static constexpr int64_t M = 4, K = 6, N = 5;
  Program program;
  std::vector<float> x, w, b; ///< inputs and weights
  std::vector<float> y;       ///< x @ w + b, computed here
};
LinearModel makeLinearModel(int world);

/// Writes model.zrt, weights.safetensors, x.npy and expected.safetensors (y
/// and y_sum) for makeLinearModel(world) into `dir`.
Status writeLinearModel(const std::string &dir, int world);

/// A tiny data-parallel training program for `world` ranks (replicated
/// parameter), used by the loader and end-to-end tests:
///   inputs x, y: f32[b, D] per rank; w: f32[D] Parameter ("w"); m, v:
///   OptimizerState ("w.exp_avg", "w.exp_avg_sq"); step: Counter ("step")
///   d = w * x - y;  loss = ReduceSum(d * d) / b          (this rank's mean)
///   g = ReduceSum(d * x, axes [0]) * (2 / B)             (B = b * world)
///   grad = AllReduce(g) on the comm stream (events e0, e1)
///   grad_norm = Sqrt(ReduceSumSquare(grad))
///   grad_scale = Min(max_norm / (grad_norm + 1e-6), 1)   (clip_grad_norm_)
///   step = Add(step, 1) in place;  lr = LrSchedule(step)
///   AdamW(w, grad, step, lr, grad_scale, m, v) -> (w, m, v) in place
/// Outputs loss, grad_norm, lr (the training table names them).
struct TrainingModel {
  int64_t D = 4;
  int64_t b = 2;
  Program program;
  double maxNorm = 1.0;
  AttrMap adamAttrs, lrAttrs; ///< the attributes of AdamW and LrSchedule
  /// Buffer indices, for tests that change the program.
  uint32_t wBuffer = 0, lossBuffer = 0, counterBuffer = 0;
};
TrainingModel makeTrainingModel(int world, int64_t batchPerRank = 2,
                                int64_t dim = 4);

} // namespace test
} // namespace zrt

#endif // ZRT_TEST_PROGRAMWRITER_H
