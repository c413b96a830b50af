//===- Bindings.h - Weights, inputs and outputs of a program ----*- C++ -*-===//
//
// Connects a program's globals, inputs and outputs to tensor files. Globals are
// read from a safetensors weights file; a sharded global (ShardSpec) reads only
// this rank's element range of the flattened tensor and zero-fills the padding.
// Inputs come from .npy files or from safetensors tensors with matching names.
// Every mismatch names the tensor and says what was expected and what was found.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_BINDINGS_H
#define ZRT_BINDINGS_H

#include "zrt/Executor.h"
#include "zrt/Program.h"
#include "zrt/Status.h"
#include "zrt/TensorFile.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

/// What loading the globals cost this rank.
struct WeightsStats {
  uint64_t residentBytes = 0; ///< bytes of global buffers held by this rank
  uint64_t bytesRead = 0;     ///< bytes read from the weights file
};

/// Which globals rank `rank` holds: all of them, or, in a program cut into
/// pipeline stages, those that an instruction running on `rank` (or an output
/// it writes: rank 0 writes them) touches. Any buffer overlapping a global's
/// bytes counts (views alias it).
std::vector<bool> globalsUsedOn(const Program &p, int rank);

/// For each global, the pipeline stages holding a copy of it: those all of
/// whose ranks use it (globalsUsedOn), ascending. Two stages for a tied
/// parameter (GPT-2's wte / lm_head on the first and the last), none for a
/// global that nothing reads. A program not cut into stages is one stage of
/// every rank, which holds every global: {0} each.
std::vector<std::vector<int>> stagesHoldingGlobals(const Program &p);

/// Reads every Parameter and Frozen global of the executor's program from
/// `weights` into its buffer: the whole tensor for replicated globals, world
/// rank `rank`'s shard for sharded ones. OptimizerState and Counter globals
/// are zero-filled and never looked up in the file. In a program cut into
/// pipeline stages, a global no instruction of this rank touches (nor an
/// output it writes) is skipped: each stage holds only its own weights.
Status loadGlobals(Executor &executor, const SafetensorsFile &weights, int rank,
                   WeightsStats *stats = nullptr);

/// Zero-fills the OptimizerState and Counter globals and starts each fp32
/// master as its parameter widened (what loadGlobals does for them; for
/// programs run without a weights file; `rank` picks a sharded master's part).
Status zeroStateGlobals(Executor &executor, int rank = 0);

/// Writes zeros over the whole buffer of `global`.
Status zeroGlobal(Executor &executor, const GlobalDesc &global);

/// The number of globals read from the weights file (Parameter and Frozen).
size_t countWeightGlobals(const Program &program);

/// A hash of what loadGlobals() would bind from `weights` for `program`: for
/// each global read from the file (Parameter, Frozen), in program order, its
/// tensor name and that tensor's header entry (dtype, shape, byte range; or
/// its absence). Ranks compare it to make sure they read the same weights
/// layout.
uint64_t weightsLayoutHash(const Program &program,
                           const SafetensorsFile &weights);

/// Where an input comes from: `name=path.npy`, or every tensor of a
/// safetensors file whose name is a program input (name empty).
struct InputSource {
  std::string name;
  std::string path;
};

/// Reads the program inputs from `sources` into their buffers. Every program
/// input must be given exactly once, with the buffer's dtype and shape; a named
/// source must name a program input.
Status bindInputs(Executor &executor, const std::vector<InputSource> &sources);

/// Writes the program outputs, in program order, to a safetensors file.
Status writeOutputs(const Executor &executor, const std::string &path);

} // namespace zrt

#endif // ZRT_BINDINGS_H
