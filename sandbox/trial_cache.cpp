#include "sandbox/trial_cache.h"
#include "reports/remove_tree.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <cmath>

#include <sys/resource.h>
#include <unistd.h>

#include "base/rng.h"
#include "base/sha256.h"
#include "kernels/task_torch_refs.h"
#include "oracles/comparators.h"
#include "oracles/task_oracles.h"
#include "timing/phase_log.h"

namespace kg {
namespace {

void write_file(const std::filesystem::path& f, const host_tensor& t) {
  std::ofstream out(f, std::ios::binary);
  out.write(reinterpret_cast<const char*>(t.bytes.data()),
            static_cast<std::streamsize>(t.bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + f.string());
}

} // namespace

std::string trial_key::id() const {
  std::ostringstream s;
  s << task->id << "/" << shape->name << "/" << seed << "/" << regime.uniform01_activations
    << regime.identity_params << regime.normal_params << regime.normal_weights_only
    << regime.normal_biases_only << "/" << regime.scale << "/" << regime.strict_regime << "/"
    << variant << "/" << with_reference;
  return s.str();
}

void apply_variant(const task_def& t, std::vector<host_tensor>& inputs, std::uint64_t variant) {
  for (std::size_t k = 0; k < inputs.size() && k < t.inputs.size(); ++k) {
    auto& x = inputs[k];
    if (t.inputs[k].role != "activation" || !is_floating(x.type) || x.numel() < 16) continue;
    rng r(variant, stream_id("variant/" + t.inputs[k].name));
    const std::int64_t n = x.numel(), len = n / 8;
    const std::int64_t from =
        len + static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(n - 2 * len + 1)));
    for (std::int64_t i = from; i < from + len; ++i)
      x.set(i, r.normal());
  }
}

namespace {

enum class move_sign { up, random };

// The inputs with floating elements moved by u, relative: every floating input (only == -1) or
// input `only` alone; all up, or each element in a random direction. In float64, so a move
// smaller than the input dtype's spacing survives.
std::vector<host_tensor> moved_inputs(const std::vector<host_tensor>& inputs, double u,
                                      move_sign sign, int only, std::uint64_t seed) {
  std::vector<host_tensor> moved;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const auto& x = inputs[k];
    if (!is_floating(x.type) || (only >= 0 && static_cast<std::size_t>(only) != k)) {
      moved.push_back(x);
      continue;
    }
    host_tensor y(dtype::float64, x.shape);
    rng r(seed, stream_id("condition/" + std::to_string(k)));
    for (std::int64_t i = 0; i < x.numel(); ++i)
      y.set(i, x.at(i) * (1.0 + (sign == move_sign::up || r.below(2) ? u : -u)));
    moved.push_back(std::move(y));
  }
  return moved;
}

// |oracle(moved) - oracle| per wanted output element (0 where not finite).
std::vector<std::vector<double>> oracle_moves(const task_def& t, const task_shape& shape,
                                              const std::vector<host_tensor>& moved,
                                              const std::vector<host_tensor>& oracle,
                                              const std::vector<bool>& wanted) {
  const auto out = run_task_oracle(t, shape, moved);
  std::vector<std::vector<double>> d(oracle.size());
  for (std::size_t k = 0; k < oracle.size(); ++k) {
    if (!wanted[k]) continue;
    d[k].resize(static_cast<std::size_t>(oracle[k].numel()));
    for (std::int64_t i = 0; i < oracle[k].numel(); ++i) {
      const double m = std::fabs(out[k].at(i) - oracle[k].at(i));
      d[k][static_cast<std::size_t>(i)] = std::isfinite(m) ? m : 0.0;
    }
  }
  return d;
}

} // namespace

