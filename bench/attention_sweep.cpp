// The decode engine's split-KV attention (kernels/decode, launch_attention_with) in every
// configuration of attention_sweep_configs (kernels/decode/attention_config.h; the default
// first) on the Qwen3-4B heads (32 query heads, 8 kv heads, head_dim 128) at the contexts the
// issue names, timed by kernelgate's harness (L2 flushed before each sample) and expressed as a
// fraction of the device-to-device copy bandwidth measured in the same run, as
// bench/decode_kernels.cpp does: bandwidth = the task's minimum bytes (K and V once, q and o
// once) / median time; copy bandwidth = (read + write) / median time of a 1 GiB cudaMemcpyAsync.
//
// Inputs are the catalog task qwen3_decode_attention_splitkv's (data/tasks; its K and V
// [B, HK, S, 128] are the engine's cache with slot b = row b and max_context = S, every row at
// length S). Before it is timed each configuration's output is checked against the task's fp64
// oracle with the task's tolerance, and run a second time (output and workspace poisoned before
// each run) for bitwise identity. One shape also puts the rows in a cache 8x longer than they
// are, as the engine's graphs do (blocks past a row's last chunk return at once). Every launch
// gets merge counters (zeroed once; a launch that leaves them nonzero fails the check), so the
// configurations with merge_in_stage1 time the one-kernel form beside their two-kernel twins.
//
// One row per (shape, configuration) as measured, then a matrix of the fractions of copy
// (configuration x shape) and the best configuration per shape.
//
//   kg_bench_attention_sweep [--list] [--max-wall S] [--config NAME]... [--no-ceiling]
//                            [--profile N]
//     --list        print the shapes and configurations (no GPU needed)
//     --max-wall S  wall-clock cap per configuration's timing (default 0.3 s)
//     --config NAME time only the named configurations (repeatable)
//     --no-ceiling  skip each shape's read ceiling (its bytes read once by a plain kernel)
//     --profile N   under a profiler (ncu): after each check, N plain launches, the device
//                   synchronized after each, and no timing (the timing loop's blocking kernel
//                   cannot wait out a profiler's replays)
// Exit: 0 every configuration matched, 1 one was wrong or failed, 2 bad usage, 3 no GPU.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/gemv_reference.h"
#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"
#include "gpu/device_info.h"
#include "kernels/decode/decode_kernels.h"
#include "oracles/comparators.h"
#include "oracles/task_oracles.h"
#include "suite/task_catalog.h"
#include "timing/copy_bandwidth.h"
#include "timing/gpu_timer.h"
#include "workloads/task.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

constexpr int hq = 32, hk = 8, head_dim = 128;

struct shape_def {
  int batch = 0, context = 0;
  int cache = 0; // max_context of the cache the rows sit in (>= context)
  std::string name() const {
    std::string n = "b" + std::to_string(batch) + " ctx" + std::to_string(context);
    if (cache != context) n += " in " + std::to_string(cache);
    return n;
  }
};

struct measured {
  bool ok = false;
  double median_us = 0, lo_us = 0, hi_us = 0, gbps = 0;
  std::string check;
};

