//===- TrainingData.cpp - zero-run --data: inputs of every step -----------===//
//
// Opening checks every file's header against the program inputs (nothing of
// the data is read then) and closes it again; bindStep() opens the file of
// its step when it is not the one already open, and reads one step's slice
// of each input for this rank with one pread per input, straight into the
// input's buffer when the backend's memory is host accessible.
//
//===----------------------------------------------------------------------===//

#include "zrt/TrainingData.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace zrt {

namespace {

/// "[steps, 8, 6]": the expected shape of a data array.
std::string dataShapeString(int64_t globalBatch,
                            const std::vector<int64_t> &shape) {
  std::string out = "[steps, " + std::to_string(globalBatch);
  for (size_t d = 1; d < shape.size(); ++d)
    out += ", " + std::to_string(shape[d]);
  return out + "]";
}

std::string listString(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

} // namespace

int64_t embeddingRows(const Program &program, uint32_t buffer, std::string *where) {
  const DType dtype = program.buffers[buffer].dtype;
  if (dtype != DType::I64 && dtype != DType::I32)
    return 0;
  int64_t vocab = 0;
  for (const Instruction &inst : program.instructions) {
    if (inst.op != "Gather" || inst.inputs.size() < 2 || inst.inputs[1] != buffer)
      continue;
    const BufferDesc &table = program.buffers[inst.inputs[0]];
    const bool floating = table.dtype == DType::F32 || table.dtype == DType::F16 ||
                          table.dtype == DType::BF16 || table.dtype == DType::F64;
    int64_t axis = inst.attrs.getInt("axis", 0);
    if (axis < 0)
      axis += int64_t(table.shape.size());
    if (!floating || axis != 0 || table.shape.size() < 2)
      continue;
    if (vocab == 0 || table.shape[0] < vocab) {
      vocab = table.shape[0];
      if (where)
        *where = inst.loc;
    }
  }
  return vocab;
}

void TrainingData::findEmbedding(const Program &program, Input &input) {
  input.vocab = embeddingRows(program, input.buffer, &input.embedding);
}

Status TrainingData::checkTokenIds(int64_t steps) const {
  const int64_t limit = std::min(steps, steps_);
  for (const File &f : files_) {
    const int64_t count = std::min(f.steps, limit - f.firstStep);
    bool any = false;
    for (const Input &in : inputs_)
      any |= in.vocab > 0;
    if (count <= 0 || !any)
      continue;
    Expected<SafetensorsFile> file = SafetensorsFile::open(f.path);
    if (!file)
      return file.status();
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const Input &in = inputs_[i];
      if (in.vocab == 0)
        continue;
      const uint64_t elem = dtypeSize(in.dtype);
      const uint64_t perRow = in.rankBytes / elem / uint64_t(std::max<int64_t>(1, in.rows));
      std::vector<uint8_t> bytes(size_t(in.rankBytes));
      for (int64_t local = 0; local < count; ++local) {
        const uint64_t offset = uint64_t(local) * in.stepBytes + uint64_t(rank_) * in.rankBytes;
        ZRT_RETURN_IF_ERROR(file->read(f.entries[i], offset, in.rankBytes, bytes.data()));
        for (uint64_t k = 0; k < in.rankBytes / elem; ++k) {
          int64_t id;
          if (in.dtype == DType::I64) {
            std::memcpy(&id, bytes.data() + k * 8, 8);
          } else {
            int32_t v;
            std::memcpy(&v, bytes.data() + k * 4, 4);
            id = v;
          }
          if (id >= 0 && id < in.vocab)
            continue;
          const int64_t row = int64_t(rank_) * in.rows + int64_t(k / perRow);
          return Status::error(
              "--data " + f.path + ": array \"" + in.name + "\", step " +
              std::to_string(f.firstStep + local + 1) + ", row " + std::to_string(row) +
              " (of the step's " + std::to_string(in.rows * worldSize_) +
              "), position " + std::to_string(k % perRow) + ": token id " +
              std::to_string(id) + " is outside [0, " + std::to_string(in.vocab) +
              "), the rows of the embedding " +
              (in.embedding.empty() ? std::string("Gather") : "\"" + in.embedding + "\"") +
              " reads; fix the data (its tokenizer's vocabulary must fit the model's)");
        }
      }
    }
  }
  return Status::ok();
}

