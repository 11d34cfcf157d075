#include "workloads/continuous_batching.h"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>

#include "workloads/load_search.h"

namespace kg {

double batching_result::tokens_per_second() const {
  return end_seconds > 0 ? static_cast<double>(tokens) / end_seconds : 0.0;
}

double batching_result::mean_batch() const {
  double steps = 0, rows = 0;
  for (std::size_t k = 0; k < batch_histogram.size(); ++k) {
    steps += static_cast<double>(batch_histogram[k]);
    rows += static_cast<double>(k * batch_histogram[k]);
  }
  return steps > 0 ? rows / steps : 0.0;
}

double batching_result::p99_itl_ms() const {
  std::vector<std::vector<double>> ms;
  for (const auto& s : sequences) {
    std::vector<double> t;
    for (const double x : s.token_seconds)
      t.push_back(x * 1e3);
    ms.push_back(std::move(t));
  }
  return p99_inter_token_ms(ms);
}

batching_result run_continuous_batching(const std::vector<request>& requests, const step_fn& step,
                                        const batching_options& opt) {
  if (opt.max_batch < 1) throw std::invalid_argument("max_batch must be at least 1");
  batching_result r;
  r.batch_histogram.assign(static_cast<std::size_t>(opt.max_batch) + 1, 0);
  struct running {
    std::size_t seq;            // index into r.sequences
    std::int64_t generated = 0; // tokens out so far
    std::int64_t target = 0;    // output tokens
    std::int64_t kv = 0;        // slots reserved: context + output tokens
  };
  std::deque<std::size_t> waiting; // sequences arrived, not admitted, FIFO
  std::vector<std::int64_t> targets;
  for (const auto& q : requests)
    for (const auto c : q.contexts) {
      if (c + q.output_tokens > opt.kv_capacity_tokens)
        throw std::invalid_argument("a sequence of context " + std::to_string(c) + " + " +
                                    std::to_string(q.output_tokens) +
                                    " output tokens can never fit a KV cache of " +
                                    std::to_string(opt.kv_capacity_tokens) + " tokens");
      r.sequences.push_back({q.arrival_seconds, c, {}});
      targets.push_back(q.output_tokens);
    }
  // Arrival order (stable: a request's sequences stay together, in order).
  std::vector<std::size_t> order(r.sequences.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return r.sequences[a].arrival_seconds < r.sequences[b].arrival_seconds;
  });
  std::size_t next = 0; // into order: the next sequence to arrive
  std::vector<running> active;
  std::int64_t kv_used = 0;
  double now = 0;
  while (next < order.size() || !waiting.empty() || !active.empty()) {
    while (next < order.size() && r.sequences[order[next]].arrival_seconds <= now)
      waiting.push_back(order[next++]);
    if (active.empty() && waiting.empty()) { // idle until the next arrival
      now = r.sequences[order[next]].arrival_seconds;
      continue;
    }
    if (now >= opt.max_seconds) {
      r.truncated = true;
      break;
    }
    // Admit in arrival order while a batch slot and the sequence's whole KV lifetime are free
    // (FIFO: a sequence that does not fit blocks the ones behind it, so none starves).
    std::vector<std::size_t> admitted;
    while (!waiting.empty() && static_cast<int>(active.size() + admitted.size()) < opt.max_batch) {
      const std::size_t s = waiting.front();
      const std::int64_t kv = r.sequences[s].context + targets[s];
      if (kv_used + kv > opt.kv_capacity_tokens) break;
      kv_used += kv;
      admitted.push_back(s);
      waiting.pop_front();
    }
    step_plan plan;
    for (const auto& a : active)
      plan.decode_lengths.push_back(r.sequences[a.seq].context + a.generated);
    for (const auto s : admitted)
      plan.prefill_contexts.push_back(r.sequences[s].context);
    if (plan.decode_lengths.empty() && plan.prefill_contexts.empty()) {
      // Nothing fits yet and nothing runs: cannot happen (capacity checked above) unless the
      // batch is full of nothing; guard against a spin all the same.
      throw std::logic_error("continuous batching: no work and no progress");
    }
    const double dt = step(plan);
    if (!(dt > 0)) throw std::invalid_argument("a step must take positive time");
    now += dt;
    ++r.steps;
    r.batch_histogram[plan.decode_lengths.size()] += 1;
    r.max_batch_seen = std::max(r.max_batch_seen, static_cast<int>(plan.decode_lengths.size()));
    for (auto& a : active) {
      r.sequences[a.seq].token_seconds.push_back(now);
      ++a.generated;
    }
    for (const auto s : admitted) { // the prefill's output is the sequence's first token
      r.sequences[s].token_seconds.push_back(now);
      active.push_back({s, 1, targets[s], r.sequences[s].context + targets[s]});
    }
    r.tokens += static_cast<std::int64_t>(plan.decode_lengths.size() + admitted.size());
    // Finished sequences free their batch slot and KV reservation.
    std::erase_if(active, [&](const running& a) {
      if (a.generated < a.target) return false;
      kv_used -= a.kv;
      return true;
    });
  }
  r.end_seconds = now;
  return r;
}

} // namespace kg
