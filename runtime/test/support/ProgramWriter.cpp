//===- ProgramWriter.cpp - Serialise test programs to .zrt bytes ----------===//
//
// The inverse of the loader's conversion, field by field, plus the example
// linear model whose expected outputs are computed here in plain loops.
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"

#include "zrt/TensorFile.h"

#include "zrt_generated.h"

#include <fstream>

namespace zrt {
namespace test {

std::vector<uint8_t> serializeProgram(const Program &p) {
  flatbuffers::FlatBufferBuilder fbb;
  auto optString = [&](const std::string &s) {
    return s.empty() ? flatbuffers::Offset<flatbuffers::String>()
                     : fbb.CreateString(s);
  };

  std::vector<flatbuffers::Offset<fb::Arena>> arenas;
  for (const ArenaDesc &a : p.arenas)
    arenas.push_back(fb::CreateArena(fbb, optString(a.name), a.size,
                                     a.noReuseSize, a.lowerBound,
                                     a.inOrderSize, optString(a.path), a.host));
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (const BufferDesc &b : p.buffers)
    buffers.push_back(fb::CreateBuffer(fbb, optString(b.name),
                                       fb::DType(b.dtype),
                                       fbb.CreateVector(b.shape), b.arena,
                                       b.offset, b.inOrderOffset));
  std::vector<flatbuffers::Offset<fb::Constant>> constants;
  for (const ConstantDesc &c : p.constants)
    constants.push_back(
        fb::CreateConstant(fbb, c.buffer, fbb.CreateVector(c.data)));
  std::vector<flatbuffers::Offset<fb::Global>> globals;
  for (const GlobalDesc &g : p.globals) {
    flatbuffers::Offset<fb::ShardSpec> shard;
    if (g.shard)
      shard = fb::CreateShardSpec(fbb, g.shard->world, g.shard->numel,
                                  g.shard->paddedNumel);
    flatbuffers::Offset<fb::HeldGradient> gradient;
    if (g.gradient)
      gradient = fb::CreateHeldGradient(fbb, fb::DType(g.gradient->dtype), g.gradient->numel);
    globals.push_back(fb::CreateGlobal(fbb, optString(g.name),
                                       optString(g.tensor), fb::DType(g.dtype),
                                       fbb.CreateVector(g.shape), g.buffer,
                                       shard, fb::GlobalRole(g.role), gradient, g.widenFrom));
  }
  std::vector<flatbuffers::Offset<fb::Stream>> streams;
  for (const StreamDesc &s : p.streams)
    streams.push_back(
        fb::CreateStream(fbb, optString(s.name), fb::StreamKind(s.kind)));
  std::vector<flatbuffers::Offset<fb::ProcessGroup>> groups;
  for (const ProcessGroupDesc &g : p.groups)
    groups.push_back(fb::CreateProcessGroup(
        fbb, optString(g.name), fbb.CreateVector(g.ranks), g.groupSize));
  auto bindings = [&](const std::vector<BindingDesc> &list) {
    std::vector<flatbuffers::Offset<fb::Binding>> out;
    for (const BindingDesc &b : list)
      out.push_back(fb::CreateBinding(fbb, optString(b.name), b.buffer));
    return fbb.CreateVector(out);
  };
  auto inputs = bindings(p.inputs);
  auto outputs = bindings(p.outputs);

  std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
  for (const Instruction &i : p.instructions) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const auto &[name, value] : i.attrs.entries())
      attrs.push_back(fb::CreateAttr(fbb, fbb.CreateString(name),
                                     fbb.CreateVector(value.ints),
                                     fbb.CreateVector(value.floats),
                                     optString(value.str)));
    instructions.push_back(fb::CreateInstruction(
        fbb, fbb.CreateString(i.op), i.stream, fbb.CreateVector(i.inputs),
        fbb.CreateVector(i.outputs), fbb.CreateVector(attrs), i.event, i.group,
        optString(i.loc),
        i.ranks.empty() ? flatbuffers::Offset<flatbuffers::Vector<int32_t>>()
                        : fbb.CreateVector(i.ranks)));
  }

  flatbuffers::Offset<fb::Training> training;
  if (p.training)
    training = fb::CreateTraining(
        fbb, optString(p.training->loss), optString(p.training->gradNorm),
        optString(p.training->lr), p.training->accumulationSteps,
        optString(p.training->optimizer));
  auto root = fb::CreateProgram(
      fbb, p.version, p.worldSize, fbb.CreateVector(arenas),
      fbb.CreateVector(buffers), fbb.CreateVector(constants),
      fbb.CreateVector(globals), fbb.CreateVector(streams), p.numEvents,
      fbb.CreateVector(groups), inputs, outputs, fbb.CreateVector(instructions),
      training);
  fb::FinishProgramBuffer(fbb, root);
  return std::vector<uint8_t>(fbb.GetBufferPointer(),
                              fbb.GetBufferPointer() + fbb.GetSize());
}

