// The Qwen3-4B decode kernels (issue: workloads under test) as kernelgate's harness times them,
// each as a fraction of the device-to-device copy bandwidth measured in the same run: the GEMV /
// skinny GEMM of every projection (qkv 6144x2560, o_proj 2560x4096, gate_up 19456x2560, down
// 2560x9728, lm_head 151936x2560) at batch 1, 8, 16 and 32, and split-KV decode attention at
// batch 1/8/32 x 2048/8192 tokens (the table in main). The kernels are the task kernels of
// kernels/tasks and the variants in kernels/variants/<task>/ (each row names which), compiled as
// candidates are (nvcc, the compile cache) and called through kg_run on the timer's stream; each
// shape's output is first checked against the fp64 oracle where the oracle is cheap enough (weights
// up to 64M elements), else marked unchecked.
//
// Copy bandwidth = (bytes read + bytes written) / time of a cudaMemcpyAsync device to device,
// 1 GiB (the ceiling) and 49.8 MB (the down projection's weight), L2 flushed before each sample
// as for every kernel. A kernel's bandwidth = the task's minimum bytes / its median time.
//
//   kg_bench_decode_kernels [--max-wall S]   (needs a GPU; exits 3 without one)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <dlfcn.h>

#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"
#include "gpu/device_info.h"
#include "kernels/abi/kg_candidate.h"
#include "oracles/comparators.h"
#include "oracles/task_oracles.h"
#include "sandbox/candidate_compiler.h"
#include "suite/task_catalog.h"
#include "timing/copy_bandwidth.h"
#include "timing/gpu_timer.h"
#include "workloads/qwen3.h"
#include "workloads/task.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

using kg_run_fn = int (*)(const kg_tensor*, int, kg_tensor*, int, cudaStream_t);

struct device_tensors {
  std::vector<device_buffer> buffers;
  std::vector<kg_tensor> views;
  void add(dtype type, const std::vector<std::int64_t>& shape, const host_tensor* fill) {
    std::int64_t n = 1;
    kg_tensor t{};
    t.dtype = static_cast<int>(type);
    t.ndim = static_cast<std::int32_t>(shape.size());
    for (std::size_t k = shape.size(); k-- > 0;) {
      t.shape[k] = shape[k];
      t.strides[k] = n;
      n *= shape[k];
    }
    buffers.emplace_back(static_cast<std::size_t>(n) * dtype_size(type));
    if (fill)
      KG_CUDA_CHECK(cudaMemcpy(buffers.back().get(), fill->bytes.data(), fill->bytes.size(),
                               cudaMemcpyHostToDevice));
    t.data = buffers.back().get();
    views.push_back(t);
  }
};

kg_run_fn load_kernel(const compile_result& c) {
  if (!c.ok) {
    std::cerr << "kg_bench_decode_kernels: " << c.source << " does not compile: " << c.log << "\n";
    std::exit(1);
  }
  void* so = dlopen(c.shared_object.c_str(), RTLD_NOW | RTLD_LOCAL);
  auto* run = so ? reinterpret_cast<kg_run_fn>(dlsym(so, "kg_run")) : nullptr;
  if (!run) {
    std::cerr << "kg_bench_decode_kernels: cannot load " << c.shared_object << "\n";
    std::exit(1);
  }
  return run;
}

struct row_result {
  double median_us = 0, lo_us = 0, hi_us = 0, gbps = 0;
  std::string checked;
};

// Times `run` on the task at `dims`; checks the output against the fp64 oracle first when
// `check` (the output is a single bf16 tensor for both tasks here).
row_result time_kernel(gpu_timer& timer, const task_def& task, kg_run_fn run,
                       const std::map<std::string, std::int64_t>& dims, bool check) {
  task_shape shape;
  shape.name = "bench";
  shape.dims = dims;
  const auto inputs = make_task_inputs(task, shape, 20261129);
  device_tensors in, out;
  for (const auto& h : inputs)
    in.add(h.type, h.shape, &h);
  for (const auto& o : task.outputs)
    out.add(o.type, resolve_shape(o, shape), nullptr);
  auto call = [&](cudaStream_t s) {
    if (run(in.views.data(), static_cast<int>(in.views.size()), out.views.data(),
            static_cast<int>(out.views.size()), s) != 0)
      throw std::runtime_error("kg_run returned an error");
  };
  row_result r;
  r.checked = "unchecked (oracle too costly)";
  if (check) {
    call(timer.stream());
    KG_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
    const auto oracle = run_task_oracle(task, shape, inputs);
    host_tensor got(task.outputs[0].type, resolve_shape(task.outputs[0], shape));
    KG_CUDA_CHECK(cudaMemcpy(got.bytes.data(), out.buffers[0].get(), got.bytes.size(),
                             cudaMemcpyDeviceToHost));
    const auto& tol = task.tolerance.at(task.outputs[0].type);
    const auto c = compare_allclose(oracle[0], got, tol.atol, tol.rtol, tolerance_side::reference);
    r.checked = c.mismatches == 0 ? "matches fp64 oracle"
                                  : "WRONG: " + std::to_string(c.mismatches) + " elements";
  }
  const auto t = timer.measure(call);
  r.median_us = t.summary.median;
  r.lo_us = t.median_ci.lo;
  r.hi_us = t.median_ci.hi;
  r.gbps = eval_dim_expr(task.min_bytes, dims) / (r.median_us * 1e-6) / 1e9;
  return r;
}

} // namespace

