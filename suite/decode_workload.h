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

namespace kg {

struct decode_workload_options {
  int latency_samples = 100;        // timed steps at batch 1
  double start_rps = 2.0;           // the load search's first offered load (requests/s)
  double trace_seconds = 6.0;       // simulated arrivals per load point
  int max_load_steps = 30;          // loads tried at most (5% apart): 2 -> 8.2 requests/s
  std::ostream* progress = nullptr; // a line per load point, when set
  double itl_limit_ms = 50.0;
};

struct workload_gate {
  std::string name;
  bool pass = false;
  std::string detail;
};

struct decode_workload_output {
  nlohmann::json metrics = nlohmann::json::object();
  std::vector<workload_gate> gates;
};

decode_workload_output run_decode_qwen3_4b(const decode_workload_options& o);

// The engine on a green-context partition of >= 99 SMs while a memory-bandwidth hog streams HBM
// on the remaining SMs, against the engine alone on the whole GPU and alone on the partition:
// batch-1 step latency at context 2048 and batch-32 step throughput over contexts drawn as the
// arrivals draw them; each as a fraction of solo. Gated: the co-located logits are bit-identical
// to solo (batch 1 and 32). Throws when no green partition can be made (its reason).
decode_workload_output run_decode_colocated(const decode_workload_options& o);

} // namespace kg
