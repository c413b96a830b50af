//===- Training.cpp - zero-run's training loop helpers --------------------===//
//
// The per-step log of a training run (Training.h; its checkpoints are the
// library's, zrt/TrainingCheckpoint.h). The
// --log-json keys (step, loss, grad_norm, lr, time_s, samples_per_s) are an
// interface that tests assert on; docs/program-format.md lists them.
//
//===----------------------------------------------------------------------===//

#include "Training.h"

#include "zrt/OutputFile.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace zrt {

TrainingLog::TrainingLog(int64_t totalSteps, int64_t logEvery, bool progressBar,
                         std::string jsonPath)
    : totalSteps_(totalSteps), logEvery_(logEvery), progressBar_(progressBar),
      jsonPath_(std::move(jsonPath)) {}

Status TrainingLog::flush() {
  if (jsonPath_.empty() || written_ == json_.size())
    return Status::ok();
  const std::string text = json_.dump(2) + "\n";
  ZRT_RETURN_IF_ERROR(writeFileAtomically(jsonPath_, [&](int fd) {
    return writeAllToFd(fd, text.data(), text.size());
  }));
  written_ = json_.size();
  return Status::ok();
}

std::string formatStepLine(const StepRecord &r, int64_t totalSteps) {
  char text[256];
  int n = std::snprintf(text, sizeof text, "step %lld/%lld  loss %.6f",
                        (long long)r.step, (long long)totalSteps, r.loss);
  std::string line(text, size_t(n));
  if (r.gradNorm) {
    std::snprintf(text, sizeof text, "  grad_norm %.4f", *r.gradNorm);
    line += text;
  }
  if (r.lr) {
    std::snprintf(text, sizeof text, "  lr %.3e", *r.lr);
    line += text;
  }
  if (r.lossScale) {
    std::snprintf(text, sizeof text, "  loss_scale %g", *r.lossScale);
    line += text;
  }
  if (r.skipped && *r.skipped)
    line += "  skipped (overflow)";
  std::snprintf(text, sizeof text, "  time %.1f ms", r.seconds * 1e3);
  line += text;
  if (r.samplesPerSecond > 0) {
    std::snprintf(text, sizeof text, "  samples/s %.1f", r.samplesPerSecond);
    line += text;
  }
  if (r.tokensPerSecond > 0) {
    std::snprintf(text, sizeof text, "  tokens/s %.0f", r.tokensPerSecond);
    line += text;
  }
  if (r.mfu) {
    std::snprintf(text, sizeof text, "  MFU %.1f%%", *r.mfu * 100);
    line += text;
  }
  return line;
}

std::string formatEvalLine(const EvalRecord &r, int64_t totalSteps) {
  char text[256];
  int n = std::snprintf(text, sizeof text,
                        "step %lld/%lld  eval_loss %.6f  perplexity %.2f  (%lld batches, "
                        "%.2f s)",
                        (long long)r.step, (long long)totalSteps, r.loss, std::exp(r.loss),
                        (long long)r.batches, r.seconds);
  return std::string(text, size_t(n));
}

Status TrainingLog::recordEval(const EvalRecord &r) {
  json_.push_back({{"step", r.step},
                   {"eval_loss", r.loss},
                   {"perplexity", std::exp(r.loss)},
                   {"eval_batches", r.batches},
                   {"eval_time_s", r.seconds}});
  lastEvalLoss_ = r.loss;
  clearBar(); // drawn again at the next step
  std::printf("%s\n", formatEvalLine(r, totalSteps_).c_str());
  std::fflush(stdout);
  return flush();
}

void TrainingLog::clearBar() {
  if (barShown_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    barShown_ = false;
  }
}

