//===- ONNXImporter.cpp - ONNX model -> onnx dialect ----------------------===//
//
// Walks an ONNX graph in order and builds the `forward` function: graph inputs
// become arguments (symbolic dims fixed from --input-shape), parameters become
// ml_program.global + global_load, each node goes through the operator table in
// OpImporters.cpp, model-local functions are inlined, and constant operands are
// folded as the graph is built, so shape sub-graphs never reach the IR.
//
//===----------------------------------------------------------------------===//

#include "zero/Import/ONNXImporter.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"

#include "ImporterImpl.h"

#include <google/protobuf/unknown_field_set.h>
#include "Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/defs/parser.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <limits>
#include <fcntl.h>
#include <unistd.h>

using namespace mlir;
namespace attrs = ::zero::attrs;
using namespace zero;
using namespace zero::import;

ImportedWeights::~ImportedWeights() = default;

bool zero::parseShape(StringRef s, std::vector<int64_t> &dims) {
  dims.clear();
  if (s.empty() || s == "scalar")
    return true;
  SmallVector<StringRef> parts;
  s.split(parts, 'x');
  for (StringRef p : parts) {
    int64_t d;
    if (p.getAsInteger(10, d) || d < 0)
      return false;
    dims.push_back(d);
  }
  return true;
}

Type zero::import::elementTypeFor(MLIRContext *ctx, int32_t t) {
  using TP = ::onnx::TensorProto;
  switch (t) {
  case TP::FLOAT: return Float32Type::get(ctx);
  case TP::DOUBLE: return Float64Type::get(ctx);
  case TP::FLOAT16: return Float16Type::get(ctx);
  case TP::BFLOAT16: return BFloat16Type::get(ctx);
  case TP::INT64: return IntegerType::get(ctx, 64);
  case TP::INT32: return IntegerType::get(ctx, 32);
  case TP::INT16: return IntegerType::get(ctx, 16);
  case TP::INT8: return IntegerType::get(ctx, 8);
  case TP::UINT8: return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case TP::UINT16: return IntegerType::get(ctx, 16, IntegerType::Unsigned);
  case TP::UINT32: return IntegerType::get(ctx, 32, IntegerType::Unsigned);
  case TP::UINT64: return IntegerType::get(ctx, 64, IntegerType::Unsigned);
  case TP::BOOL: return IntegerType::get(ctx, 1);
  default: return {};
  }
}

std::string zero::import::dataTypeName(int32_t t) {
  if (!::onnx::TensorProto_DataType_IsValid(t))
    return std::to_string(t);
  return ::onnx::TensorProto_DataType_Name(::onnx::TensorProto_DataType(t)) + " (" +
         std::to_string(t) + ")";
}

std::string zero::import::tensorDimsProblem(const ::onnx::TensorProto &t) {
  std::string dims = llvm::join(
      llvm::map_range(t.dims(), [](int64_t v) { return std::to_string(v); }), "x");
  for (int64_t d : t.dims())
    if (d < 0)
      return "has dims " + dims + ", a negative dimension; the model is corrupt";
  // Checked element and byte counts: a dims product that overflows is a
  // corrupt model, not a huge one. Unsupported types count one byte per
  // element so that their element count is checked too.
  uint64_t bytes = std::max<uint64_t>(onnxElementSize(t.data_type()), 1);
  for (int64_t d : t.dims()) {
    if (d != 0 && bytes > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(d))
      return "has dims " + dims + " whose size overflows 64 bits; the model is corrupt";
    bytes *= uint64_t(d);
  }
  return "";
}

DenseElementsAttr zero::import::tensorProtoToAttr(MLIRContext *ctx,
                                                  const ::onnx::TensorProto &t) {
  if (t.data_location() == ::onnx::TensorProto::EXTERNAL)
    return {};
  Type elem = elementTypeFor(ctx, t.data_type());
  if (!elem)
    return {};
  // RankedTensorType::get with a negative or overflowing shape is invalid
  // (and its element count could wrap to match the data): callers report the
  // problem by name, this only refuses.
  if (!tensorDimsProblem(t).empty())
    return {};
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  auto type = RankedTensorType::get(shape, elem);
  std::string bytes = tensorProtoBytes(t);
  int64_t n = type.getNumElements();
  size_t elemBytes = elem.isInteger(1) ? 1 : elem.getIntOrFloatBitWidth() / 8;
  if (bytes.size() != size_t(n) * elemBytes)
    return {};
  if (elem.isInteger(1)) {
    SmallVector<bool> vals;
    for (char c : bytes)
      vals.push_back(c != 0);
    return DenseElementsAttr::get(type, vals);
  }
  return DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(bytes.data(), bytes.size()));
}

namespace zero::import {

/// Builds the module for one ONNX model.
class GraphImporter {
public:
  GraphImporter(MLIRContext &ctx, StringRef path, const ImportOptions &options,
                std::unique_ptr<::onnx::ModelProto> model)
      : ctx_(ctx), builder_(&ctx), path_(path.str()), options_(options),
        model_(std::move(model)) {}

  FailureOr<ImportedModel> run();

  MLIRContext *ctx() { return &ctx_; }
  OpBuilder &builder() { return builder_; }
  const std::string &path() const { return path_; }

  /// The Value for an ONNX value name (materialising initializers on demand),
  /// or null if unknown.
  Value lookup(const std::string &name);

  /// The sequence named `name`, or null.
  const Sequence *lookupSequence(const std::string &name) const {
    auto it = sequences_.find(name);
    return it == sequences_.end() ? nullptr : &it->second;
  }

  /// The initializer named `name`, or null.
  const ::onnx::TensorProto *initializer(const std::string &name) const {
    auto it = initializers_.find(name);
    return it == initializers_.end() ? nullptr : it->second;
  }

  InFlightDiagnostic fileError() {
    return mlir::emitError(FileLineColLoc::get(&ctx_, path_, 0, 0));
  }

  /// See NodeContext::zeroSizedGraphInputs.
  std::string zeroSizedGraphInputs();

private:
  LogicalResult importGraphInputs();
  LogicalResult importNodes(const google::protobuf::RepeatedPtrField<::onnx::NodeProto> &nodes,
                            const llvm::StringMap<int64_t> &opsets, int depth);
  LogicalResult checkNodeOutputs(const ::onnx::NodeProto &node, Location loc);
  LogicalResult checkOpset(const ::onnx::NodeProto &node, Location loc, int64_t opset);
  LogicalResult checkInputs(const ::onnx::NodeProto &node, Location loc, int64_t opset);
  LogicalResult bindResults(const ::onnx::NodeProto &node, Location loc,
                            const NodeContext &nc);
  LogicalResult importNode(const ::onnx::NodeProto &node,
                           const llvm::StringMap<int64_t> &opsets, int depth);
  LogicalResult inlineFunction(const ::onnx::NodeProto &node,
                               const ::onnx::FunctionProto &fn, int depth);
  Value materializeInitializer(const ::onnx::TensorProto &t);
  Location nodeLoc(const ::onnx::NodeProto &node);
  void eraseDeadCode();

  MLIRContext &ctx_;
  OpBuilder builder_;
  std::string path_;
  const ImportOptions &options_;
  std::unique_ptr<::onnx::ModelProto> model_;
  ModuleOp module_;
  func::FuncOp func_;
  std::unique_ptr<SymbolTable> symbols_;
  llvm::StringMap<Value> values_;
  llvm::StringMap<Sequence> sequences_;
  llvm::StringMap<const ::onnx::TensorProto *> initializers_;
  /// Initializers that hold the same numbers as an earlier one (a copy, or
  /// the transpose of a 2-D one): name -> (that one's name, transposed).
  llvm::StringMap<std::pair<std::string, bool>> ties_;
  void findTiedInitializers();
  /// An external-data initializer's bytes, or null if they cannot be read.
  std::unique_ptr<llvm::MemoryBuffer> externalBytes(const ::onnx::TensorProto &t) const;
  /// What torch.export recorded of each initializer it lifted from the
  /// module ("PARAMETER", "BUFFER"), from the value_info metadata; and
  /// whether the model came from torch.export at all.
  llvm::StringMap<std::string> exportKinds_;
  bool torchExport_ = false;
  /// Initializers ONNX Script's optimizer folded, and the values it folded
  /// them from (`pkg.onnxscript.optimizer.folded_from`).
  llvm::StringMap<SmallVector<std::string>> foldedFrom_;
  /// The module parameters torch.export's graph signature lists.
  llvm::StringSet<> signatureParameters_;
  /// A folded initializer made from parameters (a transposed weight standing
  /// in for it), not only from constants and buffers (a causal mask).
  bool foldedFromParameter(StringRef name) const;
  void readExportKinds();
  /// Initializers read only as BatchNormalization's mean and variance: the
  /// module's running statistics (buffers in PyTorch), not trained.
  llvm::StringSet<> runningStatistics_;
  void findRunningStatistics();
  /// Whether the export is of a transformers model (a transformers class at
  /// the root or just under it, class_hierarchy), and whether a loss node ran
  /// in transformers' loss function with its logits cast to f32, a cast the
  /// export drops (the op is then marked zero.compute_f32).
  bool transformersModel_ = false;
  void findTransformersModules();
  bool lossUpcastByModel(const ::onnx::NodeProto &node) const;
  void warnMergedParameters();
  void warnFoldedConvParameters();
  bool isParameter(const ::onnx::TensorProto &t) const;
  LogicalResult checkOperatorsSupported(const llvm::StringMap<int64_t> &opsets);
  /// The node (as named in messages) that produced each value so far.
  llvm::StringMap<std::string> producers_;
  std::vector<WeightRef> weights_;
  int nodeCounter_ = 0;
  int inlineCounter_ = 0;
};

} // namespace zero::import

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

