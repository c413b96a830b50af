//===- HostEvent.h - An event as a flag under a mutex -----------*- C++ -*-===//
//
// The host side of every backend's events: record() sets a flag, wait() blocks
// the calling stream thread on a condition variable until the flag is set or the
// run is cancelled. The CPU backend uses it as is (its kernels have finished when
// record() is called); the CUDA backend adds a cudaEvent_t on top, since a CUDA
// stream can only wait for an event that has already been recorded.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_HOSTEVENT_H
#define ZRT_KERNELS_HOSTEVENT_H

#include "zrt/Backend.h"

#include <condition_variable>
#include <mutex>

namespace zrt {

class HostEvent : public Event {
public:
  Status record(Stream &) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      recorded_ = true;
    }
    cv_.notify_all();
    return Status::ok();
  }
  Status wait(Stream &) override {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return recorded_ || cancelled_; });
    if (!recorded_)
      return Status::error("run cancelled while waiting for an event");
    return Status::ok();
  }
  void cancel() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
    }
    cv_.notify_all();
  }
  void reset() override {
    std::lock_guard<std::mutex> lock(mutex_);
    recorded_ = cancelled_ = false;
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool recorded_ = false;
  bool cancelled_ = false;
};

} // namespace zrt

#endif // ZRT_KERNELS_HOSTEVENT_H
