//===- Program.cpp - Reading .zrt files -----------------------------------===//
//
// Turns the bytes of a .zrt file into a zrt::Program. The order of the checks is
// what makes the messages useful: the file identifier first (is this a program
// at all?), then the format version read through a minimal verification of the
// root table (a newer format may not verify as this one, and "recompile" is the
// right advice then), then the full FlatBuffers verification, and only then the
// conversion into plain structs and validateProgram()'s index checks.
//
//===----------------------------------------------------------------------===//

#include "zrt/Program.h"

#include "zrt_generated.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <type_traits>

namespace zrt {

const char *opKindName(OpKind k) {
  switch (k) {
  case OpKind::Kernel: return "kernel";
  case OpKind::Record: return "Record";
  case OpKind::Wait: return "Wait";
  case OpKind::AllGather: return "AllGather";
  case OpKind::ReduceScatter: return "ReduceScatter";
  case OpKind::AllReduce: return "AllReduce";
  case OpKind::Broadcast: return "Broadcast";
  case OpKind::AllToAll: return "AllToAll";
  case OpKind::Send: return "Send";
  case OpKind::Recv: return "Recv";
  }
  return "?";
}

OpKind classifyOp(const std::string &op) {
  static const OpKind kinds[] = {
      OpKind::Record,    OpKind::Wait,          OpKind::AllGather,
      OpKind::ReduceScatter, OpKind::AllReduce, OpKind::Broadcast,
      OpKind::AllToAll,  OpKind::Send,          OpKind::Recv};
  for (OpKind k : kinds)
    if (op == opKindName(k))
      return k;
  return OpKind::Kernel;
}

const char *globalRoleName(GlobalRole role) {
  switch (role) {
  case GlobalRole::Parameter: return "Parameter";
  case GlobalRole::Frozen: return "Frozen";
  case GlobalRole::OptimizerState: return "OptimizerState";
  case GlobalRole::Counter: return "Counter";
  }
  return "?";
}

bool Program::hasInOrderPlan() const {
  for (const ArenaDesc &a : arenas)
    if (a.inOrderSize > 0)
      return true;
  return false;
}

void Program::useInOrderPlan(bool inOrder) {
  if (inOrder == inOrderPlanInUse)
    return;
  inOrderPlanInUse = inOrder;
  for (ArenaDesc &a : arenas)
    a.size = std::max(a.size, a.inOrderSize);
  for (BufferDesc &b : buffers)
    if (b.inOrderOffset >= 0) {
      const int64_t other = int64_t(b.offset);
      b.offset = uint64_t(b.inOrderOffset);
      b.inOrderOffset = other;
    }
}

std::string Program::describeInstruction(size_t index) const {
  std::ostringstream os;
  os << "instruction " << index;
  if (index < instructions.size()) {
    const Instruction &inst = instructions[index];
    os << " (" << inst.op;
    if (!inst.loc.empty())
      os << " at \"" << inst.loc << "\"";
    os << ")";
  }
  return os.str();
}

std::string Program::describeBuffer(uint32_t index) const {
  std::ostringstream os;
  os << "buffer " << index;
  if (index >= buffers.size())
    return os.str();
  const BufferDesc &b = buffers[index];
  if (!b.name.empty())
    os << " \"" << b.name << "\"";
  os << " (" << dtypeName(b.dtype) << "[" << shapeString(b.shape) << "]";
  if (b.arena < arenas.size()) {
    os << " in arena " << b.arena;
    if (!arenas[b.arena].name.empty())
      os << " \"" << arenas[b.arena].name << "\"";
  }
  os << " at offset " << b.offset << ")";
  return os.str();
}

namespace {

std::string str(const flatbuffers::String *s) {
  return s ? s->str() : std::string();
}

/// The elements of a vector of scalars. The verifier checks only the 4-byte
/// alignment of a vector's length, so the elements of a [long] or [double]
/// may sit at any multiple of 4 in a damaged file: they are copied out with
/// memcpy rather than read through a pointer of their type.
template <typename T, typename U>
std::vector<T> vec(const flatbuffers::Vector<U> *v) {
  static_assert(std::is_scalar<U>::value, "vectors of scalars only");
  std::vector<T> out;
  if (v) {
    out.reserve(v->size());
    const uint8_t *p = v->Data();
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
      U x;
      std::memcpy(&x, p + size_t(i) * sizeof(U), sizeof(U));
      out.push_back(T(flatbuffers::EndianScalar(x)));
    }
  }
  return out;
}

/// Reads only the root table's `version`, verifying just the bytes that takes.
/// Returns false when even that much of the file is malformed.
bool peekVersion(const uint8_t *data, size_t size, uint32_t &version) {
  flatbuffers::Verifier verifier(data, size);
  if (size < 8 || !verifier.VerifyAlignment(0, sizeof(flatbuffers::uoffset_t)))
    return false;
  if (flatbuffers::ReadScalar<flatbuffers::uoffset_t>(data) >= size)
    return false;
  // The generated Program derives privately from Table; read it as a Table.
  const auto *table = flatbuffers::GetRoot<flatbuffers::Table>(data);
  if (!table->VerifyTableStart(verifier) ||
      !table->VerifyField<uint32_t>(verifier, fb::Program::VT_VERSION, 4))
    return false;
  version = table->GetField<uint32_t>(fb::Program::VT_VERSION, 0);
  return true;
}

/// The error of a table entry (`what`) whose dtype `dt` is none of fb::DType's.
Status badDType(const std::string &name, const std::string &what, int dt) {
  return Status::error(name + ": " + what + " has unknown dtype " +
                       std::to_string(dt) + " (known: 0-" +
                       std::to_string(int(fb::DType_MAX)) + ")");
}

/// Appends the file's buffers to `p`; fails on the first of unknown dtype.
Status convertBuffers(const fb::Program &fp, const std::string &name, Program &p) {
  if (auto *buffers = fp.buffers()) {
    for (const fb::Buffer *b : *buffers) {
      BufferDesc d;
      d.name = str(b->name());
      if (b->dtype() < fb::DType_MIN || b->dtype() > fb::DType_MAX)
        return badDType(name, "buffer " + std::to_string(p.buffers.size()), b->dtype());
      d.dtype = DType(b->dtype());
      d.shape = vec<int64_t>(b->shape());
      d.arena = b->arena();
      d.offset = b->offset();
      d.inOrderOffset = b->in_order_offset();
      p.buffers.push_back(std::move(d));
    }
  }
  return Status::ok();
}

/// Appends the file's globals to `p`; fails on the first of unknown dtype,
/// role or held gradient's dtype (checked in that order).
Status convertGlobals(const fb::Program &fp, const std::string &name, Program &p) {
  if (auto *globals = fp.globals()) {
    for (const fb::Global *g : *globals) {
      GlobalDesc d;
      d.name = str(g->name());
      d.tensor = str(g->tensor());
      if (g->dtype() < fb::DType_MIN || g->dtype() > fb::DType_MAX)
        return badDType(name,
                        "global " + std::to_string(p.globals.size()) + " \"" +
                            d.name + "\"",
                        g->dtype());
      d.dtype = DType(g->dtype());
      d.shape = vec<int64_t>(g->shape());
      d.buffer = g->buffer();
      if (const fb::ShardSpec *s = g->shard())
        d.shard = ShardSpec{s->world(), s->numel(), s->padded_numel()};
      if (g->role() < fb::GlobalRole_MIN || g->role() > fb::GlobalRole_MAX)
        return Status::error(name + ": global " +
                             std::to_string(p.globals.size()) + " \"" + d.name +
                             "\" has unknown role " + std::to_string(g->role()) +
                             " (known: 0-" + std::to_string(int(fb::GlobalRole_MAX)) +
                             ")");
      d.role = GlobalRole(g->role());
      if (const fb::HeldGradient *h = g->gradient()) {
        if (h->dtype() < fb::DType_MIN || h->dtype() > fb::DType_MAX)
          return badDType(name,
                          "the gradient of global " + std::to_string(p.globals.size()) +
                              " \"" + d.name + "\"",
                          h->dtype());
        d.gradient = HeldGradient{DType(h->dtype()), h->numel()};
      }
      d.widenFrom = g->widen_from();
      p.globals.push_back(std::move(d));
    }
  }
  return Status::ok();
}

/// Appends the file's instructions to `p`, each with its kind (classifyOp)
/// and attributes.
void convertInstructions(const fb::Program &fp, Program &p) {
  if (auto *instructions = fp.instructions()) {
    p.instructions.reserve(instructions->size());
    for (const fb::Instruction *i : *instructions) {
      Instruction d;
      d.op = i->op()->str();
      d.kind = classifyOp(d.op);
      d.stream = i->stream();
      d.inputs = vec<uint32_t>(i->inputs());
      d.outputs = vec<uint32_t>(i->outputs());
      d.event = i->event();
      d.group = i->group();
      d.ranks = vec<int>(i->ranks());
      d.loc = str(i->loc());
      d.eval = i->eval();
      d.flops = i->flops();
      if (auto *attrs = i->attrs()) {
        for (const fb::Attr *a : *attrs) {
          AttrValue v;
          v.ints = vec<int64_t>(a->ints());
          v.floats = vec<double>(a->floats());
          v.str = str(a->str());
          d.attrs.set(a->name()->str(), std::move(v));
        }
      }
      p.instructions.push_back(std::move(d));
    }
  }
}

/// The training table of a training program.
TrainingDesc convertTraining(const fb::Training &t) {
  TrainingDesc d;
  d.loss = str(t.loss());
  d.gradNorm = str(t.grad_norm());
  d.lr = str(t.lr());
  d.accumulationSteps = t.accumulation_steps();
  d.optimizer = str(t.optimizer());
  d.lossScale = str(t.loss_scale());
  d.stepsPerPrint = t.steps_per_print();
  d.csvMonitor = str(t.csv_monitor());
  d.skipped = str(t.skipped());
  return d;
}

/// The file's root table as a Program: its tables in file order (arenas,
/// buffers, constants, globals, streams, groups, bindings, instructions,
/// training), failing at the first entry of an unknown dtype, role or kind.
Expected<Program> convert(const fb::Program &fp, const std::string &name) {
  Program p;
  p.path = name;
  p.version = fp.version();
  p.worldSize = fp.world_size();
  p.pipelineDp = fp.pipeline_dp();
  p.numEvents = fp.num_events();

  if (auto *arenas = fp.arenas())
    for (const fb::Arena *a : *arenas)
      p.arenas.push_back(
          {str(a->name()), a->size(), a->no_reuse_size(), a->lower_bound(),
           a->in_order_size(), str(a->path()), a->host()});

  ZRT_RETURN_IF_ERROR(convertBuffers(fp, name, p));

  if (auto *constants = fp.constants()) {
    for (const fb::Constant *c : *constants) {
      ConstantDesc d;
      d.buffer = c->buffer();
      if (c->data())
        d.data.assign(c->data()->begin(), c->data()->end());
      p.constants.push_back(std::move(d));
    }
  }

  ZRT_RETURN_IF_ERROR(convertGlobals(fp, name, p));

  if (auto *streams = fp.streams()) {
    for (const fb::Stream *s : *streams) {
      if (s->kind() < fb::StreamKind_MIN || s->kind() > fb::StreamKind_MAX)
        return Status::error(name + ": stream " +
                             std::to_string(p.streams.size()) +
                             " has unknown kind " + std::to_string(s->kind()));
      p.streams.push_back({str(s->name()), StreamKind(s->kind())});
    }
  }

  if (auto *groups = fp.groups())
    for (const fb::ProcessGroup *g : *groups)
      p.groups.push_back(
          {str(g->name()), vec<int>(g->ranks()), g->group_size()});

  for (auto [from, to] : {std::make_pair(fp.inputs(), &p.inputs),
                          std::make_pair(fp.outputs(), &p.outputs)})
    if (from)
      for (const fb::Binding *b : *from)
        to->push_back({str(b->name()), b->buffer()});

  convertInstructions(fp, p);

  if (const fb::Training *t = fp.training())
    p.training = convertTraining(*t);
  return p;
}

} // namespace

