#include "kernels/decode/decode_driver.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "gpu/cuda_raii.h"
#include "timing/interrupt.h"
#include "workloads/decode_engine_plan.h"
#include "workloads/kv_allocator.h"

namespace kg {
namespace {

// A running sequence's engine state.
struct sequence_state {
  int slot = 0;
  std::int64_t kv_start = 0;
  int token = 0;          // the last token out: the next decode step's input
  bool simulated = false; // a warm-up step moved it: its KV is not there yet
};

// The slots and KV blocks of the running sequences, handed out at admission.
class kv_placement {
public:
  kv_placement(decode_engine& e, decode_batching_stats* stats)
      : e_(e), blocks_(kv_pool_tokens_of(e.config())), slots_(e.config().max_batch), stats_(stats) {
  }
  ~kv_placement() { e_.bind_default_slots(); } // the run's bindings undone, whatever ended it
  kv_placement(const kv_placement&) = delete;
  kv_placement& operator=(const kv_placement&) = delete;

  bool reserve(std::size_t seq, std::int64_t tokens) {
    if (slots_.free_slots() == 0) return false;
    const auto start = blocks_.allocate(tokens);
    if (!start) {
      if (stats_) ++stats_->kv_refusals;
      return false;
    }
    const int slot = slots_.acquire();
    e_.bind_slot(slot, static_cast<int>(*start), static_cast<int>(tokens));
    running_[seq] = {slot, *start, 0};
    return true;
  }
  void release(std::size_t seq) {
    const auto it = running_.find(seq);
    if (it == running_.end()) throw std::logic_error("kv_placement: sequence not running");
    blocks_.release(it->second.kv_start);
    slots_.release(it->second.slot);
    running_.erase(it);
  }
  sequence_state& at(std::size_t seq) {
    const auto it = running_.find(seq);
    if (it == running_.end()) throw std::logic_error("kv_placement: sequence not running");
    return it->second;
  }

private:
  decode_engine& e_;
  kv_block_allocator blocks_;
  kv_slot_pool slots_;
  decode_batching_stats* stats_;
  std::map<std::size_t, sequence_state> running_;
};

void check_requests(const decode_engine& e, const std::vector<request>& requests) {
  const std::int64_t outputs = requests.front().output_tokens;
  for (const auto& q : requests) {
    if (q.output_tokens != outputs)
      throw std::invalid_argument(
          "run_decode_batching: every request needs the same output_tokens");
    for (const auto ctx : q.contexts)
      if (ctx < 1 || ctx + outputs > e.config().max_context)
        throw std::invalid_argument("run_decode_batching: context " + std::to_string(ctx) + " + " +
                                    std::to_string(outputs) + " outputs exceeds the engine's " +
                                    std::to_string(e.config().max_context) + " tokens a sequence");
  }
}

double elapsed_seconds(const cuda_event& a, const cuda_event& b) {
  float ms = 0;
  KG_CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
  return ms * 1e-3;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds of `run` by the host clock, the stream synchronized: the median of 3 after one
// untimed (as a serving step is timed).
template <class F>
double time_host(decode_engine& e, F run) {
  std::vector<double> t;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    KG_CUDA_CHECK(cudaStreamSynchronize(e.stream()));
    if (i > 0)
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median_of(t);
}

} // namespace

step_cost_model calibrate_step_cost(decode_engine& e, std::int64_t context,
                                    std::int64_t chunk_tokens) {
  const auto& c = e.config();
  const int ctx = static_cast<int>(std::clamp<std::int64_t>(context, 1, c.max_context - 1));
  e.capture_all();
  step_cost_model m;
  kv_placement kv(e, nullptr);
  std::vector<int> slots;
  auto decode_at = [&](int b) {
    const std::vector<int> tokens(static_cast<std::size_t>(b), 0), positions(tokens.size(), ctx),
        rows(slots.begin(), slots.begin() + b);
    m.decode_seconds.push_back({b, time_host(e, [&] {
                                  e.step(tokens, positions, rows);
                                  (void)e.next_tokens(b);
                                })});
  };
  for (const int want : {1, 16, 64, c.max_batch}) {
    const int b = std::min(want, c.max_batch);
    if (!m.decode_seconds.empty() && b <= m.decode_seconds.back().first) continue;
    while (static_cast<int>(slots.size()) < b && kv.reserve(slots.size(), ctx + 1)) {
      slots.push_back(kv.at(slots.size()).slot);
      e.prefill(slots.back(), ctx);
    }
    const int placed = static_cast<int>(slots.size());
    if (placed == 0)
      throw std::invalid_argument("calibrate_step_cost: no sequence of " + std::to_string(ctx) +
                                  " tokens fits the KV pool");
    if (m.decode_seconds.empty() || placed > m.decode_seconds.back().first) decode_at(placed);
    if (placed < b) break; // the pool is full: the last segment extends beyond
  }
  const bool chunked = chunk_tokens > 0;
  if (chunked && c.max_prefill_tokens < 1)
    throw std::invalid_argument("calibrate_step_cost: chunked prefill needs prefill buffers");
  const int n = chunked ? static_cast<int>(std::min<std::int64_t>(
                              {chunk_tokens, static_cast<std::int64_t>(c.max_prefill_tokens), ctx}))
                        : ctx;
  const double t = time_host(e, [&] {
    if (chunked) {
      e.prefill_chunk({{slots.front(), 0, n, 1}});
      (void)e.prefill_next_tokens(1);
    } else {
      e.prefill(slots.front(), n);
    }
  });
  m.prefill_seconds_per_token = t / n;
  return m;
}

batching_result run_decode_batching(decode_engine& e, const std::vector<request>& requests,
                                    batching_options opt, decode_batching_stats* stats,
                                    const step_cost_model* warm_model) {
  const auto& c = e.config();
  if (opt.measure_from_seconds > 0 && !warm_model)
    throw std::invalid_argument("run_decode_batching: a warm start needs a step cost model");
  if (requests.empty())
    return run_continuous_batching(
        requests, [](const step_plan&) { return 1.0; }, opt);
  check_requests(e, requests);
  opt.max_batch = std::min(opt.max_batch, c.max_batch);
  const bool real_prefill = opt.prefill_chunk_tokens > 0;
  if (real_prefill && c.max_prefill_tokens < 1)
    throw std::invalid_argument("run_decode_batching: chunked prefill needs an engine with "
                                "prefill buffers (max_prefill_tokens > 0)");
  opt.prefill_chunk_tokens = std::min<std::int64_t>(opt.prefill_chunk_tokens, c.max_prefill_tokens);
  opt.kv_capacity_tokens = kv_pool_tokens_of(c);
  kv_placement kv(e, stats);
  opt.kv_reserve = [&](std::size_t seq, std::int64_t tokens) { return kv.reserve(seq, tokens); };
  opt.kv_release = [&](std::size_t seq) { kv.release(seq); };
  e.capture_all(); // capture time is not a step's time
  cuda_event ev_start, ev_mid, ev_end;
  std::uint64_t synthetic_count = 0;
  const auto synthetic_token = [&] {
    return static_cast<int>((++synthetic_count * 7919u) % c.model.vocab);
  };
  const auto simulate = [&](const step_plan& plan) {
    for (const auto seq : plan.decode_sequences)
      kv.at(seq).simulated = true;
    for (const auto& p : plan.prefills) {
      auto& s = kv.at(p.sequence);
      s.simulated = true;
      if (p.last()) s.token = synthetic_token();
    }
    return warm_model->seconds(plan);
  };
  // The KV a simulated step would have written: decode rows up to their new token's position,
  // prompts up to their part's first token. Before the step's clock starts.
  const auto materialize = [&](const step_plan& plan) {
    bool filled = false;
    const auto fill = [&](std::size_t seq, std::int64_t tokens) {
      auto& s = kv.at(seq);
      if (!s.simulated) return;
      s.simulated = false;
      if (tokens > 0) e.prefill(s.slot, static_cast<int>(tokens));
      filled = true;
    };
    for (std::size_t i = 0; i < plan.decode_sequences.size(); ++i)
      fill(plan.decode_sequences[i], plan.decode_lengths[i] - 1);
    for (const auto& p : plan.prefills)
      fill(p.sequence, p.begin);
    if (filled) KG_CUDA_CHECK(cudaStreamSynchronize(e.stream()));
  };
  const auto step = [&](const step_plan& plan) {
    if (plan.simulated) return simulate(plan);
    materialize(plan);
    const auto t0 = std::chrono::steady_clock::now();
    if (stats) KG_CUDA_CHECK(cudaEventRecord(ev_start.get(), e.stream()));
    std::vector<decode_engine::prefill_part> parts;
    for (const auto& p : plan.prefills) {
      auto& s = kv.at(p.sequence);
      if (real_prefill)
        parts.push_back({s.slot, static_cast<int>(p.begin), static_cast<int>(p.tokens),
                         static_cast<std::uint64_t>(p.sequence) + 1});
      else
        e.prefill(s.slot, static_cast<int>(p.context));
    }
    if (!parts.empty()) e.prefill_chunk(parts);
    if (stats) KG_CUDA_CHECK(cudaEventRecord(ev_mid.get(), e.stream()));
    const int n = static_cast<int>(plan.decode_sequences.size());
    if (n > 0) {
      std::vector<int> tokens, positions, slots;
      for (int i = 0; i < n; ++i) {
        const auto& s = kv.at(plan.decode_sequences[static_cast<std::size_t>(i)]);
        tokens.push_back(s.token);
        positions.push_back(static_cast<int>(plan.decode_lengths[static_cast<std::size_t>(i)] - 1));
        slots.push_back(s.slot);
      }
      e.step(tokens, positions, slots);
    }
    if (stats) KG_CUDA_CHECK(cudaEventRecord(ev_end.get(), e.stream()));
    const auto next = n > 0 ? e.next_tokens(n) : std::vector<int>{}; // synchronizes the stream
    const auto first =
        parts.empty() ? std::vector<int>{} : e.prefill_next_tokens(static_cast<int>(parts.size()));
    KG_CUDA_CHECK(cudaStreamSynchronize(e.stream()));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (stats) {
      stats->prefill_gpu_seconds += elapsed_seconds(ev_start, ev_mid);
      stats->decode_gpu_seconds += elapsed_seconds(ev_mid, ev_end);
    }
    for (int i = 0; i < n; ++i)
      kv.at(plan.decode_sequences[static_cast<std::size_t>(i)]).token =
          next[static_cast<std::size_t>(i)];
    for (std::size_t i = 0; i < plan.prefills.size(); ++i) {
      const auto& p = plan.prefills[i];
      if (!p.last()) continue;
      // The prefill's argmax; without a real prefill a synthetic first token, spread over the
      // vocabulary.
      kv.at(p.sequence).token = real_prefill ? first[i] : synthetic_token();
    }
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
