#include "suite/trial_cache.h"

#include <sstream>

#include "kernels/task_torch_refs.h"
#include "oracles/task_oracles.h"

namespace kg {

std::string trial_key::id() const {
  std::ostringstream s;
  s << task->id << "/" << shape->name << "/" << seed << "/" << regime.uniform01_activations
    << regime.identity_params << regime.normal_params << "/" << regime.scale << "/"
    << with_reference;
  return s.str();
}

trial_data compute_trial(const trial_key& k) {
  trial_data d;
  d.inputs = make_task_inputs(*k.task, *k.shape, k.seed, k.regime);
  d.oracle = run_task_oracle(*k.task, *k.shape, d.inputs);
  if (k.with_reference) {
    const auto ref = run_torch_reference(*k.task, d.inputs);
    d.reference_ran = ref.has_value();
    if (ref && ref->error.empty())
      d.reference = ref->outputs;
    else if (ref)
      d.reference_error = ref->error;
  }
  return d;
}

void trial_cache::prefetch(const trial_key& k) {
  const std::string id = k.id();
  std::lock_guard<std::mutex> lock(m_);
  if (pending_.count(id)) return;
  pending_[id] = std::async(std::launch::async, [k] { return compute_trial(k); }).share();
}

trial_data trial_cache::take(const trial_key& k) {
  std::shared_future<trial_data> f;
  {
    std::lock_guard<std::mutex> lock(m_);
    const auto it = pending_.find(k.id());
    if (it == pending_.end()) return compute_trial(k);
    f = it->second;
    pending_.erase(it);
  }
  return f.get(); // rethrows what the computation threw
}

void trial_cache::forget(const std::vector<trial_key>& keys) {
  std::vector<std::shared_future<trial_data>> dropped; // waited for outside the lock
  {
    std::lock_guard<std::mutex> lock(m_);
    for (const auto& k : keys)
      if (const auto it = pending_.find(k.id()); it != pending_.end()) {
        dropped.push_back(it->second);
        pending_.erase(it);
      }
  }
}

} // namespace kg
