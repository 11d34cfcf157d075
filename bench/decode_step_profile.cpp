// Where a decode step's time goes: the Qwen3-4B engine's step (kernels/decode/decode_engine.h)
// replayed from its CUDA graph and traced with CUPTI's activity API (timing/activity_tracer.h),
// every kernel's start and end on the GPU's clock. Per kernel role of the step (the input RMSNorm,
// the qkv GEMV, ..., in the engine's launch order) it prints the count, the median and summed
// duration, how far the role's kernels moved the step's end past the kernels before them
// ("extends": these add up to the busy time) and that as a share of the step; then the step's span
// (first kernel start to last kernel end), the union of the kernels' busy intervals and the idle
// time between them: what the boundaries between kernels cost. Plain and programmatic launches,
// batch 1 and 8 by default, context 2048 (decode-qwen3-4b's step point). Each step also gets its
// bound, decode_step_roofline's bytes over the device copy bandwidth measured first in the same
// process (the suite's SOL), and the span's fraction of it. Every batch runs on the decode
// GEMVs (max_gemv_batch raised to the largest batch asked for, up to 128: the GEMV table's
// range), not the cuBLAS GEMM the engine switches to above 32 by default.
//
// Beside that bound, a read-ceiling bound: each kernel of the roofline (each projection, the
// attention) as one plain contiguous read of its bytes (bench/gemv_reference.h, the best of a
// few grids, L2 flushed before each sample), times its count in the step, summed -- the span of a
// step of one kernel per operation if every kernel read its bytes as fast as a kernel that only
// reads can, back to back. A 21 MB read does not reach the 1 GiB copy's bandwidth (ramp and
// drain), so this bound says how much of the gap to the copy bound a kernel-per-operation step
// can close at all. --no-ceiling skips it.
//
// --attention NAME,... times the step under each named configuration of the split-KV attention
// (attention_sweep_configs, kernels/decode/attention_config.h; "pick" is the engine's own,
// pick_attention_config), one after another in the same process: in the step the attention's
// stage 1 starts its K/V loads before the qkv GEMV ahead has finished, which a sweep of the
// attention alone does not see.
//
// Durations under programmatic launches include the time a kernel's blocks wait at
// griddepcontrol.wait for the kernel ahead, so only the span and the idle time compare across
// modes.
//
// --norms fold,kernels times the step with its RMSNorms folded into the GEMVs where their
// configurations allow (decode_engine_config::fold_norms) and as kernels of their own (the
// engine's default), one after the other in the same process; default: kernels.
//
// --gate epilogue,kernel times the step with the SwiGLU gate as the gate_up GEMV's epilogue where
// its configuration takes it (decode_engine_config::gate_in_gemv, the default) and as a kernel of
// its own, one after the other; default: epilogue.
//
// --gemv PROJ@BATCH=CONFIG[+PROJ@BATCH=CONFIG...] (repeatable) times the step once more with those
// GEMVs running CONFIG (parse_gemv_config's spelling, "simt:2,4,2,1") instead of the table's row
// (decode_engine::set_gemv_config), after the step with the table's: the table's rows were each
// chosen alone, and in the step a kernel also overlaps the ones beside it.
//
//   kg_bench_decode_step [--steps N] [--batches 1,8] [--attention pick,NAME...]
//                        [--norms fold,kernels] [--gate epilogue,kernel] [--gemv SET]...
//                        [--no-ceiling]
//   (needs a GPU; exits 3 without one)
// Exit: 0 done, 1 the trace did not show the step's kernels, 2 bad usage, 3 no GPU or no CUPTI.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/gemv_reference.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_raii.h"
#include "gpu/device_buffer.h"
#include "gpu/device_info.h"
#include "kernels/decode/attention_config.h"
#include "kernels/decode/decode_engine.h"
#include "timing/activity_tracer.h"
#include "timing/copy_bandwidth.h"
#include "timing/gpu_timer.h"
#include "workloads/qwen3.h"

using namespace kg;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct role_stats {
  std::vector<double> per_instance_us; // over every traced step
  double sum_us = 0;                   // over every traced step
  // How far each instance moved the step's end: end - max(start, the latest end before it);
  // these add up to the busy time, overlapping launches or not.
  std::vector<double> extends_us;
  double extends_sum_us = 0;
};

