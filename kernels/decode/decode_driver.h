// The decode engine under the continuous-batching loop (continuous_batching.h): each step of the
// loop prefills the admitted sequences (the engine's synthetic KV fill) and decodes one token of
// every running one with the batch size's CUDA graph; the step's seconds are the host clock from
// the first queued call until the next tokens are back on the host (the stream synchronized), so
// launch and copy overheads count as a server would see them. The loop's clock advances by those
// measured seconds: the latencies are those of this GPU under the offered load.
#pragma once

#include <functional>

#include "workloads/arrivals.h"
#include "workloads/continuous_batching.h"
#include "kernels/decode/decode_engine.h"
#include "workloads/load_search.h"

namespace kg {

// Every request must have the same output_tokens, and context + output_tokens <= max_context.
// opt.max_batch is capped at the engine's; the graphs are captured before the first step.
batching_result run_decode_batching(decode_engine& e, const std::vector<request>& requests,
                                    batching_options opt);

// Throughput at the p99 inter-token-latency limit: each load is a trace of `arrivals` at that
// rate (arrivals.requests_per_second is replaced), run by run_decode_batching; the loop stops
// admitting at arrivals.duration_seconds. `progress`, when set, sees each load and its run as they
// are measured.
// With max_batch sequences a step, a step's time -- hence the inter-token latency -- is bounded:
// when even a full batch steps under the limit, the limit is never exceeded and the search ends at
// max_steps (limit_never_exceeded), the last load being past saturation if max_steps reaches it.
load_search_result search_decode_load(
    decode_engine& e, const arrival_options& arrivals, const batching_options& batching,
    const load_search_options& search,
    const std::function<void(const load_point&, const batching_result&)>& progress = {});

} // namespace kg