uint64_t hashBytes(const void *bytes, size_t size, uint64_t seed) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  const auto *p = static_cast<const uint8_t *>(bytes);
  uint64_t h = seed;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word = 0;
    for (int b = 7; b >= 0; --b) // little-endian, whatever the host
      word = (word << 8) | p[i + size_t(b)];
    h = (h ^ word) * kPrime;
  }
  for (; i < size; ++i)
    h = (h ^ p[i]) * kPrime;
  return h;
}

Expected<Program> parseProgram(const void *bytes, size_t size,
                               const std::string &name,
                               const KernelTable *kernels) {
  // FlatBuffers reads scalars through typed pointers once the verifier has
  // checked their alignment relative to the start of the buffer; that is only
  // the real alignment when the buffer itself starts 8-byte aligned.
  std::vector<uint64_t> alignedCopy;
  if (reinterpret_cast<uintptr_t>(bytes) % alignof(uint64_t) != 0) {
    alignedCopy.resize((size + 7) / 8);
    if (size > 0)
      std::memcpy(alignedCopy.data(), bytes, size);
    bytes = alignedCopy.data();
  }
  const auto *data = static_cast<const uint8_t *>(bytes);
  const std::string recompile = "; recompile it with zero-opt --emit=zrt";
  if (size < 8)
    return Status::error(name + ": file too short to be a zrt program (" +
                         std::to_string(size) + " bytes)");
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return Status::error(name + ": file too large for a zrt program (" +
                         std::to_string(size) + " bytes, at most 2 GiB)");
  if (!fb::ProgramBufferHasIdentifier(data)) {
    std::string id(reinterpret_cast<const char *>(data) + 4, 4);
    for (char &c : id)
      if (c < 32 || c > 126)
        c = '?';
    return Status::error(name + ": not a zrt program (file identifier \"" + id +
                         "\", expected \"" + fb::ProgramIdentifier() + "\")");
  }
  uint32_t version = 0;
  if (!peekVersion(data, size, version))
    return Status::error(name + ": corrupted or truncated program file (its "
                                "root table is malformed)" + recompile);
  if (version != kFormatVersion)
    return Status::error(name + ": program format version " +
                         std::to_string(version) + ", this zero-run reads version " +
                         std::to_string(kFormatVersion) +
                         "; recompile with the matching zero-opt");

  flatbuffers::Verifier::Options options;
  options.max_tables = 1u << 30; // large models have many instructions
  options.max_depth = 16;
  flatbuffers::Verifier verifier(data, size, options);
  if (!fb::VerifyProgramBuffer(verifier))
    return Status::error(name + ": corrupted or truncated program file "
                                "(FlatBuffers verification failed)" + recompile);

  Expected<Program> program = convert(*fb::GetProgram(data), name);
  if (!program)
    return program;
  program->contentHash = hashBytes(data, size);
  ZRT_RETURN_IF_ERROR(validateProgram(*program, kernels));
  return program;
}

Expected<Program> loadProgram(const std::string &path,
                              const KernelTable *kernels) {
  // A directory opens as a stream on Linux and reports a nonsensical size.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::error(path + ": is a directory, not a .zrt program");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return Status::error(path + ": cannot open program file: " +
                         std::strerror(errno));
  std::streamoff size = in.tellg();
  if (size < 0)
    return Status::error(path + ": cannot determine the file size");
  // A vector of uint64_t keeps the data 8-byte aligned for the verifier.
  std::vector<uint64_t> storage((size_t(size) + 7) / 8);
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char *>(storage.data()), size))
    return Status::error(path + ": cannot read program file: " +
                         std::strerror(errno));
  return parseProgram(storage.data(), size_t(size), path, kernels);
}

} // namespace zrt
