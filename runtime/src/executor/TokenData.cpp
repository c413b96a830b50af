//===- TokenData.cpp - zero-run --tokens: windows of a token file ---------===//
//
// See TokenData.h. The file is mapped read-only once; bindStep() reads this
// replica's b windows of the step from the mapping (the kernel pages them in)
// and writes every input in the program input's integer type.
//
//===----------------------------------------------------------------------===//

#include "zrt/TokenData.h"
#include "zrt/TrainingData.h" // embeddingRows

#include "math/ElementwiseMath.h" // mix64

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace zrt {

uint64_t tokenWindow(uint64_t seed, int64_t step, int64_t row, uint64_t count) {
  const uint64_t key = math::mix64(math::mix64(seed) ^ math::mix64(uint64_t(step) +
                                                                   0x8CB92BA72F3D8DD7ull));
  const uint64_t v = math::mix64(key + uint64_t(row) * 0x9E3779B97F4A7C15ull);
  return uint64_t((unsigned __int128)v * count >> 64);
}

Expected<TokenData> TokenData::open(const Options &o, const Program &program, int worldSize,
                                    int rank) {
  const std::string what = o.flag + " " + o.path;
  TokenData data;
  data.options_ = o;
  data.rank_ = rank;
  data.worldSize_ = worldSize;
  if (program.inputs.empty())
    return Status::error(what + ": the program has no inputs to fill");
  for (const BindingDesc &in : program.inputs) {
    const BufferDesc &b = program.buffers[in.buffer];
    if ((b.dtype != DType::I64 && b.dtype != DType::I32) || b.shape.size() != 2)
      return Status::error(what + ": program input \"" + in.name + "\" is " +
                           dtypeName(b.dtype) + " of rank " + std::to_string(b.shape.size()) +
                           "; --tokens fills integer inputs of shape [batch, sequence] "
                           "(token ids, labels, attention_mask, position_ids); pass --data "
                           "for other inputs");
    if (data.rows_ == 0) {
      data.rows_ = b.shape[0];
      data.seq_ = b.shape[1];
    } else if (b.shape[0] != data.rows_ || b.shape[1] != data.seq_) {
      return Status::error(what + ": program input \"" + in.name + "\" is [" +
                           std::to_string(b.shape[0]) + ", " + std::to_string(b.shape[1]) +
                           "], the others [" + std::to_string(data.rows_) + ", " +
                           std::to_string(data.seq_) + "]; --tokens needs one batch and "
                           "sequence length");
    }
    Input input;
    input.buffer = in.buffer;
    input.name = in.name;
    input.dtype = b.dtype;
    if (in.name == "labels")
      input.fill = Fill::Labels;
    else if (in.name == "attention_mask")
      input.fill = Fill::Ones;
    else if (in.name == "position_ids")
      input.fill = Fill::Positions;
    if (input.fill == Fill::Window || input.fill == Fill::Labels)
      input.vocab = embeddingRows(program, in.buffer, &input.embedding);
    data.inputs_.push_back(input);
  }
  if (data.rows_ <= 0 || data.seq_ <= 0)
    return Status::error(what + ": the program's inputs are empty");

  const int fd = ::open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(what + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(what + ": not a regular file");
  }
  const uint64_t bytes = uint64_t(st.st_size);
  if (bytes % uint64_t(o.elementBytes) != 0) {
    ::close(fd);
    return Status::error(what + ": " + std::to_string(bytes) + " bytes is not a whole number "
                         "of " + std::to_string(8 * o.elementBytes) + "-bit tokens; is "
                         "--tokens-dtype right?");
  }
  data.tokens_ = bytes / uint64_t(o.elementBytes);
  const uint64_t need = uint64_t(data.seq_) + (o.nextLabels ? 1 : 0);
  if (data.tokens_ < need) {
    ::close(fd);
    return Status::error(what + ": " + std::to_string(data.tokens_) + " tokens, fewer than "
                         "one window of " + std::to_string(need) + " (the program's sequence "
                         "length" + (o.nextLabels ? " + 1 for --labels next" : "") + ")");
  }
  void *map = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return Status::error(what + ": cannot map: " + std::strerror(errno));
  madvise(map, bytes, MADV_RANDOM);
  data.map_ = map;
  data.mapBytes_ = bytes;
  return data;
}

TokenData::TokenData(TokenData &&other) noexcept { *this = std::move(other); }

TokenData &TokenData::operator=(TokenData &&other) noexcept {
  if (this != &other) {
    if (map_)
      munmap(const_cast<void *>(map_), mapBytes_);
    options_ = std::move(other.options_);
    rank_ = other.rank_;
    worldSize_ = other.worldSize_;
    rows_ = other.rows_;
    seq_ = other.seq_;
    tokens_ = other.tokens_;
    map_ = other.map_;
    mapBytes_ = other.mapBytes_;
    inputs_ = std::move(other.inputs_);
    other.map_ = nullptr;
    other.mapBytes_ = 0;
  }
  return *this;
}

TokenData::~TokenData() {
  if (map_)
    munmap(const_cast<void *>(map_), mapBytes_);
}

uint64_t TokenData::token(uint64_t i) const {
  if (options_.elementBytes == 2) {
    uint16_t v;
    std::memcpy(&v, static_cast<const char *>(map_) + 2 * i, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, static_cast<const char *>(map_) + 4 * i, 4);
  return v;
}

Status TokenData::bindStep(Executor &executor, int64_t step) const {
  const uint64_t need = uint64_t(seq_) + (options_.nextLabels ? 1 : 0);
  const uint64_t starts = tokens_ - need + 1;
  std::vector<uint64_t> first(static_cast<size_t>(rows_));
  for (int64_t r = 0; r < rows_; ++r)
    first[size_t(r)] = tokenWindow(options_.seed, step, int64_t(rank_) * rows_ + r, starts);
  std::vector<int64_t> values(size_t(rows_ * seq_));
  for (const Input &in : inputs_) {
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t t = 0; t < seq_; ++t) {
        int64_t v = 1;
        if (in.fill == Fill::Positions) {
          v = t;
        } else if (in.fill != Fill::Ones) {
          const uint64_t at = first[size_t(r)] + uint64_t(t) +
                              (in.fill == Fill::Labels && options_.nextLabels ? 1 : 0);
          const uint64_t id = token(at);
          if (in.vocab > 0 && id >= uint64_t(in.vocab))
            return Status::error(
                options_.flag + " " + options_.path + ": token " + std::to_string(id) + " at token " +
                std::to_string(at) + " (step " + std::to_string(step + 1) + ", input \"" +
                in.name + "\") is outside [0, " + std::to_string(in.vocab) +
                "), the rows of the embedding " +
                (in.embedding.empty() ? std::string("Gather") : "\"" + in.embedding + "\"") +
                " reads; the file was made with another vocabulary (or --tokens-dtype is "
                "wrong)");
          v = int64_t(id);
        }
        values[size_t(r * seq_ + t)] = v;
      }
    const uint64_t count = uint64_t(rows_ * seq_);
    if (in.dtype == DType::I64) {
      ZRT_RETURN_IF_ERROR(executor.writeBuffer(in.buffer, values.data(), count * 8));
    } else {
      std::vector<int32_t> narrow(values.begin(), values.end());
      ZRT_RETURN_IF_ERROR(executor.writeBuffer(in.buffer, narrow.data(), count * 4));
    }
  }
  return Status::ok();
}

} // namespace zrt