std::vector<host_tensor> condition_tolerance(const task_def& t, const task_shape& shape,
                                             const std::vector<host_tensor>& inputs,
                                             const std::vector<host_tensor>& oracle,
                                             std::uint64_t seed, double factor) {
  std::vector<bool> wanted(oracle.size(), false);
  bool any = false;
  for (std::size_t k = 0; k < oracle.size(); ++k) {
    const dtype type = t.outputs.at(k).type;
    const auto tol = t.tolerance.find(type);
    wanted[k] = is_floating(type) && tol != t.tolerance.end() &&
                (tol->second.atol > 0 || tol->second.rtol > 0);
    any = any || wanted[k];
  }
  if (!any) return {};
  double u = 0; // the coarsest floating output's unit roundoff
  for (std::size_t k = 0; k < oracle.size(); ++k)
    if (wanted[k]) u = std::max(u, unit_roundoff(t.outputs[k].type));
  // Moves of all inputs at once: all up (a reduction's terms cannot cancel), random directions.
  auto together =
      oracle_moves(t, shape, moved_inputs(inputs, u, move_sign::up, -1, seed), oracle, wanted);
  {
    const auto r = oracle_moves(t, shape, moved_inputs(inputs, u, move_sign::random, -1, seed),
                                oracle, wanted);
    for (std::size_t k = 0; k < r.size(); ++k)
      for (std::size_t i = 0; i < r[k].size(); ++i)
        together[k][i] = std::max(together[k][i], r[k][i]);
  }
  // Each floating input alone, the moves summed in magnitude: x + b + r with x ~ -r cannot cancel.
  std::vector<std::vector<double>> apart(oracle.size());
  for (std::size_t k = 0; k < oracle.size(); ++k)
    apart[k].assign(together[k].size(), 0.0);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!is_floating(inputs[k].type)) continue;
    const auto r = oracle_moves(
        t, shape, moved_inputs(inputs, u, move_sign::random, static_cast<int>(k), seed + 1), oracle,
        wanted);
    for (std::size_t o = 0; o < r.size(); ++o)
      for (std::size_t i = 0; i < r[o].size(); ++i)
        apart[o][i] += r[o][i];
  }
  std::vector<host_tensor> extra(oracle.size());
  for (std::size_t k = 0; k < oracle.size(); ++k) {
    if (!wanted[k]) continue;
    extra[k] = host_tensor(dtype::float64, oracle[k].shape);
    for (std::int64_t i = 0; i < oracle[k].numel(); ++i) {
      const auto j = static_cast<std::size_t>(i);
      extra[k].set(i, factor * std::max(together[k][j], apart[k][j]));
    }
  }
  return extra;
}

void floor_at_reference_error(const task_def& t, const std::vector<host_tensor>& oracle,
                              const std::vector<host_tensor>& reference,
                              std::vector<host_tensor>& extra, double factor, double cap) {
  for (std::size_t k = 0; k < extra.size() && k < reference.size() && k < oracle.size(); ++k) {
    if (extra[k].shape.empty() || reference[k].numel() != oracle[k].numel()) continue;
    const auto& tol = t.tolerance.at(t.outputs.at(k).type);
    for (std::int64_t i = 0; i < oracle[k].numel(); ++i) {
      const double o = oracle[k].at(i), e = std::fabs(reference[k].at(i) - o);
      if (!std::isfinite(e)) continue;
      const double most = cap * (tol.atol + tol.rtol * std::fabs(o));
      extra[k].set(i, std::max(extra[k].at(i), std::min(factor * e, most)));
    }
  }
}

const std::vector<host_tensor>& trial_data::extra_atol() const {
  static const std::vector<host_tensor> none;
  if (!lazy_extra) return none;
  std::call_once(lazy_extra->once, [&] { lazy_extra->value = lazy_extra->make(*this); });
  return lazy_extra->value;
}

trial_data compute_trial(const trial_key& k) {
  trial_data d;
  {
    scoped_phase phase("trial.inputs");
    d.inputs = make_task_inputs(*k.task, *k.shape, k.seed, k.regime);
    if (k.variant) apply_variant(*k.task, d.inputs, k.variant);
  }
  {
    scoped_phase phase("trial.oracle");
    d.oracle = run_task_oracle(*k.task, *k.shape, d.inputs);
  }
  if (k.regime.strict_regime > 0) {
    d.lazy_extra = std::make_shared<trial_data::lazy_term>();
    d.lazy_extra->make = [task = k.task, shape = k.shape,
                          seed = k.seed ^ 0x636f6e64ull](const trial_data& t) {
      auto extra = condition_tolerance(*task, *shape, t.inputs, t.oracle, seed);
      // Never stricter than the task's own LibTorch reference where the op is ill-conditioned:
      // it rounds intermediates (a float32 angle, a bfloat16 partial sum) that no input move
      // reaches, and a kernel that rounds where it does is honest.
      if (!t.reference.empty()) {
        floor_at_reference_error(*task, t.oracle, t.reference, extra);
      } else if (const auto ref = run_torch_reference(*task, t.inputs); ref && ref->error.empty()) {
        floor_at_reference_error(*task, t.oracle, ref->outputs, extra);
      }
      return extra;
    };
  }
  if (k.with_reference) {
    scoped_phase phase("trial.reference");
    const auto ref = run_torch_reference(*k.task, d.inputs);
    d.reference_ran = ref.has_value();
    if (ref && ref->error.empty())
      d.reference = ref->outputs;
    else if (ref)
      d.reference_error = ref->error;
  }
  return d;
}

trial_cache::trial_cache(std::filesystem::path file_dir, unsigned threads)
    : dir_(std::move(file_dir)) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < threads; ++i)
    pool_.emplace_back([this] { serve(); });
}