NodeContext::NodeContext(GraphImporter &graph, const ::onnx::NodeProto &node,
                         int64_t opset, Location loc)
    : graph_(graph), node_(node), opset_(opset), loc_(loc) {
  for (const std::string &name : node.input())
    inputs_.push_back(name.empty() ? Value() : graph.lookup(name));
}

MLIRContext *NodeContext::ctx() const { return graph_.ctx(); }
OpBuilder &NodeContext::builder() { return graph_.builder(); }

const Sequence *NodeContext::sequenceInput(size_t i) const {
  if (i >= size_t(node_.input_size()) || node_.input(int(i)).empty())
    return nullptr;
  return graph_.lookupSequence(node_.input(int(i)));
}

DenseElementsAttr NodeContext::constInput(size_t i) const {
  Value v = input(i);
  DenseElementsAttr attr;
  if (v && matchPattern(v, m_Constant(&attr)))
    return attr;
  // An initializer used where ONNX wants a constant (Clip's min as float[1],
  // Pad's value): read its value; the load disappears if nothing else uses it.
  if (i < size_t(node_.input_size()))
    if (const ::onnx::TensorProto *t = graph_.initializer(node_.input(int(i))))
      if (t->dims_size() <= 1 && t->data_location() != ::onnx::TensorProto::EXTERNAL) {
        int64_t n = 1;
        for (int64_t d : t->dims())
          n *= d;
        if (n <= zero::onnx::kMaxFoldElements)
          return tensorProtoToAttr(ctx(), *t);
      }
  return {};
}

FailureOr<std::optional<SmallVector<int64_t>>>
NodeContext::constIntsInput(size_t i, StringRef what) {
  if (!input(i))
    return std::optional<SmallVector<int64_t>>();
  DenseElementsAttr attr = constInput(i);
  if (attr && !attr.getElementType().isInteger()) {
    emitError() << what << " (input " << i << ", '" << node_.input(int(i))
                << "') must be an integer tensor, got " << attr.getElementType();
    return failure();
  }
  if (!attr) {
    emitError() << what << " (input " << i << ", '" << node_.input(int(i))
                << "') must be a constant integer tensor once input shapes are "
                   "fixed; it is computed from run-time data";
    return failure();
  }
  SmallVector<int64_t> out;
  for (APInt v : attr.getValues<APInt>())
    out.push_back(v.getSExtValue());
  return std::optional<SmallVector<int64_t>>(std::move(out));
}