// A comma list's non-empty items.
std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// A comma list of two-way switches ("fold,kernels", "epilogue,kernel") -> one bool each, true
// for `on`; nullopt where an item is neither.
std::optional<std::vector<bool>> parse_modes(const std::string& s, const char* on,
                                             const char* off) {
  std::vector<bool> out;
  for (const auto& n : split_names(s)) {
    if (n != on && n != off) return std::nullopt;
    out.push_back(n == on);
  }
  return out;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  for (const auto& item : split_names(s))
    out.push_back(std::atoi(item.c_str()));
  return out;
}

// The fastest plain read of `bytes` from `buf` (best of a few grids), microseconds.
double read_ceiling_us(gpu_timer& timer, const device_buffer& buf, std::size_t bytes,
                       device_buffer& sink) {
  bytes = bytes / 16 * 16;
  double best = 0;
  for (const int blocks : {132, 264, 528, 1056})
    for (const int unroll : {8, 16}) {
      const auto t = timer.measure([&](cudaStream_t st) {
        read_stream(buf.get(), bytes, static_cast<unsigned*>(sink.get()), blocks, unroll, st);
      });
      if (best == 0 || t.summary.median < best) best = t.summary.median;
    }
  return best;
}

struct read_bound {
  double us = 0;     // the step's: every roofline kernel's read ceiling x its count
  std::string lines; // one a kernel: bytes, ceiling, fraction of copy, count
};

// The read-ceiling bound of the step at (batch, context) for `c`'s model.
read_bound step_read_bound(gpu_timer& timer, const device_buffer& buf, device_buffer& sink,
                           int batch, int context, const qwen3_config& m, double copy_gbps) {
  read_bound r;
  auto add = [&](const std::string& name, double bytes, double times) {
    const double us = read_ceiling_us(timer, buf, static_cast<std::size_t>(bytes), sink);
    r.us += times * us;
    char line[160];
    std::snprintf(line, sizeof line, "    %-10s %9.2f MB  read %8.2f us (%5.1f%% of copy) x %g\n",
                  name.c_str(), bytes / 1e6, us, 100.0 * bytes / (us * 1e3) / copy_gbps, times);
    r.lines += line;
  };
  for (const auto& g : decode_gemms(m))
    add(g.name, gemm_roofline(g, batch, m).bytes,
        g.name == "lm_head" ? 1.0 : static_cast<double>(m.layers));
  add("attention", attention_roofline(batch, context, m).bytes, static_cast<double>(m.layers));
  return r;
}

// "pick" (nullopt: the engine's pick_attention_config) or a name of attention_sweep_configs;
// false for an unknown name.
bool attention_config_named(const std::string& name, std::optional<decode::attention_config>& out) {
  if (name == "pick") {
    out.reset();
    return true;
  }
  for (const auto& nc : decode::attention_sweep_configs)
    if (name == nc.name) {
      out = nc.config;
      return true;
    }
  return false;
}

int usage() {
  std::cerr << "usage: kg_bench_decode_step [--steps N] [--batches 1,8] "
               "[--attention pick,NAME...] [--norms fold,kernels] [--gate epilogue,kernel] "
               "[--gemv PROJ@BATCH=CONFIG[+...]]... [--no-ceiling]\n";
  return 2;
}

// One GEMV of a --gemv set: the projection, the batch and the configuration it runs there.
struct gemv_choice {
  std::string projection;
  int batch = 0;
  gemv_config config;
};
struct gemv_set {
  std::string text; // as given ("table" for none)
  std::vector<gemv_choice> choices;
};

// "qkv@1=simt:2,4,2,1+gate_up@1=simt:2,4,2,1"; nullopt names the item it cannot read in `bad`.
std::optional<gemv_set> parse_gemv_set(const std::string& text, std::string& bad) {
  gemv_set set{text, {}};
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, '+');) {
    bad = item;
    const std::size_t at = item.find('@'), eq = item.find('=');
    if (at == std::string::npos || eq == std::string::npos || eq < at) return std::nullopt;
    gemv_choice c;
    c.projection = item.substr(0, at);
    const std::string batch = item.substr(at + 1, eq - at - 1);
    if (batch.empty() || batch.find_first_not_of("0123456789") != std::string::npos ||
        batch.size() > 3)
      return std::nullopt;
    c.batch = std::atoi(batch.c_str());
    const auto config = parse_gemv_config(item.substr(eq + 1));
    if (!config) return std::nullopt;
    c.config = *config;
    set.choices.push_back(c);
  }
  if (set.choices.empty()) return std::nullopt;
  return set;
}

