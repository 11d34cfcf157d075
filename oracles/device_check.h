// The per-call output check of honest timing: one kernel compares a call's output with the
// candidate's own verified output for the same input set, where both already are (the device),
// and ORs a mismatch into a flag. Nothing is copied to the host: the harness reads the flag
// after the stream it already synchronizes, so checking every timed call costs one small launch.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "workloads/tensor.h"

namespace kg {

// got, want: `n` elements of `type` on the device. bitwise: every byte equal (a deterministic
// kernel must repeat its own bits). Otherwise floating dtypes pass when
// |got - want| <= atol + rtol |want| (NaN fails), integer dtypes when equal. On a mismatch the
// kernel stores `code` into *flag (device-visible memory, e.g. mapped host memory), first
// mismatch wins no race: any nonzero value means "failed". Queued on `stream`; never waits.
void launch_output_check(const void* got, const void* want, std::size_t n, dtype type, bool bitwise,
                         float atol, float rtol, unsigned* flag, unsigned code,
                         cudaStream_t stream);

} // namespace kg