const ::onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::attrInt(StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

float NodeContext::attrFloat(StringRef name, float dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string NodeContext::attrString(StringRef name, StringRef dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt.str();
}

std::optional<SmallVector<int64_t>> NodeContext::attrInts(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank,
                                              StringRef what) {
  if (axis < -rank || axis >= rank) {
    emitError() << what << " " << axis << " is out of range for rank " << rank;
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

std::string NodeContext::zeroSizedGraphInputs() const {
  return graph_.zeroSizedGraphInputs();
}

InFlightDiagnostic NodeContext::emitError() {
  return mlir::emitError(loc_) << node_.op_type() << ": ";
}

NamedAttribute NodeContext::i64(StringRef name, int64_t v) {
  return builder().getNamedAttr(name, builder().getI64IntegerAttr(v));
}
NamedAttribute NodeContext::f32(StringRef name, float v) {
  return builder().getNamedAttr(name, builder().getF32FloatAttr(v));
}
NamedAttribute NodeContext::f64(StringRef name, double v) {
  return builder().getNamedAttr(name, builder().getF64FloatAttr(v));
}
NamedAttribute NodeContext::str(StringRef name, StringRef v) {
  return builder().getNamedAttr(name, builder().getStringAttr(v));
}
NamedAttribute NodeContext::i64s(StringRef name, ArrayRef<int64_t> v) {
  return builder().getNamedAttr(name, builder().getDenseI64ArrayAttr(v));
}
NamedAttribute NodeContext::type(StringRef name, Type t) {
  return builder().getNamedAttr(name, TypeAttr::get(t));
}

Value NodeContext::constant(DenseElementsAttr value) {
  return zero::onnx::ConstantOp::create(builder(), loc_, value);
}

FailureOr<SmallVector<Value>> NodeContext::create(StringRef opName,
                                                  ValueRange operands,
                                                  ArrayRef<NamedAttribute> attrs,
                                                  unsigned numResults) {
  std::string fullName = ("onnx." + opName).str();
  std::optional<RegisteredOperationName> info =
      RegisteredOperationName::lookup(fullName, ctx());
  assert(info && "op importer names an unregistered onnx op");
  OperationState state(loc_, *info);
  // Omitted optional operands (null Values) are trailing; drop them. A gap
  // before a given operand is a missing input, not an omitted one.
  for (auto [i, v] : llvm::enumerate(operands)) {
    if (v) {
      if (state.operands.size() != i) {
        emitError() << "input " << state.operands.size()
                    << " is missing (empty name or absent)";
        return failure();
      }
      state.operands.push_back(v);
    }
  }
  state.addAttributes(attrs);
  state.addTypes(SmallVector<Type>(numResults, NoneType::get(ctx())));
  Operation *op = builder().create(state);
  // Ops of fixed arity need every operand before their types can be inferred.
  unsigned need = 0;
  if (op->hasTrait<OpTrait::OneOperand>())
    need = 1;
  else if (op->hasTrait<OpTrait::NOperands<2>::Impl>())
    need = 2;
  else if (op->hasTrait<OpTrait::NOperands<3>::Impl>())
    need = 3;
  else if (op->hasTrait<OpTrait::NOperands<4>::Impl>())
    need = 4;
  else if (op->hasTrait<OpTrait::AtLeastNOperands<1>::Impl>())
    need = 1;
  if (op->getNumOperands() < need) {
    op->erase();
    emitError() << "needs " << need << " input(s), got " << state.operands.size();
    return failure();
  }

  // Infer result types; re-emit the inference's own message at this node.
  SmallVector<Type> types;
  std::string message;
  LogicalResult inferred = failure();
  {
    ScopedDiagnosticHandler capture(ctx(), [&](Diagnostic &diag) {
      message = diag.str();
      return success();
    });
    auto iface = cast<InferTypeOpInterface>(op);
    inferred = iface.inferReturnTypes(ctx(), loc_, op->getOperands(),
                                      op->getRawDictionaryAttrs(),
                                      op->getPropertiesStorage(),
                                      op->getRegions(), types);
  }
  if (failed(inferred) || types.size() != numResults) {
    op->erase();
    emitError() << (message.empty() ? "cannot infer the result types" : message);
    return failure();
  }
  for (auto [r, t] : llvm::zip(op->getResults(), types))
    r.setType(t);
  if (failed(mlir::verify(op))) {
    op->erase();
    return failure();
  }

  SmallVector<OpFoldResult> folded;
  if (succeeded(op->fold(folded)) && !folded.empty()) {
    SmallVector<Value> out;
    for (auto [fr, r] : llvm::zip(folded, op->getResults())) {
      if (auto v = dyn_cast<Value>(fr)) {
        out.push_back(v);
        continue;
      }
      auto attr = cast<DenseElementsAttr>(cast<Attribute>(fr));
      out.push_back(constant(attr));
    }
    op->erase();
    return out;
  }
  return SmallVector<Value>(op->getResults());
}

FailureOr<Value> NodeContext::create1(StringRef opName, ValueRange operands,
                                      ArrayRef<NamedAttribute> attrs) {
  FailureOr<SmallVector<Value>> r = create(opName, operands, attrs, 1);
  if (failed(r))
    return failure();
  return r->front();
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

/// The strings of a Python list literal, as the dynamo exporter writes its
/// node metadata: "['', 'transformer', 'transformer.h.0']".
static SmallVector<std::string> pythonStrings(StringRef text) {
  SmallVector<std::string> out;
  while (true) {
    size_t open = text.find_first_of("'\"");
    if (open == StringRef::npos)
      break;
    char quote = text[open];
    size_t close = text.find(quote, open + 1);
    if (close == StringRef::npos)
      break;
    out.push_back(text.slice(open + 1, close).str());
    text = text.drop_front(close + 1);
  }
  return out;
}

/// The metadata_props entries a message keeps in field `number`, a field
/// newer than the onnx headers we build with (ValueInfoProto's 4 and
/// GraphProto's 16, NodeProto's 9, IR version 10): read from the unknown
/// fields.
template <typename Fn>
static void forEachNewerMetadataProp(const google::protobuf::Message &msg,
                                     int number, Fn fn) {
  const auto &unknown = msg.GetReflection()->GetUnknownFields(msg);
  for (int f = 0; f < unknown.field_count(); ++f) {
    const auto &field = unknown.field(f);
    if (field.number() != number ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    ::onnx::StringStringEntryProto prop;
    if (prop.ParseFromString(field.length_delimited()))
      fn(prop);
  }
}

/// The module path of a node, outermost first ("transformer",
/// "transformer.h.0", "transformer.h.0.attn"), with each module's class where
/// the exporter recorded it: the dynamo exporter's name_scopes / class_hierarchy
/// metadata (NodeProto.metadata_props, field 9, newer than our onnx headers),
/// else the TorchScript exporter's node names ("/transformer/h.0/attn/MatMul").
static void moduleScopes(const ::onnx::NodeProto &node,
                         SmallVector<std::string> &scopes,
                         SmallVector<std::string> &classes) {
  SmallVector<std::string> names, types;
  forEachNewerMetadataProp(
      node, 9, [&](const ::onnx::StringStringEntryProto &prop) {
        if (prop.key() == "pkg.torch.onnx.name_scopes")
          names = pythonStrings(prop.value());
        else if (prop.key() == "pkg.torch.onnx.class_hierarchy")
          types = pythonStrings(prop.value());
      });
  if (!names.empty()) {
    // The last entry is the op itself; the first the root module ('').
    // (Nodes outside every module carry a placeholder module instead.)
    for (size_t i = 0; i + 1 < names.size(); ++i) {
      if (names[i].empty() || StringRef(names[i]).starts_with("_empty_nn_module_stack"))
        continue;
      scopes.push_back(names[i]);
      StringRef cls = i < types.size() ? StringRef(types[i]) : StringRef();
      classes.push_back(cls.rsplit('.').second.empty() ? cls.str()
                                                       : cls.rsplit('.').second.str());
    }
    return;
  }
  StringRef name = node.name();
  if (!name.consume_front("/"))
    return;
  SmallVector<StringRef> parts;
  name.split(parts, '/');
  std::string path;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    path += (path.empty() ? "" : ".") + parts[i].str();
    scopes.push_back(path);
    classes.push_back("");
  }
}

/// The dynamo exporter's class_hierarchy of a node, fully qualified: the
/// root module's class first, then each module's down to the node's, then
/// the op ("aten.cross_entropy_loss.default"). Empty without the metadata.
static SmallVector<std::string> classHierarchy(const ::onnx::NodeProto &node) {
  SmallVector<std::string> hierarchy;
  forEachNewerMetadataProp(node, 9,
                           [&](const ::onnx::StringStringEntryProto &prop) {
                             if (prop.key() == "pkg.torch.onnx.class_hierarchy")
                               hierarchy = pythonStrings(prop.value());
                           });
  return hierarchy;
}

/// Whether transformers computes the loss of a model of class `cls` (its
/// name, unqualified) on logits cast to f32: PreTrainedModel picks the loss
/// from the first LOSS_MAPPING key in the class name, ForCausalLM when none;
/// ForCausalLMLoss (also ForConditionalGeneration's), ForMaskedLMLoss and
/// ForTokenClassification start with `logits = logits.float()`, the
/// classification, question-answering, segmentation, detection and CTC
/// losses do not.
static bool transformersLossUpcasts(StringRef cls) {
  static constexpr std::pair<const char *, bool> kLossTypes[] = {
      {"ForCausalLM", true},
      {"ForMaskedLM", true},
      {"ForTokenClassification", true},
      {"ForConditionalGeneration", true},
      {"ForSequenceClassification", false},
      {"ForImageClassification", false},
      {"ForVideoClassification", false},
      {"ForAudioClassification", false},
      {"ForQuestionAnswering", false},
      {"ForSemanticSegmentation", false},
      {"ForSegmentation", false},
      {"ForObjectDetection", false},
      {"ForCTC", false}};
  size_t first = StringRef::npos;
  bool upcasts = true; // no key: ForCausalLM
  for (auto [key, up] : kLossTypes)
    if (size_t at = cls.find(key); at < first) {
      first = at;
      upcasts = up;
    }
  return upcasts;
}

void GraphImporter::findTransformersModules() {
  for (const ::onnx::NodeProto &node : model_->graph().node()) {
    SmallVector<std::string> h = classHierarchy(node);
    for (size_t i = 0; i + 1 < h.size() && i < 2; ++i)
      if (StringRef(h[i]).starts_with("transformers."))
        transformersModel_ = true;
  }
}

bool GraphImporter::lossUpcastByModel(const ::onnx::NodeProto &node) const {
  if (!transformersModel_)
    return false;
  SmallVector<std::string> h = classHierarchy(node);
  if (h.size() < 2)
    return false;
  // The modules, the op (last) left out; the innermost runs the loss.
  ArrayRef<std::string> modules = ArrayRef<std::string>(h).drop_back();
  if (llvm::any_of(modules, [](const std::string &c) {
        return StringRef(c).starts_with("torch.nn.modules.loss.");
      }))
    return false; // the model's own loss module
  StringRef inner = modules.back();
  // A transformers class, or the root (a subclass of a transformers model:
  // its class is the user's, the modules under it transformers').
  if (!inner.starts_with("transformers.") && modules.size() != 1)
    return false;
  return transformersLossUpcasts(
      inner.rsplit('.').second.empty() ? inner : inner.rsplit('.').second);
}

Location GraphImporter::nodeLoc(const ::onnx::NodeProto &node) {
  std::string name = node.name();
  if (name.empty())
    name = node.op_type() + "_" + std::to_string(nodeCounter_);
  Location file = FileLineColLoc::get(&ctx_, path_, 0, 0);
  SmallVector<std::string> scopes, classes;
  moduleScopes(node, scopes, classes);
  if (!scopes.empty()) {
    // The module path rides on the location (printed only with locations),
    // for the pipeline passes' layer recovery.
    SmallVector<Attribute> s, c;
    for (auto [scope, cls] : llvm::zip(scopes, classes)) {
      s.push_back(StringAttr::get(&ctx_, scope));
      c.push_back(StringAttr::get(&ctx_, cls));
    }
    auto meta = DictionaryAttr::get(
        &ctx_, {NamedAttribute(StringAttr::get(&ctx_, "module_scopes"), ArrayAttr::get(&ctx_, s)),
                NamedAttribute(StringAttr::get(&ctx_, "module_classes"), ArrayAttr::get(&ctx_, c))});
    file = FusedLoc::get(&ctx_, {file}, meta);
  }
  return NameLoc::get(StringAttr::get(&ctx_, name), file);
}

static bool isFloatTensor(const ::onnx::TensorProto &t) {
  using TP = ::onnx::TensorProto;
  return t.data_type() == TP::FLOAT || t.data_type() == TP::DOUBLE ||
         t.data_type() == TP::FLOAT16 || t.data_type() == TP::BFLOAT16;
}

/// An initializer name an exporter made up for a scalar it stored: the
/// TorchScript exporter's "onnx::Mul_12" and "/Constant_output_0", ONNX
/// Script's "val_12", torch's "_tensor_constant0".
static bool isExporterScalarName(StringRef name) {
  if (name.starts_with("onnx::") || name.starts_with("/") ||
      name.starts_with("_tensor_constant"))
    return true;
  StringRef rest = name;
  if (!rest.consume_front("val_") && !rest.consume_front("_val_"))
    return false;
  return !rest.empty() && llvm::all_of(rest, llvm::isDigit);
}

/// Parameters (float tensors, large integer tables) become globals; small
/// integer/bool initializers are shapes and indices and become constants so
/// they can fold. A 0-d float initializer is a parameter when its module owns
/// it (a learnable temperature, CLIP's logit_scale): torch.export says so, and
/// without torch.export's record its name is the module's, not one the
/// exporter made up for a scalar it stored (eps, a scale, 0, -inf), which
/// stays a constant.
bool GraphImporter::isParameter(const ::onnx::TensorProto &t) const {
  using TP = ::onnx::TensorProto;
  const bool isFloat = isFloatTensor(t);
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  if (t.dims_size() == 0 && t.data_location() != TP::EXTERNAL) {
    if (!isFloat)
      return false;
    if (exportKinds_.count(t.name()))
      return true;
    return !torchExport_ && !isExporterScalarName(t.name());
  }
  return isFloat || n > zero::onnx::kMaxFoldElements ||
         t.data_location() == TP::EXTERNAL;
}

void GraphImporter::findRunningStatistics() {
  llvm::StringSet<> statistics, other;
  std::function<void(const ::onnx::GraphProto &)> visit = [&](const ::onnx::GraphProto &g) {
    for (const ::onnx::NodeProto &node : g.node()) {
      const bool bn = node.op_type() == "BatchNormalization" &&
                      (node.domain().empty() || node.domain() == "ai.onnx");
      for (int i = 0; i < node.input_size(); ++i)
        (bn && (i == 3 || i == 4) ? statistics : other).insert(node.input(i));
      for (const ::onnx::AttributeProto &a : node.attribute()) {
        if (a.has_g())
          visit(a.g());
        for (const ::onnx::GraphProto &sub : a.graphs())
          visit(sub);
      }
    }
    for (const ::onnx::ValueInfoProto &out : g.output())
      other.insert(out.name());
  };
  visit(model_->graph());
  for (const auto &name : statistics)
    if (!other.contains(name.getKey()) && initializers_.count(name.getKey()))
      runningStatistics_.insert(name.getKey());
}

void GraphImporter::readExportKinds() {
  forEachNewerMetadataProp(model_->graph(), 16, [&](const ::onnx::StringStringEntryProto &p) {
    if (p.key() != "pkg.torch.export.ExportedProgram.graph_signature")
      return;
    torchExport_ = true;
    // "p_fc_weight: PARAMETER target='fc.weight'" per line.
    SmallVector<StringRef> lines;
    StringRef(p.value()).split(lines, '\n');
    for (StringRef line : lines) {
      auto [head, target] = line.split(": PARAMETER target='");
      if (!target.empty())
        signatureParameters_.insert(target.take_until([](char c) { return c == '\''; }));
    }
  });
  for (const auto &vi : model_->graph().value_info())
    forEachNewerMetadataProp(vi, 4, [&](const ::onnx::StringStringEntryProto &p) {
      if (p.key() == "pkg.torch.export.graph_signature.InputSpec.kind") {
        exportKinds_[vi.name()] = p.value();
        torchExport_ = true;
      } else if (p.key() == "pkg.onnxscript.optimizer.folded_from") {
        // A Python list of names: ['a', 'b'].
        SmallVector<StringRef> parts;
        StringRef(p.value()).trim("[] ").split(parts, ',');
        auto &sources = foldedFrom_[vi.name()];
        for (StringRef part : parts)
          if (StringRef n = part.trim(" '\""); !n.empty())
            sources.push_back(n.str());
      }
    });
}

/// The first eight of `names`, quoted, for a warning.
static void appendNames(mlir::InFlightDiagnostic &diag, ArrayRef<StringRef> names) {
  for (size_t i = 0; i < names.size() && i < 8; ++i)
    diag << (i ? ", " : "") << "'" << names[i] << "'";
  if (names.size() > 8)
    diag << ", ...";
}

void GraphImporter::warnMergedParameters() {
  // ONNX Script's optimizer keeps one initializer of several with equal
  // values: a freshly initialised model's LayerNorm weights and zero biases
  // all become one tensor, trained as one. PyTorch's tied parameters (an
  // LM head and its embedding) look the same in the file.
  llvm::StringSet<> folded;
  for (const auto &entry : foldedFrom_)
    for (const std::string &src : entry.getValue())
      folded.insert(src);
  SmallVector<StringRef> missing;
  for (const auto &p : signatureParameters_)
    if (!initializers_.count(p.getKey()) && !folded.count(p.getKey()))
      missing.push_back(p.getKey());
  // One missing name is most often a tie (GPT-2's wte); a fresh model's
  // merged norms come at least in pairs (weights and biases).
  if (missing.size() < 2)
    return;
  llvm::sort(missing);
  auto diag = mlir::emitWarning(FileLineColLoc::get(&ctx_, path_, 0, 0));
  diag << "torch.export lists " << missing.size() << " parameter"
       << (missing.size() == 1 ? "" : "s") << " that the file holds no initializer of (";
  appendNames(diag, missing);
  diag << "): parameters PyTorch ties to another are stored once, but the exporter's "
          "optimizer also merges parameters that merely hold equal values (a fresh "
          "model's norm weights and zero biases) and folds some into others (an "
          "eval-mode BatchNormalization's scale and bias into the Conv before it), and "
          "those are trained here as one tensor, unlike PyTorch; export with "
          "torch.onnx.export(..., optimize=False) to keep them apart";
}

void GraphImporter::warnFoldedConvParameters() {
  // The TorchScript exporter's constant folding merges an eval-mode
  // BatchNormalization into the Conv before it and names the result itself.
  SmallVector<StringRef> folded;
  for (const ::onnx::NodeProto &node : model_->graph().node()) {
    if (node.op_type() != "Conv" && node.op_type() != "ConvTranspose")
      continue;
    for (int i = 1; i < node.input_size() && i < 3; ++i)
      if (StringRef(node.input(i)).starts_with("onnx::") &&
          initializers_.count(node.input(i)) && !llvm::is_contained(folded, node.input(i)))
        folded.push_back(node.input(i));
  }
  if (folded.empty())
    return;
  auto diag = mlir::emitWarning(FileLineColLoc::get(&ctx_, path_, 0, 0));
  diag << folded.size() << " convolution weight" << (folded.size() == 1 ? "" : "s")
       << " or bias" << (folded.size() == 1 ? "" : "es") << " under a name the exporter made (";
  appendNames(diag, folded);
  diag << "): the TorchScript exporter folds an eval-mode BatchNormalization into the "
          "Conv before it, and the folded tensor is trained here as one, unlike "
          "PyTorch's separate convolution and batch-norm parameters; export with "
          "torch.onnx.export(..., do_constant_folding=False) to keep them apart";
}

bool GraphImporter::foldedFromParameter(StringRef name) const {
  auto it = foldedFrom_.find(name);
  if (it == foldedFrom_.end())
    return false;
  for (const std::string &src : it->second) {
    auto kind = exportKinds_.find(src);
    if ((kind != exportKinds_.end() && kind->second == "PARAMETER") ||
        signatureParameters_.count(src))
      return true;
  }
  return false;
}

/// As onnx's checker: an external-data location must be a relative path that
/// stays inside the model's directory.
static bool escapesModelDirectory(StringRef location) {
  bool escapes = location.empty() || llvm::sys::path::is_absolute(location) ||
                 location.starts_with("/") || location.starts_with("\\");
  for (auto it = llvm::sys::path::begin(location), end = llvm::sys::path::end(location);
       it != end; ++it)
    escapes |= *it == "..";
  return escapes;
}

Value GraphImporter::materializeInitializer(const ::onnx::TensorProto &t) {
  MLIRContext *ctx = &ctx_;
  Location loc = NameLoc::get(StringAttr::get(ctx, t.name()));
  // Before anything is built from the dims: isParameter multiplies them and
  // tensorProtoToAttr makes a type of them.
  if (std::string problem = tensorDimsProblem(t); !problem.empty()) {
    fileError() << "initializer '" << t.name() << "' " << problem;
    return {};
  }
  if (!isParameter(t)) {
    if (DenseElementsAttr attr = tensorProtoToAttr(ctx, t))
      return zero::onnx::ConstantOp::create(builder_, loc, attr);
  }
  Type elem = elementTypeFor(ctx, t.data_type());
  if (!elem) {
    fileError() << "initializer '" << t.name() << "' has unsupported data type "
                << dataTypeName(t.data_type());
    return {};
  }
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  auto type = RankedTensorType::get(shape, elem);
  WeightRef ref;
  ref.name = t.name();
  ref.proto = &t;
  ref.shape.assign(shape.begin(), shape.end());
  // Cannot overflow: tensorDimsProblem checked it above.
  uint64_t bytes = onnxElementSize(t.data_type());
  for (int64_t d : shape)
    bytes *= uint64_t(d);
  if (t.data_location() == ::onnx::TensorProto::EXTERNAL) {
    bool hasLength = false;
    for (const auto &kv : t.external_data()) {
      uint64_t value = 0;
      const bool isNumber = !StringRef(kv.value()).getAsInteger(10, value);
      if (kv.key() == "location") {
        ref.externalPath = kv.value();
      } else if (kv.key() == "offset" || kv.key() == "length") {
        if (!isNumber) {
          fileError() << "initializer '" << t.name() << "' has external-data "
                      << kv.key() << " '" << kv.value()
                      << "', which is not a non-negative integer";
          return {};
        }
        (kv.key() == "offset" ? ref.externalOffset : ref.externalLength) = value;
        hasLength |= kv.key() == "length";
      }
    }
    if (escapesModelDirectory(ref.externalPath)) {
      fileError() << "initializer '" << t.name() << "' keeps its data at '"
                  << ref.externalPath
                  << "', outside the model's directory; external-data "
                     "locations must be relative paths below the model";
      return {};
    }
    SmallString<256> full(llvm::sys::path::parent_path(path_));
    llvm::sys::path::append(full, ref.externalPath);
    ref.externalPath = std::string(full);
    if (hasLength && ref.externalLength != bytes) {
      fileError() << "initializer '" << t.name()
                  << "' has external-data length " << ref.externalLength
                  << " but its dims and type need " << bytes << " bytes";
      return {};
    }
    // --no-weights: the bytes are never read; the file may be absent.
    uint64_t fileSize = 0;
    if (!options_.withoutWeights &&
        (!llvm::sys::fs::is_regular_file(ref.externalPath) ||
         llvm::sys::fs::file_size(ref.externalPath, fileSize))) {
      fileError()
          << "initializer '" << t.name() << "' keeps its data in '"
          << ref.externalPath
          << "', which does not exist; put the external-data file next "
             "to the model (or compile without the weights, --no-weights, "
             "for zero-run --simulate)";
      return {};
    }
    if (!options_.withoutWeights && (ref.externalOffset > fileSize ||
                                     fileSize - ref.externalOffset < bytes)) {
      fileError() << "initializer '" << t.name() << "' needs " << bytes
                  << " bytes at offset " << ref.externalOffset << " of '"
                  << ref.externalPath << "', which has " << fileSize;
      return {};
    }
  }
  weights_.push_back(std::move(ref));

  // The global goes before the function (symbol names are made unique by the
  // symbol table); the load goes where the value is first used.
  ml_program::GlobalOp global;
  {
    OpBuilder::InsertionGuard guard(builder_);
    builder_.setInsertionPoint(func_);
    global = ml_program::GlobalOp::create(
        builder_, loc, t.name(), type, /*is_mutable=*/false,
        ml_program::ExternAttr::get(ctx, type), builder_.getStringAttr("private"));
    attrs::kTensor.set(global, builder_.getStringAttr(t.name()));
    // torch.export records which initializers are module buffers (rotary
    // frequencies, position ids): state, not parameters; training leaves
    // them alone as PyTorch does.
    // So is what the exporter folded from buffers and constants alone (a
    // causal mask, a rotary table): not a parameter of the module.
    // So are BatchNormalization's running statistics where the exporter
    // did not say (the TorchScript exporter).
    auto kind = exportKinds_.find(t.name());
    if ((kind != exportKinds_.end() && kind->second == "BUFFER") ||
        (foldedFrom_.count(t.name()) && !foldedFromParameter(t.name())) ||
        runningStatistics_.contains(t.name()))
      attrs::kBuffer.set(global, builder_.getUnitAttr());
    symbols_->insert(global);
  }
  return ml_program::GlobalLoadOp::create(builder_, loc, type,
                                          FlatSymbolRefAttr::get(global.getSymNameAttr()));
}

std::string GraphImporter::zeroSizedGraphInputs() {
  std::string out;
  for (BlockArgument arg : func_.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    if (type.getNumElements() != 0)
      continue;
    auto name = func_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "onnx.name");
    out += (out.empty() ? "" : ", ") + ("graph input '" + name.getValue() + "' (").str() +
           llvm::join(llvm::map_range(type.getShape(),
                                      [](int64_t d) { return std::to_string(d); }),
                      "x") +
           ")";
  }
  return out;
}

Value GraphImporter::lookup(const std::string &name) {
  auto it = values_.find(name);
  if (it != values_.end())
    return it->second;
  auto init = initializers_.find(name);
  if (init == initializers_.end())
    return {};
  Value v;
  if (auto tie = ties_.find(name); tie != ties_.end()) {
    // One parameter, seen through a view: trained and sharded once.
    v = lookup(tie->second.first);
    if (v && tie->second.second) {
      auto t = cast<RankedTensorType>(v.getType());
      v = zero::onnx::TransposeOp::create(
          builder_, NameLoc::get(StringAttr::get(&ctx_, name)),
          RankedTensorType::get({t.getDimSize(1), t.getDimSize(0)},
                                t.getElementType()),
          v, builder_.getDenseI64ArrayAttr({1, 0}));
    }
  } else {
    v = materializeInitializer(*init->second);
  }
  if (v)
    values_[name] = v;
  return v;
}

LogicalResult GraphImporter::importGraphInputs() {
  const ::onnx::GraphProto &graph = model_->graph();
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  llvm::StringSet<> known;
  std::string inputList;
  for (const auto &in : graph.input())
    if (!initializers_.count(in.name())) {
      known.insert(in.name());
      inputList += (inputList.empty() ? "" : ", ") + in.name();
    }
  for (const auto &kv : options_.inputShapes) {
    if (!known.contains(kv.first)) {
      fileError() << "--input-shape names '" << kv.first
                  << "', which is not a graph input (inputs: " << inputList << ")";
      return failure();
    }
  }
  // A negative dim_value is never valid (symbolic dims have a name, not a
  // value) and would make a type that the printed IR cannot express. Declared
  // types the importer does not use (outputs, value_info) are checked too: a
  // model that carries one is corrupt.
  auto checkDims = [&](const ::onnx::ValueInfoProto &v, StringRef what) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape())
      return success();
    const auto &shape = v.type().tensor_type().shape();
    for (int d = 0; d < shape.dim_size(); ++d) {
      if (shape.dim(d).has_dim_value() && shape.dim(d).dim_value() < 0) {
        fileError() << what << " '" << v.name() << "' has dimension "
                    << shape.dim(d).dim_value() << " (dim " << d
                    << "); dimensions must be non-negative, the model is corrupt";
        return failure();
      }
    }
    return success();
  };
  for (const auto &in : graph.input())
    if (!initializers_.count(in.name()) && failed(checkDims(in, "graph input")))
      return failure();
  for (const auto &out : graph.output())
    if (failed(checkDims(out, "graph output")))
      return failure();
  for (const auto &vi : graph.value_info())
    if (failed(checkDims(vi, "value_info")))
      return failure();
  for (const auto &in : graph.input()) {
    if (initializers_.count(in.name()))
      continue; // IR < 4 lists initializers as inputs too.
    if (!in.type().has_tensor_type()) {
      fileError() << "graph input '" << in.name()
                  << "' is not a tensor; only tensor inputs are supported";
      return failure();
    }
    const auto &tt = in.type().tensor_type();
    Type elem = elementTypeFor(&ctx_, tt.elem_type());
    if (!elem) {
      fileError() << "graph input '" << in.name() << "' has unsupported element type "
                  << dataTypeName(tt.elem_type());
      return failure();
    }
    SmallVector<int64_t> dims;
    auto fixed = options_.inputShapes.find(in.name());
    if (fixed != options_.inputShapes.end()) {
      if (tt.has_shape() && tt.shape().dim_size() != int(fixed->second.size())) {
        fileError() << "--input-shape " << in.name() << " gives "
                    << fixed->second.size() << " dimension(s) but the input has rank "
                    << tt.shape().dim_size();
        return failure();
      }
      for (int d = 0; d < int(fixed->second.size()); ++d) {
        int64_t v = fixed->second[d];
        if (tt.has_shape() && tt.shape().dim(d).has_dim_value() &&
            tt.shape().dim(d).dim_value() != v) {
          fileError() << "--input-shape " << in.name() << ": dimension " << d
                      << " is fixed to " << tt.shape().dim(d).dim_value()
                      << " in the model, not " << v;
          return failure();
        }
      }
      dims.assign(fixed->second.begin(), fixed->second.end());
    } else if (!tt.has_shape()) {
      fileError() << "graph input '" << in.name()
                  << "' has no shape; give one with --input-shape " << in.name()
                  << "=<d0>x<d1>...";
      return failure();
    } else {
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto &dim = tt.shape().dim(d);
        if (!dim.has_dim_value()) {
          std::string sym = dim.has_dim_param() ? dim.dim_param() : "?";
          fileError() << "graph input '" << in.name() << "' has symbolic dimension '"
                      << sym << "' (dim " << d << "); fix it with --input-shape "
                      << in.name() << "=<d0>x<d1>... (rank " << tt.shape().dim_size()
                      << ")";
          return failure();
        }
        dims.push_back(dim.dim_value());
      }
    }
    argTypes.push_back(RankedTensorType::get(dims, elem));
    argNames.push_back(in.name());
  }

  std::string fname = options_.functionName.empty() ? "forward" : options_.functionName;
  builder_.setInsertionPointToEnd(module_.getBody());
  func_ = func::FuncOp::create(builder_, FileLineColLoc::get(&ctx_, path_, 0, 0),
                               fname, builder_.getFunctionType(argTypes, {}));
  symbols_ = std::make_unique<SymbolTable>(module_);
  Block *entry = func_.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func_.setArgAttr(i, "onnx.name", builder_.getStringAttr(name));
    values_[name] = entry->getArgument(i);
  }
  builder_.setInsertionPointToStart(entry);
  return success();
}

