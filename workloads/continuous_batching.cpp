#include "workloads/continuous_batching.h"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>

#include "workloads/load_search.h"

namespace kg {

double batching_result::tokens_per_second() const {
  const double window = end_seconds - window_start_seconds;
  return window > 0 ? static_cast<double>(tokens) / window : 0.0;
}

double batching_result::mean_batch() const {
  double steps = 0, rows = 0;
  for (std::size_t k = 0; k < batch_histogram.size(); ++k) {
    steps += static_cast<double>(batch_histogram[k]);
    rows += static_cast<double>(k * batch_histogram[k]);
  }
  return steps > 0 ? rows / steps : 0.0;
}

namespace {
// A sequence's token times in the window, in ms: a gap counts when it starts there (a gap from a
// warm-up token ends a simulated step).
std::vector<double> window_tokens_ms(const sequence_trace& s, double window_start) {
  std::vector<double> t;
  for (const double x : s.token_seconds)
    if (x >= window_start) t.push_back(x * 1e3);
  return t;
}
} // namespace

inter_token_summary batching_result::itl_summary_ms() const {
  std::vector<std::vector<double>> ms;
  for (const auto& s : sequences)
    ms.push_back(window_tokens_ms(s, window_start_seconds));
  return summarize_inter_token_ms(ms);
}

double batching_result::p99_itl_ms() const {
  return itl_summary_ms().p99_ms;
}

bool batching_result::has_inter_token_interval() const {
  for (const auto& s : sequences)
    if (window_tokens_ms(s, window_start_seconds).size() >= 2) return true;
  return false;
}

namespace {

// A sequence admitted and still being prefilled: `done` prompt tokens so far.
struct prefilling {
  std::size_t seq = 0; // index into batching_result::sequences
  std::int64_t done = 0;
};

// A sequence past its prefill, decoding one token a step.
struct decoding {
  std::size_t seq = 0;
  std::int64_t generated = 0; // tokens out so far (the prefill's is the first)
};

// The loop's state between steps: the sequences that wait (FIFO), prefill and decode, in
// admission order. Whole-prompt mode is chunked mode whose budget covers every admitted prompt:
// `prefilling_` is then empty again after every step.
class batching_loop {
public:
  batching_loop(const std::vector<request>& requests, const step_fn& step,
                const batching_options& opt)
      : step_(step), opt_(opt) {
    if (opt.max_batch < 1) throw std::invalid_argument("max_batch must be at least 1");
    if (opt.prefill_chunk_tokens < 0)
      throw std::invalid_argument("prefill_chunk_tokens must be 0 (whole prompts) or positive");
    r_.batch_histogram.assign(static_cast<std::size_t>(opt.max_batch) + 1, 0);
    load(requests);
  }

  batching_result run() {
    while (next_ < order_.size() || !waiting_.empty() || !prefilling_.empty() ||
           !decoding_.empty()) {
      while (next_ < order_.size() && r_.sequences[order_[next_]].arrival_seconds <= now_)
        waiting_.push_back(order_[next_++]);
      if (waiting_.empty() && prefilling_.empty() && decoding_.empty()) { // idle until an arrival
        const double next_arrival = r_.sequences[order_[next_]].arrival_seconds;
        if (!window_open_ && next_arrival >= opt_.measure_from_seconds) {
          now_ = std::max(now_, opt_.measure_from_seconds); // idle when the window opened
          open_window();
        }
        now_ = next_arrival;
        continue;
      }
      if (now_ >= opt_.max_seconds) {
        r_.truncated = true;
        break;
      }
      // The window's counts are taken after this step's admissions: the batch its first step
      // runs (a slot freed by the step before it is refilled here, not left empty).
      const bool opened = open_window(false);
      admit();
      if (opened) note_window_batch();
      run_step(plan_step());
    }
    r_.end_seconds = now_;
    done_ = true;
    open_window(); // a loop that ended in its warm-up: an empty window at its end
    return std::move(r_);
  }

private:
  // Every sequence, checked to fit the KV capacity alone, and the order they arrive in.
  void load(const std::vector<request>& requests) {
    for (const auto& q : requests)
      for (const auto c : q.contexts) {
        if (c + q.output_tokens > opt_.kv_capacity_tokens)
          throw std::invalid_argument("a sequence of context " + std::to_string(c) + " + " +
                                      std::to_string(q.output_tokens) +
                                      " output tokens can never fit a KV cache of " +
                                      std::to_string(opt_.kv_capacity_tokens) + " tokens");
        r_.sequences.push_back({q.arrival_seconds, c, {}});
        targets_.push_back(q.output_tokens);
      }
    // Arrival order (stable: a request's sequences stay together, in order).
    order_.resize(r_.sequences.size());
    for (std::size_t i = 0; i < order_.size(); ++i)
      order_[i] = i;
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
      return r_.sequences[a].arrival_seconds < r_.sequences[b].arrival_seconds;
    });
  }

