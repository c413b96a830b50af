//===- Bindings.cpp - Weights, inputs and outputs of a program ------------===//
//
// The ZeRO-3 read path: a sharded global's buffer holds elements [r*s, (r+1)*s)
// of the flattened, zero-padded tensor, so rank r reads the byte range of the real
// elements among those straight from the weights file (into the arena when the
// backend's memory is host accessible, else through a staging copy) and writes
// zeros over the padding (the arena may hold data of an earlier run).
//
//===----------------------------------------------------------------------===//

#include "zrt/Bindings.h"

#include "math/HalfMath.h"

#include <cstring>
#include <fstream>
#include <map>
#include <tuple>
#include <vector>

namespace zrt {

namespace {

std::string typeString(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeName(dtype)) + "[" + shapeString(shape) + "]";
}

/// Copies `bytes` from `read` (a function filling a host buffer) into buffer
/// `index` at `offset`, directly when the memory is host accessible.
template <typename ReadFn>
Status fill(Executor &executor, uint32_t index, uint64_t offset, uint64_t bytes,
            ReadFn read) {
  if (void *host = executor.hostAddress(index))
    return read(static_cast<uint8_t *>(host) + offset);
  std::vector<uint8_t> staging(static_cast<size_t>(bytes));
  ZRT_RETURN_IF_ERROR(read(staging.data()));
  return executor.writeBuffer(index, staging.data(), bytes, offset);
}

/// Whether `path` starts with the .npy magic.
bool isNpyFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[6] = {};
  return in.read(magic, sizeof magic) &&
         std::memcmp(magic, "\x93NUMPY", sizeof magic) == 0;
}

} // namespace

Status zeroGlobal(Executor &executor, const GlobalDesc &global) {
  const BufferDesc &buffer = executor.program().buffers[global.buffer];
  // A swap file starts as zeros: writing them would only bring its pages in.
  if (!executor.program().arenas[buffer.arena].path.empty())
    return Status::ok();
  const uint64_t bytes = buffer.bytes();
  if (void *host = executor.hostAddress(global.buffer)) {
    std::memset(host, 0, size_t(bytes));
    return Status::ok();
  }
  std::vector<uint8_t> zeros(size_t(bytes), 0);
  return executor.writeBuffer(global.buffer, zeros.data(), bytes);
}

size_t countWeightGlobals(const Program &program) {
  size_t n = 0;
  for (const GlobalDesc &g : program.globals)
    n += readsWeights(g.role) ? 1 : 0;
  return n;
}

/// Global `g` (an fp32 master, GlobalDesc::widenFrom) as its 16-bit
/// parameter widened: the rank's shard of the flattened parameter (zeros
/// past its end) when `g` is sharded, whichever way the parameter is held.
static Status widenInto(Executor &executor, const GlobalDesc &g, int rank) {
  const Program &p = executor.program();
  const GlobalDesc &from = p.globals[size_t(g.widenFrom)];
  const BufferDesc &dst = p.buffers[g.buffer];
  const BufferDesc &src = p.buffers[from.buffer];
  std::vector<uint16_t> bits(size_t(src.numel()));
  ZRT_RETURN_IF_ERROR(executor.readBuffer(from.buffer, bits.data(), src.bytes()));
  // The elements of the parameter's buffer that land in g's: all of them,
  // or (g sharded over a whole parameter) the rank's range.
  uint64_t first = 0, last = uint64_t(src.numel());
  if (g.shard && !from.shard)
    std::tie(first, last) = g.shard->range(rank % p.dataParallelSize());
  std::vector<float> wide(size_t(dst.numel()), 0.0f);
  for (uint64_t i = first; i < last && i - first < wide.size(); ++i)
    wide[size_t(i - first)] = from.dtype == DType::BF16 ? math::bfloat16ToFloat(bits[size_t(i)])
                                                        : math::halfToFloat(bits[size_t(i)]);
  return executor.writeBuffer(g.buffer, wide.data(), dst.bytes());
}

/// Starts every master (widenFrom) this rank holds as its parameter widened;
/// call after the parameters are loaded.
static Status initMasters(Executor &executor, const std::vector<bool> &used, int rank) {
  const Program &p = executor.program();
  for (size_t gi = 0; gi < p.globals.size(); ++gi)
    if (used[gi] && p.globals[gi].widenFrom >= 0)
      ZRT_RETURN_IF_ERROR(widenInto(executor, p.globals[gi], rank));
  return Status::ok();
}

Status zeroStateGlobals(Executor &executor, int rank) {
  for (const GlobalDesc &g : executor.program().globals)
    if (!readsWeights(g.role))
      ZRT_RETURN_IF_ERROR(zeroGlobal(executor, g));
  const Program &p = executor.program();
  return initMasters(executor, globalsUsedOn(p, rank), rank);
}

