// How a worker's CUDA context waits for the GPU (cudaSetDeviceFlags' schedule flags), named by
// the environment variable KERNELGATE_WORKER_SYNC that the audit sets for its workers.
//
// The driver's default (cudaDeviceScheduleAuto) for a process with fewer contexts than logical
// processors is to spin (CUDA Runtime API, cudaSetDeviceFlags): every wait (a stream
// synchronization, a copy back) keeps a core busy until the GPU answers. The audit runs eight
// workers whose waits are long (their contexts share the GPU by time slices) beside its own judging
// and up to one nvcc a core, so spinning workers take cores the rest needs; "block" makes a waiting
// worker sleep until the GPU's interrupt. Eval leaves the variable unset: its timing uses events,
// and its workers run one at a time.
#pragma once

#include <optional>
#include <string_view>

#include <cuda_runtime_api.h>

namespace kg {

// The schedule flag for `name` ("spin", "yield", "block"; "auto" or empty: the driver's
// heuristic, cudaDeviceScheduleAuto); nullopt for any other name.
inline std::optional<unsigned int> worker_sync_flag(std::string_view name) {
  if (name.empty() || name == "auto") return cudaDeviceScheduleAuto;
  if (name == "spin") return cudaDeviceScheduleSpin;
  if (name == "yield") return cudaDeviceScheduleYield;
  if (name == "block") return cudaDeviceScheduleBlockingSync;
  return std::nullopt;
}

} // namespace kg