Status writeFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            std::streamsize(bytes.size()));
  if (!out.flush())
    return Status::error(path + ": cannot write");
  return Status::ok();
}

Instruction makeInstruction(const std::string &op, uint32_t stream,
                            std::vector<uint32_t> inputs,
                            std::vector<uint32_t> outputs,
                            const std::string &loc) {
  Instruction i;
  i.op = op;
  i.kind = classifyOp(op);
  i.stream = stream;
  i.inputs = std::move(inputs);
  i.outputs = std::move(outputs);
  i.loc = loc;
  return i;
}

Instruction makeEventOp(OpKind kind, uint32_t stream, int event) {
  Instruction i = makeInstruction(opKindName(kind), stream, {}, {});
  i.event = event;
  return i;
}

LinearModel makeLinearModel(int world) {
  constexpr int64_t M = LinearModel::M, K = LinearModel::K, N = LinearModel::N;
  LinearModel m;
  Program &p = m.program;
  p.path = "linear.zrt";
  p.version = kFormatVersion;
  p.worldSize = world;
  uint64_t numel = K * N;
  uint64_t padded = (numel + world - 1) / world * world;
  uint64_t shard = padded / uint64_t(world);
  auto align = [](uint64_t x) { return (x + 63) / 64 * 64; };

  // Arena 0 "params": w shard, b. Arena 1 "activations": w padded (and its
  // [K, N] view), x, h, y, y_sum.
  uint64_t bOff = align(shard * 4);
  p.arenas.push_back({"params", bOff + align(N * 4), bOff + align(N * 4),
                      shard * 4 + N * 4});
  uint64_t xOff = align(padded * 4), hOff = xOff + align(M * K * 4),
           yOff = hOff + align(M * N * 4), sOff = yOff + align(M * N * 4),
           end = sOff + align(M * N * 4);
  // The most that is live at once: x, the gathered w and h, during MatMul.
  p.arenas.push_back({"activations", end, end, (M * K + padded + M * N) * 4});
  p.buffers = {
      {"w.shard", DType::F32, {int64_t(shard)}, 0, 0},          // 0
      {"b", DType::F32, {N}, 0, bOff},                          // 1
      {"w.gathered", DType::F32, {int64_t(padded)}, 1, 0},      // 2
      {"w", DType::F32, {K, N}, 1, 0},                          // 3 (view of 2)
      {"x", DType::F32, {M, K}, 1, xOff},                       // 4
      {"h", DType::F32, {M, N}, 1, hOff},                       // 5
      {"y", DType::F32, {M, N}, 1, yOff},                       // 6
      {"y_sum", DType::F32, {M, N}, 1, sOff},                   // 7
  };
  p.globals.push_back({"w", "w", DType::F32, {K, N}, 0,
                       ShardSpec{world, numel, padded}});
  p.globals.push_back({"b", "b", DType::F32, {N}, 1, std::nullopt});
  p.streams = {{"compute", StreamKind::Compute}, {"comm", StreamKind::Comm}};
  p.numEvents = 2;
  p.inputs = {{"x", 4}};
  p.outputs = {{"y", 6}, {"y_sum", 7}};
  p.instructions = {
      makeInstruction("AllGather", 1, {0}, {2}, "gather.w"),
      makeEventOp(OpKind::Record, 1, 0),
      makeEventOp(OpKind::Wait, 0, 0),
      makeInstruction("MatMul", 0, {4, 3}, {5}, "linear/MatMul"),
      makeInstruction("Add", 0, {5, 1}, {6}, "linear/Add"),
      makeEventOp(OpKind::Record, 0, 1),
      makeEventOp(OpKind::Wait, 1, 1),
      makeInstruction("AllReduce", 1, {6}, {7}, "sum.y"),
  };

  // Small integers and halves: every sum below is exact in f32.
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      m.x.push_back(float((i + k) % 3) - 1.0f);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      m.w.push_back(float((k * 5 + n) % 4) - 1.5f);
  for (int64_t n = 0; n < N; ++n)
    m.b.push_back(0.5f * float(n));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) {
      float acc = m.b[n];
      for (int64_t k = 0; k < K; ++k)
        acc += m.x[i * K + k] * m.w[k * N + n];
      m.y.push_back(acc);
    }
  return m;
}