std::vector<bool> globalsUsedOn(const Program &p, int rank) {
  std::vector<bool> used(p.globals.size(), true);
  bool limited = false; // instructions for some ranks only (a pipeline's)
  for (const Instruction &inst : p.instructions)
    limited |= !inst.ranks.empty();
  if (!limited)
    return used;
  std::vector<bool> bufferUsed(p.buffers.size(), false);
  for (const Instruction &inst : p.instructions)
    if (inst.runsOn(rank)) {
      for (uint32_t b : inst.inputs)
        bufferUsed[b] = true;
      for (uint32_t b : inst.outputs)
        bufferUsed[b] = true;
    }
  if (rank == 0)
    for (const BindingDesc &o : p.outputs)
      bufferUsed[o.buffer] = true;
  for (size_t gi = 0; gi < p.globals.size(); ++gi) {
    const BufferDesc &g = p.buffers[p.globals[gi].buffer];
    used[gi] = false;
    for (size_t b = 0; b < p.buffers.size() && !used[gi]; ++b) {
      const BufferDesc &o = p.buffers[b];
      used[gi] = bufferUsed[b] && o.arena == g.arena && o.offset < g.offset + g.bytes() &&
                 g.offset < o.offset + o.bytes();
    }
  }
  return used;
}

std::vector<std::vector<int>> stagesHoldingGlobals(const Program &p) {
  if (!p.pipelined())
    return std::vector<std::vector<int>>(p.globals.size(), std::vector<int>{0});
  const int dp = p.dataParallelSize();
  std::vector<std::vector<int>> stages(p.globals.size());
  for (int s = 0; s < p.worldSize / dp; ++s) {
    std::vector<bool> everyRank(p.globals.size(), true);
    for (int r = s * dp; r < (s + 1) * dp; ++r) {
      const std::vector<bool> used = globalsUsedOn(p, r);
      for (size_t gi = 0; gi < used.size(); ++gi)
        everyRank[gi] = everyRank[gi] && used[gi];
    }
    for (size_t gi = 0; gi < everyRank.size(); ++gi)
      if (everyRank[gi])
        stages[gi].push_back(s);
  }
  return stages;
}

Status loadGlobals(Executor &executor, const SafetensorsFile &weights, int rank,
                   WeightsStats *stats) {
  const Program &p = executor.program();
  uint64_t readBefore = weights.bytesRead();
  WeightsStats local;
  // A pipeline stage loads only the weights its own instructions read: the
  // rest of the parameter arena is never touched, so never resident.
  const std::vector<bool> used = globalsUsedOn(p, rank);
  for (size_t gi = 0; gi < p.globals.size(); ++gi) {
    const GlobalDesc &g = p.globals[gi];
    if (!used[gi])
      continue;
    if (!readsWeights(g.role)) {
      // Optimizer state and the step counter start at zero.
      ZRT_RETURN_IF_ERROR(zeroGlobal(executor, g));
      local.residentBytes += p.buffers[g.buffer].bytes();
      continue;
    }
    std::string where = weights.path() + ": weight \"" + g.tensor + "\"" +
                        (g.name != g.tensor ? " (global " + g.name + ")" : "");
    const SafetensorsEntry *e = weights.find(g.tensor);
    if (!e)
      return Status::error(where + " is missing from the weights file (" +
                           std::to_string(weights.entries().size()) +
                           " tensors); expected " + typeString(g.dtype, g.shape));
    // A 16-bit program (zero-mixed-precision, DeepSpeed's bf16/fp16) takes
    // the f32 weights rounded to nearest even, as module.bfloat16() does.
    const bool rounded = e->dtype == DType::F32 &&
                         (g.dtype == DType::BF16 || g.dtype == DType::F16);
    if (e->dtype != g.dtype && !rounded)
      return Status::error(where + " has dtype " + safetensorsDTypeName(e->dtype) +
                           ", the program expects " +
                           safetensorsDTypeName(g.dtype));
    if (e->shape != g.shape)
      return Status::error(where + " has shape [" + shapeString(e->shape) +
                           "], the program expects [" + shapeString(g.shape) +
                           "]");
    const BufferDesc &b = p.buffers[g.buffer];
    uint64_t elem = dtypeSize(g.dtype);
    uint64_t first = 0, last = uint64_t(e->numel());
    if (g.shard) // the rank's position among its stage's replicas (or the world)
      std::tie(first, last) = g.shard->range(rank % p.dataParallelSize());
    uint64_t bytes = (last - first) * elem;
    ZRT_RETURN_IF_ERROR(fill(executor, g.buffer, 0, bytes, [&](void *dst) {
      if (!rounded)
        return weights.read(*e, first * elem, bytes, dst);
      std::vector<float> wide(size_t(last - first));
      ZRT_RETURN_IF_ERROR(weights.read(*e, first * 4, (last - first) * 4, wide.data()));
      auto *out = static_cast<uint16_t *>(dst);
      for (size_t i = 0; i < wide.size(); ++i)
        out[i] = g.dtype == DType::BF16 ? math::floatToBfloat16(wide[i])
                                        : math::floatToHalf(wide[i]);
      return Status::ok();
    }));
    if (uint64_t padding = b.bytes() - bytes) {
      std::vector<uint8_t> zeros(size_t(padding), 0);
      ZRT_RETURN_IF_ERROR(
          executor.writeBuffer(g.buffer, zeros.data(), padding, bytes));
    }
    local.residentBytes += b.bytes();
  }
  ZRT_RETURN_IF_ERROR(initMasters(executor, used, rank));
  local.bytesRead = weights.bytesRead() - readBefore;
  if (stats)
    *stats = local;
  return Status::ok();
}

