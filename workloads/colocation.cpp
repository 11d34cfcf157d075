#include "workloads/colocation.h"

#include <stdexcept>

namespace kg {

std::vector<decode_shape> colocated_bitwise_shapes() {
  std::vector<decode_shape> out;
  for (const int batch : {1, 4, 8, 32})
    for (const int context : {512, 2048, 8192})
      out.push_back({batch, context});
  return out;
}

sm_split colocation_target(unsigned total_sms) {
  const unsigned training = (total_sms + 2) / 4; // total / 4 rounded half up
  return {total_sms - training, training};
}

std::size_t nearest_grant(const std::vector<green_grant>& grants, sm_split target) {
  if (grants.empty()) throw std::invalid_argument("nearest_grant: no grants");
  auto gap = [](unsigned a, unsigned b) { return a > b ? a - b : b - a; };
  std::size_t best = 0;
  unsigned best_distance = 0;
  for (std::size_t i = 0; i < grants.size(); ++i) {
    const unsigned d =
        gap(grants[i].decode, target.decode) + gap(grants[i].training, target.training);
    if (i == 0 || d < best_distance) {
      best = i;
      best_distance = d;
    }
  }
  return best;
}

std::vector<std::uint64_t> repeat_arrival_seeds(std::uint64_t search_seed, int repeats) {
  if (repeats < 0) throw std::invalid_argument("repeat_arrival_seeds: negative count");
  std::vector<std::uint64_t> out;
  for (int k = 1; k <= repeats; ++k)
    out.push_back(search_seed + static_cast<std::uint64_t>(k));
  return out;
}

} // namespace kg
