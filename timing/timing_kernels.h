// The small kernels the timing harness queues around the work under measurement.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace kg {

struct clock_probe {
  std::uint64_t cycles = 0; // clock64() delta on the probing SM
  std::uint64_t ns = 0;     // %globaltimer delta over the same span
  int timed_out = 0;        // blocking kernel only: gave up waiting for the host
};

// Holds `stream` until the host sets *flag != 0, so that the start event, the work and the stop
// event are all queued before any of them runs (launch overhead stays outside the timed span).
// Gives up after timeout_ns of device time and sets probe->timed_out: a host that never releases
// it cannot hang the GPU. While it spins it also measures the SM clock into *probe. On its way out
// it increments *flush_seq (when given), the value launch_l2_flush derives its contents from.
void launch_blocking_kernel(const volatile int* flag, std::uint64_t timeout_ns, clock_probe* probe,
                            cudaStream_t stream, unsigned* flush_seq = nullptr);
// One thread spins for about span_ns of %globaltimer and records both deltas: cycles / ns is the
// SM clock at that moment.
// *flush_seq, when given, is incremented as launch_blocking_kernel does.
void launch_clock_probe(clock_probe* out, std::uint64_t span_ns, cudaStream_t stream,
                        unsigned* flush_seq = nullptr);

// The per-sample flush, two launches: write all `bytes` of `buf` (a multiple of 128, the buffer
// 128-byte aligned) with contents derived from *seq (device memory; the blocking kernel advances
// it every sample, so launches captured once into a graph still write new contents each time),
// which evicts everything else from L2; then discard the buffer's lines, so L2 is left holding
// nothing and the timed work pays no write-back of flush data. `blocks` should all be resident
// at once (a few per SM).
void launch_l2_flush(void* buf, std::size_t bytes, const unsigned* seq, int blocks,
                     cudaStream_t stream);

// A kernel of known length: one thread per block spins until clock64() has advanced `cycles`.
void launch_spin_kernel(std::int64_t cycles, int blocks, cudaStream_t stream);

} // namespace kg
