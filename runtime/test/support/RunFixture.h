//===- RunFixture.h - A program loaded with its weights, for tests -*- C++
//-*-===//
//
// The start the run-mode tests share: a .zrt program loaded for a backend, its
// executor over a communicator and the weights file's globals bound, as
// zero-run does before a forward or a training run.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TEST_RUNFIXTURE_H
#define ZRT_TEST_RUNFIXTURE_H

#include "zrt/Backend.h"
#include "zrt/Communicator.h"
#include "zrt/Executor.h"
#include "zrt/Program.h"
#include "zrt/Status.h"

#include <memory>
#include <string>

namespace zrt {
namespace test {

/// Loads the program at `zrtPath` for `backend` into `program`, makes its
/// executor over `comm` into `executor` and loads rank 0's globals from the
/// safetensors file at `weightsPath`. `program` must outlive `executor`.
Status loadProgramWithWeights(const std::string &zrtPath,
                              const std::string &weightsPath, Backend &backend,
                              Communicator &comm, Expected<Program> &program,
                              std::unique_ptr<Executor> &executor);

} // namespace test
} // namespace zrt

#endif // ZRT_TEST_RUNFIXTURE_H
