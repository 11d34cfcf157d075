// Where a run's host time goes, for profiling the evaluation pipeline across its processes:
// with KG_PHASE_LOG=FILE set, each scoped_phase appends "<pid> <name> <seconds>" to FILE when it
// ends (one write to an O_APPEND file: lines of several threads and processes never interleave).
// Unset, a scoped_phase reads no clock and writes nothing. bench/eval_throughput sums the file.
#pragma once

#include <chrono>

namespace kg {

class scoped_phase {
public:
  explicit scoped_phase(const char* name);
  ~scoped_phase();
  scoped_phase(const scoped_phase&) = delete;
  scoped_phase& operator=(const scoped_phase&) = delete;

private:
  const char* name_;
  bool on_;
  std::chrono::steady_clock::time_point t0_;
};

} // namespace kg