// One shape's task inputs on the device, in a cache of `cache` positions per (row, kv head).
struct shape_data {
  shape_def s;
  task_shape shape;
  host_tensor want;
  device_buffer q, k, v, slots, lengths, out;
  shape_data(const task_def& task, const shape_def& s_) : s(s_) {
    shape.name = s.name();
    shape.dims = {{"B", s.batch}, {"HQ", hq}, {"HK", hk}, {"S", s.context}};
    const auto inputs = make_task_inputs(task, shape, 20261129);
    want = run_task_oracle(task, shape, inputs)[0];
    q = device_buffer(inputs[0].bytes.size());
    KG_CUDA_CHECK(cudaMemcpy(q.get(), inputs[0].bytes.data(), inputs[0].bytes.size(),
                             cudaMemcpyHostToDevice));
    // [B, HK, S, D] rows into [B, HK, cache, D]: one pitched copy, S x D x 2 bytes per (b, h).
    const std::size_t row_bytes = static_cast<std::size_t>(s.context) * head_dim * 2,
                      pitch = static_cast<std::size_t>(s.cache) * head_dim * 2,
                      heads = static_cast<std::size_t>(s.batch) * hk;
    k = device_buffer(heads * pitch);
    v = device_buffer(heads * pitch);
    KG_CUDA_CHECK(cudaMemset(k.get(), 0xff, heads * pitch)); // NaN past the rows' length
    KG_CUDA_CHECK(cudaMemset(v.get(), 0xff, heads * pitch));
    KG_CUDA_CHECK(cudaMemcpy2D(k.get(), pitch, inputs[1].bytes.data(), row_bytes, row_bytes, heads,
                               cudaMemcpyHostToDevice));
    KG_CUDA_CHECK(cudaMemcpy2D(v.get(), pitch, inputs[2].bytes.data(), row_bytes, row_bytes, heads,
                               cudaMemcpyHostToDevice));
    std::vector<int> sl(s.batch), len(s.batch, s.context);
    for (int b = 0; b < s.batch; ++b)
      sl[b] = b;
    slots = device_buffer(sl.size() * sizeof(int));
    lengths = device_buffer(len.size() * sizeof(int));
    KG_CUDA_CHECK(
        cudaMemcpy(slots.get(), sl.data(), sl.size() * sizeof(int), cudaMemcpyHostToDevice));
    KG_CUDA_CHECK(
        cudaMemcpy(lengths.get(), len.data(), len.size() * sizeof(int), cudaMemcpyHostToDevice));
    out = device_buffer(want.numel() * 2);
  }
  // counters: [batch x kv heads], zero (a configuration with merge_in_stage1 merges in stage 1).
  cudaError_t launch(const decode::attention_config& c, void* work, unsigned* counters,
                     cudaStream_t st) const {
    decode::attention_args a{static_cast<const __nv_bfloat16*>(q.get()),
                             hq * head_dim,
                             static_cast<__nv_bfloat16*>(k.get()),
                             static_cast<__nv_bfloat16*>(v.get()),
                             static_cast<const int*>(slots.get()),
                             static_cast<const int*>(lengths.get()),
                             static_cast<__nv_bfloat16*>(out.get()),
                             work,
                             s.batch,
                             hq,
                             hk,
                             head_dim,
                             s.cache};
    a.counters = counters;
    return decode::launch_attention_with(c, a, st);
  }
};

// Runs `c` twice on a poisoned output and workspace; "" when the first matches the oracle and
// the second the first bit for bit, else what went wrong.
std::string check_config(const task_def& task, shape_data& d, const decode::attention_config& c,
                         void* work, std::size_t work_bytes, device_buffer& counters) {
  std::vector<std::byte> runs[2];
  for (auto& got : runs) {
    KG_CUDA_CHECK(cudaMemset(d.out.get(), 0xff, d.want.numel() * 2));
    KG_CUDA_CHECK(cudaMemset(work, 0xff, work_bytes));
    const cudaError_t e = d.launch(c, work, static_cast<unsigned*>(counters.get()), nullptr);
    if (e != cudaSuccess) return std::string("launch failed: ") + cudaGetErrorString(e);
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned> left(counters.size() / sizeof(unsigned));
    KG_CUDA_CHECK(cudaMemcpy(left.data(), counters.get(), counters.size(), cudaMemcpyDeviceToHost));
    if (std::any_of(left.begin(), left.end(), [](unsigned v) { return v != 0; }))
      return "WRONG: a launch left its merge counters nonzero";
    got.resize(d.want.numel() * 2);
    KG_CUDA_CHECK(cudaMemcpy(got.data(), d.out.get(), got.size(), cudaMemcpyDeviceToHost));
  }
  host_tensor got(dtype::bfloat16, d.want.shape);
  got.bytes = runs[0];
  const auto& tol = task.tolerance.at(dtype::bfloat16);
  const auto r = compare_allclose(d.want, got, tol.atol, tol.rtol, tolerance_side::reference);
  if (r.mismatches != 0 || !r.pass) {
    std::ostringstream o;
    o << "WRONG: " << r.mismatches << " of " << r.numel << " elements (" << r.reason
      << "), first at " << r.first_mismatch << ", max abs err " << r.max_abs_err;
    return o.str();
  }
  if (runs[0] != runs[1]) return "WRONG: not deterministic, two runs differ bitwise";
  return "";
}

