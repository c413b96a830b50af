//===- TrainingCheckpoint.h - Saving and resuming a training run -*- C++ -*-===//
//
// Library zrt_executor: a training run's trained state out of the
// executor's globals into files, and back. Every rank calls these: the
// pieces of sharded and pipelined globals are gathered or written where they
// are held. The file formats are zrt/Checkpoint.h's (zrt_io).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAININGCHECKPOINT_H
#define ZRT_TRAININGCHECKPOINT_H

#include "zrt/Communicator.h"
#include "zrt/Executor.h"
#include "zrt/Status.h"

#include <cstdint>
#include <string>

namespace zrt {

/// Writes every Parameter global as f32 (`parameters`; a 16-bit one's fp32
/// master copy, NAME.master, where the program has one), or every
/// OptimizerState and Counter global in its own dtype, under its tensor name
/// and full shape, to a safetensors file at `path` (atomically, each tensor's
/// checksum in its metadata: writeSafetensorsWithChecksums). Every rank
/// calls it: a sharded global's shards are gathered to rank 0 (rank-major,
/// the padding dropped), which writes the file. In a pipeline program each
/// global comes from the first stage holding it, and it fails if another
/// stage's copy (a tied parameter's) differs.
Status saveGlobals(const Executor &executor, Communicator &comm, bool parameters,
                   const std::string &path);

/// A checkpoint directory's newest complete checkpoint (DIR/latest names it).
struct CheckpointInfo {
  std::string path;   ///< DIR/step-NNNNNNNN
  int64_t step = 0;   ///< optimizer steps done; the data position
  int worldSize = 1;  ///< the world it was saved from
};

/// Writes the checkpoint of `step` under `dir` (every rank calls it): each
/// rank's model-rank-R.safetensors and optimizer-rank-R.safetensors (its
/// pieces: its shard of every sharded global, padding dropped, and on a
/// stage's first rank the replicated ones whole; in a pipeline each global
/// from the first stage holding it, the others' copies only compared with
/// it) and manifest.json (zrt/Checkpoint.h), first into
/// DIR/.step-NNNNNNNN.tmp (files fsynced), then renamed into place, then
/// DIR/latest updated. A crash before the end leaves the previous checkpoint
/// and DIR/latest as they were; a failure removes the tmp directory.
Status saveCheckpoint(const Executor &executor, Communicator &comm,
                      const std::string &dir, int64_t step);

/// Reads DIR/latest and its manifest.
Expected<CheckpointInfo> readLatestCheckpoint(const std::string &dir);

/// Loads a checkpoint's parameters and optimizer state into the executor's
/// globals; whole tensors, so the world size and pipeline layout may differ
/// from the saving one (each rank reads the globals its stage holds, of a
/// sharded one its replica's elements). First the ranks verify the
/// checkpoint's files between them (`rank` of `worldSize` checks every
/// worldSize-th): a damaged file fails the rank that checked it.
Status loadCheckpoint(Executor &executor, const CheckpointInfo &checkpoint, int rank,
                      int worldSize);

} // namespace zrt

#endif // ZRT_TRAININGCHECKPOINT_H
