//===- TestGen.cpp - zrt-testgen: write example programs ------------------===//
//
// Writes the example linear model (a ZeRO-3 sharded weight all-gathered on a
// communication stream, a MatMul + Add on the compute stream, an all-reduce of
// the result back on the communication stream) with its weights, input and expected
// outputs, so zero-run can be tried and tested without the compiler:
//   zrt-testgen DIR [--world N]
//   mpirun -np N zero-run DIR/model.zrt --weights DIR/weights.safetensors \
//       --input x=DIR/x.npy --output DIR/out.safetensors
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char **argv) {
  std::string dir;
  int world = 1;
  bool usage = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--world" && i + 1 < argc)
      world = std::atoi(argv[++i]);
    else if (dir.empty() && arg[0] != '-')
      dir = arg;
    else
      usage = true;
  }
  if (usage || dir.empty() || world < 1) {
    std::fprintf(stderr, "usage: zrt-testgen DIR [--world N]\n");
    return 2;
  }
  zrt::Status status = zrt::test::writeLinearModel(dir, world);
  if (!status.isOk()) {
    std::fprintf(stderr, "zrt-testgen: error: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