// Why the engine would refuse a choice of `sets` (an unknown projection, a batch past the largest
// one run, a configuration launch_gemv_bf16 does not take at that shape), "" if none: checked
// before anything is timed.
std::string gemv_sets_refused(const std::vector<gemv_set>& sets, int max_batch) {
  const auto gemms = decode_gemms(qwen3_config{});
  for (const auto& set : sets)
    for (const auto& c : set.choices) {
      const auto g = std::find_if(gemms.begin(), gemms.end(),
                                  [&](const auto& e) { return e.name == c.projection; });
      const std::string which = c.projection + "@" + std::to_string(c.batch);
      if (g == gemms.end())
        return which + ": no such projection (qkv, o_proj, gate_up, down, lm_head)";
      if (c.batch < 1 || c.batch > max_batch)
        return which + ": the batches run are 1.." + std::to_string(max_batch);
      if (!gemv_config_supported(c.config, c.batch, static_cast<int>(g->n), static_cast<int>(g->k)))
        return which + ": launch_gemv_bf16 does not run " + gemv_config_text(c.config) +
               " at that shape";
    }
  return "";
}

// The engine's GEMVs as the table has them, then `set`'s choices (std::invalid_argument where the
// engine refuses one).
void apply_gemv_set(decode_engine& e, const gemv_set* previous, const gemv_set& set) {
  if (previous)
    for (const auto& c : previous->choices)
      e.set_gemv_config(c.projection, c.batch, std::nullopt);
  for (const auto& c : set.choices)
    e.set_gemv_config(c.projection, c.batch, c.config);
}

} // namespace

