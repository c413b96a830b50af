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
//===----------------------------------------------------------------------===//

#ifndef ZRT_CHECKPOINT_H
#define ZRT_CHECKPOINT_H

#include "zrt/Status.h"
#include "zrt/Tensor.h"
#include "zrt/TensorFile.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zrt {

/// Elements [offset, offset + count) of a tensor, in `rank`'s file.
struct CheckpointPiece {
  int rank = 0;
  uint64_t offset = 0;
  uint64_t count = 0;
};

struct CheckpointTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string kind; ///< "model" or "optimizer"
  std::vector<CheckpointPiece> pieces;
  uint64_t numel() const;
};

struct CheckpointManifest {
  std::string path; ///< DIR/step-NNNNNNNN
  int64_t step = 0;
  int worldSize = 1;
  std::string program; ///< the program that saved it, as zero-run was given it
  std::vector<CheckpointTensor> tensors;
  const CheckpointTensor *find(const std::string &name) const;
};

/// DIR/step-NNNNNNNN/<kind>-rank-RRRRR.safetensors
std::string checkpointRankFile(const std::string &checkpointDir, const std::string &kind,
                               int rank);

/// The checkpoint DIR/latest names (DIR a --save-dir), or DIR itself when it
/// holds a manifest.json.
Expected<std::string> resolveCheckpoint(const std::string &dir);

/// Reads and checks a checkpoint's manifest.json.
Expected<CheckpointManifest> readCheckpointManifest(const std::string &checkpointDir);

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
/// file at `out`, streaming: at most `chunkBytes` of tensor data in memory.
Status consolidateCheckpoint(const CheckpointManifest &manifest, const std::string &kind,
                             const std::string &out, uint64_t chunkBytes = 16u << 20);

} // namespace zrt

#endif // ZRT_CHECKPOINT_H
