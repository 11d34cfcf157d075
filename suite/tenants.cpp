#include "suite/tenants.h"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "workloads/colocation.h"
#include "workloads/lora_model.h"
#include "workloads/lora_torch.h"

namespace kg {

background_hog::background_hog(cudaStream_t stream, int sms, double clock_mhz)
    : hog_(contention_hog::kind::memory_bandwidth),
      loop_("contention hog", [=, this](const std::atomic<bool>& stopping) {
        while (!stopping.load()) {
          hog_.launch(stream, 50000.0, clock_mhz, sms);
          bytes_ += hog_.work_done(stream); // waits for the launch
          ++launches_;
        }
      }) {}

double background_hog::stop() {
  loop_.stop();
  return launches_ ? bytes_ / static_cast<double>(launches_) : 0.0;
}

background_training::background_training(cudaStream_t stream, int device, int jobs)
    : loop_(
          "co-located training",
          [this, stream, device, jobs](const std::atomic<bool>& stopping) {
            run_on_torch_stream(stream, device, [&] {
              const lora_config c; // Qwen3-4B, rank 8, sequence 2048
              std::vector<lora_adapters> adapters;
              std::vector<lora_batch> batches;
              for (int j = 0; j < jobs; ++j) {
                adapters.push_back(make_lora_adapters(c, lora_seed, j));
                batches.push_back(make_lora_batch(c, lora_seed, j));
              }
              lora_trainer t(c, lora_seed, adapters, {"cuda", "bfloat16"});
              while (!stopping.load()) {
                const auto t0 = std::chrono::steady_clock::now();
                const auto r = t.step(batches, lora_training_lr); // reads the losses: finished
                const double s =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                const bool was_first = losses_.empty(); // only this thread appends
                first_step f;
                if (was_first) f = {r[0].loss, r[0].grad, t.adapters()[0].flat()};
                {
                  const std::lock_guard<std::mutex> l(m_);
                  if (was_first) first_ = std::move(f);
                  losses_.push_back(r[0].loss);
                  seconds_.push_back(s);
                }
                cv_.notify_all();
              }
            });
          },
          [this] {
            {
              const std::lock_guard<std::mutex> l(m_);
              done_ = true;
            }
            cv_.notify_all();
          }) {}

void background_training::wait_first_step() {
  std::unique_lock<std::mutex> l(m_);
  cv_.wait(l, [&] { return !losses_.empty() || done_; });
  if (!losses_.empty()) return;
  l.unlock();
  stop(); // throws the thread's error
  throw std::runtime_error("co-located training stopped before its first step");
}

std::size_t background_training::steps() {
  const std::lock_guard<std::mutex> l(m_);
  return losses_.size();
}

background_training::first_step background_training::first() {
  const std::lock_guard<std::mutex> l(m_);
  return first_;
}

background_training::result background_training::snapshot() {
  const std::lock_guard<std::mutex> l(m_);
  return {losses_, seconds_};
}

background_training::result background_training::stop() {
  loop_.stop();
  return {losses_, seconds_};
}

green_partition nearest_partition(nlohmann::json* record) {
  int total = 0;
  KG_CUDA_CHECK(cudaDeviceGetAttribute(&total, cudaDevAttrMultiProcessorCount, 0));
  const auto target = colocation_target(static_cast<unsigned>(total));
  std::string why;
  auto up = green_partition::create(0, target.decode, &why);
  if (!up) throw std::runtime_error("no green partition: " + why);
  std::vector<green_grant> grants = {{target.decode, up->first_sms(), up->rest_sms()}};
  std::optional<green_partition> down;
  if (up->first_sms() > target.decode) {
    // 64 tries at most, far above any grain seen (the H200 granted 104 for 99: 8 SMs).
    for (int r = static_cast<int>(target.decode) - 1; r >= 1 && grants.size() == 1; --r) {
      if (static_cast<int>(target.decode) - r > 64) break;
      std::string w;
      auto p = green_partition::create(0, static_cast<unsigned>(r), &w);
      if (!p) break; // nothing smaller is granted
      if (p->first_sms() < up->first_sms()) {
        grants.push_back({static_cast<unsigned>(r), p->first_sms(), p->rest_sms()});
        down.emplace(std::move(*p));
      }
    }
  }
  const auto k = nearest_grant(grants, target);
  nlohmann::json tried = nlohmann::json::array();
  for (const auto& g : grants)
    tried.push_back({{"requested_decode_sms", g.request},
                     {"decode_sms", g.decode},
                     {"training_sms", g.training}});
  *record = {{"target_decode_sms", target.decode},
             {"target_training_sms", target.training},
             {"total_sms", up->total_sms()},
             {"driver_min_partition", up->min_partition()},
             {"driver_alignment", up->alignment()},
             {"grants_tried", tried},
             {"decode_sms", grants[k].decode},
             {"training_sms", grants[k].training},
             {"note", "granted, not asked: the driver rounds a group's SMs to its grain; of the "
                      "grants tried the one nearest the target (least |decode - target| + "
                      "|training - target|) is used"}};
  return k == 0 ? std::move(*up) : std::move(*down);
}

} // namespace kg
