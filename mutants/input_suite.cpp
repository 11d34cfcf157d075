#include "mutants/input_suite.h"

#include <algorithm>
#include <stdexcept>

namespace kg {

namespace {

// A set of mutants as 64-bit words, position i of the subset at bit i.
using bitset = std::vector<std::uint64_t>;

bitset empty_set(std::size_t n) {
  return bitset((n + 63) / 64, 0);
}
void add(bitset& s, std::size_t i) {
  s[i / 64] |= std::uint64_t{1} << (i % 64);
}
std::size_t count(const bitset& s) {
  std::size_t n = 0;
  for (const auto w : s)
    n += static_cast<std::size_t>(__builtin_popcountll(w));
  return n;
}
std::size_t count_new(const bitset& s, const bitset& have) {
  std::size_t n = 0;
  for (std::size_t k = 0; k < s.size(); ++k)
    n += static_cast<std::size_t>(__builtin_popcountll(s[k] & ~have[k]));
  return n;
}
void merge_into(bitset& have, const bitset& s) {
  for (std::size_t k = 0; k < s.size(); ++k)
    have[k] |= s[k];
}

// The allowed configurations' kill sets over the subset, and the union they can reach.
struct prepared {
  std::vector<std::size_t> allowed; // configuration indices
  std::vector<bitset> sets;         // per allowed configuration
  bitset reachable;
};

prepared prepare(const cover_problem& p, const std::vector<std::size_t>& subset) {
  p.check();
  prepared r;
  r.reachable = empty_set(subset.size());
  for (std::size_t c = 0; c < p.configs.size(); ++c) {
    if (p.fails_control[c]) continue;
    auto s = empty_set(subset.size());
    for (std::size_t i = 0; i < subset.size(); ++i) {
      if (subset[i] >= p.mutants.size())
        throw std::invalid_argument("cover: a subset index is past the mutants");
      if (p.kills[c][subset[i]]) add(s, i);
    }
    merge_into(r.reachable, s);
    r.allowed.push_back(c);
    r.sets.push_back(std::move(s));
  }
  return r;
}

std::vector<std::size_t> uncoverable(const prepared& pr, const std::vector<std::size_t>& subset) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < subset.size(); ++i)
    if (!(pr.reachable[i / 64] >> (i % 64) & 1)) out.push_back(subset[i]);
  return out;
}

// Whether at most k of the sets from `from` on, with `have`, reach `goal` (the picks in `pick`):
// depth first, cut when even k copies of the largest remaining gain cannot fill what is missing.
bool search(const prepared& pr, std::size_t from, std::size_t k, const bitset& have,
            const bitset& goal, std::vector<std::size_t>& pick) {
  if (have == goal) return true;
  if (k == 0) return false;
  const std::size_t missing = count(goal) - count(have);
  std::size_t max_gain = 0;
  for (std::size_t i = from; i < pr.sets.size(); ++i)
    max_gain = std::max(max_gain, count_new(pr.sets[i], have));
  if (max_gain * k < missing) return false;
  for (std::size_t i = from; i < pr.sets.size(); ++i) {
    if (count_new(pr.sets[i], have) == 0) continue;
    bitset next = have;
    merge_into(next, pr.sets[i]);
    pick.push_back(i);
    if (search(pr, i + 1, k - 1, next, goal, pick)) return true;
    pick.pop_back();
  }
  return false;
}

} // namespace

void cover_problem::check() const {
  if (kills.size() != configs.size() || fails_control.size() != configs.size())
    throw std::invalid_argument("cover: kills and fails_control need one entry per configuration");
  for (const auto& row : kills)
    if (row.size() != mutants.size())
      throw std::invalid_argument("cover: a configuration's kills need one entry per mutant");
}

cover_result greedy_cover(const cover_problem& p, const std::vector<std::size_t>& subset) {
  const auto pr = prepare(p, subset);
  cover_result r;
  r.uncoverable = uncoverable(pr, subset);
  auto have = empty_set(subset.size());
  while (have != pr.reachable) {
    std::size_t best = 0, best_gain = 0;
    for (std::size_t i = 0; i < pr.sets.size(); ++i) {
      const std::size_t g = count_new(pr.sets[i], have);
      if (g > best_gain) {
        best = i;
        best_gain = g;
      }
    }
    merge_into(have, pr.sets[best]);
    r.chosen.push_back(pr.allowed[best]);
  }
  return r;
}

cover_result minimum_cover(const cover_problem& p, const std::vector<std::size_t>& subset,
                           std::size_t exact_limit) {
  auto r = greedy_cover(p, subset);
  const auto pr = prepare(p, subset);
  if (pr.sets.size() > exact_limit) return r;
  // Greedy's size bounds the answer; look for a cover one smaller until none exists.
  while (!r.chosen.empty()) {
    std::vector<std::size_t> pick;
    if (!search(pr, 0, r.chosen.size() - 1, empty_set(subset.size()), pr.reachable, pick)) break;
    r.chosen.clear();
    for (const auto i : pick)
      r.chosen.push_back(pr.allowed[i]);
  }
  r.minimal = true;
  return r;
}

bool held_out(std::string_view mutant_id) {
  if (mutant_id.empty()) throw std::invalid_argument("held_out: an empty mutant id");
  const char c = mutant_id.back();
  int v = 0;
  if (c >= '0' && c <= '9')
    v = c - '0';
  else if (c >= 'a' && c <= 'f')
    v = c - 'a' + 10;
  else if (c >= 'A' && c <= 'F')
    v = c - 'A' + 10;
  else
    throw std::invalid_argument("held_out: mutant id '" + std::string(mutant_id) +
                                "' does not end in a hex digit");
  return v % 2 == 1;
}

input_suite suggest_input_suite(const cover_problem& p, std::size_t exact_limit) {
  p.check();
  std::vector<std::size_t> dev, test;
  for (std::size_t m = 0; m < p.mutants.size(); ++m)
    (held_out(p.mutants[m]) ? test : dev).push_back(m);
  input_suite s;
  s.cover = minimum_cover(p, dev, exact_limit);
  for (const auto c : s.cover.chosen)
    s.configs.push_back(p.configs[c]);
  for (std::size_t c = 0; c < p.configs.size(); ++c)
    if (p.fails_control[c]) s.disallowed.push_back(p.configs[c]);
  auto killed_by_suite = [&](std::size_t m) {
    return std::any_of(s.cover.chosen.begin(), s.cover.chosen.end(),
                       [&](std::size_t c) { return p.kills[c][m]; });
  };
  s.dev_mutants = static_cast<int>(dev.size());
  s.held_out_mutants = static_cast<int>(test.size());
  s.dev_killed = static_cast<int>(std::count_if(dev.begin(), dev.end(), killed_by_suite));
  s.held_out_killed = static_cast<int>(std::count_if(test.begin(), test.end(), killed_by_suite));
  s.held_out_ci95 = wilson_interval(s.held_out_killed, s.held_out_mutants);
  return s;
}

nlohmann::json input_suite::to_json() const {
  return {{"configs", configs},
          {"minimal", cover.minimal},
          {"disallowed_fail_a_correct_kernel", disallowed},
          {"development", {{"mutants", dev_mutants}, {"killed", dev_killed}}},
          {"held_out",
           {{"mutants", held_out_mutants},
            {"killed", held_out_killed},
            {"kill_rate",
             held_out_mutants > 0 ? static_cast<double>(held_out_killed) / held_out_mutants : 0.0},
            {"kill_rate_ci95", {held_out_ci95.lo, held_out_ci95.hi}}}}};
}

} // namespace kg