void TrainingLog::drawBar(const StepRecord &r) {
  constexpr int kWidth = 30;
  const int filled = int(kWidth * r.step / std::max<int64_t>(1, totalSteps_));
  std::string bar(size_t(filled), '#');
  bar.append(size_t(kWidth - filled), '.');
  std::string line = "\r[" + bar + "] " + std::to_string(r.step) + "/" +
                     std::to_string(totalSteps_);
  char text[96];
  std::snprintf(text, sizeof text, "  loss %.4f", r.loss);
  line += text;
  if (r.lr) {
    std::snprintf(text, sizeof text, "  lr %.2e", *r.lr);
    line += text;
  }
  if (lastEvalLoss_) {
    std::snprintf(text, sizeof text, "  eval %.4f (ppl %.1f)", *lastEvalLoss_,
                  std::exp(*lastEvalLoss_));
    line += text;
  }
  if (r.tokensPerSecond > 0) {
    std::snprintf(text, sizeof text, "  %.0f tok/s", r.tokensPerSecond);
    line += text;
  }
  if (r.mfu) {
    std::snprintf(text, sizeof text, "  MFU %.0f%%", *r.mfu * 100);
    line += text;
  }
  // The time left at the mean step time so far.
  secondsSoFar_ += r.seconds;
  ++stepsSoFar_;
  const double left = secondsSoFar_ / double(stepsSoFar_) * double(totalSteps_ - r.step);
  std::snprintf(text, sizeof text, "  ETA %d:%02d", int(left) / 60, int(left) % 60);
  line += text;
  std::fputs(line.c_str(), stderr);
  std::fputs("\033[K", stderr);
  std::fflush(stderr);
  barShown_ = true;
}

Status TrainingLog::record(const StepRecord &r) {
  nlohmann::json entry = {{"step", r.step}, {"loss", r.loss}};
  if (r.gradNorm)
    entry["grad_norm"] = *r.gradNorm;
  if (r.lr)
    entry["lr"] = *r.lr;
  if (r.lossScale)
    entry["loss_scale"] = *r.lossScale;
  if (r.skipped)
    entry["skipped"] = *r.skipped;
  entry["time_s"] = r.seconds;
  entry["samples_per_s"] = r.samplesPerSecond;
  if (r.tokensPerSecond > 0)
    entry["tokens_per_s"] = r.tokensPerSecond;
  if (r.flopsPerSecond > 0)
    entry["tflops"] = r.flopsPerSecond / 1e12;
  if (r.mfu)
    entry["mfu"] = *r.mfu;
  json_.push_back(std::move(entry));
  if (!csvDir_.empty()) {
    ZRT_RETURN_IF_ERROR(appendCsv("train_loss", r.step, r.loss));
    if (r.lr)
      ZRT_RETURN_IF_ERROR(appendCsv("lr", r.step, *r.lr));
    if (r.lossScale)
      ZRT_RETURN_IF_ERROR(appendCsv("loss_scale", r.step, *r.lossScale));
  }
  const bool logged = r.step % logEvery_ == 0 || r.step == totalSteps_;
  if (logged) {
    clearBar();
    std::printf("%s\n", formatStepLine(r, totalSteps_).c_str());
    std::fflush(stdout);
  }
  if (progressBar_)
    drawBar(r);
  return logged ? flush() : Status::ok();
}

void TrainingLog::finish() { clearBar(); }

Status TrainingLog::openCsvMonitor(const std::string &dir, double samplesPerStep) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::error("csv_monitor: cannot create " + dir + ": " + ec.message() +
                         "; fix the config's csv_monitor.output_path");
  csvDir_ = dir;
  csvSamplesPerStep_ = samplesPerStep;
  return Status::ok();
}

Status TrainingLog::appendCsv(const std::string &name, int64_t step, double value) {
  const std::string path = csvDir_ + "/Train_Samples_" + name + ".csv";
  std::FILE *f = std::fopen(path.c_str(), "a");
  if (!f)
    return Status::error("csv_monitor: cannot append to " + path + ": " +
                         std::strerror(errno));
  char number[64];
  // The shortest text that reads back as the same double (Python's repr).
  auto [end, err] = std::to_chars(number, number + sizeof number, value);
  *end = 0;
  bool ok = true;
  if (std::ftell(f) == 0)
    ok = std::fprintf(f, "step,%s\n", name.c_str()) > 0;
  ok = ok && std::fprintf(f, "%lld,%s\n",
                          (long long)std::llround(double(step) * csvSamplesPerStep_),
                          number) > 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok)
    return Status::error("csv_monitor: cannot write " + path + ": " + std::strerror(errno));
  return Status::ok();
}

} // namespace zrt
