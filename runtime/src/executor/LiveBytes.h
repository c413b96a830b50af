//===- LiveBytes.h - Measured peak of live bytes per arena ------*- C++ -*-===//
//
// The memory plan promises that an arena of Arena.size bytes is enough; this
// measures what a run really kept live, to compare with the plan's lower bound.
// Streams report each instruction's start and end; a buffer becomes live when an
// instruction that writes or reads it starts (constants, inputs and globals are
// live from the start) and dies when the last instruction reading it ends (never
// for outputs and globals). The live size of an arena is the union of the byte
// ranges of its live buffers, so aliasing views are not counted twice.
//
// It also measures the gathered bytes: the bytes of buffers written by
// instructions on a communication stream (all-gather outputs, the bucket
// rebuild slices and staging copies the lowering puts there) together with the
// views that alias them (the unpad slice and reshape of a gathered parameter,
// the 2-D view a bucket's slices read). Such a buffer and its views form one
// gathered block: live from the start of the first instruction touching any of
// them to the end of the last one reading any of them, so the bytes stay
// counted between the gather and their first read through a view. The figure
// is the union of the byte ranges of the live blocks (aliases count once).
// plannedPeakGatheredBytes() computes the same figure with the instructions run
// one at a time in program order, which is what the compiler planned.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXECUTOR_LIVEBYTES_H
#define ZRT_EXECUTOR_LIVEBYTES_H

#include "zrt/Executor.h"
#include "zrt/Program.h"

#include <chrono>

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace zrt {

/// The total length of the union of a multiset of ranges whose ends are
/// among fixed coordinates: a segment tree of cover counts, so adding or
/// removing a range and reading the union take O(log n).
class RangeCover {
public:
  /// Ranges will begin and end at `coordinates` (any order, repeats allowed).
  void init(std::vector<uint64_t> coordinates);
  /// Forgets every range.
  void clear();
  /// Adds (delta +1) or removes (-1, a range added before) [begin, end).
  void add(uint64_t begin, uint64_t end, int delta);
  /// The length of the union of the ranges held.
  uint64_t covered() const { return covered_.empty() ? 0 : covered_[1]; }

private:
  void update(size_t node, size_t lo, size_t hi, size_t l, size_t r, int delta);

  std::vector<uint64_t> xs_; ///< sorted distinct coordinates
  std::vector<int> count_;   ///< per node: ranges covering it whole
  std::vector<uint64_t> covered_;
};

class LiveBytesTracker {
public:
  /// Prepares for a run of the instructions in `executed` (indices into
  /// program.instructions, the ones this rank runs).
  LiveBytesTracker(const Program &program, const std::vector<size_t> &executed);

  /// Resets to the state at the start of a run.
  void reset();
  void instructionStarted(const Instruction &inst);
  void instructionFinished(const Instruction &inst);
  /// Per arena, the largest live size seen since reset().
  std::vector<uint64_t> peaks() const;
  /// From now on, samples are timed from `start`.
  void setStart(std::chrono::steady_clock::time_point start) { start_ = start; }
  /// From now on, samples are timed `us` microseconds from the start
  /// instead of by the clock (a simulated run, run/Simulation.h).
  void setSimulatedTime(double us) { simulatedUs_ = us; }
  /// Every change of an arena's live size since reset(), timed from the
  /// setStart() time, in time order.
  const std::vector<MemorySample> &timeline() const { return timeline_; }
  /// The most gathered bytes (see above) live at once since reset().
  uint64_t peakGatheredBytes() const;

private:
  void makeLive(uint32_t buffer);
  void makeDead(uint32_t buffer);
  void updatePeak(uint32_t arena);
  void gatheredTouched(uint32_t buffer);
  void gatheredReleased(uint32_t buffer);
  void updateGatheredPeak();

  const Program &program_;
  std::vector<uint32_t> readers_;   // executed instructions reading each buffer
  std::vector<bool> initiallyLive_; // constants, inputs, globals
  std::vector<bool> keepToEnd_;     // outputs, globals
  std::mutex mutex_;
  std::vector<uint32_t> remaining_;
  std::vector<bool> live_;
  /// Per arena: the live buffers' byte ranges.
  std::vector<RangeCover> cover_;
  std::vector<uint64_t> peak_;
  std::vector<uint64_t> current_; ///< per arena: the live size now
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::vector<MemorySample> timeline_;
  double simulatedUs_ = -1; ///< < 0: time by the clock

  // Gathered blocks: block of each buffer (-1: not gathered), and per block
  // its arena, byte range [begin, end), executed reads of its buffers, and
  // whether it is an output (never dies).
  std::vector<int> blockOf_;
  struct Block {
    uint32_t arena = 0;
    uint64_t begin = 0, end = 0;
    uint32_t readers = 0;
    bool keepToEnd = false;
  };
  std::vector<Block> blocks_;
  std::vector<uint32_t> blockRemaining_;
  std::vector<bool> blockLive_;
  /// Per arena: the live blocks' byte ranges; their union's total length.
  std::vector<RangeCover> gatheredCover_;
  uint64_t gatheredNow_ = 0;
  uint64_t gatheredPeak_ = 0;
};

/// The instructions world rank `rank` executes, in program order: those whose
/// `ranks` include it and, for collectives, whose group it is a member of (the
/// executor's rule).
std::vector<size_t> executedInstructions(const Program &program, int rank);

/// The peak of gathered bytes when `executed` run one at a time in program
/// order (instruction i starts and finishes before i+1 starts): the plan's
/// figure for what a run measures as LiveBytesTracker::peakGatheredBytes().
uint64_t plannedPeakGatheredBytes(const Program &program,
                                  const std::vector<size_t> &executed);


} // namespace zrt

#endif // ZRT_EXECUTOR_LIVEBYTES_H
