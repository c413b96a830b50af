//===- TokenData.h - zero-run --tokens: windows of a token file -*- C++ -*-===//
//
// The data of a training run as nanoGPT and Megatron keep it: one flat file
// of token ids (uint16 or uint32, native byte order: nanoGPT's train.bin),
// memory-mapped, so a file of many GB costs only the pages the windows touch.
// Each optimizer step draws its global batch of B = b x dp windows of the
// program's sequence length S at seeded random offsets: row g of step s
// starts at tokenWindow(seed, s, g, count), a function of those alone, so
// every world size sees the same windows (data-parallel replica r takes rows
// [r*b, (r+1)*b)) and a run resumed at step s draws what the uninterrupted
// run drew there: the sampler's position is the step.
//
// The program's integer inputs of shape [b, S] are filled by name:
//   labels          the same window (Hugging Face models shift inside), or
//                   the window one token later (`next`: a model that does not)
//   attention_mask  ones
//   position_ids    0 .. S-1
//   any other       the window (input_ids)
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TOKENDATA_H
#define ZRT_TOKENDATA_H

#include "zrt/Executor.h"
#include "zrt/Program.h"
#include "zrt/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zrt {

/// The first token of row `row` of step `step` (0-based) among `count`
/// possible window starts: mix64-derived from (seed, step, row), mapped onto
/// [0, count) by a 128-bit multiply (no modulo bias worth the name).
uint64_t tokenWindow(uint64_t seed, int64_t step, int64_t row, uint64_t count);

class TokenData {
public:
  struct Options {
    std::string path;
    int elementBytes = 2; ///< 2: uint16 (--tokens-dtype u16), 4: uint32
    uint64_t seed = 0;
    bool nextLabels = false; ///< --labels next
    std::string flag = "--tokens"; ///< the option that named it, for messages
  };
  /// Maps `o.path` and matches it to `program`'s inputs for `worldSize`
  /// data-parallel replicas, this being replica `rank`. Errors name the file
  /// or the input and say what to do.
  static Expected<TokenData> open(const Options &o, const Program &program, int worldSize,
                                  int rank);

  TokenData(TokenData &&) noexcept;
  TokenData &operator=(TokenData &&) noexcept;
  ~TokenData();

  /// Tokens in the file.
  uint64_t tokens() const { return tokens_; }
  /// Fills every program input for step `step` (0-based); a token id
  /// outside the embedding the ids index is an error naming its offset.
  Status bindStep(Executor &executor, int64_t step) const;

private:
  enum class Fill { Window, Labels, Ones, Positions };
  struct Input {
    uint32_t buffer = 0;
    std::string name;
    DType dtype = DType::I64;
    Fill fill = Fill::Window;
    int64_t vocab = 0; ///< rows of the embedding it indexes; 0: none
    std::string embedding;
  };
  TokenData() = default;
  uint64_t token(uint64_t i) const;

  Options options_;
  int rank_ = 0, worldSize_ = 1;
  int64_t rows_ = 0, seq_ = 0; ///< per replica: b and S
  uint64_t tokens_ = 0;
  const void *map_ = nullptr;
  uint64_t mapBytes_ = 0;
  std::vector<Input> inputs_;
};

} // namespace zrt

#endif // ZRT_TOKENDATA_H
