#include "kernels/decode/decode_driver.h"
#include "timing/interrupt.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"

namespace kg {

batching_result run_decode_batching(decode_engine& e, const std::vector<request>& requests,
                                    batching_options opt) {
  const auto& c = e.config();
  if (requests.empty())
    return run_continuous_batching(
        requests, [](const step_plan&) { return 1.0; }, opt);
  const std::int64_t outputs = requests.front().output_tokens;
  for (const auto& q : requests) {
    if (q.output_tokens != outputs)
      throw std::invalid_argument(
          "run_decode_batching: every request needs the same output_tokens");
    for (const auto ctx : q.contexts)
      if (ctx < 1 || ctx + outputs > c.max_context)
        throw std::invalid_argument("run_decode_batching: context " + std::to_string(ctx) + " + " +
                                    std::to_string(outputs) + " outputs exceeds the engine's " +
                                    std::to_string(c.max_context) + " tokens a slot");
  }
  opt.max_batch = std::min(opt.max_batch, c.max_batch);
  // A slot holds max_context tokens whatever the sequence: the batch size, not the token count,
  // is what runs out. The loop's token capacity is therefore never the binding limit.
  opt.kv_capacity_tokens = static_cast<std::int64_t>(c.max_batch) * c.max_context;
  e.capture_all(); // capture time is not a step's time
  decode_row_tracker tracker(c.max_batch, outputs);
  std::uint64_t admitted_count = 0;
  const auto step = [&](const step_plan& plan) {
    const auto rows = tracker.begin(plan);
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& r : rows.admitted)
      e.prefill(r.slot, static_cast<int>(r.context));
    std::vector<int> next;
    if (!rows.decode.empty()) {
      std::vector<int> tokens, positions, slots;
      for (const auto& r : rows.decode) {
        tokens.push_back(r.token);
        positions.push_back(static_cast<int>(r.position()));
        slots.push_back(r.slot);
      }
      e.step(tokens, positions, slots);
      next = e.next_tokens(static_cast<int>(rows.decode.size())); // synchronizes the stream
    } else {
      KG_CUDA_CHECK(cudaStreamSynchronize(e.stream()));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // A prefill's first token: synthetic (no prompt was run), spread over the vocabulary.
    std::vector<int> first;
    for (std::size_t i = 0; i < rows.admitted.size(); ++i)
      first.push_back(static_cast<int>((++admitted_count * 7919u) % c.model.vocab));
    tracker.end(next, first);
    return seconds;
  };
  return run_continuous_batching(requests, step, opt);
}

load_search_result
search_decode_load(decode_engine& e, const arrival_options& arrivals,
                   const batching_options& batching, const load_search_options& search,
                   const std::function<void(const load_point&, const batching_result&)>& progress) {
  return search_load(
      [&](double rps) {
        throw_if_stop_requested(); // between load points: an interrupted search ends here
        auto a = arrivals;
        a.requests_per_second = rps;
        auto b = batching;
        b.max_seconds = a.duration_seconds;
        const auto r = run_decode_batching(e, generate_arrivals(a), b);
        const load_point p{rps, r.p99_itl_ms(), r.tokens_per_second()};
        if (progress) progress(p, r);
        return p;
      },
      search);
}

} // namespace kg
