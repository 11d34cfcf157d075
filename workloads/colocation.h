// The co-located decode + training workload's plan, apart from the GPU so it is unit-tested
// without one (issue: workloads under test): which SM split to aim for and how to pick among the
// splits the driver grants, the (batch, context) shapes whose logits must be bit-identical solo
// and co-located, and the arrival seeds of the repeated traces.
#pragma once

#include <cstdint>
#include <vector>

namespace kg {

struct decode_shape {
  int batch = 0;
  int context = 0; // the decoded token sits at this position and attends context + 1 tokens
};

// Batches {1, 4, 8, 32} x contexts {512, 2048, 8192}, batch-major: every batch the arrivals mix
// produces a step of (1, 2, 4, 8 sequences a request, 32 the engine's cap) at the ends and the
// middle of the contexts drawn (log-uniform 512..8192). All fit the engine's default KV cache
// (32 slots of 8448 tokens), so none is left out.
std::vector<decode_shape> colocated_bitwise_shapes();

struct sm_split {
  unsigned decode = 0, training = 0;
};

// The split the issue asks for, 33 training / 99 decode of the H200's 132 SMs, scaled to
// `total_sms`: training a quarter (rounded half up), decode the rest.
sm_split colocation_target(unsigned total_sms);

// One partition the driver made: the decode group asked for `request` SMs and got `decode`; the
// training group got the remaining `training`.
struct green_grant {
  unsigned request = 0, decode = 0, training = 0;
};

// The grant nearest the target: least |decode - target.decode| + |training - target.training|,
// the earlier grant on a tie. Throws std::invalid_argument on an empty list.
std::size_t nearest_grant(const std::vector<green_grant>& grants, sm_split target);

// The arrival seeds of `repeats` traces at a found load: search_seed + 1, + 2, ...: each repeat
// a different trace, none the search's own (whose p99 chose the load), and the same seeds for
// every configuration (solo and co-located see the same traces).
std::vector<std::uint64_t> repeat_arrival_seeds(std::uint64_t search_seed, int repeats);

} // namespace kg