LogicalResult GraphImporter::inlineFunction(const ::onnx::NodeProto &call,
                                            const ::onnx::FunctionProto &fn,
                                            int depth) {
  if (depth > 16) {
    fileError() << "node '" << call.name() << "': functions nest too deeply";
    return failure();
  }
  // Rename the function's values into a fresh scope bound to the call's values.
  std::string prefix = "__inline" + std::to_string(inlineCounter_++) + "/";
  llvm::StringMap<std::string> rename;
  for (int i = 0; i < fn.input_size(); ++i)
    rename[fn.input(i)] = i < call.input_size() ? call.input(i) : "";
  for (int i = 0; i < fn.output_size(); ++i)
    rename[fn.output(i)] = i < call.output_size() ? call.output(i) : "";
  auto mapName = [&](const std::string &n) -> std::string {
    if (n.empty())
      return n;
    auto it = rename.find(n);
    return it != rename.end() ? it->second : prefix + n;
  };
  llvm::StringMap<const ::onnx::AttributeProto *> callAttrs;
  for (const auto &a : call.attribute())
    callAttrs[a.name()] = &a;

  google::protobuf::RepeatedPtrField<::onnx::NodeProto> body;
  for (const ::onnx::NodeProto &n : fn.node()) {
    ::onnx::NodeProto *copy = body.Add();
    *copy = n;
    if (copy->name().empty())
      copy->set_name(call.name() + "/" + n.op_type());
    else
      copy->set_name(call.name() + "/" + n.name());
    for (auto &in : *copy->mutable_input())
      in = mapName(in);
    for (auto &out : *copy->mutable_output())
      out = mapName(out);
    copy->clear_attribute();
    for (const auto &a : n.attribute()) {
      if (a.ref_attr_name().empty()) {
        *copy->add_attribute() = a;
        continue;
      }
      auto it = callAttrs.find(a.ref_attr_name());
      if (it == callAttrs.end())
        continue; // The function's default applies.
      ::onnx::AttributeProto *na = copy->add_attribute();
      *na = *it->second;
      na->set_name(a.name());
    }
  }
  llvm::StringMap<int64_t> opsets;
  for (const auto &o : fn.opset_import())
    opsets[o.domain()] = o.version();
  return importNodes(body, opsets, depth + 1);
}

