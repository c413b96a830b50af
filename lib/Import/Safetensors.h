//===- Safetensors.h - Writing imported weights -----------------*- C++ -*-===//
//
// Where each imported parameter's bytes live (inline in the ModelProto or in an
// external-data file) and the writer that streams them into a safetensors file.
// Not a public header.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_IMPORT_SAFETENSORS_H
#define ZERO_LIB_IMPORT_SAFETENSORS_H

#include "zero/Import/ONNXImporter.h"

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

namespace zero::import {

/// One parameter: its tensor name and where its bytes come from.
struct WeightRef {
  std::string name;
  std::vector<int64_t> shape;
  const ::onnx::TensorProto *proto = nullptr;
  std::string externalPath; ///< empty: data inline in `proto`
  uint64_t externalOffset = 0;
  uint64_t externalLength = 0; ///< 0: to the end of the file
};

/// The little-endian element bytes of an inline TensorProto, whichever of its
/// typed fields holds them.
std::string tensorProtoBytes(const ::onnx::TensorProto &t);

/// safetensors dtype string ("F32", "I64", ...) of an ONNX data type, or "".
const char *safetensorsDType(int32_t onnxType);

/// Bytes per element of an ONNX data type (0 if unsupported).
size_t onnxElementSize(int32_t onnxType);

/// Takes ownership of the model so the weights can be streamed from it later.
std::unique_ptr<ImportedWeights>
makeImportedWeights(std::unique_ptr<::onnx::ModelProto> model,
                    std::vector<WeightRef> weights);

} // namespace zero::import

#endif // ZERO_LIB_IMPORT_SAFETENSORS_H
