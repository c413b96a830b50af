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
#include "zero/Target/zrt_generated.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"

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

} // namespace

LogicalResult zero::serializeZRTProgram(::zero::zrt::ProgramOp program, std::string &out) {
  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  llvm::StringMap<uint32_t> buffers, streams, arenas, groups;
  std::vector<flatbuffers::Offset<::zrt::fb::Arena>> arenaTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Buffer>> bufferTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Constant>> constantTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Global>> globalTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Stream>> streamTable;
  std::vector<flatbuffers::Offset<::zrt::fb::ProcessGroup>> groupTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Binding>> inputTable, outputTable;
  std::vector<flatbuffers::Offset<::zrt::fb::Instruction>> instrTable;
  int64_t numEvents = 0;

  auto index = [&](Operation *op, llvm::StringMap<uint32_t> &map,
                   FlatSymbolRefAttr ref) -> FailureOr<uint32_t> {
    auto it = map.find(ref.getValue());
    if (it == map.end()) {
      op->emitOpError() << "refers to " << ref << " before it is declared";
      return failure();
    }
    return it->second;
  };
  auto indices = [&](Operation *op, ArrayAttr refs) -> FailureOr<std::vector<uint32_t>> {
    std::vector<uint32_t> out;
    for (Attribute a : refs) {
      FailureOr<uint32_t> i = index(op, buffers, cast<FlatSymbolRefAttr>(a));
      if (failed(i))
        return failure();
      out.push_back(*i);
    }
    return out;
  };
  auto attrs = [&](Operation *op, DictionaryAttr params)
      -> FailureOr<std::vector<flatbuffers::Offset<::zrt::fb::Attr>>> {
    std::vector<flatbuffers::Offset<::zrt::fb::Attr>> out;
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
          fbb, a.getName().getValue().str().c_str(), ints.empty() && !isStr ? nullptr : &ints,
          floats.empty() ? nullptr : &floats, isStr ? str.c_str() : nullptr));
    }
    return out;
  };

  for (Operation &op : program.getBody().front()) {
    if (auto s = dyn_cast<::zero::zrt::StreamOp>(op)) {
      streams[s.getSymName()] = streamTable.size();
      streamTable.push_back(::zrt::fb::CreateStreamDirect(
          fbb, s.getSymName().str().c_str(),
          s.getKind() == "comm" ? ::zrt::fb::StreamKind_Comm : ::zrt::fb::StreamKind_Compute));
    } else if (auto g = dyn_cast<::zero::zrt::GroupOp>(op)) {
      groups[g.getSymName()] = groupTable.size();
      std::vector<int32_t> ranks(g.getRanks().begin(), g.getRanks().end());
      groupTable.push_back(
          ::zrt::fb::CreateProcessGroupDirect(fbb, g.getSymName().str().c_str(), &ranks,
                                              int32_t(g.getGroupSize().value_or(0))));
    } else if (auto a = dyn_cast<::zero::zrt::ArenaOp>(op)) {
      arenas[a.getSymName()] = arenaTable.size();
      arenaTable.push_back(::zrt::fb::CreateArenaDirect(
          fbb, a.getSymName().str().c_str(), a.getSize(), a.getNoReuseSize(),
          a.getLowerBound(), uint64_t(a.getInOrderSize().value_or(0))));
    } else if (auto b = dyn_cast<::zero::zrt::BufferOp>(op)) {
      FailureOr<uint32_t> arena = index(&op, arenas, b.getArenaAttr());
      auto type = cast<RankedTensorType>(b.getType());
      FailureOr<::zrt::fb::DType> dt = dtypeOf(&op, type);
      if (failed(arena) || failed(dt))
        return failure();
      buffers[b.getSymName()] = bufferTable.size();
      std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
      bufferTable.push_back(::zrt::fb::CreateBufferDirect(
          fbb, b.getSymName().str().c_str(), *dt, &shape, *arena, b.getOffset(),
          b.getInOrderOffset().value_or(-1)));
    } else if (auto c = dyn_cast<::zero::zrt::ConstantOp>(op)) {
      FailureOr<uint32_t> buf = index(&op, buffers, c.getBufferAttr());
      if (failed(buf))
        return failure();
      std::vector<uint8_t> bytes = constantBytes(c.getValue());
      constantTable.push_back(::zrt::fb::CreateConstantDirect(fbb, *buf, &bytes));
    } else if (auto g = dyn_cast<::zero::zrt::GlobalOp>(op)) {
      FailureOr<uint32_t> buf = index(&op, buffers, g.getBufferAttr());
      auto type = cast<RankedTensorType>(g.getType());
      FailureOr<::zrt::fb::DType> dt = dtypeOf(&op, type);
      if (failed(buf) || failed(dt))
        return failure();
      std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
      flatbuffers::Offset<::zrt::fb::ShardSpec> shard = 0;
      if (g.getShardWorld())
        shard = ::zrt::fb::CreateShardSpec(fbb, int32_t(*g.getShardWorld()),
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
          return g.emitOpError() << "has an unknown role '" << *r
                                 << "' (parameter, frozen, optimizer_state, counter)";
      }
      globalTable.push_back(::zrt::fb::CreateGlobalDirect(
          fbb, g.getName().str().c_str(), g.getTensor().str().c_str(), *dt, &shape, *buf,
          shard, role));
    } else if (auto in = dyn_cast<::zero::zrt::InputOp>(op)) {
      FailureOr<uint32_t> buf = index(&op, buffers, in.getBufferAttr());
      if (failed(buf))
        return failure();
      inputTable.push_back(::zrt::fb::CreateBindingDirect(fbb, in.getName().str().c_str(), *buf));
    } else if (auto o = dyn_cast<::zero::zrt::OutputOp>(op)) {
      FailureOr<uint32_t> buf = index(&op, buffers, o.getBufferAttr());
      if (failed(buf))
        return failure();
      outputTable.push_back(::zrt::fb::CreateBindingDirect(fbb, o.getName().str().c_str(), *buf));
    } else if (auto k = dyn_cast<::zero::zrt::KernelOp>(op)) {
      auto stream = index(&op, streams, k.getStreamAttr());
      auto ins = indices(&op, k.getIns());
      auto outs = indices(&op, k.getOuts());
      auto params = attrs(&op, k.getParams());
      if (failed(stream) || failed(ins) || failed(outs) || failed(params))
        return failure();
      std::vector<int32_t> ranks;
      if (auto r = k.getRanks())
        ranks.assign(r->begin(), r->end());
      instrTable.push_back(::zrt::fb::CreateInstructionDirect(
          fbb, k.getKernel().str().c_str(), *stream, &*ins, &*outs, &*params, -1, -1,
          locString(op.getLoc()).c_str(), ranks.empty() ? nullptr : &ranks));
    } else if (auto c = dyn_cast<::zero::zrt::CollectiveOp>(op)) {
      auto stream = index(&op, streams, c.getStreamAttr());
      auto group = index(&op, groups, c.getGroupAttr());
      auto ins = indices(&op, c.getIns());
      auto outs = indices(&op, c.getOuts());
      auto params = attrs(&op, c.getParams());
      if (failed(stream) || failed(group) || failed(ins) || failed(outs) || failed(params))
        return failure();
      std::vector<int32_t> ranks;
      if (auto r = c.getRanks())
        ranks.assign(r->begin(), r->end());
      instrTable.push_back(::zrt::fb::CreateInstructionDirect(
          fbb, c.getKind().str().c_str(), *stream, &*ins, &*outs, &*params, -1,
          int32_t(*group), locString(op.getLoc()).c_str(),
          ranks.empty() ? nullptr : &ranks));
    } else if (isa<::zero::zrt::RecordOp, ::zero::zrt::WaitOp>(op)) {
      bool record = isa<::zero::zrt::RecordOp>(op);
      int64_t event = record ? cast<::zero::zrt::RecordOp>(op).getEvent()
                             : cast<::zero::zrt::WaitOp>(op).getEvent();
      FlatSymbolRefAttr s = record ? cast<::zero::zrt::RecordOp>(op).getStreamAttr()
                                   : cast<::zero::zrt::WaitOp>(op).getStreamAttr();
      auto stream = index(&op, streams, s);
      if (failed(stream))
        return failure();
      numEvents = std::max(numEvents, event + 1);
      std::optional<ArrayRef<int64_t>> r = record ? cast<::zero::zrt::RecordOp>(op).getRanks()
                                                  : cast<::zero::zrt::WaitOp>(op).getRanks();
      std::vector<int32_t> ranks;
      if (r)
        ranks.assign(r->begin(), r->end());
      instrTable.push_back(::zrt::fb::CreateInstructionDirect(
          fbb, record ? "Record" : "Wait", *stream, nullptr, nullptr, nullptr,
          int32_t(event), -1, locString(op.getLoc()).c_str(),
          ranks.empty() ? nullptr : &ranks));
    } else {
      op.emitOpError("cannot be serialised into a .zrt program");
      return failure();
    }
  }
  flatbuffers::Offset<::zrt::fb::Training> training = 0;
  if (auto t = program->getAttrOfType<DictionaryAttr>("training")) {
    auto str = [&](StringRef key) {
      auto s = t.getAs<StringAttr>(key);
      return s ? s.str() : std::string();
    };
    int64_t accumulation = 1;
    if (auto a = t.getAs<IntegerAttr>("accumulation_steps"))
      accumulation = a.getInt();
    training = ::zrt::fb::CreateTrainingDirect(
        fbb, str("loss").c_str(), str("grad_norm").c_str(), str("lr").c_str(),
        int32_t(accumulation), str("optimizer").c_str());
  }
  auto root = ::zrt::fb::CreateProgramDirect(
      fbb, kZRTFormatVersion, int32_t(program.getWorldSize()), &arenaTable, &bufferTable,
      &constantTable, &globalTable, &streamTable, uint32_t(numEvents), &groupTable,
      &inputTable, &outputTable, &instrTable, training,
      program->getAttrOfType<IntegerAttr>("pipeline_dp")
          ? int32_t(program->getAttrOfType<IntegerAttr>("pipeline_dp").getInt())
          : 0);
  ::zrt::fb::FinishProgramBuffer(fbb, root);
  out.assign(reinterpret_cast<const char *>(fbb.GetBufferPointer()), fbb.GetSize());
  return success();
}