Expected<TrainingData> TrainingData::open(const std::string &path,
                                          const Program &program,
                                          int worldSize, int rank) {
  namespace fs = std::filesystem;
  TrainingData data;
  data.path_ = path;
  data.rank_ = rank;
  data.worldSize_ = worldSize;

  std::vector<std::string> paths;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    return Status::error("--data " + path + ": no such file or directory");
  if (fs::is_directory(st)) {
    for (fs::directory_iterator it(path, ec), end; !ec && it != end;
         it.increment(ec))
      if (it->path().extension() == ".safetensors" &&
          fs::is_regular_file(it->status()))
        paths.push_back(it->path().string());
    if (ec)
      return Status::error("--data " + path + ": cannot list the directory: " +
                           ec.message());
    if (paths.empty())
      return Status::error("--data " + path +
                           ": the directory holds no *.safetensors files");
    std::sort(paths.begin(), paths.end());
  } else {
    paths.push_back(path);
  }

  // Per program input: its per-rank shape [b, rest...] and slice sizes.
  for (const BindingDesc &in : program.inputs) {
    const BufferDesc &b = program.buffers[in.buffer];
    if (b.shape.empty())
      return Status::error("--data " + path + ": program input \"" + in.name +
                           "\" is a scalar (" + dtypeName(b.dtype) +
                           "[]); --data needs inputs with a batch "
                           "dimension (pass --input for this program)");
    Input input;
    input.buffer = in.buffer;
    input.rankBytes = b.bytes();
    input.stepBytes = b.bytes() * uint64_t(worldSize);
    input.name = in.name;
    input.dtype = b.dtype;
    input.rows = b.shape[0];
    findEmbedding(program, input);
    data.inputs_.push_back(input);
  }

  for (const std::string &file : paths) {
    Expected<SafetensorsFile> opened = SafetensorsFile::open(file);
    if (!opened)
      return opened.status();
    File f{file, data.steps_, -1, {}};
    std::string firstName;
    for (const BindingDesc &in : program.inputs) {
      const BufferDesc &b = program.buffers[in.buffer];
      const int64_t globalBatch = b.shape[0] * worldSize;
      const std::string expected = dataShapeString(globalBatch, b.shape);
      const std::string perRank =
          " (the program input is " + std::string(dtypeName(b.dtype)) + "[" +
          shapeString(b.shape) + "] per rank, " + std::to_string(worldSize) +
          " rank(s))";
      const std::vector<SafetensorsEntry> &entries = opened->entries();
      auto it = std::find_if(entries.begin(), entries.end(),
                             [&](const SafetensorsEntry &e) {
                               return e.name == in.name;
                             });
      if (it == entries.end())
        return Status::error(file + ": the data has no array \"" + in.name +
                             "\" for the program input of that name; expected " +
                             safetensorsDTypeName(b.dtype) + " " + expected +
                             perRank);
      const SafetensorsEntry &e = *it;
      if (e.dtype != b.dtype)
        return Status::error(file + ": data array \"" + in.name +
                             "\" has dtype " + safetensorsDTypeName(e.dtype) +
                             ", the program input expects " +
                             safetensorsDTypeName(b.dtype));
      bool shapeOk = e.shape.size() == b.shape.size() + 1 &&
                     e.shape[1] == globalBatch &&
                     std::equal(b.shape.begin() + 1, b.shape.end(),
                                e.shape.begin() + 2);
      if (!shapeOk)
        return Status::error(file + ": data array \"" + in.name +
                             "\" has shape " + listString(e.shape) +
                             ", expected " + expected + perRank);
      if (f.steps < 0) {
        f.steps = e.shape[0];
        firstName = in.name;
      } else if (e.shape[0] != f.steps) {
        return Status::error(file + ": data arrays have different step "
                             "counts: \"" + firstName + "\" has " +
                             std::to_string(f.steps) + ", \"" + in.name +
                             "\" has " + std::to_string(e.shape[0]) +
                             " (every input needs one entry per step)");
      }
      f.entries.push_back(e);
    }
    if (f.steps < 0)
      f.steps = 0; // a program without inputs: the file adds no steps
    data.steps_ += f.steps;
    data.files_.push_back(std::move(f));
  }
  return data;
}

std::vector<std::string> TrainingData::files() const {
  std::vector<std::string> out;
  for (const File &f : files_)
    out.push_back(f.path);
  return out;
}

Status TrainingData::bindStep(Executor &executor, int64_t step) const {
  auto f = std::find_if(files_.begin(), files_.end(), [&](const File &file) {
    return step >= file.firstStep && step < file.firstStep + file.steps;
  });
  if (step < 0 || f == files_.end())
    return Status::error("--data " + path_ + ": no step " +
                         std::to_string(step + 1) + " (the data has " +
                         std::to_string(steps_) + ")");
  const size_t index = size_t(f - files_.begin());
  if (!open_ || openIndex_ != index) {
    open_.reset();
    Expected<SafetensorsFile> opened = SafetensorsFile::open(f->path);
    if (!opened)
      return opened.status();
    open_.emplace(std::move(*opened));
    openIndex_ = index;
  }
  const SafetensorsFile &file = *open_;
  const uint64_t local = uint64_t(step - f->firstStep);
  const uint64_t before = file.bytesRead();
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Input &in = inputs_[i];
    // The entry as checked at open(); its byte range is read from the file
    // as it is now (a file truncated since then fails the read).
    const SafetensorsEntry &e = f->entries[i];
    const uint64_t offset = local * in.stepBytes + uint64_t(rank_) * in.rankBytes;
    if (void *host = executor.hostAddress(in.buffer)) {
      ZRT_RETURN_IF_ERROR(file.read(e, offset, in.rankBytes, host));
      continue;
    }
    std::vector<uint8_t> staging(size_t(in.rankBytes));
    ZRT_RETURN_IF_ERROR(file.read(e, offset, in.rankBytes, staging.data()));
    ZRT_RETURN_IF_ERROR(
        executor.writeBuffer(in.buffer, staging.data(), in.rankBytes));
  }
  bytesRead_ += file.bytesRead() - before;
  return Status::ok();
}

uint64_t TrainingData::bytesRead() const { return bytesRead_; }

} // namespace zrt
