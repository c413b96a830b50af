//===- ImporterImpl.h - Shared state of the ONNX importer -------*- C++ -*-===//
//
// The pieces the graph walker (ONNXImporter.cpp) and the per-operator importers
// (OpImporters.cpp) share: the value table with lazily materialised
// initializers, the node being imported, and helpers to read attributes and
// constant inputs. Not a public header.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_IMPORT_IMPORTERIMPL_H
#define ZERO_LIB_IMPORT_IMPORTERIMPL_H

#include "zero/Dialect/ONNX/ONNXDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zero::import {

/// MLIR element type of an ONNX TensorProto data type, or null.
mlir::Type elementTypeFor(mlir::MLIRContext *ctx, int32_t onnxType);

/// An ONNX TensorProto data type for messages: "COMPLEX64 (14)", or "14".
std::string dataTypeName(int32_t onnxType);

/// The default-domain opsets the importer accepts. The newest is the newest
/// opset of the onnx release the conformance suite runs (1.23.2): its node
/// tests at opsets 24-28 pass and are locked in. A newer opset may change an
/// operator in a way the importer does not know, so it is refused.
constexpr int64_t kMinOpset = 13;

/// ONNX's version converter on `model` (to default-domain opset `target`),
/// in VersionConvert.cpp: the one file built with C++ exceptions, which the
/// converter throws. False, with the converter's message in `error`, when it
/// cannot convert.
bool convertOnnxOpset(::onnx::ModelProto &model, int target, std::string &error);
constexpr int64_t kMaxOpset = 28;

/// Why a TensorProto's dims cannot describe a tensor ("has dims 2x-5, a
/// negative dimension", "has dims ... whose size overflows 64 bits"), or "" if
/// they can: every dim is non-negative and the byte size fits in int64. Checked
/// before any type or attribute is built from the dims.
std::string tensorDimsProblem(const ::onnx::TensorProto &t);

/// The elements of a TensorProto (inline data only) as a dense attribute, or
/// null if the data type is unsupported, the data is external, the dims are
/// invalid (see tensorDimsProblem) or the data does not match the dims.
mlir::DenseElementsAttr tensorProtoToAttr(mlir::MLIRContext *ctx,
                                          const ::onnx::TensorProto &t);

class GraphImporter;

/// An ONNX sequence value: its tensors. Sequences only exist in the importer:
/// with static shapes their lengths are known, so SplitToSequence, SequenceAt,
/// ConcatFromSequence, ... resolve to the tensors they hold.
using Sequence = llvm::SmallVector<mlir::Value>;

/// One ONNX node being imported: its inputs (null Values for omitted optional
/// The inputs ONNX's schema of an op requires (neither optional nor
/// variadic), by index and formal name, and the least number of inputs.
struct InputArity {
  int minInputs = 0;
  std::vector<std::pair<int, std::string>> required;
  /// Index of the variadic formal (every input from there on is given), or -1.
  int variadicFrom = -1;
};

/// Fills `arity` from ONNX's schema of `opType` at `opset` (default domain);
/// false when the linked ONNX release has no schema for it.
bool lookupInputArity(const std::string &opType, int64_t opset,
                      InputArity &arity);

/// inputs), attribute access, and a way to create onnx ops with inferred types.
class NodeContext {
public:
  NodeContext(GraphImporter &graph, const ::onnx::NodeProto &node,
              int64_t opset, mlir::Location loc);

  const ::onnx::NodeProto &node() const { return node_; }
  int64_t opset() const { return opset_; }
  mlir::Location loc() const { return loc_; }
  mlir::MLIRContext *ctx() const;
  mlir::OpBuilder &builder();

