//===- ONNXImporter.h - ONNX model -> onnx dialect --------------*- C++ -*-===//
//
// The front door of the compiler: reads an ONNX model (binary protobuf, or
// ONNX's text format for tests), fixes symbolic input dimensions, and builds a
// module with one function whose body is onnx dialect ops. Initializers that are
// model parameters become ml_program.global symbols; their bytes go to a
// safetensors file, never into the IR.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_IMPORT_ONNXIMPORTER_H
#define ZERO_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zero {

/// What the user told the importer on the command line.
struct ImportOptions {
  /// `--input-shape name=2x8`: static shapes for graph inputs.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Name of the function to create; empty means "forward".
  std::string functionName;
  /// The model is imported to be trained: say which of its module's
  /// parameters the file does not hold apart.
  bool training = false;
  /// `--no-weights`: the parameters' bytes are never read, so their
  /// external-data files may be absent (a program compiled to be simulated
  /// or planned, not run); nothing can write the weights.
  bool withoutWeights = false;
};

/// The weights of an imported model: where each global's bytes are, so they can
/// be streamed to a safetensors file without another copy in memory.
class ImportedWeights {
public:
  virtual ~ImportedWeights();
  /// Writes every parameter, in safetensors format, to `out`. Returns an
  /// error message, empty on success.
  virtual std::string writeSafetensors(llvm::raw_ostream &out) const = 0;
  /// The external-data files the weights are read from (full paths).
  virtual std::vector<std::string> externalDataFiles() const = 0;
  /// Number of tensors and their total bytes.
  virtual size_t numTensors() const = 0;
  virtual uint64_t totalBytes() const = 0;
};

/// The result of a successful import.
struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<ImportedWeights> weights;
};

/// Parses `s` ("2x8", "2x8x64", "" for a scalar) into dims; false on bad syntax.
bool parseShape(llvm::StringRef s, std::vector<int64_t> &dims);

/// Imports the model at `path` (`.onnx`, or `.onnxtext` in ONNX's text format).
/// On failure, reports errors through the context's diagnostic engine, each
/// naming the file and, where there is one, the ONNX node, and returns a model
/// with a null module.
ImportedModel importONNXFile(mlir::MLIRContext &context, llvm::StringRef path,
                             const ImportOptions &options);

} // namespace zero

#endif // ZERO_IMPORT_ONNXIMPORTER_H
