// The decode engine under the continuous-batching loop (continuous_batching.h). Each running
// sequence gets a slot and a KV block of its whole lifetime (context + outputs) from a
// kv_block_allocator over the engine's pool, through the loop's kv_reserve / kv_release. Each
// step runs the step's prompt parts, then decodes one token of every decoding sequence with the
// batch size's CUDA graph; the step's seconds are the host clock from the first queued call until
// the tokens are back on the host (the stream synchronized), so launch and copy overheads count
// as a server would see them. The loop's clock advances by those measured seconds: the latencies
// are those of this GPU under the offered load.
//
// Prefill: with batching_options::prefill_chunk_tokens > 0 (at most the engine's
// max_prefill_tokens), real chunked prefill -- the model over the prompts' tokens
// (decode_engine::prefill_chunk), a sequence's first token its prefill's argmax. With 0, the
// engine's synthetic KV fill in the admission step and a synthetic first token: decode cost
// alone (the kernel-level and step-level figures' set-up).
#pragma once

#include <functional>

#include "kernels/decode/decode_engine.h"
#include "workloads/arrivals.h"
#include "workloads/continuous_batching.h"
#include "workloads/load_search.h"
#include "workloads/step_cost_model.h"

namespace kg {

// Where a run's GPU time went (CUDA events around each step's two halves).
struct decode_batching_stats {
  double prefill_gpu_seconds = 0; // the steps' prompt parts
  double decode_gpu_seconds = 0;  // the steps' decode graphs
  std::int64_t kv_refusals = 0;   // admissions the allocator refused (no free run long enough;
                                  // a warm-up's too: batching_result::kv_refusals has the window's)
  double prefill_share() const {
    const double t = prefill_gpu_seconds + decode_gpu_seconds;
    return t > 0 ? prefill_gpu_seconds / t : 0.0;
  }
};

// Every request must have the same output_tokens, and context + output_tokens <= max_context.
// opt.max_batch is capped at the engine's, opt.prefill_chunk_tokens at its max_prefill_tokens
// (std::invalid_argument when chunked prefill is asked of an engine without prefill buffers);
// the graphs are captured before the first step. `stats`, when given, is filled (the window's
// steps only).
// Warm start (opt.measure_from_seconds > 0): `warm_model` answers the simulated steps, with no
// GPU work; the sequences they admitted or prefilled get their KV by the synthetic fill (up to
// the position they reached) just before their first real step, outside its time, and a
// synthetic last token. std::invalid_argument without a model.
batching_result run_decode_batching(decode_engine& e, const std::vector<request>& requests,
                                    batching_options opt, decode_batching_stats* stats = nullptr,
                                    const step_cost_model* warm_model = nullptr);

// The warm start's cost model measured on `e` now (under whatever else runs on the GPU): the
// decode step's host-clock seconds (as run_decode_batching times a step; the median of 3 after
// one untimed) at batch 1, 16, 64 and max_batch (those whose sequences of `context` tokens fit
// the KV pool), and one chunk of min(chunk_tokens, max_prefill_tokens, context) prompt tokens
// per token. chunk_tokens 0 (whole prompts) measures a prompt of `context` tokens.
step_cost_model calibrate_step_cost(decode_engine& e, std::int64_t context,
                                    std::int64_t chunk_tokens);

// Throughput at the p99 inter-token-latency limit: each load is a trace of `arrivals` at that
// rate (arrivals.requests_per_second is replaced), run by run_decode_batching; the loop stops
// admitting at arrivals.duration_seconds. `progress`, when set, sees each load and its run as they
// are measured.
// Without chunked prefill a step's time -- hence the inter-token latency -- is bounded by a full
// batch's decode: when that is under the limit, the limit is never exceeded and the search ends at
// max_steps (limit_never_exceeded), the last load being past saturation if max_steps reaches it.
load_search_result search_decode_load(
    decode_engine& e, const arrival_options& arrivals, const batching_options& batching,
    const load_search_options& search,
    const std::function<void(const load_point&, const batching_result&)>& progress = {});

} // namespace kg
