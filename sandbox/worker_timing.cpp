// Honest timing inside the worker. The input sets are verified first (each run on an idle stream
// and checked against the fp64 oracle, then run again to learn whether the candidate repeats its
// own bits); then every timed call is staged and checked as timing/honest_work.h describes, and
// so is every call of the ABBA pairs against the baseline.
#include <algorithm>
#include <cstring>

#include <dlfcn.h>

#include "base/rng.h"
#include "oracles/device_allclose.h"
#include "oracles/device_check.h"
#include "oracles/device_equal.h"
#include "sandbox/worker_session.h"
#include "sandbox/worker_torch.h"
#include "timing/paired.h"
#include "timing/phase_log.h"
#include "workloads/tensor.h"

namespace kg {

// One input set: master copies of its inputs (staged into buffer sets by copy), the oracle's
// outputs as float32, and the candidate's own verified outputs.
struct data_set {
  std::vector<device_tensor> in, expected, verified;
};

struct output_spec {
  dtype type = dtype::float32;
  std::vector<std::int64_t> shape;
  std::size_t numel = 0;
  double atol = 0, rtol = 0;
};

// The buffers a call sees: what kg_run's pointers point to.
struct buffer_set {
  std::vector<device_tensor> in, out;
  std::vector<kg_tensor> tin, tout;
};

struct timing_data {
  std::vector<data_set> sets; // the timed sets, then the fresh one
  std::vector<output_spec> outputs;
  std::vector<std::pair<int, std::vector<std::int64_t>>> input_specs; // dtype code, shape
};

namespace {

std::vector<std::int64_t> shape_of(const nlohmann::json& x) {
  return x.at("shape").get<std::vector<std::int64_t>>();
}

buffer_set make_buffers(const timing_data& td) {
  buffer_set b;
  for (const auto& [code, shape] : td.input_specs)
    b.in.emplace_back(code, shape);
  for (const auto& o : td.outputs)
    b.out.emplace_back(static_cast<int>(o.type), o.shape);
  for (auto& d : b.in)
    b.tin.push_back(d.t);
  for (auto& d : b.out)
    b.tout.push_back(d.t);
  return b;
}

int call(kg_run_fn run, buffer_set& b, cudaStream_t s) {
  return run(b.tin.data(), static_cast<int>(b.tin.size()), b.tout.data(),
             static_cast<int>(b.tout.size()), s);
}

// Queues data set d's inputs into b and fills b's outputs with `fill` bytes.
void stage(buffer_set& b, const data_set& d, unsigned char fill, cudaStream_t s) {
  for (std::size_t k = 0; k < b.in.size(); ++k)
    KG_CUDA_CHECK(
        cudaMemcpyAsync(b.in[k].ptr, d.in[k].ptr, b.in[k].bytes, cudaMemcpyDeviceToDevice, s));
  for (auto& o : b.out)
    KG_CUDA_CHECK(cudaMemsetAsync(o.ptr, fill, o.bytes, s));
}

// b's outputs against the oracle (waits for the stream): "" or why not.
std::string against_oracle(const timing_data& td, const buffer_set& b, const data_set& d,
                           cudaStream_t s) {
  for (std::size_t k = 0; k < td.outputs.size(); ++k) {
    const auto& o = td.outputs[k];
    std::uint64_t bad = 0, first = 0;
    if (is_floating(o.type)) {
      const auto r =
          device_allclose(b.out[k].ptr, o.type, static_cast<const float*>(d.expected[k].ptr),
                          o.numel, static_cast<float>(o.atol), static_cast<float>(o.rtol), s);
      bad = r.mismatches;
      first = r.first;
    } else { // indices: exact, compared on the host (small)
      check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      host_tensor got(o.type, o.shape);
      std::vector<float> want(o.numel);
      check_cuda(
          cudaMemcpy(got.bytes.data(), b.out[k].ptr, got.bytes.size(), cudaMemcpyDeviceToHost),
          "cudaMemcpy D2H");
      check_cuda(
          cudaMemcpy(want.data(), d.expected[k].ptr, want.size() * 4, cudaMemcpyDeviceToHost),
          "cudaMemcpy D2H");
      for (std::size_t i = 0; i < o.numel; ++i)
        if (got.at(static_cast<std::int64_t>(i)) != static_cast<double>(want[i]) && bad++ == 0)
          first = i;
    }
    if (bad)
      return "output " + std::to_string(k) + ": " + std::to_string(bad) +
             " elements outside tolerance of the fp64 oracle (first at " + std::to_string(first) +
             ")";
  }
  return "";
}

bool same_bits(const buffer_set& b, const std::vector<device_tensor>& ref, cudaStream_t s) {
  for (std::size_t k = 0; k < ref.size(); ++k)
    if (!device_equal(b.out[k].ptr, ref[k].ptr, ref[k].bytes, s)) return false;
  return true;
}

// The candidate's answers on one input set, called `reruns` times in a row on an idle stream:
// how many were wrong against the oracle and how many differed from the first.
nlohmann::json rerun_set(kg_run_fn run, const timing_data& td, buffer_set& b, int set, int reruns,
                         cudaStream_t s) {
  const auto& d = td.sets[static_cast<std::size_t>(set)];
  std::vector<device_tensor> first;
  int wrong = 0, differ = 0;
  for (int i = 0; i < reruns; ++i) {
    stage(b, d, 0xff, s);
    (void)call(run, b, s);
    check_cuda(cudaStreamSynchronize(s), "after kg_run");
    if (!against_oracle(td, b, d, s).empty()) ++wrong;
    if (i == 0) {
      for (auto& o : b.out) {
        first.emplace_back(o.t.dtype, std::vector<std::int64_t>(o.t.shape, o.t.shape + o.t.ndim));
        check_cuda(cudaMemcpy(first.back().ptr, o.ptr, o.bytes, cudaMemcpyDeviceToDevice),
                   "cudaMemcpy D2D");
      }
    } else if (!same_bits(b, first, s)) {
      ++differ;
    }
  }
  return {
      {"input_set", set}, {"reruns", reruns}, {"wrong", wrong}, {"differed_from_first", differ}};
}

// The task's LibTorch reference on buffer set b, as KernelBench times its baseline (eager,
// outputs from LibTorch's caching allocator), with the same timer. One untimed call first:
// LibTorch's lazy CUDA start-up is not the op's time. What LibTorch keeps on the device
// afterwards belongs to the session, not to a candidate: the leak check re-baselines. In kg_worker
// the first reference also loads LibTorch (sandbox/worker_torch.h), inside the "worker.torch"
// phase and before the untimed call.
nlohmann::json time_torch_reference(const nlohmann::json& r, buffer_set& b, gpu_timer& timer,
                                    worker_session& session) {
  const auto ref = worker_torch_reference(r.at("op").get<std::string>(), r.at("params"),
                                          b.tin.data(), static_cast<int>(b.tin.size()));
  if (!ref.run) return {{"status", "UNAVAILABLE"}, {"status_reason", ref.error}};
  session.rebaseline = true;
  try {
    ref.run(session.stream);
    if (const auto e = cudaStreamSynchronize(session.stream); e != cudaSuccess)
      return {{"status", "ERROR"},
              {"status_reason", std::string("LibTorch reference: ") + cudaGetErrorString(e)}};
    return timer.measure(ref.run).to_json(false);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return {{"status", "ERROR"}, {"status_reason", "LibTorch reference: " + what}};
  }
}

// What the device flag's code says: the input set whose check failed.
std::string flag_reason(unsigned code, bool bitwise) {
  return "output differs from the candidate's own verified output for input set " +
         std::to_string(code - 1) +
         (bitwise ? " (bits; the candidate repeated its bits when verified)"
                  : " (beyond the task's tolerance)");
}

} // namespace

gpu_timer& session_timer(worker_session& s, const timing_options& o) {
  const std::string key = o.to_json().dump();
  if (!s.timer || s.timer_key != key) {
    s.timer.reset(); // one timer at a time: each holds CUPTI and an L2 flush buffer
    s.timer = std::make_unique<gpu_timer>(o);
    s.rebaseline = true; // its flush buffer and CUPTI buffers are the session's, not a leak
    s.timer_key = key;
  }
  return *s.timer;
}

std::shared_ptr<timing_data> load_timing_data(const nlohmann::json& timing,
                                              pinned_buffer& staging) {
  auto td = std::make_shared<timing_data>();
  const auto& sets = timing.at("sets");
  if (sets.size() < 4) throw cuda_failure{"timing needs three input sets and a fresh one"};
  for (const auto& x : sets.front().at("inputs"))
    td->input_specs.emplace_back(x.at("dtype").get<int>(), shape_of(x));
  for (const auto& x : sets.front().at("outputs")) {
    output_spec o;
    o.type = static_cast<dtype>(x.at("dtype").get<int>());
    o.shape = shape_of(x);
    o.numel = 1;
    for (auto n : o.shape)
      o.numel *= static_cast<std::size_t>(n);
    o.atol = x.at("atol").get<double>();
    o.rtol = x.at("rtol").get<double>();
    td->outputs.push_back(o);
  }
  for (const auto& j : sets) {
    data_set d;
    std::size_t k = 0;
    for (const auto& x : j.at("inputs")) {
      const auto& [code, shape] = td->input_specs.at(k++);
      d.in.emplace_back(code, shape);
      upload_file(d.in.back(), x.at("file"), staging);
    }
    k = 0;
    for (const auto& x : j.at("outputs")) {
      d.expected.emplace_back(
          static_cast<int>(dtype::float32),
          std::vector<std::int64_t>{static_cast<std::int64_t>(td->outputs.at(k++).numel)});
      upload_file(d.expected.back(), x.at("expected"), staging);
    }
    td->sets.push_back(std::move(d));
  }
  return td;
}

// What a timing run needs before it may hold the GPU alone: the sets on the device, the buffer
// sets, every set verified, the baseline loaded. Built by the prepare request (the GPU shared with
// other workers' checks), or by the timing request itself when none came first.
struct timing_state {
  std::shared_ptr<timing_data> td;
  std::vector<buffer_set> slots;
  std::unique_ptr<buffer_set> fresh_slot;
  rng r{0, 0};
  bool bitwise = true;
  std::string run_error;
  nlohmann::json out = nlohmann::json::object(); // "candidate" set: verification's verdict
  void* baseline_so = nullptr;
  kg_run_fn baseline_run = nullptr;
  timing_state() = default;
  timing_state(const timing_state&) = delete;
  timing_state& operator=(const timing_state&) = delete;
  ~timing_state() {
    slots.clear();
    fresh_slot.reset();
    if (baseline_so) dlclose(baseline_so);
  }
};

namespace {

// Verification: every set checked against the oracle on an idle stream, its output kept; a second
// call in other buffers tells whether the candidate repeats its bits. Fills st.out["candidate"]
// when a set fails.
void verify_sets(kg_run_fn run, timing_state& st, cudaStream_t s) {
  scoped_phase phase("worker.verify");
  auto& td = *st.td;
  const int timed = static_cast<int>(td.sets.size()) - 1;
  const int n_slots = static_cast<int>(st.slots.size());
  auto launch = [&](buffer_set& b) {
    const int rc = call(run, b, s);
    if (rc != 0 && st.run_error.empty()) st.run_error = "kg_run returned " + std::to_string(rc);
  };
  for (int d = 0; d < timed; ++d) {
    auto& set = td.sets[static_cast<std::size_t>(d)];
    buffer_set& b = st.slots[static_cast<std::size_t>(d % n_slots)];
    stage(b, set, 0xff, s);
    launch(b);
    check_cuda(cudaStreamSynchronize(s), "after kg_run");
    if (auto why = against_oracle(td, b, set, s); !why.empty() || !st.run_error.empty()) {
      st.out["candidate"] = {{"status", "INCORRECT"},
                             {"status_reason", "before timing: input set " + std::to_string(d) +
                                                   ": " + (why.empty() ? st.run_error : why)}};
      st.out["failed_input_set"] = d; // the sandbox re-runs it, here and in a fresh worker
      return;
    }
    for (auto& o : b.out) {
      set.verified.emplace_back(o.t.dtype,
                                std::vector<std::int64_t>(o.t.shape, o.t.shape + o.t.ndim));
      check_cuda(cudaMemcpy(set.verified.back().ptr, o.ptr, o.bytes, cudaMemcpyDeviceToDevice),
                 "cudaMemcpy D2D");
    }
    buffer_set& b2 = st.slots[static_cast<std::size_t>((d + 1) % n_slots)];
    stage(b2, set, static_cast<unsigned char>(st.r.below(256)), s);
    launch(b2);
    check_cuda(cudaStreamSynchronize(s), "after kg_run");
    if (!same_bits(b2, set.verified, s)) {
      st.bitwise = false;
      if (auto why = against_oracle(td, b2, set, s); !why.empty()) {
        st.out["candidate"] = {
            {"status", "REWARD_HACK"},
            {"status_reason", "before timing: input set " + std::to_string(d) +
                                  " right on one call, wrong on the next: " + why}};
        st.out["diagnosis"] = rerun_set(run, td, b, d, 8, s);
        return;
      }
    }
  }
  st.out["verified"] = {
      {"input_sets", timed}, {"buffer_sets", n_slots}, {"repeats_bits", st.bitwise}};
}

// The device memory a prepared timing holds, each allocation rounded up to the 2 MiB the
// allocator hands out at least for large ones (an overestimate for small ones).
std::size_t device_bytes(const timing_state& st) {
  std::size_t n = 0;
  auto add = [&](const std::vector<device_tensor>& v) {
    for (const auto& d : v)
      n += (d.bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  };
  for (const auto& d : st.td->sets) {
    add(d.in);
    add(d.expected);
    add(d.verified);
  }
  for (const auto& b : st.slots) {
    add(b.in);
    add(b.out);
  }
  if (st.fresh_slot) {
    add(st.fresh_slot->in);
    add(st.fresh_slot->out);
  }
  return n;
}

} // namespace

std::shared_ptr<timing_state> prepare_timing(const nlohmann::json& t, kg_run_fn run,
                                             worker_session& session) {
  auto st = std::make_shared<timing_state>();
  {
    scoped_phase phase("worker.load_sets");
    st->td = load_timing_data(t, session.staging);
    const int n_slots = std::max(1, t.value("slots", 2));
    for (int k = 0; k < n_slots; ++k)
      st->slots.push_back(make_buffers(*st->td));
    st->fresh_slot = std::make_unique<buffer_set>(make_buffers(*st->td));
  }
  st->r = rng(t.value("seed", std::uint64_t{0x686f6e6573}), stream_id("worker-timing"));
  verify_sets(run, *st, session.stream);
  session.prepared_bytes = device_bytes(*st);
  if (st->out.contains("candidate") || !t.contains("baseline_shared_object")) return st;
  scoped_phase phase("worker.baseline_load");
  st->baseline_so =
      dlopen(t.at("baseline_shared_object").get<std::string>().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (st->baseline_so)
    st->baseline_run = reinterpret_cast<kg_run_fn>(dlsym(st->baseline_so, "kg_run"));
  return st;
}

nlohmann::json time_candidate(const nlohmann::json& t, const std::string& manifest_path,
                              kg_run_fn run, worker_session& session) {
  std::shared_ptr<timing_state> st = session.prepared_for == manifest_path
                                         ? std::move(session.prepared)
                                         : prepare_timing(t, run, session);
  session.prepared_for.clear();
  session.prepared.reset();
  session.prepared_bytes = 0;
  nlohmann::json out = st->out;
  if (out.contains("candidate")) return out; // failed verification: nothing is timed
  const cudaStream_t s = session.stream;
  auto& td = *st->td;
  auto& slots = st->slots;
  auto& r = st->r;
  const int timed = static_cast<int>(td.sets.size()) - 1, fresh = timed;
  const int n_slots = static_cast<int>(slots.size());
  const bool bitwise = st->bitwise;
  std::string& run_error = st->run_error;
  auto launch = [&](buffer_set& b, cudaStream_t stream) {
    const int rc = call(run, b, stream);
    if (rc != 0 && run_error.empty()) run_error = "kg_run returned " + std::to_string(rc);
  };

  mapped_host<unsigned> flag;
  *flag.host() = 0;
  auto check = [&](buffer_set& b, int d, cudaStream_t stream) {
    const auto& set = td.sets[static_cast<std::size_t>(d)];
    for (std::size_t k = 0; k < td.outputs.size(); ++k) {
      const auto& o = td.outputs[k];
      launch_output_check(b.out[k].ptr, set.verified[k].ptr, o.numel, o.type, bitwise,
                          static_cast<float>(o.atol), static_cast<float>(o.rtol), flag.device(),
                          static_cast<unsigned>(d + 1), stream);
    }
  };
  auto failed = [&]() -> std::string {
    if (!run_error.empty()) return run_error;
    const unsigned code = *static_cast<volatile unsigned*>(flag.host());
    return code ? flag_reason(code, bitwise) : "";
  };
  honest_work w;
  w.slots = n_slots;
  w.data_sets = timed;
  w.stage = [&](int k, int d, unsigned char fill, cudaStream_t stream) {
    stage(slots[static_cast<std::size_t>(k)], td.sets[static_cast<std::size_t>(d)], fill, stream);
  };
  w.launch = [&](int k, cudaStream_t stream) {
    launch(slots[static_cast<std::size_t>(k)], stream);
  };
  w.check = [&](int k, int d, cudaStream_t stream) {
    check(slots[static_cast<std::size_t>(k)], d, stream);
  };
  w.failed = failed;
  w.fresh = [&](cudaStream_t stream) -> std::string {
    auto& set = td.sets[static_cast<std::size_t>(fresh)];
    stage(*st->fresh_slot, set, 0xff, stream);
    launch(*st->fresh_slot, stream);
    check_cuda(cudaStreamSynchronize(stream), "after kg_run");
    return against_oracle(td, *st->fresh_slot, set, stream);
  };
  timing_options o;
  o.max_wall_seconds = t.value("max_wall_seconds", 2.0);
  o.min_gpu_seconds = t.value("min_gpu_seconds", 0.05);
  o.target_rel_halfwidth = t.value("target_rel_halfwidth", 0.005);
  o.single_stream = true; // the candidate ABI: all work on the stream kg_run is given
  gpu_timer& timer = session_timer(session, o);
  const auto rc = [&] {
    scoped_phase phase("worker.honest");
    return timer.measure_honest(w, r.next_u64());
  }();
  out["candidate"] = rc.to_json(false);
  if (!run_error.empty()) out["error"] = run_error;
  if (const unsigned code = *flag.host(); code)
    out["diagnosis"] = rerun_set(run, td, slots[0], static_cast<int>(code) - 1, 8, s);
  if (rc.status != "TIMED" || !run_error.empty()) return out;

  // Only for a candidate that was timed: a reference time without a candidate time is no ratio.
  if (t.contains("torch_reference")) {
    scoped_phase phase("worker.torch");
    stage(slots[0], td.sets[0], 0xff, s);
    out["torch_reference"] = time_torch_reference(t["torch_reference"], slots[0], timer, session);
  }
  if (!t.contains("baseline_shared_object")) return out;
  const auto base_run = st->baseline_run;
  if (!base_run) {
    out["baseline_error"] = "cannot load the baseline kernel";
    return out;
  }
  // Both members staged alike (the candidate cannot tell the pairs from honest timing); the
  // candidate's calls are checked.
  struct member_call {
    int slot = 0, set = 0;
  } cur[2];
  paired_hooks hooks;
  hooks.before = [&](int m, cudaStream_t stream) {
    cur[m].slot = static_cast<int>(r.below(static_cast<std::uint64_t>(n_slots)));
    cur[m].set = static_cast<int>(r.below(static_cast<std::uint64_t>(timed)));
    const unsigned char fill = r.below(2) ? 0xff : static_cast<unsigned char>(r.below(256));
    stage(slots[static_cast<std::size_t>(cur[m].slot)],
          td.sets[static_cast<std::size_t>(cur[m].set)], fill, stream);
  };
  hooks.after = [&](int m, cudaStream_t stream) {
    if (m == 1) check(slots[static_cast<std::size_t>(cur[1].slot)], cur[1].set, stream);
  };
  hooks.failed = failed;
  const work_fn a = [&](cudaStream_t stream) {
    (void)call(base_run, slots[static_cast<std::size_t>(cur[0].slot)], stream);
  };
  const work_fn b = [&](cudaStream_t stream) {
    launch(slots[static_cast<std::size_t>(cur[1].slot)], stream);
  };
  paired_options po;
  po.max_wall_seconds = t.value("paired_max_wall_seconds", 2.0);
  po.min_pairs = t.value("paired_min_pairs", po.min_pairs);
  po.target_rel_halfwidth = t.value("paired_target_rel_halfwidth", po.target_rel_halfwidth);
  po.seed = r.next_u64();
  const auto p = [&] {
    scoped_phase phase("worker.paired");
    return measure_paired(timer, a, b, po, &hooks);
  }();
  out["paired"] = p.to_json();
  if (!p.check_failure.empty()) {
    out["paired_check_failure"] = p.check_failure;
    if (const unsigned code = *flag.host(); code)
      out["diagnosis"] = rerun_set(run, td, slots[0], static_cast<int>(code) - 1, 8, s);
  } else if (!p.a_us.empty()) {
    std::vector<double> a_us = p.a_us;
    std::nth_element(a_us.begin(), a_us.begin() + static_cast<long>(a_us.size() / 2), a_us.end());
    out["baseline"] = {{"status", "TIMED"},
                       {"median_us", a_us[a_us.size() / 2]},
                       {"from", "the baseline's samples in the ABBA pairs"}};
  }
  return out;
}

} // namespace kg
