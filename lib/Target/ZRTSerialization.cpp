//===- ZRTSerialization.cpp - zrt.program -> .zrt file --------------------===//
//
// One pass over the program's ops in order: declarations become the tables of
// the FlatBuffer, instructions keep their order (each stream runs its own in
// that order). Symbol references become indices. Kernel parameters become
// named Attr entries (integers and integer arrays as `ints`, floats as
// `floats`, strings as `str`).
//
//===----------------------------------------------------------------------===//

#include "zero/Target/ZRTSerialization.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Target/zrt_generated.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace zero;

namespace {

FailureOr<::zrt::fb::DType> dtypeOf(Operation *op, Type t) {
  if (auto rt = dyn_cast<ShapedType>(t))
    t = rt.getElementType();
  if (t.isF32()) return ::zrt::fb::DType_F32;
  if (t.isF16()) return ::zrt::fb::DType_F16;
  if (t.isBF16()) return ::zrt::fb::DType_BF16;
  if (t.isF64()) return ::zrt::fb::DType_F64;
  if (t.isInteger(1)) return ::zrt::fb::DType_Bool;
  if (t.isInteger(64)) return ::zrt::fb::DType_I64;
  if (t.isInteger(32)) return ::zrt::fb::DType_I32;
  if (t.isUnsignedInteger(8)) return ::zrt::fb::DType_U8;
  if (t.isInteger(8)) return ::zrt::fb::DType_I8;
  op->emitOpError() << "element type " << t << " has no runtime dtype";
  return failure();
}

/// The raw little-endian bytes of a constant (i1 as one byte per element).
std::vector<uint8_t> constantBytes(ElementsAttr value) {
  std::vector<uint8_t> out;
  auto dense = cast<DenseElementsAttr>(value);
  Type elem = dense.getElementType();
  int64_t n = dense.getNumElements();
  if (elem.isInteger(1)) {
    for (bool v : dense.getValues<bool>())
      out.push_back(v ? 1 : 0);
    return out;
  }
  size_t width = elem.getIntOrFloatBitWidth() / 8;
  out.resize(n * width);
  auto put = [&](int64_t i, uint64_t bits) {
    for (size_t k = 0; k < width; ++k)
      out[i * width + k] = uint8_t(bits >> (8 * k));
  };
  if (isa<FloatType>(elem)) {
    int64_t i = 0;
    for (APFloat v : dense.getValues<APFloat>())
      put(i++, v.bitcastToAPInt().getZExtValue());
  } else {
    int64_t i = 0;
    for (APInt v : dense.getValues<APInt>())
      put(i++, v.getZExtValue());
  }
  return out;
}

std::string locString(Location loc) {
  if (auto n = dyn_cast<NameLoc>(loc))
    return n.getName().str();
  if (auto f = dyn_cast<FusedLoc>(loc))
    for (Location l : f.getLocations())
      if (std::string s = locString(l); !s.empty())
        return s;
  return "";
}

/// The `ranks` of an instruction run by some ranks only (empty: all of them).
std::vector<int32_t> ranksOf(std::optional<ArrayRef<int64_t>> ranks) {
  std::vector<int32_t> out;
  if (ranks)
    out.assign(ranks->begin(), ranks->end());
  return out;
}

using AttrOffsets = std::vector<flatbuffers::Offset<::zrt::fb::Attr>>;

/// The FlatBuffer of one zrt.program under construction: its tables, filled
/// in program order, and the index each declared symbol got in its table.
class ProgramWriter {
public:
  LogicalResult add(Operation &op);
  void finish(::zero::zrt::ProgramOp program, std::string &out);

private:
  FailureOr<uint32_t> index(Operation *op, llvm::StringMap<uint32_t> &map,
                            FlatSymbolRefAttr ref);
  FailureOr<std::vector<uint32_t>> bufferIndices(Operation *op, ArrayAttr refs);
  FailureOr<AttrOffsets> kernelParams(Operation *op, DictionaryAttr params);

