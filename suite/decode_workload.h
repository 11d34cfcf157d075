// The decode workloads of `kernelgate workload run` (issue: workloads under test): the Qwen3-4B
// BF16 decode engine alone on the GPU -- its step latency at batch 1, context 2048 against the
// bytes / measured-copy-bandwidth bound, and its continuous-batching throughput at a p99
// inter-token-latency limit; and the same engine co-located with a contention tenant on a green
// partition. Metrics and gates in the layout the LoRA workloads use.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/workload_result.h"

namespace kg {

struct decode_workload_options {
  int latency_samples = 100;        // timed steps at batch 1
  double start_rps = 2.0;           // the load search's first offered load (requests/s)
  double trace_seconds = 6.0;       // simulated arrivals per load point
  int max_load_steps = 30;          // loads tried at most (5% apart): 2 -> 8.2 requests/s
  std::ostream* progress = nullptr; // a line per load point, when set
  double itl_limit_ms = 50.0;
  int repeats = 5; // traces at each configuration's found load (decode-colocated-training)
};

workload_result run_decode_qwen3_4b(const decode_workload_options& o);

// The engine on a green-context partition of >= 99 SMs while a memory-bandwidth hog streams HBM
// on the remaining SMs, against the engine alone on the whole GPU and alone on the partition:
// batch-1 step latency at context 2048 and batch-32 step throughput over contexts drawn as the
// arrivals draw them; each as a fraction of solo. Gated: the co-located logits are bit-identical
// to solo (batch 1 and 32). Throws when no green partition can be made (its reason).
workload_result run_decode_colocated(const decode_workload_options& o);

// Decode and LoRA rank-8 training of Qwen3-4B side by side in two green contexts, the split the
// driver grants nearest 99 decode / 33 training SMs (of 132; colocation.h), training stepping
// continuously in a thread on its partition's stream. Throughput at p99 ITL <= itl_limit_ms found
// by the load search for the engine alone on the whole GPU and on its partition beside the
// training; at each found load `repeats` traces of other arrival seeds; fraction_of_solo = mean
// co-located / mean solo tokens/s with a bootstrap interval over the repeats. Gated: logits
// bit-identical solo vs co-located at every colocated_bitwise_shapes() shape, a load within the
// limit in each configuration, the training's losses finite, its steps overlapping the decode
// measurements, and its first loss against a float32 recomputation. Throws when no partition can
// be made or LibTorch cannot run on a given CUDA stream (torch_external_stream_unavailable).
workload_result run_decode_colocated_training(const decode_workload_options& o);

} // namespace kg
