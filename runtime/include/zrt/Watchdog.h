//===- Watchdog.h - Bounds the time a collective may take -------*- C++ -*-===//
//
// A collective blocks until every member of its group has entered it, so one
// rank that stopped (kill -STOP, a hung file system) or runs another program
// leaves the others waiting forever. A Watchdog, like NCCL's, bounds that wait:
// callers mark when they enter and leave a collective (two atomic stores, no
// lock), and one thread, asleep between checks, reports the first collective
// that has been in progress for longer than the timeout. Nothing busy-waits,
// and the blocking MPI calls of the fast path stay as they are.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_WATCHDOG_H
#define ZRT_WATCHDOG_H

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace zrt {

/// Watches a fixed number of slots (callers that run one collective at a
/// time each, such as the streams of a program) from a thread of its own.
class Watchdog {
public:
  /// Called once, on the watchdog's thread, with the slot and the tag of the
  /// first collective found in progress for longer than the timeout. It may
  /// end the process (zero-run aborts the job: a blocking MPI call cannot be
  /// interrupted); if it returns, the watchdog stops watching.
  using ExpiryFn = std::function<void(size_t slot, uint64_t tag)>;

  /// Starts watching `numSlots` slots; `timeoutSeconds` must be positive.
  Watchdog(double timeoutSeconds, size_t numSlots, ExpiryFn onExpiry);
  /// Stops the thread without reporting what is still in progress.
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  /// Slot `slot` enters a collective, identified by `tag` in the report.
  void begin(size_t slot, uint64_t tag);
  /// Slot `slot` has left its collective.
  void end(size_t slot);
  double timeoutSeconds() const { return timeoutSeconds_; }

  /// begin() on construction and end() on destruction; a null watchdog
  /// watches nothing.
  class Scope {
  public:
    Scope(Watchdog *watchdog, size_t slot, uint64_t tag)
        : watchdog_(watchdog), slot_(slot) {
      if (watchdog_)
        watchdog_->begin(slot_, tag);
    }
    ~Scope() {
      if (watchdog_)
        watchdog_->end(slot_);
    }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Watchdog *watchdog_;
    size_t slot_;
  };

private:
  struct Slot {
    std::atomic<int64_t> since{0}; ///< steady-clock ns at begin(); 0: idle
    std::atomic<uint64_t> tag{0};
  };
  void watch();

  double timeoutSeconds_;
  size_t numSlots_;
  ExpiryFn onExpiry_;
  std::unique_ptr<Slot[]> slots_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace zrt

#endif // ZRT_WATCHDOG_H
