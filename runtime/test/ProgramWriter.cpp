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
                                     a.noReuseSize, a.lowerBound));
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (const BufferDesc &b : p.buffers)
    buffers.push_back(fb::CreateBuffer(fbb, optString(b.name),
                                       fb::DType(b.dtype),
                                       fbb.CreateVector(b.shape), b.arena,
                                       b.offset));
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
    globals.push_back(fb::CreateGlobal(fbb, optString(g.name),
                                       optString(g.tensor), fb::DType(g.dtype),
                                       fbb.CreateVector(g.shape), g.buffer,
                                       shard));
  }
  std::vector<flatbuffers::Offset<fb::Stream>> streams;
  for (const StreamDesc &s : p.streams)
    streams.push_back(
        fb::CreateStream(fbb, optString(s.name), fb::StreamKind(s.kind)));
  std::vector<flatbuffers::Offset<fb::ProcessGroup>> groups;
  for (const ProcessGroupDesc &g : p.groups)
    groups.push_back(fb::CreateProcessGroup(fbb, optString(g.name),
                                            fbb.CreateVector(g.ranks)));
  auto bindings = [&](const std::vector<BindingDesc> &list) {
    std::vector<flatbuffers::Offset<fb::Binding>> out;
    for (const BindingDesc &b : list)
      out.push_back(fb::CreateBinding(fbb, optString(b.name), b.buffer));
    return fbb.CreateVector(out);
  };
  auto inputs = bindings(p.inputs);
  auto outputs = bindings(p.outputs);

  // AttrMap has no iteration; tests record attributes through the names the
  // runtime reads.
  static const char *kAttrNames[] = {"root", "peer", "tag", "axis", "alpha",
                                     "beta", "transA", "transB", "value"};
  std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
  for (const Instruction &i : p.instructions) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const char *name : kAttrNames) {
      if (!i.attrs.has(name))
        continue;
      std::vector<int64_t> ints = i.attrs.getInts(name);
      double f = i.attrs.getFloat(name, 0);
      std::vector<double> floats;
      if (ints.empty())
        floats.push_back(f);
      attrs.push_back(fb::CreateAttr(fbb, fbb.CreateString(name),
                                     fbb.CreateVector(ints),
                                     fbb.CreateVector(floats)));
    }
    instructions.push_back(fb::CreateInstruction(
        fbb, fbb.CreateString(i.op), i.stream, fbb.CreateVector(i.inputs),
        fbb.CreateVector(i.outputs), fbb.CreateVector(attrs), i.event, i.group,
        optString(i.loc),
        i.ranks.empty() ? flatbuffers::Offset<flatbuffers::Vector<int32_t>>()
                        : fbb.CreateVector(i.ranks)));
  }

  auto root = fb::CreateProgram(
      fbb, p.version, p.worldSize, fbb.CreateVector(arenas),
      fbb.CreateVector(buffers), fbb.CreateVector(constants),
      fbb.CreateVector(globals), fbb.CreateVector(streams), p.numEvents,
      fbb.CreateVector(groups), inputs, outputs, fbb.CreateVector(instructions));
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

} // namespace test
} // namespace zrt