int main(int argc, char** argv) {
  std::cout << std::unitbuf; // rows as they are measured
  timing_options o;
  o.max_wall_seconds = 2.0;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--max-wall") o.max_wall_seconds = std::atof(argv[i + 1]);
  const auto dev = query_device(0);
  if (!dev.available) {
    std::cerr << "kg_bench_decode_kernels: no GPU: " << dev.reason << "\n";
    return 3;
  }
  const fs::path root = KG_SOURCE_DIR;
  const auto linear = load_task(root / "data/tasks/qwen3_decode_linear_bf16.json");
  const auto attention = load_task(root / "data/tasks/qwen3_decode_attention_splitkv.json");
  // The task kernels, then every variant in kernels/variants/<task>/ (timed side by side).
  std::vector<fs::path> sources = {root / "kernels/tasks/qwen3_decode_linear_bf16.cu",
                                   root / "kernels/tasks/qwen3_decode_attention_splitkv.cu"};
  std::vector<std::pair<std::string, std::size_t>> linear_kernels = {{"task", 0}},
                                                   attention_kernels = {{"task", 1}};
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::size_t>>*>>
      variant_dirs = {{"qwen3_decode_linear_bf16", &linear_kernels},
                      {"qwen3_decode_attention_splitkv", &attention_kernels}};
  for (const auto& [task_id, list] : variant_dirs) {
    const fs::path dir = root / "kernels/variants" / task_id;
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".cu") found.push_back(e.path());
    std::sort(found.begin(), found.end());
    for (const auto& f : found) {
      list->push_back({f.stem().string(), sources.size()});
      sources.push_back(f);
    }
  }
  const auto compiled = compile_candidates(sources, compile_options{});
  std::vector<kg_run_fn> runs;
  for (const auto& c : compiled)
    runs.push_back(load_kernel(c));
  gpu_timer timer(o);

  const auto big = measure_copy_bandwidth(timer, std::size_t{1} << 30);
  const auto down = measure_copy_bandwidth(timer, 2560ull * 9728ull * 2ull);
  const double copy_big = big.gbps, us_big = big.median_us, copy_down = down.gbps,
               us_down = down.median_us;
  std::cout << std::fixed << std::setprecision(1) << "device: " << dev.name << ", timing backend "
            << timing_backend_name(o.backend) << "\n"
            << "copy bandwidth (read + write), device to device: 1 GiB " << copy_big << " GB/s ("
            << us_big << " us); 49.8 MB " << copy_down << " GB/s (" << us_down
            << " us). Fractions below are of the 1 GiB figure.\n\n";
  std::cout << std::left << std::setw(44) << "kernel" << std::right << std::setw(11) << "median us"
            << std::setw(22) << "95% interval" << std::setw(10) << "GB/s" << std::setw(9)
            << "of copy"
            << "  check\n";
  auto print = [&](const std::string& name, const row_result& r) {
    std::ostringstream ci;
    ci << std::fixed << std::setprecision(2) << "[" << r.lo_us << ", " << r.hi_us << "]";
    std::cout << std::left << std::setw(44) << name << std::right << std::fixed
              << std::setprecision(2) << std::setw(11) << r.median_us << std::setw(22) << ci.str()
              << std::setprecision(1) << std::setw(10) << r.gbps << std::setw(8)
              << 100.0 * r.gbps / copy_big << "%  " << r.checked << "\n";
  };
  for (const auto& g : decode_gemms())
    for (const std::int64_t b : {1, 8, 16, 32})
      for (const auto& [kname, k] : linear_kernels) {
        const bool check = g.n * g.k <= (64ll << 20);
        const auto r =
            time_kernel(timer, linear, runs[k], {{"B", b}, {"N", g.n}, {"K", g.k}}, check);
        print(g.name + " " + std::to_string(g.n) + "x" + std::to_string(g.k) + " b" +
                  std::to_string(b) + " [" + kname + "]",
              r);
      }
  for (const auto& [b, s] :
       std::vector<std::pair<int, int>>{{1, 2048}, {1, 8192}, {8, 2048}, {8, 8192}, {32, 2048}})
    for (const auto& [kname, k] : attention_kernels) {
      const auto r = time_kernel(timer, attention, runs[k],
                                 {{"B", b}, {"HQ", 32}, {"HK", 8}, {"S", s}}, b * s <= 8 * 8192);
      print("attention b" + std::to_string(b) + " ctx" + std::to_string(s) + " [" + kname + "]", r);
    }
  std::cout << "\ntargets (issue): down b1 >= 85% and b8 >= 80% of copy; attention b8 ctx8192 >= "
               "85%; attention b1 ctx2048: report (torch SDPA: 15%)\n";
  return 0;
}