/// ONNX graphs are SSA: a second producer of a value would silently replace
/// the first for every later reader. Fails on an output of `node` that is
/// already produced, an initializer, a graph input, or listed twice.
LogicalResult GraphImporter::checkNodeOutputs(const ::onnx::NodeProto &node, Location loc) {
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string &out = node.output(i);
    if (out.empty())
      continue;
    auto fail = [&](const Twine &what) {
      mlir::emitError(loc) << node.op_type() << ": output '" << out << "' is "
                           << what << "; every value must be produced once";
      return failure();
    };
    if (auto it = producers_.find(out); it != producers_.end())
      return fail("already produced by node '" + it->second + "'");
    if (initializers_.count(out))
      return fail("also an initializer");
    if (isa_and_nonnull<BlockArgument>(values_.lookup(out)))
      return fail("also a graph input");
    for (int j = 0; j < i; ++j)
      if (node.output(j) == out)
        return fail("listed twice among the node's outputs");
  }
  return success();
}

/// The default domain's opset must be one this importer supports.
LogicalResult GraphImporter::checkOpset(const ::onnx::NodeProto &node, Location loc,
                                        int64_t opset) {
  if (opset < kMinOpset) {
    mlir::emitError(loc) << node.op_type() << ": the model uses opset " << opset
                         << " of the default domain; zero-opt accepts opsets "
                         << kMinOpset << " and newer (re-export with opset_version >= "
                         << kMinOpset << ")";
    return failure();
  }
  if (opset > kMaxOpset) {
    mlir::emitError(loc) << node.op_type() << ": opset " << opset
                         << " of the default domain is newer than this importer "
                            "supports ("
                         << kMinOpset << "-" << kMaxOpset
                         << "); re-export with opset_version <= " << kMaxOpset;
    return failure();
  }
  return success();
}

