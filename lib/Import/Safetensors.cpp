//===- Safetensors.cpp - Streaming imported weights to safetensors --------===//
//
// The importer never copies weights into the IR. After a successful import the
// parameters are written here, one after another, straight from the protobuf's
// buffers (or copied in chunks from external-data files), so peak memory stays
// close to the size of the model itself. The caller owns the file (zero-opt
// writes it through an OutputFile, so a failure leaves nothing behind).
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#define XXH_INLINE_ALL
#include <xxhash.h>

using namespace zero;
using namespace zero::import;

const char *zero::import::safetensorsDType(int32_t t) {
  using TP = ::onnx::TensorProto;
  switch (t) {
  case TP::FLOAT: return "F32";
  case TP::DOUBLE: return "F64";
  case TP::FLOAT16: return "F16";
  case TP::BFLOAT16: return "BF16";
  case TP::INT64: return "I64";
  case TP::INT32: return "I32";
  case TP::INT16: return "I16";
  case TP::INT8: return "I8";
  case TP::UINT8: return "U8";
  case TP::UINT16: return "U16";
  case TP::UINT32: return "U32";
  case TP::UINT64: return "U64";
  case TP::BOOL: return "BOOL";
  default: return "";
  }
}

size_t zero::import::onnxElementSize(int32_t t) {
  using TP = ::onnx::TensorProto;
  switch (t) {
  case TP::FLOAT: case TP::INT32: case TP::UINT32: return 4;
  case TP::DOUBLE: case TP::INT64: case TP::UINT64: return 8;
  case TP::FLOAT16: case TP::BFLOAT16: case TP::INT16: case TP::UINT16: return 2;
  case TP::INT8: case TP::UINT8: case TP::BOOL: return 1;
  default: return 0;
  }
}

std::string zero::import::tensorProtoBytes(const ::onnx::TensorProto &t) {
  if (t.has_raw_data())
    return t.raw_data();
  using TP = ::onnx::TensorProto;
  size_t elem = onnxElementSize(t.data_type());
  std::string out;
  auto append = [&](const void *p, size_t n) {
    out.append(static_cast<const char *>(p), n);
  };
  switch (t.data_type()) {
  case TP::FLOAT:
    append(t.float_data().data(), t.float_data_size() * 4);
    break;
  case TP::DOUBLE:
    append(t.double_data().data(), t.double_data_size() * 8);
    break;
  case TP::INT64:
    append(t.int64_data().data(), t.int64_data_size() * 8);
    break;
  case TP::UINT32: case TP::UINT64:
    for (uint64_t v : t.uint64_data())
      append(&v, elem);
    break;
  default:
    // INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16, BFLOAT16 live in
    // int32_data, one element per entry; keep the low `elem` bytes.
    for (int32_t v : t.int32_data())
      append(&v, elem);
    break;
  }
  return out;
}

namespace {

class SafetensorsWeights : public ImportedWeights {
public:
  SafetensorsWeights(std::unique_ptr<::onnx::ModelProto> model,
                     std::vector<WeightRef> weights)
      : model_(std::move(model)), weights_(std::move(weights)) {}

  size_t numTensors() const override { return weights_.size(); }

  uint64_t totalBytes() const override {
    uint64_t total = 0;
    for (const WeightRef &w : weights_)
      total += byteSize(w);
    return total;
  }

  std::string writeSafetensors(llvm::raw_ostream &out) const override;

  std::vector<std::string> externalDataFiles() const override {
    std::vector<std::string> files;
    for (const WeightRef &w : weights_)
      if (!w.externalPath.empty() &&
          std::find(files.begin(), files.end(), w.externalPath) == files.end())
        files.push_back(w.externalPath);
    return files;
  }

private:
  static uint64_t byteSize(const WeightRef &w) {
    uint64_t n = onnxElementSize(w.proto->data_type());
    for (int64_t d : w.shape)
      n *= d;
    return n;
  }

