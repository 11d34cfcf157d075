// The decode engine's continuous-batching loop (issue: workloads under test), apart from the GPU:
// sequences of arriving requests (arrivals.h) are admitted while the batch has room and the KV
// cache can hold their whole lifetime (context + output tokens: no preemption), each step
// prefills the newly admitted sequences and decodes one token for every running one, and every
// token's time is recorded. The step itself is a callback returning its duration -- the CUDA
// graph of the batch size on the GPU, a cost model in the tests -- so the scheduling, the clock
// and the latency bookkeeping are tested without a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "workloads/arrivals.h"

namespace kg {

struct batching_options {
  int max_batch = 32; // sequences decoded per step (graphs are captured for 1..max_batch)
  std::int64_t kv_capacity_tokens = 1 << 22; // KV cache slots over all running sequences
  double max_seconds = 1e9;                  // stop admitting (and stepping) past this time
};

// What one step does: prefill these contexts (their first token comes out of this step), and
// decode one token for each running sequence at these lengths (context + tokens so far).
struct step_plan {
  std::vector<std::int64_t> prefill_contexts;
  std::vector<std::int64_t> decode_lengths;
};

using step_fn = std::function<double(const step_plan&)>; // returns the step's seconds

struct sequence_trace {
  double arrival_seconds = 0;
  std::int64_t context = 0;
  std::vector<double> token_seconds; // the time each output token came out
};

struct batching_result {
  std::vector<sequence_trace> sequences; // in arrival order (requests, then their sequences)
  std::int64_t steps = 0, tokens = 0;
  double end_seconds = 0; // the clock when the last step ended
  int max_batch_seen = 0;
  std::vector<std::int64_t> batch_histogram; // steps by number of decoded sequences (0..max)
  bool truncated = false;                    // max_seconds cut the run short
  // Tokens per second over the run, and the p99 inter-token interval (first tokens excluded).
  double tokens_per_second() const;
  // Sequences decoded per step, averaged over the steps (batch_histogram): near max_batch, the
  // load is past saturation.
  double mean_batch() const;
  double p99_itl_ms() const;
};

// Throws std::invalid_argument when a sequence could never fit (context + output tokens above
// the KV capacity): it would wait forever.
batching_result run_continuous_batching(const std::vector<request>& requests, const step_fn& step,
                                        const batching_options& opt = {});

} // namespace kg