/// Every input of `node` is produced earlier (a tensor, or a sequence where
/// the op reads one), and ONNX's schema's required and variadic inputs are
/// present.
LogicalResult GraphImporter::checkInputs(const ::onnx::NodeProto &node, Location loc,
                                         int64_t opset) {
  // Which inputs are sequences: input 0 of the ops that read one, none of
  // any other op's.
  static const llvm::StringSet<> readsSequence = {
      "SequenceAt", "SequenceLength", "SequenceInsert", "SequenceErase",
      "ConcatFromSequence"};
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string &in = node.input(i);
    if (in.empty())
      continue;
    bool wantSequence = i == 0 && readsSequence.contains(node.op_type());
    bool isSequence = sequences_.count(in);
    if (!isSequence && !lookup(in)) {
      if (!initializers_.count(in))
        mlir::emitError(loc) << node.op_type() << ": input '" << in
                             << "' is not produced by any earlier node, graph input "
                                "or initializer";
      return failure();
    }
    if (isSequence != wantSequence) {
      mlir::emitError(loc) << node.op_type() << ": input '" << in << "' is "
                           << (isSequence ? "a sequence where a tensor"
                                          : "a tensor where a sequence")
                           << " is expected";
      return failure();
    }
  }
  // ONNX's own schema for the op at this opset says which inputs are
  // required (neither optional nor variadic) and how many there must be at
  // least: an op built on an absent operand could not even be type-checked.
  // Ops newer than the linked ONNX release have no schema here; their
  // importers check their operands themselves.
  if (InputArity arity; lookupInputArity(node.op_type(), opset, arity)) {
    for (const auto &[i, formal] : arity.required)
      if (i >= node.input_size() || node.input(i).empty()) {
        mlir::emitError(loc) << node.op_type() << ": required input " << i
                             << " ('" << formal << "') is missing; the node has "
                             << node.input_size() << " input(s)";
        return failure();
      }
    if (arity.variadicFrom >= 0)
      for (int i = arity.variadicFrom; i < node.input_size(); ++i)
        if (node.input(i).empty()) {
          mlir::emitError(loc) << node.op_type() << ": input " << i
                               << " is empty; the variadic inputs of "
                               << node.op_type() << " cannot be skipped";
          return failure();
        }
    if (node.input_size() < arity.minInputs) {
      mlir::emitError(loc) << node.op_type() << ": needs at least "
                           << arity.minInputs << " input(s), the node has "
                           << node.input_size();
      return failure();
    }
  }
  return success();
}

/// Records the imported results (or sequences) of `node` under its output
/// names; an output the importer did not produce is unsupported.
LogicalResult GraphImporter::bindResults(const ::onnx::NodeProto &node, Location loc,
                                         const NodeContext &nc) {
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string &out = node.output(i);
    if (out.empty())
      continue;
    if (auto seq = nc.sequenceResults.find(i); seq != nc.sequenceResults.end()) {
      sequences_[out] = seq->second;
      continue;
    }
    if (size_t(i) >= nc.results.size() || !nc.results[i]) {
      mlir::emitError(loc) << node.op_type() << ": output " << i << " ('" << out
                           << "') is not supported; only the outputs listed in "
                              "docs/ops.md are";
      return failure();
    }
    values_[out] = nc.results[i];
  }
  return success();
}

LogicalResult GraphImporter::importNode(const ::onnx::NodeProto &node,
                                        const llvm::StringMap<int64_t> &opsets,
                                        int depth) {
  ++nodeCounter_;
  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  Location loc = nodeLoc(node);
  std::string name = cast<NameLoc>(loc).getName().str();
  if (failed(checkNodeOutputs(node, loc)))
    return failure();
  // Model-local functions (exporters put decompositions there) are inlined.
  // Their body nodes produce the call's outputs (and check them); the call
  // node is then recorded as their producer.
  for (const auto &fn : model_->functions())
    if (fn.name() == node.op_type() && fn.domain() == node.domain()) {
      if (failed(inlineFunction(node, fn, depth)))
        return failure();
      for (const std::string &out : node.output())
        if (!out.empty())
          producers_[out] = name;
      return success();
    }
  for (const std::string &out : node.output())
    if (!out.empty())
      producers_[out] = name;

  auto opsetIt = opsets.find(domain);
  int64_t opset = opsetIt == opsets.end() ? 0 : opsetIt->second;
  const auto &table = getOpImporters();
  auto importer = table.find(node.op_type());
  if (!domain.empty() || importer == table.end()) {
    mlir::emitError(loc) << "unsupported operator " << node.op_type()
                         << " (domain '" << (node.domain().empty() ? "ai.onnx" : node.domain())
                         << "', opset " << opset
                         << "); docs/ops.md lists the supported operators";
    return failure();
  }
  if (failed(checkOpset(node, loc, opset)))
    return failure();
  if (failed(checkInputs(node, loc, opset)))
    return failure();
  NodeContext nc(*this, node, opset, loc);
  if (failed(importer->second(nc)))
    return failure();
  if (failed(bindResults(node, loc, nc)))
    return failure();
  if ((node.op_type() == "SoftmaxCrossEntropyLoss" ||
       node.op_type() == "NegativeLogLikelihoodLoss") &&
      lossUpcastByModel(node))
    if (Value loss = lookup(node.output(0)); loss && loss.getDefiningOp())
      ::zero::attrs::kComputeF32.set(loss.getDefiningOp(),
                                     builder_.getUnitAttr());
  return success();
}

