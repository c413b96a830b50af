//===- OpSchemas.cpp - What ONNX's own schemas say about an op ------------===//
//
// The importer asks ONNX's operator schemas (libonnx's OpSchemaRegistry)
// which inputs of an op are required, before any op importer runs. The
// schema headers need C++ exceptions, which the rest of the compiler is built
// without, so this file alone is compiled with them and exposes plain data.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include <onnx/defs/schema.h>

#include <map>

bool zero::import::lookupInputArity(const std::string &opType, int64_t opset,
                                    InputArity &arity) {
  const ::onnx::OpSchema *schema =
      ::onnx::OpSchemaRegistry::Schema(opType, int(opset), "");
  if (!schema) {
    // Operators the importer takes that have no schema here: newer than the
    // linked ONNX release, or (Mish, opset 18) used at an older opset. Their
    // required inputs, from the ONNX specification.
    static const std::map<std::string, std::vector<std::string>> newer = {
        {"Gelu", {"X"}},
        {"Mish", {"X"}},
        {"RMSNormalization", {"X", "scale"}},
        {"RotaryEmbedding", {"X", "cos_cache", "sin_cache"}},
        {"Attention", {"Q", "K", "V"}},
    };
    auto it = newer.find(opType);
    if (it == newer.end())
      return false;
    arity.required.clear();
    for (size_t i = 0; i < it->second.size(); ++i)
      arity.required.push_back({int(i), it->second[i]});
    arity.minInputs = int(it->second.size());
    arity.variadicFrom = -1;
    return true;
  }
  arity.minInputs = schema->min_input();
  arity.required.clear();
  const auto &formals = schema->inputs();
  arity.variadicFrom = -1;
  for (size_t i = 0; i < formals.size(); ++i) {
    if (formals[i].GetOption() == ::onnx::OpSchema::Single)
      arity.required.push_back({int(i), formals[i].GetName()});
    if (formals[i].GetOption() == ::onnx::OpSchema::Variadic)
      arity.variadicFrom = int(i);
  }
  return true;
}