Status writeLinearModel(const std::string &dir, int world) {
  LinearModel m = makeLinearModel(world);
  constexpr int64_t M = LinearModel::M, K = LinearModel::K, N = LinearModel::N;
  ZRT_RETURN_IF_ERROR(writeFile(dir + "/model.zrt", serializeProgram(m.program)));
  ZRT_RETURN_IF_ERROR(writeSafetensors(
      dir + "/weights.safetensors",
      {{"b", DType::F32, {N}, m.b.data()}, {"w", DType::F32, {K, N}, m.w.data()}}));
  ZRT_RETURN_IF_ERROR(writeNpy(dir + "/x.npy", DType::F32, {M, K}, m.x.data()));
  std::vector<float> ySum;
  for (float v : m.y)
    ySum.push_back(v * float(world));
  return writeSafetensors(dir + "/expected.safetensors",
                          {{"y", DType::F32, {M, N}, m.y.data()},
                           {"y_sum", DType::F32, {M, N}, ySum.data()}});
}

TrainingModel makeTrainingModel(int world, int64_t batchPerRank,
                                int64_t dim) {
  const int64_t D = dim;
  TrainingModel m;
  m.D = dim;
  m.b = batchPerRank;
  const int64_t b = batchPerRank, B = b * world;
  Program &p = m.program;
  p.path = "train.zrt";
  p.version = kFormatVersion;
  p.worldSize = world;
  p.arenas = {{"params", 0, 0, 0}, {"activations", 0, 0, 0},
              {"constants", 0, 0, 0}};
  auto add = [&](const std::string &name, DType dtype,
                 std::vector<int64_t> shape, uint32_t arena) {
    BufferDesc d{name, dtype, std::move(shape), arena, p.arenas[arena].size};
    p.arenas[arena].size += (d.bytes() + 63) / 64 * 64;
    p.buffers.push_back(std::move(d));
    return uint32_t(p.buffers.size() - 1);
  };
  auto constant = [&](const std::string &name, DType dtype, const void *value) {
    uint32_t index = add(name, dtype, {}, 2);
    const auto *bytes = static_cast<const uint8_t *>(value);
    p.constants.push_back({index, std::vector<uint8_t>(
                                      bytes, bytes + dtypeSize(dtype))});
    return index;
  };
  const uint32_t w = add("w", DType::F32, {D}, 0);
  const uint32_t expAvg = add("w.exp_avg", DType::F32, {D}, 0);
  const uint32_t expAvgSq = add("w.exp_avg_sq", DType::F32, {D}, 0);
  const uint32_t step = add("step", DType::I64, {}, 0);
  const uint32_t x = add("x", DType::F32, {b, D}, 1);
  const uint32_t y = add("y", DType::F32, {b, D}, 1);
  const uint32_t wx = add("wx", DType::F32, {b, D}, 1);
  const uint32_t d = add("d", DType::F32, {b, D}, 1);
  const uint32_t dd = add("dd", DType::F32, {b, D}, 1);
  const uint32_t sum = add("sum", DType::F32, {}, 1);
  const uint32_t loss = add("loss", DType::F32, {}, 1);
  const uint32_t dx = add("dx", DType::F32, {b, D}, 1);
  const uint32_t gsum = add("gsum", DType::F32, {D}, 1);
  const uint32_t gLocal = add("g.local", DType::F32, {D}, 1);
  const uint32_t grad = add("grad", DType::F32, {D}, 1);
  const uint32_t sq = add("grad.sq", DType::F32, {}, 1);
  const uint32_t norm = add("grad_norm", DType::F32, {}, 1);
  const uint32_t normEps = add("grad_norm.eps", DType::F32, {}, 1);
  const uint32_t coef = add("clip_coef", DType::F32, {}, 1);
  const uint32_t scale = add("grad_scale", DType::F32, {}, 1);
  const uint32_t lr = add("lr", DType::F32, {}, 1);
  const float invB = 1.0f / float(b), twoOverB = 2.0f / float(B),
              eps = 1e-6f, maxNorm = float(m.maxNorm), one = 1.0f;
  const int64_t oneStep = 1;
  const uint32_t cInvB = constant("1/b", DType::F32, &invB);
  const uint32_t cTwoOverB = constant("2/B", DType::F32, &twoOverB);
  const uint32_t cEps = constant("1e-6", DType::F32, &eps);
  const uint32_t cMaxNorm = constant("max_norm", DType::F32, &maxNorm);
  const uint32_t cOne = constant("1.0", DType::F32, &one);
  const uint32_t cOneStep = constant("1", DType::I64, &oneStep);
  for (ArenaDesc &a : p.arenas) {
    a.noReuseSize = a.size;
    a.lowerBound = a.size;
  }
  m.wBuffer = w;
  m.lossBuffer = loss;
  m.counterBuffer = step;

  p.globals = {
      {"w", "w", DType::F32, {D}, w, std::nullopt, GlobalRole::Parameter},
      {"w.exp_avg", "w.exp_avg", DType::F32, {D}, expAvg, std::nullopt,
       GlobalRole::OptimizerState},
      {"w.exp_avg_sq", "w.exp_avg_sq", DType::F32, {D}, expAvgSq,
       std::nullopt, GlobalRole::OptimizerState},
      {"step", "step", DType::I64, {}, step, std::nullopt, GlobalRole::Counter},
  };
  p.streams = {{"compute", StreamKind::Compute}, {"comm", StreamKind::Comm}};
  p.numEvents = 2;
  p.inputs = {{"x", x}, {"y", y}};
  p.outputs = {{"loss", loss}, {"grad_norm", norm}, {"lr", lr}};
  p.training = TrainingDesc{"loss", "grad_norm", "lr", 1,
                            "adamw lr=warmup-decay betas=0.9,0.999"};

  auto floats = [](double v) { return AttrValue{{}, {v}, ""}; };
  auto ints = [](int64_t v) { return AttrValue{{v}, {}, ""}; };
  m.adamAttrs.set("beta1", floats(0.9));
  m.adamAttrs.set("beta2", floats(0.999));
  m.adamAttrs.set("eps", floats(1e-8));
  m.adamAttrs.set("weight_decay", floats(0.01));
  m.adamAttrs.set("decoupled", ints(1));
  m.lrAttrs.set("type", AttrValue{{}, {}, "WarmupDecayLR"});
  m.lrAttrs.set("warmup_min_lr", floats(0.01));
  m.lrAttrs.set("warmup_max_lr", floats(0.1));
  m.lrAttrs.set("warmup_num_steps", ints(3));
  m.lrAttrs.set("warmup_type", AttrValue{{}, {}, "linear"});
  m.lrAttrs.set("total_num_steps", ints(8));

  Instruction reduceAll = makeInstruction("ReduceSum", 0, {dd}, {sum}, "loss/sum");
  reduceAll.attrs.set("keepdims", ints(0));
  Instruction reduceRows = makeInstruction("ReduceSum", 0, {dx}, {gsum}, "grad/sum");
  reduceRows.attrs.set("axes", AttrValue{{0}, {}, ""});
  reduceRows.attrs.set("keepdims", ints(0));
  Instruction sumSquare =
      makeInstruction("ReduceSumSquare", 0, {grad}, {sq}, "clip/sumsq");
  sumSquare.attrs.set("keepdims", ints(0));
  Instruction schedule = makeInstruction("LrSchedule", 0, {step}, {lr}, "lr");
  schedule.attrs = m.lrAttrs;
  Instruction adam = makeInstruction(
      "AdamW", 0, {w, grad, step, lr, scale, expAvg, expAvgSq},
      {w, expAvg, expAvgSq}, "optimizer/w");
  adam.attrs = m.adamAttrs;
  p.instructions = {
      makeInstruction("Mul", 0, {w, x}, {wx}, "fwd/mul"),
      makeInstruction("Sub", 0, {wx, y}, {d}, "fwd/sub"),
      makeInstruction("Mul", 0, {d, d}, {dd}, "loss/square"),
      reduceAll,
      makeInstruction("Mul", 0, {sum, cInvB}, {loss}, "loss/mean"),
      makeInstruction("Mul", 0, {d, x}, {dx}, "grad/mul"),
      reduceRows,
      makeInstruction("Mul", 0, {gsum, cTwoOverB}, {gLocal}, "grad/scale"),
      makeEventOp(OpKind::Record, 0, 0),
      makeEventOp(OpKind::Wait, 1, 0),
      makeInstruction("AllReduce", 1, {gLocal}, {grad}, "grad/allreduce"),
      makeEventOp(OpKind::Record, 1, 1),
      makeEventOp(OpKind::Wait, 0, 1),
      sumSquare,
      makeInstruction("Sqrt", 0, {sq}, {norm}, "clip/sqrt"),
      makeInstruction("Add", 0, {norm, cEps}, {normEps}, "clip/add"),
      makeInstruction("Div", 0, {cMaxNorm, normEps}, {coef}, "clip/div"),
      makeInstruction("Min", 0, {coef, cOne}, {scale}, "clip/min"),
      makeInstruction("Add", 0, {step, cOneStep}, {step}, "step/increment"),
      schedule,
      adam,
  };
  return m;
}

} // namespace test
} // namespace zrt