LogicalResult GraphImporter::importNodes(
    const google::protobuf::RepeatedPtrField<::onnx::NodeProto> &nodes,
    const llvm::StringMap<int64_t> &opsets, int depth) {
  for (const ::onnx::NodeProto &node : nodes)
    if (failed(importNode(node, opsets, depth)))
      return failure();
  return success();
}

void GraphImporter::eraseDeadCode() {
  // Folding leaves the shape sub-graph's constants and loads without users.
  Block &body = func_.getBody().front();
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
      if (!op.use_empty() || op.hasTrait<OpTrait::IsTerminator>())
        continue;
      if (isOpTriviallyDead(&op) || isa<ml_program::GlobalLoadOp>(op)) {
        op.erase();
        changed = true;
      }
    }
  }
  // Parameters only a shape computation looked at are not model state.
  llvm::StringSet<> loaded;
  func_.walk([&](ml_program::GlobalLoadOp load) {
    loaded.insert(load.getGlobal().getRootReference().getValue());
  });
  llvm::StringSet<> keptTensors;
  for (auto global : llvm::make_early_inc_range(module_.getOps<ml_program::GlobalOp>())) {
    if (!loaded.contains(global.getSymName())) {
      global.erase();
      continue;
    }
    keptTensors.insert(attrs::kTensor.get(global).getValue());
  }
  llvm::erase_if(weights_, [&](const WeightRef &w) { return !keptTensors.contains(w.name); });
}

LogicalResult
GraphImporter::checkOperatorsSupported(const llvm::StringMap<int64_t> &opsets) {
  // Every unsupported operator of the graph at once, one error per operator
  // at its first node, with how many nodes use it: a user porting a model
  // learns the whole list from one run. Node names follow importNode's
  // numbering (the nodes of inlined functions count too).
  const auto &table = getOpImporters();
  std::function<int64_t(const ::onnx::FunctionProto &, int)> bodySize =
      [&](const ::onnx::FunctionProto &fn, int depth) -> int64_t {
    int64_t n = 0;
    for (const auto &inner : fn.node()) {
      ++n;
      if (depth < 8)
        for (const auto &f : model_->functions())
          if (f.name() == inner.op_type() && f.domain() == inner.domain())
            n += bodySize(f, depth + 1);
    }
    return n;
  };
  struct Unsupported {
    std::string firstNode, domain;
    int64_t opset = 0, count = 0;
    /// A supported op that cannot be imported here (NonZero of run-time
    /// data): the importer's own message for its first node.
    std::string reason;
  };
  llvm::MapVector<StringRef, Unsupported> unsupported;
  // Values computed from run-time data (graph inputs, and whatever reads one;
  // Shape and Size are constants once shapes are fixed). Import folds the
  // rest, so a NonZero of one of these can only fail: it is listed with the
  // unsupported operators.
  llvm::StringSet<> runtime;
  for (const auto &in : model_->graph().input())
    if (!initializers_.count(in.name()))
      runtime.insert(in.name());
  int64_t counter = nodeCounter_;
  for (const auto &node : model_->graph().node()) {
    ++counter;
    bool readsRuntime = llvm::any_of(
        node.input(), [&](const std::string &in) { return runtime.contains(in); });
    if (readsRuntime && node.op_type() != "Shape" && node.op_type() != "Size")
      for (const std::string &out : node.output())
        runtime.insert(out);
    const ::onnx::FunctionProto *local = nullptr;
    for (const auto &fn : model_->functions())
      if (fn.name() == node.op_type() && fn.domain() == node.domain())
        local = &fn;
    if (local) {
      counter += bodySize(*local, 0);
      continue;
    }
    std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    bool dataDependent = domain.empty() && node.op_type() == "NonZero" &&
                         node.input_size() && runtime.contains(node.input(0));
    if (domain.empty() && table.count(node.op_type()) && !dataDependent)
      continue;
    Unsupported &u = unsupported[node.op_type()];
    if (u.count++ == 0) {
      u.firstNode = node.name().empty()
                        ? node.op_type() + "_" + std::to_string(counter)
                        : node.name();
      u.domain = node.domain().empty() ? "ai.onnx" : node.domain();
      auto it = opsets.find(domain);
      u.opset = it == opsets.end() ? 0 : it->second;
      if (dataDependent)
        u.reason = dataDependentShapeMessage(node);
    }
  }
  for (auto &[op, u] : unsupported) {
    auto diag = mlir::emitError(NameLoc::get(StringAttr::get(&ctx_, u.firstNode),
                                             FileLineColLoc::get(&ctx_, path_, 0, 0)));
    if (!u.reason.empty()) {
      diag << op << ": " << u.reason;
      if (u.count > 1)
        diag << " (" << u.count << " nodes)";
      continue;
    }
    diag << "unsupported operator " << op << " (domain '" << u.domain
         << "', opset " << u.opset;
    if (u.count > 1)
      diag << "; " << u.count << " nodes";
    diag << "); docs/ops.md lists the supported operators";
  }
  return failure(!unsupported.empty());
}

std::unique_ptr<llvm::MemoryBuffer>
GraphImporter::externalBytes(const ::onnx::TensorProto &t) const {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool hasLength = false;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset" && StringRef(kv.value()).getAsInteger(10, offset))
      return nullptr;
    else if (kv.key() == "length") {
      if (StringRef(kv.value()).getAsInteger(10, length))
        return nullptr;
      hasLength = true;
    }
  }
  if (escapesModelDirectory(location))
    return nullptr;
  SmallString<256> full(llvm::sys::path::parent_path(path_));
  llvm::sys::path::append(full, location);
  uint64_t size = 0;
  if (llvm::sys::fs::file_size(full, size) || offset > size)
    return nullptr;
  if (!hasLength)
    length = size - offset;
  if (length > size - offset)
    return nullptr;
  auto buffer = llvm::MemoryBuffer::getFileSlice(full, length, offset);
  return buffer ? std::move(*buffer) : nullptr;
}