int usage() {
  std::cerr << "usage: kg_bench_attention_sweep [--list] [--max-wall S] [--config NAME]... "
               "[--no-ceiling] [--profile N]\n";
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  std::cout << std::unitbuf; // rows as they are measured
  double max_wall = 0.3;
  bool list = false, no_ceiling = false;
  int profile = 0; // launches per (shape, configuration) under a profiler; 0: time them
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--list")
      list = true;
    else if (a == "--max-wall" && i + 1 < argc)
      max_wall = std::atof(argv[++i]);
    else if (a == "--config" && i + 1 < argc)
      only.push_back(argv[++i]);
    else if (a == "--no-ceiling")
      no_ceiling = true;
    else if (a == "--profile" && i + 1 < argc && std::atoi(argv[i + 1]) > 0)
      profile = std::atoi(argv[++i]);
    else
      return usage();
  }
  std::vector<decode::named_attention_config> configs;
  for (const auto& nc : decode::attention_sweep_configs)
    if (only.empty() || std::find(only.begin(), only.end(), nc.name) != only.end())
      configs.push_back(nc);
  if (configs.empty()) return usage();
  // The shapes, then batch 1 at 2048 tokens in a 16384-token cache (the engine's graphs
  // size the grid by max_context), then batch 4 and 8 at the decode step's context (2048: at
  // batch 8 attention was 30% of the H200 step, its configuration the one tuned at 8192).
  const std::vector<shape_def> shapes = {{1, 2048, 2048},  {8, 8192, 8192}, {1, 8192, 8192},
                                         {32, 2048, 2048}, {8, 512, 512},   {1, 2048, 16384},
                                         {4, 2048, 2048},  {8, 2048, 2048}};

  auto describe = [](const decode::attention_config& c) {
    std::ostringstream o;
    o << "target " << c.target_chunks << ", chunk " << c.min_chunk << ".." << c.max_chunk
      << ", tile " << c.tile << ", stages " << c.stages << (c.pdl ? ", pdl" : "")
      << (c.merge_in_stage1 ? ", merged in stage 1" : "");
    if (c.warps != 4) o << ", " << c.warps << " warps";
    return o.str();
  };
  std::cout << "configurations:\n";
  for (const auto& [name, c] : configs) {
    std::cout << "  " << std::left << std::setw(16) << name << std::right << " " << describe(c)
              << "; chunks x tokens:";
    for (const int len : {512, 2048, 8192})
      std::cout << " " << len << "->" << decode::attention_chunks(c, len) << "x"
                << decode::attention_chunk_tokens(c, len);
    std::cout << "\n";
  }
  if (list) {
    std::cout << "shapes:";
    for (const auto& s : shapes)
      std::cout << " [" << s.name() << "]";
    std::cout << "\n"
              << configs.size() * shapes.size() << " timings, about " << std::fixed
              << std::setprecision(0) << configs.size() * shapes.size() * (max_wall + 0.05)
              << " s of timing\n";
    return 0;
  }

  const auto dev = query_device(0);
  if (!dev.available) {
    std::cerr << "kg_bench_attention_sweep: no GPU: " << dev.reason << "\n";
    return 3;
  }
  const auto task =
      load_task(fs::path(KG_SOURCE_DIR) / "data/tasks/qwen3_decode_attention_splitkv.json");
  // Under a profiler nothing is timed (the copy's timing loop would not survive its replays).
  const auto copy_1g =
      profile > 0 ? copy_bandwidth{} : measure_copy_bandwidth(std::size_t{1} << 30);
  const double copy = copy_1g.gbps, copy_us = copy_1g.median_us;
  if (profile > 0) no_ceiling = true;
  timing_options o;
  o.max_wall_seconds = max_wall;
  gpu_timer timer(o);
  std::cout << std::fixed << std::setprecision(1) << "\ndevice: " << dev.name << " ("
            << dev.sm_count << " SMs), timing backend " << timing_backend_name(o.backend)
            << ", max wall " << max_wall << " s per configuration\n"
            << "copy bandwidth (read + write), device to device, 1 GiB: " << copy << " GB/s ("
            << copy_us << " us); fractions below are of it\n\n";
  std::cout << std::left << std::setw(20) << "shape" << std::setw(17) << "config" << std::right
            << std::setw(10) << "median us" << std::setw(20) << "95% interval" << std::setw(9)
            << "GB/s" << std::setw(9) << "of copy"
            << "  check\n";

  int failures = 0;
  std::map<std::pair<std::size_t, std::size_t>, measured> results; // (shape, config)
  std::map<std::size_t, double> ceiling_us;                        // shape -> best plain read
  device_buffer sink(4096 * sizeof(unsigned));
  for (std::size_t si = 0; si < shapes.size(); ++si) {
    const auto& s = shapes[si];
    shape_data d(task, s);
    const double min_bytes = eval_dim_expr(task.min_bytes, d.shape.dims);
    // The shape's read ceiling: its minimum bytes read once, contiguously, by the plainest
    // kernel (bench/gemv_reference.h) behind the same L2 flush -- what no attention over these
    // bytes can beat. At batch 1 the bytes are few (8.4 MB at 2048 tokens) and a kernel's ramp
    // and drain are much of its time: the fraction of copy alone does not say how far off a
    // configuration is.
    if (!no_ceiling) {
      const std::size_t bytes = static_cast<std::size_t>(min_bytes) / 16 * 16;
      device_buffer plain(bytes);
      KG_CUDA_CHECK(cudaMemset(plain.get(), 0, bytes));
      // One ceiling row: `read` timed, its median kept if it is the shape's best, and printed.
      const auto time_read = [&](const std::string& label, const auto& read) {
        const auto t = timer.measure(read);
        const double us = t.summary.median, gbps = bytes / (us * 1e-6) / 1e9;
        if (!ceiling_us.count(si) || us < ceiling_us[si]) ceiling_us[si] = us;
        std::cout << std::left << std::setw(20) << s.name() << std::setw(17) << label << std::right
                  << std::fixed << std::setprecision(2) << std::setw(10) << us << std::setw(20)
                  << "" << std::setprecision(1) << std::setw(9) << gbps << std::setw(8)
                  << 100.0 * gbps / copy << "%  read ceiling\n";
      };
      auto* sunk = static_cast<unsigned*>(sink.get());
      for (const int blocks : {132, 264, 528, 1056})
        for (const int unroll : {4, 8, 16})
          time_read("read " + std::to_string(blocks) + "u" + std::to_string(unroll),
                    [&](cudaStream_t st) { read_stream(plain.get(), bytes, sunk, blocks, unroll, st); });
      // The same bytes by bulk copies, every byte of a block's slice in flight from the start
      // (a stage 1 that issues its chunk's loads at once could at best reach this).
      for (const int blocks : {128, 132, 256, 264, 528})
        time_read("bulk " + std::to_string(blocks),
                  [&](cudaStream_t st) { read_bulk(plain.get(), bytes, sunk, blocks, st); });
    }
    for (std::size_t ci = 0; ci < configs.size(); ++ci) {
      const auto& [name, c] = configs[ci];
      measured m;
      const std::size_t work_bytes =
          decode::attention_workspace_bytes(c, s.batch, hq, hk, head_dim, s.cache);
      device_buffer work(work_bytes),
          counters(static_cast<std::size_t>(s.batch) * hk * sizeof(unsigned));
      KG_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.size()));
      m.check = check_config(task, d, c, work.get(), work_bytes, counters);
      if (m.check.empty() && profile > 0) {
        for (int r = 0; r < profile; ++r) {
          KG_CUDA_CHECK(d.launch(c, work.get(), static_cast<unsigned*>(counters.get()), nullptr));
          KG_CUDA_CHECK(cudaDeviceSynchronize());
        }
        std::cout << s.name() << " " << name << ": " << profile << " launches profiled\n";
        continue;
      }
      if (m.check.empty()) {
        try {
          const auto t = timer.measure([&](cudaStream_t st) {
            KG_CUDA_CHECK(d.launch(c, work.get(), static_cast<unsigned*>(counters.get()), st));
          });
          m.median_us = t.summary.median;
          m.lo_us = t.median_ci.lo;
          m.hi_us = t.median_ci.hi;
          m.gbps = min_bytes / (m.median_us * 1e-6) / 1e9;
          m.ok = true;
          m.check = "matches fp64 oracle, repeats bitwise";
        } catch (const std::exception& e) {
          m.check = std::string("timing failed: ") + e.what();
        }
      }
      if (!m.ok) ++failures;
      std::cout << std::left << std::setw(20) << s.name() << std::setw(17) << name << std::right;
      if (m.ok) {
        std::ostringstream ci_text;
        ci_text << std::fixed << std::setprecision(2) << "[" << m.lo_us << ", " << m.hi_us << "]";
        std::cout << std::fixed << std::setprecision(2) << std::setw(10) << m.median_us
                  << std::setw(20) << ci_text.str() << std::setprecision(1) << std::setw(9)
                  << m.gbps << std::setw(8) << 100.0 * m.gbps / copy << "%  " << m.check << "\n";
      } else {
        std::cout << "  FAIL: " << m.check << "\n";
      }
      results[{si, ci}] = m;
    }
  }

  if (profile > 0) return failures == 0 ? 0 : 1;
  std::cout << "\nfraction of copy bandwidth (median us in parentheses), configuration x shape:\n"
            << std::left << std::setw(17) << "config" << std::right;
  for (const auto& s : shapes)
    std::cout << std::setw(20) << s.name();
  std::cout << "\n";
  for (std::size_t ci = 0; ci < configs.size(); ++ci) {
    std::cout << std::left << std::setw(17) << configs[ci].name << std::right;
    for (std::size_t si = 0; si < shapes.size(); ++si) {
      const auto& m = results[{si, ci}];
      std::ostringstream cell;
      if (m.ok)
        cell << std::fixed << std::setprecision(1) << 100.0 * m.gbps / copy << "% ("
             << std::setprecision(2) << m.median_us << ")";
      else
        cell << "FAIL";
      std::cout << std::setw(20) << cell.str();
    }
    std::cout << "\n";
  }
  std::cout << "\nbest configuration per shape:\n";
  for (std::size_t si = 0; si < shapes.size(); ++si) {
    const measured* best = nullptr;
    std::size_t best_ci = 0;
    for (std::size_t ci = 0; ci < configs.size(); ++ci) {
      const auto& m = results[{si, ci}];
      if (m.ok && (!best || m.median_us < best->median_us)) {
        best = &m;
        best_ci = ci;
      }
    }
    if (best) {
      std::cout << "  " << std::left << std::setw(20) << shapes[si].name() << std::right
                << configs[best_ci].name << ": " << std::fixed << std::setprecision(2)
                << best->median_us << " us, " << std::setprecision(1) << 100.0 * best->gbps / copy
                << "% of copy";
      if (const auto c = ceiling_us.find(si); c != ceiling_us.end())
        std::cout << "; the read ceiling " << std::setprecision(2) << c->second << " us ("
                  << std::setprecision(1) << 100.0 * best->gbps / copy * best->median_us / c->second
                  << "% of copy), so " << 100.0 * c->second / best->median_us << "% of it";
      std::cout << "\n";
    }
  }
  std::cout << "\ntargets (issue): b8 ctx8192 >= 85% of copy; b1 ctx2048 far above torch SDPA's "
               "15%\n";
  if (failures) {
    std::cout << "FAIL: " << failures << " configuration(s) wrong or failed\n";
    return 1;
  }
  return 0;
}
