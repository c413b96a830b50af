//===- Watchdog.cpp - Bounds the time a collective may take ---------------===//
//
// The watching thread sleeps on a condition variable between checks: a tenth
// of the timeout, between 10 ms and 1 s, so a collective is reported at most
// that long after its deadline and an idle watchdog costs nothing measurable.
//
//===----------------------------------------------------------------------===//

#include "zrt/Watchdog.h"

#include <algorithm>
#include <chrono>

namespace zrt {
namespace {

int64_t nowNs() {
  int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
                   .count();
  return std::max<int64_t>(ns, 1); // 0 marks an idle slot
}

} // namespace

Watchdog::Watchdog(double timeoutSeconds, size_t numSlots, ExpiryFn onExpiry)
    : timeoutSeconds_(timeoutSeconds), numSlots_(numSlots),
      onExpiry_(std::move(onExpiry)), slots_(new Slot[std::max<size_t>(numSlots, 1)]) {
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::begin(size_t slot, uint64_t tag) {
  if (slot >= numSlots_)
    return;
  slots_[slot].tag.store(tag, std::memory_order_relaxed);
  slots_[slot].since.store(nowNs(), std::memory_order_release);
}

void Watchdog::end(size_t slot) {
  if (slot < numSlots_)
    slots_[slot].since.store(0, std::memory_order_release);
}

void Watchdog::watch() {
  const double interval = std::clamp(timeoutSeconds_ / 10, 0.01, 1.0);
  const auto period = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(interval));
  const double timeoutNs = timeoutSeconds_ * 1e9;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, period);
    if (stop_)
      return;
    int64_t now = nowNs();
    for (size_t s = 0; s < numSlots_; ++s) {
      int64_t since = slots_[s].since.load(std::memory_order_acquire);
      if (since == 0 || double(now - since) <= timeoutNs)
        continue;
      uint64_t tag = slots_[s].tag.load(std::memory_order_relaxed);
      // The slot may have moved on to another collective meanwhile.
      if (slots_[s].since.load(std::memory_order_acquire) != since)
        continue;
      lock.unlock();
      onExpiry_(s, tag);
      return;
    }
  }
}

} // namespace zrt