  std::unique_ptr<::onnx::ModelProto> model_;
  std::vector<WeightRef> weights_;
};

/// The XXH3-64 of an initializer's bytes, as 16 hex digits (zero-run checks
/// it when it loads the file: zrt/TensorFile.h). External data is read once
/// more for it; an error message when a tensor's bytes cannot be had.
static std::string checksumOf(const WeightRef &w, uint64_t n, std::string &error) {
  char hex[17];
  auto format = [&](uint64_t v) {
    std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)v);
    return std::string(hex);
  };
  if (w.externalPath.empty()) {
    if (w.proto->has_raw_data())
      return format(XXH3_64bits(w.proto->raw_data().data(), w.proto->raw_data().size()));
    std::string bytes = tensorProtoBytes(*w.proto);
    return format(XXH3_64bits(bytes.data(), bytes.size()));
  }
  std::ifstream in(w.externalPath, std::ios::binary);
  if (!in) {
    error = "cannot read external data '" + w.externalPath + "' of '" + w.name + "'";
    return "";
  }
  in.seekg(std::streamoff(w.externalOffset));
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  std::vector<char> chunk(1 << 20);
  for (uint64_t left = n; left;) {
    size_t step = size_t(std::min<uint64_t>(left, chunk.size()));
    in.read(chunk.data(), std::streamsize(step));
    if (size_t(in.gcount()) != step) {
      error = "external data '" + w.externalPath + "' ends before the " + std::to_string(n) +
              " bytes of '" + w.name + "' at offset " + std::to_string(w.externalOffset);
      return "";
    }
    XXH3_64bits_update(&state, chunk.data(), step);
    left -= step;
  }
  return format(XXH3_64bits_digest(&state));
}

std::string SafetensorsWeights::writeSafetensors(llvm::raw_ostream &out) const {
  // Header: name -> dtype, shape, [begin, end) within the data section; each
  // tensor's checksum in the metadata ("xxh3.NAME").
  llvm::json::Object header;
  llvm::json::Object metadata{{"format", "pt"}, {"producer", "zero-opt"}};
  uint64_t offset = 0;
  for (const WeightRef &w : weights_) {
    uint64_t n = byteSize(w);
    llvm::json::Array shape;
    for (int64_t d : w.shape)
      shape.push_back(d);
    header[w.name] = llvm::json::Object{
        {"dtype", safetensorsDType(w.proto->data_type())},
        {"shape", std::move(shape)},
        {"data_offsets", llvm::json::Array{offset, offset + n}}};
    offset += n;
    std::string error;
    std::string sum = checksumOf(w, n, error);
    if (!error.empty())
      return error;
    metadata["xxh3." + w.name] = sum;
  }
  header["__metadata__"] = std::move(metadata);
  std::string headerText;
  llvm::raw_string_ostream(headerText) << llvm::json::Value(std::move(header));
  while (headerText.size() % 8)
    headerText.push_back(' ');

  uint64_t len = headerText.size();
  char lenBytes[8];
  for (int i = 0; i < 8; ++i)
    lenBytes[i] = char((len >> (8 * i)) & 0xff);
  out.write(lenBytes, 8);
  out.write(headerText.data(), headerText.size());

  std::vector<char> chunk(1 << 20);
  for (const WeightRef &w : weights_) {
    uint64_t n = byteSize(w);
    if (w.externalPath.empty()) {
      if (w.proto->has_raw_data()) {
        if (w.proto->raw_data().size() != n)
          return std::string("initializer '" + w.name + "' has " +
                      std::to_string(w.proto->raw_data().size()) +
                      " bytes of data, its shape needs " + std::to_string(n));
        out.write(w.proto->raw_data().data(), size_t(n));
      } else {
        std::string bytes = tensorProtoBytes(*w.proto);
        if (bytes.size() != n)
          return std::string("initializer '" + w.name + "' has " +
                      std::to_string(bytes.size()) + " bytes of data, its shape needs " +
                      std::to_string(n));
        out.write(bytes.data(), size_t(n));
      }
      continue;
    }
    std::ifstream in(w.externalPath, std::ios::binary);
    if (!in)
      return std::string("cannot read external data '" + w.externalPath + "' of '" + w.name + "'");
    in.seekg(std::streamoff(w.externalOffset));
    uint64_t left = n;
    while (left) {
      size_t step = size_t(std::min<uint64_t>(left, chunk.size()));
      in.read(chunk.data(), std::streamsize(step));
      if (size_t(in.gcount()) != step)
        return std::string("external data '" + w.externalPath + "' ends before the " +
                    std::to_string(n) + " bytes of '" + w.name + "' at offset " +
                    std::to_string(w.externalOffset));
      out.write(chunk.data(), step);
      left -= step;
    }
  }
  return "";
}

} // namespace

std::unique_ptr<ImportedWeights>
zero::import::makeImportedWeights(std::unique_ptr<::onnx::ModelProto> model,
                                  std::vector<WeightRef> weights) {
  return std::make_unique<SafetensorsWeights>(std::move(model), std::move(weights));
}
