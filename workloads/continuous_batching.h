// The decode engine's continuous-batching loop (issue: workloads under test), apart from the GPU:
// sequences of arriving requests (arrivals.h) are admitted while the batch has room and the KV
// cache can hold their whole lifetime (context + output tokens: no preemption), each step
// prefills prompt tokens of the admitted sequences -- whole prompts of the newly admitted ones,
// or a bounded chunk of prompt tokens over them (chunked prefill) -- and decodes one token for
// every running one, and every token's time is recorded. The step itself is a callback returning
// its duration -- the CUDA graph of the batch size on the GPU, a cost model in the tests -- so the
// scheduling, the clock and the latency bookkeeping are tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "workloads/arrivals.h"
#include "workloads/load_search.h"

namespace kg {

struct batching_options {
  int max_batch = 32; // sequences admitted at once, decoding or prefilling (one KV block each)
  std::int64_t kv_capacity_tokens = 1 << 22; // KV cache slots over all running sequences
  double max_seconds = 1e9;                  // stop admitting (and stepping) past this time
  // Chunked prefill (a scheduler parameter): each step prefills at most this many prompt tokens,
  // over the prefilling sequences in admission order (the oldest first; a sequence may take the
  // rest of the budget and continue next step). A sequence's first token comes out of the step
  // that prefills its last prompt token; it decodes from the next step on. 0: the whole prompt in
  // the admission step.
  std::int64_t prefill_chunk_tokens = 0;
  // When kv_reserve is set, admission asks it instead of the kv_capacity_tokens counter:
  // kv_reserve reserves `tokens` (context + output tokens) for sequence `sequence` (its index in
  // batching_result::sequences) and returns false when they do not fit now -- the sequence then
  // waits at the head of the FIFO; kv_release(sequence), when set, is called once when it
  // finishes (not for sequences a max_seconds cut leaves unfinished). (The decode engine's block
  // allocator plugs in here: fragmentation can refuse what a counter would admit.) The check that
  // a sequence can ever fit still uses kv_capacity_tokens, so callers set both.
  std::function<bool(std::size_t sequence, std::int64_t tokens)> kv_reserve;
  std::function<void(std::size_t sequence)> kv_release;
  // Warm start: the steps that begin before this time are simulated (step_plan::simulated: the
  // caller answers them from a cost model, without the GPU), and the result's measures cover the
  // window after it (window_start_seconds). Why: a trace that starts empty measures the server
  // filling up, not its steady state -- a sequence of 256 tokens lives for seconds at load, far
  // longer than a trace -- so arrivals before the window bring the batch to its steady size
  // first. 0: no warm-up, every step real.
  double measure_from_seconds = 0;
};

// Prompt tokens [begin, begin + tokens) of sequence `sequence` (whose prompt is `context` tokens)
// prefilled in this step; the part with begin + tokens == context ends the prefill.
struct prefill_part {
  std::size_t sequence = 0;
  std::int64_t context = 0, begin = 0, tokens = 0;
  bool last() const { return begin + tokens == context; }
};

// What one step does: prefill these prompt parts (a sequence's first token comes out of the step
// of its last part), and decode one token for each running sequence at these lengths (context +
// tokens so far).
struct step_plan {
  // Whole-prompt mode: the contexts of the sequences admitted (and prefilled whole) this step;
  // empty in chunked mode (see prefills).
  std::vector<std::int64_t> prefill_contexts;
  // The decoding sequences in the order they started decoding (admission order).
  std::vector<std::int64_t> decode_lengths;
  std::vector<std::size_t> decode_sequences; // the decode rows' sequence indices, same order
  std::vector<prefill_part> prefills;        // both modes: every prompt part of this step
  bool simulated = false; // a warm-up step (before batching_options::measure_from_seconds)
};

using step_fn = std::function<double(const step_plan&)>; // returns the step's seconds

struct sequence_trace {
  double arrival_seconds = 0;
  std::int64_t context = 0;
  std::vector<double> token_seconds; // the time each output token came out
};

// Every count and measure below covers the measured window (from window_start_seconds on: the
// warm-up's simulated steps are counted apart); sequences keep every token's time.
struct batching_result {
  std::vector<sequence_trace> sequences; // in arrival order (requests, then their sequences)
  std::int64_t steps = 0, tokens = 0;    // tokens: output tokens (decode rows + first tokens)
  std::int64_t prefill_tokens = 0;       // prompt tokens prefilled over the window
  std::int64_t prefill_steps = 0;        // steps with at least one prefill part
  double end_seconds = 0;                // the clock when the last step ended
  int max_batch_seen = 0;
  std::vector<std::int64_t> batch_histogram; // steps by number of decoded sequences (0..max)
  bool truncated = false;                    // max_seconds cut the run short
  // Warm start: where the window began (measure_from_seconds, or the end of the simulated step
  // that straddled it), the simulated steps before it, and the sequences running (prefilling or
  // decoding) and waiting then.
  double window_start_seconds = 0;
  std::int64_t simulated_steps = 0;
  std::int64_t kv_refusals = 0; // admissions the KV cache refused in the window (each attempt)
  int running_at_window_start = 0, waiting_at_window_start = 0;
  // Tokens per second over the window, and the p99 inter-token interval of the gaps that start
  // in it (first tokens excluded).
  double tokens_per_second() const;
  bool has_inter_token_interval() const; // some gap starts in the window
  // Sequences decoded per step, averaged over the steps (batch_histogram): near max_batch, the
  // load is past saturation.
  double mean_batch() const;
  double p99_itl_ms() const;
  inter_token_summary itl_summary_ms() const; // the same gaps' distribution
};

// Throws std::invalid_argument when a sequence could never fit (context + output tokens above
// the KV capacity): it would wait forever; also for max_batch < 1 or prefill_chunk_tokens < 0.
// Throws std::logic_error when a step would be empty (kv_reserve refusing with nothing running).
batching_result run_continuous_batching(const std::vector<request>& requests, const step_fn& step,
                                        const batching_options& opt = {});

} // namespace kg