trial_cache::~trial_cache() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : pool_)
    t.join();
  std::lock_guard<std::mutex> lock(m_);
  for (auto& [id, e] : entries_) {
    if (!e->claimed.exchange(true)) e->promise.set_value(nullptr);
    std::lock_guard<std::mutex> fl(e->files_m);
    if (e->written) remove_tree(e->dir);
  }
}

void trial_cache::serve() {
  // The pool computes one trial per core: LibTorch's own CPU threads on top would oversubscribe.
  use_one_torch_cpu_thread();
  // Below the workers and the pair threads (Linux: a thread's own nice value): trials are made
  // ahead, and a worker's host side kept waiting for a core leaves the GPU idle.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
  for (;;) {
    std::shared_ptr<entry> e;
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      e = std::move(queue_.front());
      queue_.pop_front();
    }
    compute(*e);
  }
}

std::shared_ptr<trial_cache::entry> trial_cache::find_or_queue(const trial_key& k) {
  const std::string id = k.id();
  std::lock_guard<std::mutex> lock(m_);
  auto& e = entries_[id];
  if (!e) {
    e = std::make_shared<entry>();
    e->key = k;
    e->dir = dir_ / std::to_string(next_dir_++);
    e->data = e->promise.get_future().share();
    queue_.push_back(e);
    cv_.notify_one();
  }
  return e;
}

void trial_cache::write_files(entry& e, const trial_data& d) {
  scoped_phase phase("cache.write_files");
  std::filesystem::create_directories(e.dir);
  trial_files f;
  sha256 inputs_hash;
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    f.inputs.push_back(e.dir / ("in" + std::to_string(i) + ".bin"));
    write_file(f.inputs.back(), d.inputs[i]);
    const auto& t = d.inputs[i];
    const std::int64_t head[2] = {static_cast<std::int64_t>(t.type),
                                  static_cast<std::int64_t>(t.shape.size())};
    inputs_hash.update(head, sizeof head);
    inputs_hash.update(t.shape.data(), t.shape.size() * sizeof(std::int64_t));
    inputs_hash.update(t.bytes.data(), t.bytes.size());
  }
  f.inputs_sha256 = inputs_hash.finish_hex();
  for (std::size_t i = 0; i < d.oracle.size(); ++i) {
    f.expected.push_back(e.dir / ("expected" + std::to_string(i) + ".bin"));
    write_file(f.expected.back(), d.oracle[i].cast(dtype::float32));
  }
  std::size_t bytes = 0;
  for (const auto& t : d.inputs)
    bytes += t.bytes.size();
  for (const auto& t : d.oracle)
    bytes += t.bytes.size() / 2; // as float32
  e.files = std::move(f);
  e.written = true;
  e.bytes += bytes;
  resident_ += bytes;
}

void trial_cache::compute(entry& e) {
  if (e.claimed.exchange(true)) return;
  std::lock_guard<std::mutex> lock(e.files_m);
  std::shared_ptr<const trial_data> d;
  try {
    scoped_phase phase("cache.compute");
    d = std::make_shared<trial_data>(compute_trial(e.key));
  } catch (...) {
    e.promise.set_exception(std::current_exception());
    return;
  }
  for (const auto& t : d->inputs)
    e.bytes += t.bytes.size();
  for (const auto& t : d->oracle)
    e.bytes += t.bytes.size();
  resident_ += e.bytes;
  e.promise.set_value(d);
  try {
    write_files(e, *d);
  } catch (const std::exception&) {
    // (files() writes them again and reports why it cannot)
  }
}

void trial_cache::prefetch(const trial_key& k) {
  (void)find_or_queue(k);
}

std::shared_ptr<const trial_data> trial_cache::take(const trial_key& k) {
  const auto e = find_or_queue(k);
  compute(*e);
  return e->data.get(); // rethrows what the computation threw
}

trial_files trial_cache::files(const trial_key& k) {
  const auto e = find_or_queue(k);
  compute(*e);
  const auto data = e->data.get();
  std::lock_guard<std::mutex> lock(e->files_m);
  if (!e->written) write_files(*e, *data);
  return e->files;
}

void trial_cache::forget(const std::vector<trial_key>& keys) {
  std::vector<std::shared_ptr<entry>> dropped; // their data is released outside the lock
  {
    std::lock_guard<std::mutex> lock(m_);
    for (const auto& k : keys)
      if (const auto it = entries_.find(k.id()); it != entries_.end()) {
        dropped.push_back(it->second);
        entries_.erase(it);
      }
  }
  for (const auto& e : dropped) {
    if (!e->claimed.exchange(true)) e->promise.set_value(nullptr); // still queued: never computed
    std::lock_guard<std::mutex> lock(e->files_m);                  // waits for a running one
    if (e->written) remove_tree(e->dir);
    resident_ -= e->bytes;
  }
}

} // namespace kg