int main(int argc, char** argv) {
  int steps = 5;
  std::vector<int> batches = {1, 8};
  std::vector<std::string> attention_names = {"pick"};
  bool ceiling = true;
  std::vector<bool> fold_modes = {false};
  std::vector<bool> gate_modes = {true}; // the gate in the GEMV where it can be
  std::vector<gemv_set> gemv_sets = {{"table", {}}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--batches" && i + 1 < argc)
      batches = parse_list(argv[++i]);
    else if (a == "--attention" && i + 1 < argc)
      attention_names = split_names(argv[++i]);
    else if (a == "--no-ceiling")
      ceiling = false;
    else if (a == "--norms" && i + 1 < argc) {
      const auto m = parse_modes(argv[++i], "fold", "kernels");
      if (!m) return usage();
      fold_modes = *m;
    } else if (a == "--gate" && i + 1 < argc) {
      const auto m = parse_modes(argv[++i], "epilogue", "kernel");
      if (!m) return usage();
      gate_modes = *m;
    } else if (a == "--gemv" && i + 1 < argc) {
      std::string bad;
      const auto set = parse_gemv_set(argv[++i], bad);
      if (!set) {
        std::cerr << "kg_bench_decode_step: --gemv: cannot read '" << bad
                  << "' (PROJ@BATCH=KIND:rows_per_warp,warps_per_block,unroll,split_k[,cluster])\n";
        return 2;
      }
      gemv_sets.push_back(*set);
    } else
      return usage();
  }
  if (fold_modes.empty() || gate_modes.empty()) return usage();
  std::vector<std::optional<decode::attention_config>> attention_configs;
  for (const auto& n : attention_names) {
    std::optional<decode::attention_config> c;
    if (!attention_config_named(n, c)) {
      std::cerr << "kg_bench_decode_step: no attention configuration '" << n
                << "' (pick, or a name kg_bench_attention_sweep --list prints)\n";
      return 2;
    }
    attention_configs.push_back(c);
  }
  if (attention_configs.empty() || batches.empty() || steps < 1) return usage();
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  if (max_batch > 128 || *std::min_element(batches.begin(), batches.end()) < 1) {
    std::cerr << "kg_bench_decode_step: batches are 1..128\n";
    return 2;
  }
  if (const std::string why_not = gemv_sets_refused(gemv_sets, max_batch); !why_not.empty()) {
    std::cerr << "kg_bench_decode_step: --gemv " << why_not << "\n";
    return 2;
  }
  const auto dev = query_device(0);
  if (!dev.available) {
    std::cerr << "kg_bench_decode_step: no GPU: " << dev.reason << "\n";
    return 3;
  }
  std::string why;
  activity_tracer* tr = activity_tracer::instance(&why);
  if (!tr) {
    std::cerr << "kg_bench_decode_step: CUPTI activity tracing unavailable: " << why << "\n";
    return 3;
  }
  const double copy_gbps = measure_copy_bandwidth(std::size_t{1} << 30).gbps;
  std::printf("copy bandwidth (read + write), device to device, 1 GiB: %.1f GB/s\n", copy_gbps);
  const int context = 2048;
  // Before the engine holds the memory and before the trace below holds CUPTI: the read
  // ceilings, into one buffer as large as the largest kernel's bytes (lm_head's weight).
  std::map<int, read_bound> read_bounds;
  if (ceiling) {
    const qwen3_config m;
    double largest = 0;
    for (const int batch : batches)
      for (const auto& g : decode_gemms(m))
        largest = std::max({largest, gemm_roofline(g, batch, m).bytes,
                            attention_roofline(batch, context, m).bytes});
    device_buffer buf(static_cast<std::size_t>(largest) + 16), sink(4096 * sizeof(unsigned));
    KG_CUDA_CHECK(cudaMemset(buf.get(), 0, buf.size()));
    timing_options o;
    o.max_wall_seconds = 0.1;
    gpu_timer timer(o);
    for (const int batch : batches)
      read_bounds[batch] = step_read_bound(timer, buf, sink, batch, context, m, copy_gbps);
  }
  cuda_stream s;
  decode_engine_config c;
  c.max_batch = max_batch; // the step's kernels do not depend on it (grids: rows, max_context)
  c.max_gemv_batch = std::max(c.max_gemv_batch, max_batch);
  c.max_context = context + 256; // the KV of 128 slots of 8448 tokens would not fit (159 GB)
  decode_engine e(c, s.get());
  const int layers = static_cast<int>(c.model.layers);
  std::uint64_t tag = 1000;
  tr->acquire();
  const gemv_set* applied = nullptr;
  // Every combination, the last axis fastest: GEMV set, attention, norms, gate.
  const std::size_t per_set = attention_configs.size() * fold_modes.size() * gate_modes.size();
  for (const int batch : batches)
    for (std::size_t run = 0; run < gemv_sets.size() * per_set; ++run) {
      const std::size_t gi = run / per_set;
      const std::size_t ai =
          run / (fold_modes.size() * gate_modes.size()) % attention_configs.size();
      const bool fold = fold_modes[run / gate_modes.size() % fold_modes.size()];
      const bool gate = gate_modes[run % gate_modes.size()];
      e.set_attention_config(attention_configs[ai]);
      e.set_fold_norms(fold);
      e.set_gate_in_gemv(gate);
      if (applied != &gemv_sets[gi]) {
        try {
          apply_gemv_set(e, applied, gemv_sets[gi]);
        } catch (const std::invalid_argument& x) {
          std::cerr << "kg_bench_decode_step: --gemv " << gemv_sets[gi].text << ": " << x.what()
                    << "\n";
          tr->release();
          return 2;
        }
        applied = &gemv_sets[gi];
      }
      const std::vector<std::string> roles_of_layer = [&] {
        const auto r = e.layer_roles(batch);
        return std::vector<std::string>(r.begin(), r.end());
      }();
      const std::vector<std::string> tail = [&] {
        const auto r = e.tail_roles(batch);
        return std::vector<std::string>(r.begin(), r.end());
      }();
      const std::size_t expected = 1 + roles_of_layer.size() * layers + tail.size();
      std::vector<int> tok, pos, slot;
      for (int b = 0; b < batch; ++b) {
        e.prefill(b, context); // each configuration's steps start from the same cache
        tok.push_back(1 + b);
        pos.push_back(context);
        slot.push_back(b);
      }
      for (const bool pl : {false, true}) {
        e.set_programmatic_launch(pl);
        for (int i = 0; i < 3; ++i) // capture, then warm up
          e.step(tok, pos, slot);
        KG_CUDA_CHECK(cudaStreamSynchronize(s.get()));
        std::map<std::string, role_stats> roles;
        std::vector<double> span, busy, kernel_sum;
        for (int i = 0; i < steps; ++i) {
          tr->clear();
          tr->begin(++tag);
          e.step(tok, pos, slot);
          tr->end();
          KG_CUDA_CHECK(cudaStreamSynchronize(s.get()));
          std::vector<gpu_activity> k;
          for (const auto& a : tr->collect({tag}))
            if (a.name) k.push_back(a); // kernels only (the input copy is not the step's compute)
          std::sort(k.begin(), k.end(), [](const gpu_activity& x, const gpu_activity& y) {
            return x.start_ns < y.start_ns;
          });
          if (k.size() != expected) {
            std::cerr << "kg_bench_decode_step: traced " << k.size() << " kernels in a step, the "
                      << "engine launches " << expected << "\n";
            return 1;
          }
          // Union of the busy intervals (kernels overlap under programmatic launches).
          double union_ns = 0;
          std::uint64_t cur_s = k[0].start_ns, cur_e = k[0].end_ns;
          double sum_ns = 0;
          for (std::size_t j = 0; j < k.size(); ++j) {
            sum_ns += static_cast<double>(k[j].end_ns - k[j].start_ns);
            if (j == 0) continue;
            if (k[j].start_ns > cur_e) {
              union_ns += static_cast<double>(cur_e - cur_s);
              cur_s = k[j].start_ns;
            }
            cur_e = std::max(cur_e, k[j].end_ns);
          }
          union_ns += static_cast<double>(cur_e - cur_s);
          std::uint64_t last_end = 0;
          for (const auto& a : k)
            last_end = std::max(last_end, a.end_ns);
          span.push_back(static_cast<double>(last_end - k[0].start_ns) * 1e-3);
          busy.push_back(union_ns * 1e-3);
          kernel_sum.push_back(sum_ns * 1e-3);
          std::uint64_t prev_end = 0;
          for (std::size_t j = 0; j < k.size(); ++j) {
            std::string role;
            if (j == 0)
              role = "embedding_gather";
            else if (j + tail.size() >= k.size())
              role = tail[j + tail.size() - k.size()];
            else
              role = roles_of_layer[(j - 1) % roles_of_layer.size()];
            const double us = static_cast<double>(k[j].end_ns - k[j].start_ns) * 1e-3;
            const std::uint64_t from = std::max(k[j].start_ns, prev_end);
            const double ext =
                k[j].end_ns > from ? static_cast<double>(k[j].end_ns - from) * 1e-3 : 0.0;
            prev_end = std::max(prev_end, k[j].end_ns);
            auto& st = roles[role];
            st.per_instance_us.push_back(us);
            st.sum_us += us;
            st.extends_us.push_back(ext);
            st.extends_sum_us += ext;
          }
        }
        const double sp = median(span);
        const double bound_us = decode_step_roofline(batch, context).bytes / (copy_gbps * 1e3);
        std::printf("\ndecode step, batch %d, context %d, %s launches, attention %s, norms %s, "
                    "gate %s, GEMVs %s, graph replay (%d steps traced, medians)\n",
                    batch, context, pl ? "programmatic" : "plain", attention_names[ai].c_str(),
                    fold ? "folded" : "kernels", gate ? "epilogue" : "kernel",
                    gemv_sets[gi].text.c_str(), steps);
        std::printf("  bound %.1f us (decode_step_roofline bytes / copy bandwidth), span %.1f us: "
                    "SOL %.3f\n",
                    bound_us, sp, bound_us / sp);
        if (const auto rb = read_bounds.find(batch); rb != read_bounds.end())
          std::printf("  read-ceiling bound %.1f us (each roofline kernel a plain read of its "
                      "bytes, back to back): span at %.3f of it; such a step's SOL against the "
                      "copy bound: %.3f\n%s",
                      rb->second.us, rb->second.us / sp, bound_us / rb->second.us,
                      pl ? "" : rb->second.lines.c_str());
        std::printf("  step span %.1f us, kernels busy %.1f us, idle between kernels %.1f us "
                    "(%.2f us per boundary); sum of kernel durations %.1f us\n",
                    sp, median(busy), sp - median(busy),
                    (sp - median(busy)) / static_cast<double>(expected - 1), median(kernel_sum));
        std::printf("  %-18s %6s %10s %11s %12s %13s %7s\n", "role", "count", "median us",
                    "us per step", "extends med", "extends/step", "share");
        std::vector<std::string> order = {"embedding_gather"};
        order.insert(order.end(), roles_of_layer.begin(), roles_of_layer.end());
        order.insert(order.end(), tail.begin(), tail.end());
        for (const auto& r : order) {
          const auto& st = roles[r];
          const double per_step = st.sum_us / steps, ext_step = st.extends_sum_us / steps;
          std::printf("  %-18s %6zu %10.2f %11.1f %12.2f %13.1f %6.1f%%\n", r.c_str(),
                      st.per_instance_us.size() / static_cast<std::size_t>(steps),
                      median(st.per_instance_us), per_step, median(st.extends_us), ext_step,
                      100.0 * ext_step / sp);
        }
      }
    }
  tr->release();
  return 0;
}
