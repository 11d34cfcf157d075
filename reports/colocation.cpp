#include "reports/colocation.h"

#include <cmath>
#include <iomanip>
#include <map>
#include <numeric>
#include <span>
#include <sstream>

namespace kg {
namespace {

// Where a record ran: the placement key its params hold and its value; {"", ""} for a workload
// whose params name no placement (kernel level: it has no solo twin to be measured against).
struct placement_of {
  std::string key, value;
};

placement_of placement(const nlohmann::json& params) {
  if (!params.is_object()) return {};
  for (const char* k : placement_keys)
    if (auto it = params.find(k); it != params.end() && it->is_string())
      return {k, it->get<std::string>()};
  return {};
}

// The identity of a workload apart from where it ran: kind, metric and params with the
// placement key blanked. Two records with equal identities are the same measurement, placed
// differently.
std::string identity(const nlohmann::json& rec, const std::string& key) {
  auto params = rec.value("params", nlohmann::json::object());
  params.erase(key);
  return nlohmann::json{{"kind", rec.value("kind", nlohmann::json())},
                        {"metric", rec.value("metric", nlohmann::json())},
                        {"params", params}}
      .dump();
}

// The record's samples if every one is a finite number; none otherwise.
std::optional<std::vector<double>> samples_of(const nlohmann::json& rec) {
  const auto it = rec.find("samples");
  if (it == rec.end() || !it->is_array() || it->empty()) return std::nullopt;
  std::vector<double> out;
  for (const auto& v : *it) {
    if (!v.is_number()) return std::nullopt;
    out.push_back(v.get<double>());
    if (!std::isfinite(out.back())) return std::nullopt;
  }
  return out;
}

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

std::string metric_field(const nlohmann::json& rec, const char* k) {
  const auto m = rec.value("metric", nlohmann::json::object());
  return m.is_object() && m.contains(k) && m[k].is_string() ? m[k].get<std::string>() : "";
}

// Why no fraction can be given for this pair, or "".
std::string unusable(const std::optional<std::vector<double>>& co,
                     const std::optional<std::vector<double>>& solo, const std::string& direction) {
  if (!co) return "no samples (the workload did not measure)";
  if (!solo) return "its solo twin has no samples (it did not measure)";
  if (direction != "higher" && direction != "lower")
    return "metric direction '" + direction + "' is neither higher nor lower";
  for (const auto* side : {&*co, &*solo})
    for (const double v : *side)
      if (!(v > 0)) return "a sample is not positive: a fraction of solo needs positive values";
  return "";
}

colocation_pair make_pair(const nlohmann::json& rec, const nlohmann::json& twin,
                          const placement_of& p, std::vector<double> co, std::vector<double> solo) {
  colocation_pair out;
  out.id = rec["id"].get<std::string>();
  out.solo_id = twin["id"].get<std::string>();
  out.placement_key = p.key;
  out.placement = p.value;
  out.metric = metric_field(rec, "name");
  out.unit = metric_field(rec, "unit");
  out.direction = metric_field(rec, "direction");
  out.mean = mean(co);
  out.solo_mean = mean(solo);
  out.samples = co.size();
  out.solo_samples = solo.size();
  const bool higher = out.direction == "higher";
  const std::span<const double> num = higher ? co : solo, den = higher ? solo : co;
  out.fraction = higher ? out.mean / out.solo_mean : out.solo_mean / out.mean;
  if (co.size() >= 2 && solo.size() >= 2) out.interval = bootstrap_ratio_of_means(num, den);
  return out;
}

} // namespace

colocation_report colocation_fractions(const std::vector<nlohmann::json>& records) {
  // Solo records by identity: the twins.
  std::map<std::string, const nlohmann::json*> solo;
  for (const auto& rec : records) {
    if (!rec.is_object() || rec.value("type", "") != "suite_workload" || !rec.contains("id") ||
        !rec["id"].is_string())
      continue;
    const auto p = placement(rec.value("params", nlohmann::json::object()));
    if (p.value == "solo") solo.emplace(identity(rec, p.key), &rec);
  }
  colocation_report r;
  for (const auto& rec : records) {
    if (!rec.is_object() || rec.value("type", "") != "suite_workload" || !rec.contains("id") ||
        !rec["id"].is_string())
      continue;
    const auto p = placement(rec.value("params", nlohmann::json::object()));
    if (p.key.empty() || p.value == "solo") continue;
    const auto id = rec["id"].get<std::string>();
    const auto twin = solo.find(identity(rec, p.key));
    if (twin == solo.end()) {
      r.gaps.push_back({id, "no solo twin in this run (the same kind, metric and params with " +
                                p.key + " solo)"});
      continue;
    }
    const auto co = samples_of(rec), alone = samples_of(*twin->second);
    if (const auto why = unusable(co, alone, metric_field(rec, "direction")); !why.empty()) {
      r.gaps.push_back({id, why});
      continue;
    }
    r.pairs.push_back(make_pair(rec, *twin->second, p, *co, *alone));
  }
  return r;
}

nlohmann::json to_json(const colocation_report& r) {
  nlohmann::json pairs = nlohmann::json::array(), gaps = nlohmann::json::array();
  for (const auto& p : r.pairs)
    pairs.push_back({{"id", p.id},
                     {"solo_id", p.solo_id},
                     {"placement_key", p.placement_key},
                     {"placement", p.placement},
                     {"metric", p.metric},
                     {"unit", p.unit},
                     {"direction", p.direction},
                     {"fraction", p.fraction},
                     {"ci95", p.interval ? nlohmann::json{p.interval->lo, p.interval->hi}
                                         : nlohmann::json(nullptr)},
                     {"mean", p.mean},
                     {"solo_mean", p.solo_mean},
                     {"samples", p.samples},
                     {"solo_samples", p.solo_samples}});
  for (const auto& g : r.gaps)
    gaps.push_back({{"id", g.id}, {"reason", g.reason}});
  return {{"definition", "performance beside others / performance solo: mean(co) / mean(solo) "
                         "for a higher-is-better metric, mean(solo) / mean(co) for a "
                         "lower-is-better one; ci95 a BCa bootstrap resampling each side"},
          {"pairs", pairs},
          {"gaps", gaps}};
}

namespace {

std::string fraction_with_interval(const colocation_pair* p) {
  if (!p) return "-";
  std::ostringstream o;
  o << std::fixed << std::setprecision(3) << p->fraction;
  if (p->interval) o << " [" << p->interval->lo << ", " << p->interval->hi << "]";
  return o.str();
}

} // namespace

std::string colocation_change_text(const colocation_report& base, const colocation_report& next) {
  if (base.pairs.empty() && next.pairs.empty()) return "";
  std::map<std::string, const colocation_pair*> in_base, in_next;
  for (const auto& p : base.pairs)
    in_base.emplace(p.id, &p);
  for (const auto& p : next.pairs)
    in_next.emplace(p.id, &p);
  std::ostringstream o;
  o << "fractions of solo, BASE -> NEW (performance beside others / solo, 95% interval):\n";
  auto line = [&](const colocation_pair& p) {
    const auto b = in_base.find(p.id), n = in_next.find(p.id);
    o << "  " << p.id << " (" << p.metric << ", " << p.placement_key << " " << p.placement
      << "): " << fraction_with_interval(b == in_base.end() ? nullptr : b->second) << " -> "
      << fraction_with_interval(n == in_next.end() ? nullptr : n->second) << "\n";
  };
  for (const auto& p : next.pairs)
    line(p);
  for (const auto& p : base.pairs)
    if (!in_next.count(p.id)) line(p);
  return o.str();
}

std::string colocation_text(const colocation_report& r) {
  if (r.pairs.empty() && r.gaps.empty()) return "";
  std::ostringstream o;
  o << "fractions of solo (performance beside others / solo, 95% interval):\n"
    << std::fixed << std::setprecision(3);
  for (const auto& p : r.pairs) {
    o << "  " << p.fraction;
    if (p.interval)
      o << " [" << p.interval->lo << ", " << p.interval->hi << "]";
    else
      o << " (one sample a side: no interval)";
    o << "  " << p.id << "  (" << p.metric << ", " << p.placement_key << " " << p.placement
      << ")\n";
  }
  for (const auto& g : r.gaps)
    o << "  no fraction  " << g.id << ": " << g.reason << "\n";
  return o.str();
}

} // namespace kg
