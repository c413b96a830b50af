//===- VersionConvert.cpp - ONNX's version converter, behind one call -----===//
//
// libonnx's version converter reports what it cannot convert by throwing;
// the rest of the importer is built without exceptions (LLVM's style), so
// this file alone is built with them and turns a throw into a message.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include <onnx/version_converter/convert.h>

#include <exception>

bool zero::import::convertOnnxOpset(::onnx::ModelProto &model, int target, std::string &error) {
  try {
    ::onnx::ModelProto lifted = ::onnx::version_conversion::ConvertVersion(model, target);
    model.Swap(&lifted);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
  } catch (...) {
    error = "an unknown error";
  }
  return false;
}