  void declareStream(::zero::zrt::StreamOp s);
  void declareGroup(::zero::zrt::GroupOp g);
  void declareArena(::zero::zrt::ArenaOp a);
  LogicalResult declareBuffer(::zero::zrt::BufferOp b);
  LogicalResult addConstant(::zero::zrt::ConstantOp c);
  LogicalResult addGlobal(::zero::zrt::GlobalOp g);
  template <typename BindingOp>
  LogicalResult
  addBinding(BindingOp b,
             std::vector<flatbuffers::Offset<::zrt::fb::Binding>> &table);
  LogicalResult addKernel(::zero::zrt::KernelOp k);
  LogicalResult addCollective(::zero::zrt::CollectiveOp c);
  template <typename EventOp>
  LogicalResult addEvent(EventOp ev, const char *name);
  flatbuffers::Offset<::zrt::fb::Training>
  training(::zero::zrt::ProgramOp program);

  flatbuffers::FlatBufferBuilder fbb{1 << 16};
  llvm::StringMap<uint32_t> buffers, streams, arenas, groups;
  /// Each global's index in the table, by name (filled before any is added).
  llvm::StringMap<uint32_t> globalIndex;

public:
  void indexGlobals(::zero::zrt::ProgramOp program) {
    for (auto g : program.getBody().front().getOps<::zero::zrt::GlobalOp>())
      globalIndex.try_emplace(g.getName(), uint32_t(globalIndex.size()));
  }

private:
  std::vector<flatbuffers::Offset<::zrt::fb::Arena>> arenaTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Buffer>> bufferTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Constant>> constantTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Global>> globalTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Stream>> streamTable;
  std::vector<flatbuffers::Offset<::zrt::fb::ProcessGroup>> groupTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Binding>> inputTable, outputTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Instruction>> instrTable;
  int64_t numEvents = 0;
};

/// The table index of a symbol `op` refers to, declared earlier in the program.
FailureOr<uint32_t> ProgramWriter::index(Operation *op,
                                         llvm::StringMap<uint32_t> &map,
                                         FlatSymbolRefAttr ref) {
  auto it = map.find(ref.getValue());
  if (it == map.end()) {
    op->emitOpError() << "refers to " << ref << " before it is declared";
    return failure();
  }
  return it->second;
}

/// The buffer-table indices of a list of buffer references.
FailureOr<std::vector<uint32_t>> ProgramWriter::bufferIndices(Operation *op,
                                                              ArrayAttr refs) {
  std::vector<uint32_t> out;
  for (Attribute a : refs) {
    FailureOr<uint32_t> i = index(op, buffers, cast<FlatSymbolRefAttr>(a));
    if (failed(i))
      return failure();
    out.push_back(*i);
  }
  return out;
}

/// A kernel's or collective's parameters as named Attr entries.
FailureOr<AttrOffsets> ProgramWriter::kernelParams(Operation *op,
                                                   DictionaryAttr params) {
  AttrOffsets out;
  for (NamedAttribute a : params) {
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::string str;
    bool isStr = false;
    Attribute v = a.getValue();
    if (auto i = dyn_cast<IntegerAttr>(v))
      ints.push_back(i.getValue().getSExtValue());
    else if (auto f = dyn_cast<FloatAttr>(v))
      floats.push_back(f.getValueAsDouble());
    else if (auto arr = dyn_cast<DenseI64ArrayAttr>(v))
      ints.assign(arr.asArrayRef().begin(), arr.asArrayRef().end());
    else if (auto farr = dyn_cast<DenseF64ArrayAttr>(v))
      floats.assign(farr.asArrayRef().begin(), farr.asArrayRef().end());
    else if (auto s = dyn_cast<StringAttr>(v))
      str = s.str(), isStr = true;
    else if (auto b = dyn_cast<BoolAttr>(v))
      ints.push_back(b.getValue());
    else {
      op->emitOpError() << "parameter '" << a.getName().getValue()
                        << "' has no program-file encoding";
      return failure();
    }
    out.push_back(::zrt::fb::CreateAttrDirect(
        fbb, a.getName().getValue().str().c_str(),
        ints.empty() && !isStr ? nullptr : &ints,
        floats.empty() ? nullptr : &floats, isStr ? str.c_str() : nullptr));
  }
  return out;
}

/// Dispatches one program-body op to the table it belongs in.
LogicalResult ProgramWriter::add(Operation &op) {
  using namespace ::zero::zrt;
  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case([&](StreamOp s) {
        declareStream(s);
        return success();
      })
      .Case([&](GroupOp g) {
        declareGroup(g);
        return success();
      })
      .Case([&](ArenaOp a) {
        declareArena(a);
        return success();
      })
      .Case([&](BufferOp b) { return declareBuffer(b); })
      .Case([&](ConstantOp c) { return addConstant(c); })
      .Case([&](GlobalOp g) { return addGlobal(g); })
      .Case([&](InputOp in) { return addBinding(in, inputTable); })
      .Case([&](OutputOp o) { return addBinding(o, outputTable); })
      .Case([&](KernelOp k) { return addKernel(k); })
      .Case([&](CollectiveOp c) { return addCollective(c); })
      .Case([&](RecordOp r) { return addEvent(r, "Record"); })
      .Case([&](WaitOp w) { return addEvent(w, "Wait"); })
      .Case<BlockOp, ReleaseOp>([](Operation *op) {
        op->emitOpError(
            "belongs to a program the memory plan has not finished: run "
            "zero-lower-to-runtime (or its last passes, zero-plan-memory to "
            "zero-finalize-program) before writing a .zrt program");
        return failure();
      })
      .Default([](Operation *other) {
        other->emitOpError("cannot be serialised into a .zrt program");
        return failure();
      });
}

/// A stream: where instructions run in order (compute or communication).
void ProgramWriter::declareStream(::zero::zrt::StreamOp s) {
  streams[s.getSymName()] = streamTable.size();
  streamTable.push_back(::zrt::fb::CreateStreamDirect(
      fbb, s.getSymName().str().c_str(),
      ::zero::attrs::symbolizeEnum<::zero::attrs::StreamKind>(s.getKind()) ==
              ::zero::attrs::StreamKind::Comm
          ? ::zrt::fb::StreamKind_Comm
          : ::zrt::fb::StreamKind_Compute));
}

/// A process group: the world ranks a collective runs over.
void ProgramWriter::declareGroup(::zero::zrt::GroupOp g) {
  groups[g.getSymName()] = groupTable.size();
  std::vector<int32_t> ranks(g.getRanks().begin(), g.getRanks().end());
  groupTable.push_back(::zrt::fb::CreateProcessGroupDirect(
      fbb, g.getSymName().str().c_str(), &ranks,
      int32_t(g.getGroupSize().value_or(0))));
}

/// An arena: one allocation that buffers are offsets into.
void ProgramWriter::declareArena(::zero::zrt::ArenaOp a) {
  arenas[a.getSymName()] = arenaTable.size();
  const std::string path = a.getPath() ? a.getPath()->str() : std::string();
  arenaTable.push_back(::zrt::fb::CreateArenaDirect(
      fbb, a.getSymName().str().c_str(), a.getSize(), a.getNoReuseSize(),
      a.getLowerBound(), uint64_t(a.getInOrderSize().value_or(0)),
      path.empty() ? nullptr : path.c_str(), a.getHost()));
}

/// A buffer: a typed tensor at an offset of its arena.
LogicalResult ProgramWriter::declareBuffer(::zero::zrt::BufferOp b) {
  FailureOr<uint32_t> arena = index(b, arenas, b.getArenaAttr());
  auto type = cast<RankedTensorType>(b.getType());
  FailureOr<::zrt::fb::DType> dt = dtypeOf(b, type);
  if (failed(arena) || failed(dt))
    return failure();
  buffers[b.getSymName()] = bufferTable.size();
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  bufferTable.push_back(::zrt::fb::CreateBufferDirect(
      fbb, b.getSymName().str().c_str(), *dt, &shape, *arena, b.getOffset(),
      b.getInOrderOffset().value_or(-1)));
  return success();
}

/// A constant: the bytes a buffer is filled with before the program runs.
LogicalResult ProgramWriter::addConstant(::zero::zrt::ConstantOp c) {
  FailureOr<uint32_t> buf = index(c, buffers, c.getBufferAttr());
  if (failed(buf))
    return failure();
  std::vector<uint8_t> bytes = constantBytes(c.getValue());
  constantTable.push_back(::zrt::fb::CreateConstantDirect(fbb, *buf, &bytes));
  return success();
}

/// A global: a named, persistent tensor (parameter, optimizer state, ...)
/// with its buffer and, under ZeRO, its shard layout.
LogicalResult ProgramWriter::addGlobal(::zero::zrt::GlobalOp g) {
  FailureOr<uint32_t> buf = index(g, buffers, g.getBufferAttr());
  auto type = cast<RankedTensorType>(g.getType());
  FailureOr<::zrt::fb::DType> dt = dtypeOf(g, type);
  if (failed(buf) || failed(dt))
    return failure();
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  flatbuffers::Offset<::zrt::fb::ShardSpec> shard = 0;
  if (g.getShardWorld())
    shard =
        ::zrt::fb::CreateShardSpec(fbb, int32_t(*g.getShardWorld()),
                                   type.getNumElements(), *g.getPaddedNumel());
  ::zrt::fb::GlobalRole role = ::zrt::fb::GlobalRole_Parameter;
  if (std::optional<StringRef> r = g.getRole()) {
    if (*r == "frozen")
      role = ::zrt::fb::GlobalRole_Frozen;
    else if (*r == "optimizer_state")
      role = ::zrt::fb::GlobalRole_OptimizerState;
    else if (*r == "counter")
      role = ::zrt::fb::GlobalRole_Counter;
    else if (*r != "parameter")
      return g.emitOpError()
             << "has an unknown role '" << *r
             << "' (parameter, frozen, optimizer_state, counter)";
  }
  flatbuffers::Offset<::zrt::fb::HeldGradient> gradient = 0;
  if (std::optional<Type> gt = g.getGradient()) {
    auto t = cast<RankedTensorType>(*gt);
    FailureOr<::zrt::fb::DType> gdt = dtypeOf(g, t);
    if (failed(gdt))
      return failure();
    gradient = ::zrt::fb::CreateHeldGradient(fbb, *gdt, uint64_t(t.getNumElements()));
  }
  int32_t widenFrom = -1;
  if (std::optional<StringRef> from = g.getWidenFrom()) {
    auto it = globalIndex.find(*from);
    if (it == globalIndex.end())
      return g.emitOpError() << "widens from '" << *from << "', which is no global";
    widenFrom = int32_t(it->second);
  }
  globalTable.push_back(::zrt::fb::CreateGlobalDirect(
      fbb, g.getName().str().c_str(), g.getTensor().str().c_str(), *dt, &shape,
      *buf, shard, role, gradient, widenFrom));
  return success();
}

/// A graph input or output: its name and buffer.
template <typename BindingOp>
LogicalResult ProgramWriter::addBinding(
    BindingOp b, std::vector<flatbuffers::Offset<::zrt::fb::Binding>> &table) {
  FailureOr<uint32_t> buf = index(b, buffers, b.getBufferAttr());
  if (failed(buf))
    return failure();
  table.push_back(
      ::zrt::fb::CreateBindingDirect(fbb, b.getName().str().c_str(), *buf));
  return success();
}

/// A kernel call on a stream.
LogicalResult ProgramWriter::addKernel(::zero::zrt::KernelOp k) {
  auto stream = index(k, streams, k.getStreamAttr());
  auto ins = bufferIndices(k, k.getIns());
  auto outs = bufferIndices(k, k.getOuts());
  auto params = kernelParams(k, k.getParams());
  if (failed(stream) || failed(ins) || failed(outs) || failed(params))
    return failure();
  std::vector<int32_t> ranks = ranksOf(k.getRanks());
  instrTable.push_back(::zrt::fb::CreateInstructionDirect(
      fbb, k.getKernel().str().c_str(), *stream, &*ins, &*outs, &*params, -1,
      -1, locString(k.getLoc()).c_str(), ranks.empty() ? nullptr : &ranks, k.getEval(),
      k.getFlops().value_or(0)));
  return success();
}

/// A collective call on a stream over a process group.
LogicalResult ProgramWriter::addCollective(::zero::zrt::CollectiveOp c) {
  auto stream = index(c, streams, c.getStreamAttr());
  auto group = index(c, groups, c.getGroupAttr());
  auto ins = bufferIndices(c, c.getIns());
  auto outs = bufferIndices(c, c.getOuts());
  auto params = kernelParams(c, c.getParams());
  if (failed(stream) || failed(group) || failed(ins) || failed(outs) ||
      failed(params))
    return failure();
  std::vector<int32_t> ranks = ranksOf(c.getRanks());
  instrTable.push_back(::zrt::fb::CreateInstructionDirect(
      fbb, c.getKind().str().c_str(), *stream, &*ins, &*outs, &*params, -1,
      int32_t(*group), locString(c.getLoc()).c_str(),
      ranks.empty() ? nullptr : &ranks, c.getEval()));
  return success();
}

/// A Record or Wait instruction; the program has as many events as the
/// largest event number plus one.
template <typename EventOp>
LogicalResult ProgramWriter::addEvent(EventOp ev, const char *name) {
  int64_t event = ev.getEvent();
  auto stream = index(ev, streams, ev.getStreamAttr());
  if (failed(stream))
    return failure();
  numEvents = std::max(numEvents, event + 1);
  std::vector<int32_t> ranks = ranksOf(ev.getRanks());
  instrTable.push_back(::zrt::fb::CreateInstructionDirect(
      fbb, name, *stream, nullptr, nullptr, nullptr, int32_t(event), -1,
      locString(ev.getLoc()).c_str(), ranks.empty() ? nullptr : &ranks));
  return success();
}

/// The training settings the runtime reads (absent for inference programs).
flatbuffers::Offset<::zrt::fb::Training>
ProgramWriter::training(::zero::zrt::ProgramOp program) {
  auto t = program->getAttrOfType<::zero::dist::TrainingAttr>("training");
  if (!t)
    return 0;
  // fp16's loss scale and skipped outputs only where there are some, so
  // other programs' bytes stay as they were.
  std::string loss = t.getLoss().str(), gradNorm = t.getGradNorm().str(),
              lr = t.getLr().str(), optimizer = t.getOptimizer().str(),
              lossScale = t.getLossScale().str(),
              skipped = t.getSkipped().str(), csv = t.getCsvMonitor().str();
  return ::zrt::fb::CreateTrainingDirect(
      fbb, loss.c_str(), gradNorm.c_str(), lr.c_str(),
      int32_t(t.getAccumulationSteps()), optimizer.c_str(),
      lossScale.empty() ? nullptr : lossScale.c_str(),
      skipped.empty() ? nullptr : skipped.c_str(),
      int32_t(t.getStepsPerPrint()), csv.empty() ? nullptr : csv.c_str());
}

/// Writes the program header over the finished tables and copies the bytes out.
void ProgramWriter::finish(::zero::zrt::ProgramOp program, std::string &out) {
  flatbuffers::Offset<::zrt::fb::Training> trainingTable = training(program);
  auto root = ::zrt::fb::CreateProgramDirect(
      fbb, kZRTFormatVersion, int32_t(program.getWorldSize()), &arenaTable,
      &bufferTable, &constantTable, &globalTable, &streamTable,
      uint32_t(numEvents), &groupTable, &inputTable, &outputTable, &instrTable,
      trainingTable,
      program->getAttrOfType<IntegerAttr>("pipeline_dp")
          ? int32_t(program->getAttrOfType<IntegerAttr>("pipeline_dp").getInt())
          : 0);
  ::zrt::fb::FinishProgramBuffer(fbb, root);
  out.assign(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
             fbb.GetSize());
}

} // namespace

LogicalResult zero::serializeZRTProgram(::zero::zrt::ProgramOp program,
                                        std::string &out) {
  ProgramWriter writer;
  writer.indexGlobals(program);
  for (Operation &op : program.getBody().front())
    if (failed(writer.add(op)))
      return failure();
  writer.finish(program, out);
  return success();
}
