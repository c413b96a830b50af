//===- RunFixture.cpp - A program loaded with its weights, for tests ------===//

#include "RunFixture.h"

#include "zrt/Bindings.h"
#include "zrt/TensorFile.h"

namespace zrt {
namespace test {

Status loadProgramWithWeights(const std::string &zrtPath,
                              const std::string &weightsPath, Backend &backend,
                              Communicator &comm, Expected<Program> &program,
                              std::unique_ptr<Executor> &executor) {
  executor.reset();
  program = loadProgram(zrtPath, &backend.kernels());
  if (!program)
    return program.status();
  Expected<std::unique_ptr<Executor>> created =
      Executor::create(*program, backend, comm);
  if (!created)
    return created.status();
  executor = std::move(*created);
  Expected<SafetensorsFile> weights = SafetensorsFile::open(weightsPath);
  if (!weights)
    return weights.status();
  return loadGlobals(*executor, *weights, 0);
}

} // namespace test
} // namespace zrt
