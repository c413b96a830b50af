//===- Checkpoint.h - Sharded training checkpoints -------------*- C++ -*-===//
//
// A checkpoint directory (DIR/step-NNNNNNNN) written by zero-run --save-dir:
// every rank's own safetensors files, `model-rank-RRRRR.safetensors` (trained
// parameters) and `optimizer-rank-RRRRR.safetensors` (optimizer state and
// counters), each holding the rank's pieces of the tensors, and
// `manifest.json`, written last, which says for every tensor its dtype, full
// shape, kind (model or optimizer) and pieces: which rank's file holds which
// element range of the flattened tensor. A replicated tensor is one piece in
// rank 0's file (in a pipeline program's checkpoint, in the file of the first
// rank of the first stage holding it; a sharded one in that stage's ranks').
// Reading a range (resume at any world size or pipeline layout) or a whole
// tensor (consolidation) reads the pieces that overlap it.
//
// Format zero-checkpoint-3 adds checksums (XXH3-64, zrt/Checksum.h), taken as
// the bytes stream out: every rank file's size and checksum ("files"), every
// piece's data checksum, and the manifest's own ("manifest_xxh3", over its
// compact JSON without that key). Resume, `zero-ckpt consolidate` and
// `zero-ckpt verify` read manifests through readCheckpointManifest and check
// files through verifyCheckpointFiles, so all three refuse the same damage,
// naming the file and the tensor. Format 2 (no checksums) is still read.
//
//===----------------------------------------------------------------------===//

#ifndef ZRT_CHECKPOINT_H
#define ZRT_CHECKPOINT_H

#include "zrt/Status.h"
#include "zrt/Tensor.h"
#include "zrt/TensorFile.h"

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zrt {

/// Elements [offset, offset + count) of a tensor, in `rank`'s file.
struct CheckpointPiece {
  int rank = 0;
  uint64_t offset = 0;
  uint64_t count = 0;
  std::optional<uint64_t> xxh3; ///< of the piece's data bytes (format 3)
};

struct CheckpointTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string kind; ///< "model" or "optimizer"
  std::vector<CheckpointPiece> pieces;
  uint64_t numel() const;
};

/// One rank file of a checkpoint.
struct CheckpointFile {
  std::string kind; ///< "model" or "optimizer"
  int rank = 0;
  uint64_t bytes = 0;           ///< format 3
  std::optional<uint64_t> xxh3; ///< of all of its bytes (format 3)
};

struct CheckpointManifest {
  std::string path; ///< DIR/step-NNNNNNNN
  int formatVersion = 3;
  int64_t step = 0;
  int worldSize = 1;
  /// Every rank's model and optimizer files: rank-major, model first.
  std::vector<CheckpointFile> files;
  std::string program; ///< the program that saved it, as zero-run was given it
  std::vector<CheckpointTensor> tensors;
  const CheckpointTensor *find(const std::string &name) const;
};

/// DIR/step-NNNNNNNN/<kind>-rank-RRRRR.safetensors
std::string checkpointRankFile(const std::string &checkpointDir, const std::string &kind,
                               int rank);

/// The checkpoint DIR/latest names (DIR a --save-dir), or DIR itself when it
/// holds a manifest.json. DIR/latest must name a step-NNNNNNNN directory in
/// DIR; anything else (a path elsewhere, garbage) is an error.
Expected<std::string> resolveCheckpoint(const std::string &dir);

/// Reads and checks a checkpoint's manifest.json: its checksum (format 3),
/// the tensor entries (unique names, pieces covering each tensor in order,
/// ranks inside the world), the tensor count, and a model and an optimizer
/// file for every rank of world_size.
Expected<CheckpointManifest> readCheckpointManifest(const std::string &checkpointDir);

/// manifest.json's text (format 3) for the JSON object `manifest`: the
/// object with "manifest_xxh3" added.
std::string sealCheckpointManifest(const nlohmann::json &manifest);

/// Checks the rank files against the manifest: each one holds exactly the
/// tensors the manifest places in it, and (format 3) has its size and
/// checksum; where a checksum differs, the damaged tensor is named. Checks
/// the files whose index in manifest.files is `first` modulo `stride`, so
/// that ranks can share the reading. Returns every problem found, one line
/// each, naming the file.
std::vector<std::string> verifyCheckpointFiles(const CheckpointManifest &manifest,
                                               int first = 0, int stride = 1);

/// Reads element ranges of a checkpoint's tensors from the rank files
/// (opened on first use).
class CheckpointReader {
public:
  explicit CheckpointReader(const CheckpointManifest &manifest) : manifest_(manifest) {}
  /// Elements [first, last) of `tensor` into `dst`.
  Status read(const CheckpointTensor &tensor, uint64_t first, uint64_t last, void *dst);

private:
  Expected<const SafetensorsFile *> file(const std::string &kind, int rank);
  const CheckpointManifest &manifest_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
};

/// Writes the tensors of `kind` whole, under their names, to a safetensors
/// file at `out`, streaming: at most `chunkBytes` of tensor data in memory;
/// each tensor's checksum in the metadata, as zero-run --save writes them
/// (a first pass over the pieces). A model tensor trained in 16 bits is
/// taken from its fp32 master (NAME.master) when the checkpoint has one, as
/// --save writes it; `dtype` (f32, f16 or bf16) converts the model's
/// floating-point tensors (rounding to nearest even), as DeepSpeed's
/// stage3_gather_16bit_weights_on_model_save writes 16-bit weights.
Status consolidateCheckpoint(const CheckpointManifest &manifest, const std::string &kind,
                             const std::string &out, std::optional<DType> dtype = std::nullopt,
                             uint64_t chunkBytes = 16u << 20);

} // namespace zrt

#endif // ZRT_CHECKPOINT_H