uint64_t weightsLayoutHash(const Program &program,
                           const SafetensorsFile &weights) {
  uint64_t h = kHashSeed;
  auto mix = [&h](uint64_t value) { h = hashBytes(&value, sizeof value, h); };
  for (const GlobalDesc &g : program.globals) {
    if (!readsWeights(g.role))
      continue; // never looked up in the weights file
    h = hashBytes(g.tensor.data(), g.tensor.size(), h);
    mix(g.tensor.size());
    const SafetensorsEntry *e = weights.find(g.tensor);
    mix(e ? 1 : 0);
    if (!e)
      continue;
    mix(uint64_t(e->dtype));
    mix(e->shape.size());
    for (int64_t d : e->shape)
      mix(uint64_t(d));
    mix(e->fileOffset);
    mix(e->bytes);
  }
  return h;
}

Status bindInputs(Executor &executor, const std::vector<InputSource> &sources) {
  const Program &p = executor.program();
  std::map<std::string, uint32_t> inputs;
  for (const BindingDesc &b : p.inputs)
    inputs[b.name] = b.buffer;
  auto expected = [&](uint32_t buffer) {
    return typeString(p.buffers[buffer].dtype, p.buffers[buffer].shape);
  };
  auto check = [&](const std::string &name, const std::string &file, DType dtype,
                   const std::vector<int64_t> &shape, uint32_t buffer) {
    const BufferDesc &b = p.buffers[buffer];
    if (dtype != b.dtype || shape != b.shape)
      return Status::error(file + ": input \"" + name + "\" is " +
                           typeString(dtype, shape) + ", the program expects " +
                           expected(buffer));
    return Status::ok();
  };

  std::map<std::string, std::string> boundFrom;
  auto bind = [&](const std::string &name, const std::string &file) {
    auto [it, inserted] = boundFrom.emplace(name, file);
    if (!inserted)
      return Status::error("input \"" + name + "\" is given twice (" +
                           it->second + " and " + file + ")");
    return Status::ok();
  };

  for (const InputSource &src : sources) {
    if (!src.name.empty()) {
      auto it = inputs.find(src.name);
      if (it == inputs.end()) {
        std::string names;
        for (const BindingDesc &b : p.inputs)
          names += (names.empty() ? "" : ", ") + b.name;
        return Status::error("--input " + src.name + "=" + src.path +
                             ": the program has no input \"" + src.name +
                             "\" (its inputs: " +
                             (names.empty() ? "none" : names) + ")");
      }
      Expected<NpyArray> array = readNpy(src.path);
      if (!array)
        return array.status();
      ZRT_RETURN_IF_ERROR(
          check(src.name, src.path, array->dtype, array->shape, it->second));
      ZRT_RETURN_IF_ERROR(bind(src.name, src.path));
      ZRT_RETURN_IF_ERROR(executor.writeBuffer(it->second, array->data.data(),
                                               array->data.size()));
      continue;
    }
    if (isNpyFile(src.path))
      return Status::error("--input " + src.path +
                           ": .npy inputs need NAME=FILE.npy (the program "
                           "input's name); pass --input NAME=" + src.path);
    Expected<SafetensorsFile> file = SafetensorsFile::open(src.path);
    if (!file)
      return file.status();
    for (const SafetensorsEntry &e : file->entries()) {
      auto it = inputs.find(e.name);
      if (it == inputs.end())
        continue;
      ZRT_RETURN_IF_ERROR(check(e.name, src.path, e.dtype, e.shape, it->second));
      ZRT_RETURN_IF_ERROR(bind(e.name, src.path));
      ZRT_RETURN_IF_ERROR(fill(executor, it->second, 0, e.bytes, [&](void *dst) {
        return file->read(e, 0, e.bytes, dst);
      }));
    }
  }
  for (const BindingDesc &b : p.inputs)
    if (!boundFrom.count(b.name))
      return Status::error("input \"" + b.name + "\" (" + expected(b.buffer) +
                           ") is not given; pass --input " + b.name +
                           "=FILE.npy or a safetensors file with a tensor \"" +
                           b.name + "\"");
  return Status::ok();
}

Status writeOutputs(const Executor &executor, const std::string &path) {
  const Program &p = executor.program();
  std::vector<std::vector<uint8_t>> data;
  std::vector<NamedTensor> tensors;
  data.reserve(p.outputs.size());
  for (const BindingDesc &b : p.outputs) {
    const BufferDesc &d = p.buffers[b.buffer];
    data.emplace_back(size_t(d.bytes()));
    ZRT_RETURN_IF_ERROR(
        executor.readBuffer(b.buffer, data.back().data(), d.bytes()));
    tensors.push_back({b.name, d.dtype, d.shape, data.back().data()});
  }
  return writeSafetensors(path, tensors);
}

} // namespace zrt
