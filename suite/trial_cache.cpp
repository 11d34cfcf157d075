#include "suite/trial_cache.h"
#include "reports/remove_tree.h"

#include <fstream>
#include <sstream>

#include "kernels/task_torch_refs.h"
#include "oracles/task_oracles.h"

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

trial_cache::trial_cache(std::filesystem::path file_dir) : dir_(std::move(file_dir)) {}

std::shared_ptr<trial_cache::entry> trial_cache::find_or_start(const trial_key& k) {
  const std::string id = k.id();
  std::lock_guard<std::mutex> lock(m_);
  auto& e = entries_[id];
  if (!e) {
    e = std::make_shared<entry>();
    e->dir = dir_ / std::to_string(next_dir_++);
    e->data =
        std::async(std::launch::async, [k] {
          return std::shared_ptr<const trial_data>(std::make_shared<trial_data>(compute_trial(k)));
        }).share();
  }
  return e;
}

void trial_cache::prefetch(const trial_key& k) {
  (void)find_or_start(k);
}

std::shared_ptr<const trial_data> trial_cache::take(const trial_key& k) {
  return find_or_start(k)->data.get(); // rethrows what the computation threw
}

trial_files trial_cache::files(const trial_key& k) {
  const auto e = find_or_start(k);
  const auto data = e->data.get();
  std::lock_guard<std::mutex> lock(e->files_m);
  if (!e->written) {
    std::filesystem::create_directories(e->dir);
    trial_files f;
    for (std::size_t i = 0; i < data->inputs.size(); ++i) {
      f.inputs.push_back(e->dir / ("in" + std::to_string(i) + ".bin"));
      write_file(f.inputs.back(), data->inputs[i]);
    }
    for (std::size_t i = 0; i < data->oracle.size(); ++i) {
      f.expected.push_back(e->dir / ("expected" + std::to_string(i) + ".bin"));
      write_file(f.expected.back(), data->oracle[i].cast(dtype::float32));
    }
    e->files = std::move(f);
    e->written = true;
  }
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
    std::lock_guard<std::mutex> lock(e->files_m);
    if (e->written) remove_tree(e->dir);
  }
}

} // namespace kg
