//===- VersionConvert.cpp - ONNX's version converter, behind one call -----===//
//
// libonnx's version converter reports what it cannot convert by throwing;
// the rest of the importer is built without exceptions (LLVM's style), so
// this file alone is built with them and turns a throw into a message. Before
// converting it infers shapes (the adapters read them) and keeps what the
// converter would change the meaning of (an opset-6 PRelu's per-channel slope).
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <exception>
#include <regex>

namespace {

/// Before opset 7, PRelu applied a slope of C values to the channels of X
/// [N, C, D1, ...] (dim 1); from 7 it broadcasts like numpy, and ONNX's
/// converter leaves the slope as it is. A constant such slope becomes
/// [C, 1, ..., 1], which broadcasts from 7 on as it applied before.
void keepPReluPerChannel(::onnx::ModelProto &model) {
  int64_t opset = 0;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset >= 7)
    return;
  ::onnx::GraphProto *g = model.mutable_graph();
  auto rankOf = [&](const std::string &name) -> int {
    for (const auto *list : {&g->input(), &g->value_info()})
      for (const ::onnx::ValueInfoProto &v : *list)
        if (v.name() == name && v.type().tensor_type().has_shape())
          return v.type().tensor_type().shape().dim_size();
    return -1;
  };
  for (const ::onnx::NodeProto &node : g->node()) {
    if (node.op_type() != "PRelu" || node.input_size() != 2)
      continue;
    const int rank = rankOf(node.input(0));
    if (rank <= 2)
      continue;
    bool reshaped = false;
    for (::onnx::TensorProto &t : *g->mutable_initializer())
      if (t.name() == node.input(1) && t.dims_size() == 1 && t.dims(0) > 1) {
        for (int i = 2; i < rank; ++i)
          t.add_dims(1);
        reshaped = true;
      }
    // An IR-3 model lists its initializers as graph inputs too.
    if (reshaped)
      for (::onnx::ValueInfoProto &v : *g->mutable_input())
        if (v.name() == node.input(1) && v.type().tensor_type().has_shape())
          for (int i = 2; i < rank; ++i)
            v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
  }
}

} // namespace

bool zero::import::convertOnnxOpset(::onnx::ModelProto &model, int target, std::string &error) {
  try {
    // The adapters read operand shapes (Gemm's and Add's broadcast, Softmax's
    // axis), as onnx.version_converter.convert_version infers them first.
    ::onnx::shape_inference::InferShapes(model);
    keepPReluPerChannel(model);
    ::onnx::ModelProto lifted = ::onnx::version_conversion::ConvertVersion(model, target);
    model.Swap(&lifted);
    return true;
  } catch (const std::exception &e) {
    // The converter's messages are its assertions' text: "FILE:LINE: FN:
    // Assertion `COND` failed: REASON". Keep the reason.
    std::string what = e.what();
    if (size_t at = what.rfind("failed: "); at != std::string::npos)
      what = what.substr(at + 8);
    static const std::regex where("^\\S+:[0-9]+: \\w+: ");
    for (std::smatch m; std::regex_search(what, m, where);)
      what = m.suffix().str();
    what.erase(std::remove(what.begin(), what.end(), '$'), what.end());
    while (!what.empty() && (what.back() == '.' || what.back() == ' ' || what.back() == '\n'))
      what.pop_back();
    error = what.empty() ? std::string("no reason given") : what;
  } catch (...) {
    error = "an unknown error";
  }
  return false;
}
