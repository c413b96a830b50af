//===- ckpt_bench.cpp - The checksums' share of a checkpoint's write time -===//
//
//   zrt-ckpt-bench WEIGHTS.safetensors OUT_DIR [REPS]
//
// Writes a 1-rank checkpoint's two files for the model whose weights file is
// given (GPT-2-small's, from bench/ckpt_bench.sh): model-rank-00000 with every
// tensor, optimizer-rank-00000 with NAME.exp_avg and NAME.exp_avg_sq of each,
// as zero-run --save-dir does (writeSafetensors, atomically, fsynced), once
// with the checksums taken as the bytes stream out and once without,
// alternating (ABBA), REPS times each (default 3). Prints the median write times,
// their ratio and the ratio of the fastest rounds (this machine's disk stalls
// now and then, for either variant), the median of the paired ratios,
// and the checksums' own time over the same bytes in memory (two XXH3 passes:
// the file's and the tensors') as a share of the write time: the most they
// can add, were no core free to take them beside the write. One JSON
// object. Files go under OUT_DIR and are removed.
//
//===----------------------------------------------------------------------===//

#include "zrt/Checksum.h"
#include "zrt/TensorFile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace zrt;

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: zrt-ckpt-bench WEIGHTS.safetensors OUT_DIR [REPS]\n");
    return 2;
  }
  const std::string out = argv[2];
  const int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  Expected<SafetensorsFile> weights = SafetensorsFile::open(argv[1]);
  if (!weights) {
    std::fprintf(stderr, "zrt-ckpt-bench: %s\n", weights.status().message().c_str());
    return 1;
  }
  std::vector<std::vector<uint8_t>> storage;
  std::vector<NamedTensor> model, optimizer;
  uint64_t parameters = 0, bytes = 0;
  storage.reserve(weights->entries().size());
  for (const SafetensorsEntry &e : weights->entries()) {
    if (e.dtype != DType::F32)
      continue;
    storage.emplace_back(size_t(e.bytes));
    if (!weights->read(e, 0, e.bytes, storage.back().data()).isOk())
      return 1;
    model.push_back({e.name, e.dtype, e.shape, storage.back().data()});
    // The moments: the same bytes, as far as the disk and the hash care.
    optimizer.push_back({e.name + ".exp_avg", e.dtype, e.shape, storage.back().data()});
    optimizer.push_back({e.name + ".exp_avg_sq", e.dtype, e.shape, storage.back().data()});
    parameters += uint64_t(e.numel());
    bytes += 3 * e.bytes;
  }
  std::filesystem::create_directories(out);
  std::vector<double> with, without;
  // ABBA order: each variant runs first in half of the rounds, so that what
  // one round leaves to the disk weighs on both alike.
  for (int r = 0; r < reps; ++r)
    for (bool checksums : {r % 2 == 0, r % 2 != 0}) {
      SafetensorsDigest digest;
      ::sync(); // no write-back of the previous round runs into this one
      double t0 = seconds();
      for (auto *tensors : {&model, &optimizer}) {
        std::string path = out + (tensors == &model ? "/model-rank-00000.safetensors"
                                                    : "/optimizer-rank-00000.safetensors");
        Status s = writeSafetensors(path, *tensors, checksums ? &digest : nullptr);
        if (!s.isOk()) {
          std::fprintf(stderr, "zrt-ckpt-bench: %s\n", s.message().c_str());
          return 1;
        }
      }
      (checksums ? with : without).push_back(seconds() - t0);
    }
  std::filesystem::remove(out + "/model-rank-00000.safetensors");
  std::filesystem::remove(out + "/optimizer-rank-00000.safetensors");
  // XXH3 alone over the same bytes (in memory).
  double t0 = seconds();
  uint64_t sink = 0;
  for (const std::vector<uint8_t> &s : storage)
    sink ^= xxh3(s.data(), s.size());
  const double hashSeconds = 3 * (seconds() - t0);
  std::vector<double> ratios;
  for (size_t i = 0; i < with.size(); ++i)
    ratios.push_back(with[i] / without[i]);
  std::printf("{\"parameters\": %llu, \"checkpoint_bytes\": %llu, \"reps\": %d, "
              "\"write_s_with_checksums\": %.3f, \"write_s_without\": %.3f, "
              "\"ratio_of_medians\": %.4f, \"ratio_of_minima\": %.4f, "
              "\"paired_ratio_median\": %.4f, \"xxh3_gb_per_s\": %.2f, "
              "\"checksum_cpu_share_of_write\": %.4f, \"sink\": \"%016llx\", ",
              (unsigned long long)parameters, (unsigned long long)bytes, reps, median(with),
              median(without), median(with) / median(without),
              *std::min_element(with.begin(), with.end()) /
                  *std::min_element(without.begin(), without.end()),
              median(ratios), double(bytes) / hashSeconds / 1e9,
              2 * hashSeconds / median(without), (unsigned long long)sink);
  // Every round, for a look at the spread.
  std::printf("\"rounds_s\": [");
  for (size_t i = 0; i < with.size(); ++i)
    std::printf("%s[%.3f, %.3f]", i ? ", " : "", with[i], without[i]);
  std::printf("]}\n");
  return 0;
}