  size_t numInputs() const { return inputs_.size(); }
  /// Input `i`, or null when absent/empty.
  mlir::Value input(size_t i) const {
    return i < inputs_.size() ? inputs_[i] : mlir::Value();
  }
  mlir::RankedTensorType inputType(size_t i) const {
    return mlir::cast<mlir::RankedTensorType>(input(i).getType());
  }
  /// Number of outputs the node declares (including empty names).
  size_t numOutputs() const { return node_.output_size(); }
  /// True if output `i` has a name (is used by the graph).
  bool outputUsed(size_t i) const {
    return int(i) < node_.output_size() && !node_.output(int(i)).empty();
  }

  /// The constant value of input `i` (folded shape sub-graph, Constant node or
  /// small initializer), or null.
  mlir::DenseElementsAttr constInput(size_t i) const;
  /// Input `i` as a list of integers; emits an error naming the input if it is
  /// present but not constant.
  mlir::FailureOr<std::optional<llvm::SmallVector<int64_t>>>
  constIntsInput(size_t i, llvm::StringRef what);

  const ::onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t attrInt(llvm::StringRef name, int64_t dflt) const;
  float attrFloat(llvm::StringRef name, float dflt) const;
  std::string attrString(llvm::StringRef name, llvm::StringRef dflt) const;
  std::optional<llvm::SmallVector<int64_t>> attrInts(llvm::StringRef name) const;

  /// Normalises a possibly negative axis against `rank`; emits an error and
  /// returns failure when out of range.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what = "axis");

  /// Creates `onnx.<opName>` with `operands` and `attrs`, infers its result
  /// types, folds it when its operands are constant, and returns its results.
  /// `numResults` is only needed for variadic results (Split).
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  create(llvm::StringRef opName, mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attrs = {}, unsigned numResults = 1);
  /// Same, for single-result ops.
  mlir::FailureOr<mlir::Value> create1(llvm::StringRef opName,
                                       mlir::ValueRange operands,
                                       llvm::ArrayRef<mlir::NamedAttribute> attrs = {});
  /// An onnx.Constant.
  mlir::Value constant(mlir::DenseElementsAttr value);

  /// Named attribute helpers.
  mlir::NamedAttribute i64(llvm::StringRef name, int64_t v);
  mlir::NamedAttribute f32(llvm::StringRef name, float v);
  mlir::NamedAttribute f64(llvm::StringRef name, double v);
  mlir::NamedAttribute str(llvm::StringRef name, llvm::StringRef v);
  mlir::NamedAttribute i64s(llvm::StringRef name, llvm::ArrayRef<int64_t> v);
  mlir::NamedAttribute type(llvm::StringRef name, mlir::Type t);

  /// Emits an error at this node: "node 'n' (Op): <msg>".
  mlir::InFlightDiagnostic emitError();

  /// The graph inputs with a zero dimension, for messages ("graph input 'x'
  /// (0x4)"), or "" if there are none.
  std::string zeroSizedGraphInputs() const;

  /// The node's results, one per ONNX output (null for outputs not produced).
  llvm::SmallVector<mlir::Value> results;

  /// Input `i` as a sequence, or null if it is absent or not a sequence.
  const Sequence *sequenceInput(size_t i) const;
  /// Sequence-valued results by output index (ops that produce sequences).
  std::map<size_t, Sequence> sequenceResults;

private:
  GraphImporter &graph_;
  const ::onnx::NodeProto &node_;
  int64_t opset_;
  mlir::Location loc_;
  llvm::SmallVector<mlir::Value> inputs_;
};

/// Imports one ONNX operator. On success it fills ctx.results.
using OpImporter = std::function<mlir::LogicalResult(NodeContext &ctx)>;

/// Why a NonZero node whose input is not constant cannot be imported (after
/// "NonZero: "), naming its input and what to export instead.
std::string dataDependentShapeMessage(const ::onnx::NodeProto &node);

/// The table of supported ONNX operators (default domain), by op type.
const llvm::StringMap<OpImporter> &getOpImporters();

} // namespace zero::import

#endif // ZERO_LIB_IMPORT_IMPORTERIMPL_H