  std::int64_t context(std::size_t s) const { return r_.sequences[s].context; }
  std::int64_t lifetime_tokens(std::size_t s) const { return context(s) + targets_[s]; }
  int batch_size() const { return static_cast<int>(prefilling_.size() + decoding_.size()); }

  // The sequence's whole KV lifetime, from the caller's allocator or the token counter.
  bool reserve(std::size_t s) {
    if (opt_.kv_reserve) return opt_.kv_reserve(s, lifetime_tokens(s));
    if (kv_used_ + lifetime_tokens(s) > opt_.kv_capacity_tokens) return false;
    kv_used_ += lifetime_tokens(s);
    return true;
  }

  void release(std::size_t s) {
    if (opt_.kv_reserve) {
      if (opt_.kv_release) opt_.kv_release(s);
    } else {
      kv_used_ -= lifetime_tokens(s);
    }
  }

  // Admit in arrival order while a batch slot and the sequence's whole KV lifetime are free
  // (FIFO: a sequence that does not fit blocks the ones behind it, so none starves).
  void admit() {
    while (!waiting_.empty() && batch_size() < opt_.max_batch) {
      const std::size_t s = waiting_.front();
      if (!reserve(s)) {
        if (window_open_) ++r_.kv_refusals;
        break;
      }
      waiting_.pop_front();
      prefilling_.push_back({s, 0});
    }
  }

  // The prompt parts of this step: whole prompts, or the chunk's budget spent oldest first.
  std::vector<prefill_part> plan_prefills() const {
    const bool whole = opt_.prefill_chunk_tokens == 0;
    std::int64_t budget = opt_.prefill_chunk_tokens;
    std::vector<prefill_part> parts;
    for (const auto& p : prefilling_) {
      const std::int64_t rest = context(p.seq) - p.done;
      if (whole) {
        parts.push_back({p.seq, context(p.seq), p.done, rest});
        continue;
      }
      // An empty prompt (context 0) costs nothing and still ends its prefill in this step.
      if (budget == 0 && rest > 0) break;
      const std::int64_t take = std::min(rest, budget);
      parts.push_back({p.seq, context(p.seq), p.done, take});
      budget -= take;
    }
    return parts;
  }

  // The window opens at the first step that begins at or after measure_from_seconds (or at the
  // loop's end): at measure_from_seconds, or later when a simulated step straddled it. An idle
  // stretch across it counts in the window (the server was there, with nothing to do).
  // Returns whether it opened now; `note` takes the running and waiting counts at once (an
  // idle server, the loop's end), otherwise the caller does after admitting.
  bool open_window(bool note = true) {
    if (window_open_ || (now_ < opt_.measure_from_seconds && !done_)) return false;
    window_open_ = true;
    r_.window_start_seconds = std::max(opt_.measure_from_seconds, last_simulated_end_);
    if (r_.window_start_seconds > now_) r_.window_start_seconds = now_; // the loop ended first
    if (note) note_window_batch();
    return true;
  }
  void note_window_batch() {
    r_.running_at_window_start = batch_size();
    r_.waiting_at_window_start = static_cast<int>(waiting_.size());
  }

