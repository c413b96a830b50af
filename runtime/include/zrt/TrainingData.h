//===- TrainingData.h - zero-run --data: inputs of every step ---*- C++ -*-===//
//
// The data of a training run: one safetensors file, or a directory of them
// read in name order with their steps concatenated. For each program input
// NAME of per-rank shape [b, rest...] a file holds an array NAME of shape
// [steps, B, rest...] with B = b * world size and the program input's dtype;
// at step s, rank r reads rows [r*b, (r+1)*b) of step s (one pread of that
// byte range per input), never the whole file. Every file's header is
// checked when the data is opened, so a bad file stops the run before its
// first step; then only the file being read is kept open (a directory may
// hold more files than a process may have open).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAININGDATA_H
#define ZRT_TRAININGDATA_H

#include "zrt/Executor.h"
#include "zrt/Program.h"
#include "zrt/Status.h"
#include "zrt/TensorFile.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zrt {

/// The rows V of the smallest embedding table (an axis-0 Gather on a
/// floating-point table) that integer buffer `buffer` indexes, its location
/// in `where`; 0 when it indexes none. Its ids must lie in [0, V).
int64_t embeddingRows(const Program &program, uint32_t buffer, std::string *where);

class TrainingData {
public:
  /// Opens `path` (a safetensors file or a directory of *.safetensors) for
  /// `program` run by `worldSize` ranks, this being `rank`, and checks every
  /// file: each program input present with the program's dtype and shape
  /// [steps, b * worldSize, rest...], and the same step count for all inputs
  /// of a file. Errors name the file and the input.
  static Expected<TrainingData> open(const std::string &path,
                                     const Program &program, int worldSize,
                                     int rank);

  /// The data's path as given.
  const std::string &path() const { return path_; }
  /// Steps in all files together.
  int64_t steps() const { return steps_; }
  /// The files, in the order their steps are read.
  std::vector<std::string> files() const;
  /// Reads step `step` (0-based, < steps()) of every program input into its
  /// buffer.
  Status bindStep(Executor &executor, int64_t step) const;
  /// Bytes read by bindStep() so far.
  uint64_t bytesRead() const;
  /// Reads this rank's rows of steps [0, steps) of every input that gives
  /// the indices of an embedding (an axis-0 Gather on a floating-point table
  /// of V rows) and checks each id lies in [0, V): ONNX Gather would wrap a
  /// negative id around, and a larger one is out of range. The error names
  /// the file, the array, the step, the row and the id.
  Status checkTokenIds(int64_t steps) const;

private:
  struct File {
    std::string path;
    int64_t firstStep = 0;
    int64_t steps = 0;
    std::vector<SafetensorsEntry> entries; ///< per program input
  };
  struct Input {
    uint32_t buffer = 0;
    uint64_t rankBytes = 0; ///< bytes of one step's slice for this rank
    uint64_t stepBytes = 0; ///< bytes of one step of all ranks
    std::string name;
    DType dtype = DType::F32;
    int64_t rows = 0;       ///< rows of this rank's slice (dim 0)
    int64_t vocab = 0;      ///< rows of the embedding it indexes; 0: none
    std::string embedding;  ///< that Gather's location
  };
  TrainingData() = default;
  /// Sets input.vocab and input.embedding when an axis-0 Gather on a
  /// floating-point table takes `input` as its indices.
  static void findEmbedding(const Program &program, Input &input);

  std::string path_;
  int rank_ = 0;
  int worldSize_ = 1;
  int64_t steps_ = 0;
  std::vector<File> files_;
  std::vector<Input> inputs_; ///< per program input
  /// The file being read (files_[openIndex_]), opened on first use.
  mutable std::optional<SafetensorsFile> open_;
  mutable size_t openIndex_ = 0;
  mutable uint64_t bytesRead_ = 0;
};

} // namespace zrt

#endif // ZRT_TRAININGDATA_H
