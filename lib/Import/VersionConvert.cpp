//===- VersionConvert.cpp - ONNX's version converter, behind one call -----===//
//
// libonnx's version converter reports what it cannot convert by throwing;
// the rest of the importer is built without exceptions (LLVM's style), so
// this file alone is built with them and turns a throw into a message.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <exception>
#include <regex>

bool zero::import::convertOnnxOpset(::onnx::ModelProto &model, int target, std::string &error) {
  try {
    // The adapters read operand shapes (Gemm's and Add's broadcast, Softmax's
    // axis), as onnx.version_converter.convert_version infers them first.
    ::onnx::shape_inference::InferShapes(model);
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