  step_plan plan_step() const {
    step_plan plan;
    plan.simulated = !window_open_;
    for (const auto& d : decoding_) {
      plan.decode_lengths.push_back(context(d.seq) + d.generated);
      plan.decode_sequences.push_back(d.seq);
    }
    plan.prefills = plan_prefills();
    if (opt_.prefill_chunk_tokens == 0)
      for (const auto& part : plan.prefills)
        plan.prefill_contexts.push_back(part.context);
    if (plan.decode_lengths.empty() && plan.prefills.empty()) {
      // Nothing fits yet and nothing runs: the counter cannot get here (capacity checked at
      // load), a kv_reserve that refuses on an empty cache can; never spin.
      throw std::logic_error("continuous batching: no work and no progress");
    }
    return plan;
  }

  void run_step(const step_plan& plan) {
    const double dt = step_(plan);
    if (!(dt > 0)) throw std::invalid_argument("a step must take positive time");
    now_ += dt;
    const bool counted = !plan.simulated;
    if (counted) {
      ++r_.steps;
      r_.batch_histogram[plan.decode_lengths.size()] += 1;
      r_.max_batch_seen = std::max(r_.max_batch_seen, static_cast<int>(plan.decode_lengths.size()));
      r_.tokens += static_cast<std::int64_t>(plan.decode_lengths.size());
    } else {
      ++r_.simulated_steps;
      last_simulated_end_ = now_;
    }
    for (auto& d : decoding_) {
      r_.sequences[d.seq].token_seconds.push_back(now_);
      ++d.generated;
    }
    finish_prefills(plan.prefills, counted);
    retire();
  }

  // The parts are a prefix of prefilling_, in its order: the ones that end a prompt give the
  // sequence's first token and move it to the decode rows, behind the older ones.
  void finish_prefills(const std::vector<prefill_part>& parts, bool counted) {
    std::size_t ended = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      prefilling_[i].done += parts[i].tokens;
      if (counted) r_.prefill_tokens += parts[i].tokens;
      if (!parts[i].last()) continue;
      r_.sequences[parts[i].sequence].token_seconds.push_back(now_);
      decoding_.push_back({parts[i].sequence, 1});
      if (counted) ++r_.tokens;
      ++ended;
    }
    if (!parts.empty() && counted) ++r_.prefill_steps;
    // Budget goes oldest first, so only the oldest prefills can have ended.
    prefilling_.erase(prefilling_.begin(),
                      prefilling_.begin() + static_cast<std::ptrdiff_t>(ended));
  }

  // Finished sequences free their batch slot and KV reservation; the others keep their order.
  void retire() {
    std::erase_if(decoding_, [&](const decoding& d) {
      if (d.generated < targets_[d.seq]) return false;
      release(d.seq);
      return true;
    });
  }

  const step_fn& step_;
  const batching_options& opt_;
  batching_result r_;
  std::vector<std::int64_t> targets_; // output tokens per sequence
  std::vector<std::size_t> order_;    // sequence indices in arrival order
  std::size_t next_ = 0;              // into order_: the next sequence to arrive
  std::deque<std::size_t> waiting_;   // arrived, not admitted, FIFO
  std::vector<prefilling> prefilling_;
  std::vector<decoding> decoding_;
  std::int64_t kv_used_ = 0; // the counter's tokens (without kv_reserve)
  double now_ = 0;
  bool window_open_ = false, done_ = false;
  double last_simulated_end_ = 0;
};

} // namespace

batching_result run_continuous_batching(const std::vector<request>& requests, const step_fn& step,
                                        const batching_options& opt) {
  return batching_loop(requests, step, opt).run();
}

} // namespace kg