void GraphImporter::findTiedInitializers() {
  // The TorchScript exporter stores a tied embedding and LM head as two
  // initializers, one the transpose of the other (GPT-2, OPT, BLOOM, ...):
  // trained and sharded as two tensors that PyTorch keeps as one. Find 2-D
  // float initializers whose numbers are the transpose of an earlier one and
  // import them as that parameter seen through a Transpose. Only a tensor
  // the exporter made qualifies: the folded transpose has the exporter's own
  // name ("onnx::MatMul_592"), while a module's parameter keeps its path
  // (an autoencoder's "dec.weight" may start as the transpose of
  // "enc.weight" and still be trained on its own).
  // ONNX Script's optimizer (the dynamo exporter) folds the same transpose
  // under a name of its own ("val_312") and says what it folded it from.
  auto exporterMade = [&](StringRef name) {
    return name.starts_with("onnx::") || foldedFrom_.count(name);
  };
  using TP = ::onnx::TensorProto;
  struct Candidate {
    const TP *tensor;
    StringRef bytes; ///< the proto's raw data, a decoded copy in `owned`, or `read`'s external data
  };
  std::deque<std::string> owned;
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> read; ///< external data
  auto allElementsEqual = [](StringRef bytes, size_t elem) {
    for (size_t i = elem; i + elem <= bytes.size(); i += elem)
      if (std::memcmp(bytes.data(), bytes.data() + i, elem) != 0)
        return false;
    return true;
  };
  auto elements = [](const TP &t) -> int64_t {
    int64_t numel = 1;
    for (int64_t d : t.dims())
      if (d <= 0 || llvm::MulOverflow(numel, d, numel))
        return 0;
    return t.dims_size() == 0 ? 0 : numel;
  };
  // Only sizes that hold both an exporter's tensor and a module's are
  // compared, so external data is read for those alone.
  std::map<std::pair<int, int64_t>, std::pair<bool, bool>> kinds;
  for (const auto &t : model_->graph().initializer())
    if (isFloatTensor(t) && elements(t) >= 2) {
      auto &k = kinds[{t.data_type(), elements(t)}];
      (exporterMade(t.name()) ? k.first : k.second) = true;
    }
  std::map<std::pair<int, int64_t>, std::vector<Candidate>> bySize;
  for (const auto &t : model_->graph().initializer()) {
    const int64_t numel = elements(t);
    if (!isFloatTensor(t) || numel < 2 || ties_.count(t.name()))
      continue;
    if (auto k = kinds[{t.data_type(), numel}]; !k.first || !k.second)
      continue;
    const size_t elem = onnxElementSize(t.data_type());
    StringRef bytes = t.raw_data();
    if (t.data_location() == TP::EXTERNAL) {
      std::unique_ptr<llvm::MemoryBuffer> data = externalBytes(t);
      if (!data)
        continue; // materializeInitializer says why, if the graph uses it.
      bytes = data->getBuffer();
      read.push_back(std::move(data));
    } else if (!t.has_raw_data()) {
      owned.push_back(tensorProtoBytes(t));
      bytes = owned.back();
    }
    if (elem == 0 || bytes.size() != size_t(numel) * elem)
      continue;
    std::vector<Candidate> &same = bySize[{t.data_type(), numel}];
    for (const Candidate &earlier : same) {
      // Only transposes with varying values, square or not (a tied d x d
      // embedding too): an exporter-made copy of a constant (all ones) may
      // equal a parameter that merely starts out so.
      // Either order: the exporter's tensor may come first.
      const bool laterMade = exporterMade(t.name()) && !exporterMade(earlier.tensor->name());
      const bool earlierMade = !exporterMade(t.name()) && exporterMade(earlier.tensor->name());
      if (!laterMade && !earlierMade)
        continue;
      const TP &a = laterMade ? *earlier.tensor : t, &copy = laterMade ? t : *earlier.tensor;
      StringRef aBytes = laterMade ? earlier.bytes : bytes;
      StringRef copyBytes = laterMade ? bytes : earlier.bytes;
      bool transposed = false;
      if (a.dims_size() == 2 && copy.dims_size() == 2 && a.dims(0) == copy.dims(1) &&
          a.dims(1) == copy.dims(0) && !allElementsEqual(copyBytes, elem)) {
        const int64_t rows = a.dims(0), cols = a.dims(1);
        transposed = true;
        for (int64_t r = 0; r < rows && transposed; ++r)
          for (int64_t c = 0; c < cols; ++c)
            if (std::memcmp(aBytes.data() + (r * cols + c) * elem,
                            copyBytes.data() + (c * rows + r) * elem, elem) != 0) {
              transposed = false;
              break;
            }
      }
      if (transposed) {
        ties_[copy.name()] = {a.name(), true};
        mlir::emitRemark(FileLineColLoc::get(&ctx_, path_, 0, 0))
            << "initializer '" << copy.name() << "' holds the transpose of '"
            << a.name() << "'; imported as one parameter and its transpose "
            << "(the exporter untied them)";
        break;
      }
    }
    if (!ties_.count(t.name()))
      same.push_back({&t, bytes});
  }
}

FailureOr<ImportedModel> GraphImporter::run() {
  ctx_.loadDialect<zero::onnx::ONNXDialect, func::FuncDialect, ml_program::MLProgramDialect>();
  module_ = ModuleOp::create(FileLineColLoc::get(&ctx_, path_, 0, 0));
  OwningOpRef<ModuleOp> owned(module_);
  const ::onnx::GraphProto &graph = model_->graph();
  for (const auto &t : graph.initializer())
    initializers_[t.name()] = &t;
  readExportKinds();
  findRunningStatistics();
  findTransformersModules();
  if (options_.training) {
    warnMergedParameters();
    warnFoldedConvParameters();
  }
  findTiedInitializers();
  if (failed(importGraphInputs()))
    return failure();

  llvm::StringMap<int64_t> opsets;
  for (const auto &o : model_->opset_import())
    opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  if (failed(checkOperatorsSupported(opsets)))
    return failure();
  if (failed(importNodes(graph.node(), opsets, 0)))
    return failure();

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &out : graph.output()) {
    Value v = lookup(out.name());
    if (!v && initializers_.count(out.name()))
      return failure(); // materializeInitializer said why.
    if (!v && sequences_.count(out.name())) {
      fileError() << "graph output '" << out.name()
                  << "' is a sequence; only tensor outputs are supported";
      return failure();
    }
    if (!v) {
      fileError() << "graph output '" << out.name() << "' is not produced by any node";
      return failure();
    }
    auto computed = cast<RankedTensorType>(v.getType());
    if (out.type().has_tensor_type()) {
      const auto &tt = out.type().tensor_type();
      Type declaredElem = elementTypeFor(&ctx_, tt.elem_type());
      bool mismatch = declaredElem && declaredElem != computed.getElementType();
      if (tt.has_shape()) {
        mismatch |= tt.shape().dim_size() != computed.getRank();
        for (int d = 0; !mismatch && d < tt.shape().dim_size(); ++d)
          mismatch |= tt.shape().dim(d).has_dim_value() &&
                      tt.shape().dim(d).dim_value() != computed.getDimSize(d);
      }
      if (mismatch) {
        fileError() << "graph output '" << out.name() << "' is declared with a type "
                       "that differs from the computed " << computed
                    << "; the model is inconsistent (check the exporter or "
                       "--input-shape)";
        return failure();
      }
    }
    results.push_back(v);
    resultTypes.push_back(computed);
  }
  func::ReturnOp::create(builder_, func_.getLoc(), results);
  eraseDeadCode();
  func_.setType(builder_.getFunctionType(func_.getArgumentTypes(), resultTypes));
  for (auto [i, out] : llvm::enumerate(graph.output()))
    func_.setResultAttr(i, "onnx.name", builder_.getStringAttr(out.name()));
  if (!graph.name().empty())
    module_->setAttr("onnx.graph_name", builder_.getStringAttr(graph.name()));
  if (failed(mlir::verify(module_)))
    return failure();

  ImportedModel result;
  result.module = std::move(owned);
  result.weights = makeImportedWeights(std::move(model_), std::move(weights_));
  return result;
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

static std::unique_ptr<::onnx::ModelProto> readModel(MLIRContext &ctx, StringRef path) {
  auto fail = [&](const Twine &msg) {
    mlir::emitError(FileLineColLoc::get(&ctx, path, 0, 0)) << msg;
    return nullptr;
  };
  if (!llvm::sys::fs::exists(path))
    return fail("no such file; check the path");
  auto model = std::make_unique<::onnx::ModelProto>();
  if (path.ends_with(".onnxtext")) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer)
      return fail("cannot read the file: " + buffer.getError().message());
    std::string text = (*buffer)->getBuffer().str();
    auto status = ::onnx::OnnxParser::Parse(*model, text.c_str());
    if (!status.IsOK())
      return fail("not a valid ONNX text model: " + status.ErrorMessage());
    return model;
  }
  int fd = ::open(path.str().c_str(), O_RDONLY);
  if (fd < 0)
    return fail("cannot open the file");
  bool ok;
  {
    google::protobuf::io::FileInputStream raw(fd);
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(INT_MAX);
    ok = model->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  }
  ::close(fd);
  if (!ok || !model->has_graph())
    return fail("not an ONNX model (protobuf ModelProto with a graph could not be "
                "parsed); export it with torch.onnx.export or onnx.save");
  return model;
}

/// A model of a default-domain opset before kMinOpset (older exporters, most
/// of the ONNX model zoo) is lifted to kMinOpset by ONNX's own version
/// converter (onnx/version_converter: each op's adapter, e.g. Unsqueeze's and
/// ReduceSum's axes from attribute to input, Softmax's 2-D coercion made
/// explicit), with a note; what it cannot convert is an error naming the
/// converter's reason.
static LogicalResult liftOldOpset(MLIRContext &ctx, StringRef path, ::onnx::ModelProto &model) {
  int64_t opset = -1;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset < 0 || opset >= kMinOpset)
    return success();
  std::string reason;
  if (!convertOnnxOpset(model, int(kMinOpset), reason)) {
    mlir::emitError(FileLineColLoc::get(&ctx, path, 0, 0))
        << "the model uses opset " << opset << " of the default domain, and ONNX's version "
        << "converter cannot lift it to opset " << kMinOpset << " ("
        << StringRef(reason).trim() << "); re-export with opset_version >= " << kMinOpset;
    return failure();
  }
  llvm::errs() << "note: " << path << ": converted from opset " << opset << " to "
               << kMinOpset << " with ONNX's version converter\n";
  return success();
}

ImportedModel zero::importONNXFile(MLIRContext &context, StringRef path,
                                   const ImportOptions &options) {
  std::unique_ptr<::onnx::ModelProto> model = readModel(context, path);
  if (!model)
    return {};
  if (failed(liftOldOpset(context, path, *model)))
    return {};
  GraphImporter importer(context, path, options, std::move(model));
  FailureOr<ImportedModel> result = importer.run();
  if (failed(result))
    return {};
  return std::move(*result);
}
