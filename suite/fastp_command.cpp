#include "suite/fastp_command.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>

#include "reports/environment.h"
#include "reports/eval_results_io.h"
#include "reports/json_input.h"
#include "reports/kernelbench_io.h"
#include "reports/result_writer.h"
#include "reports/text_table.h"
#include "suite/exit_codes.h"

namespace kg {
namespace {

using fastp_request = fastp_options;

struct candidate_report {
  std::string name;
  std::vector<fast_p_score> scores; // one per p, in request order
  std::optional<double> geomean;
  int geomean_tasks = 0;
  std::vector<const task_outcome*> missing;
  int evaluated = 0;
};

std::string short_number(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

std::string fixed(double v, int precision) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(precision) << v;
  return o.str();
}

std::optional<double> parse_number(std::string_view s) {
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ')
    s.remove_suffix(1);
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

// Reads RESULT and picks its reader: a kernelgate result has "schema" and "kind"; any other
// object is taken as KernelBench's eval_results.json, which needs the baseline file.
fastp_source load_source(const fastp_request& r) {
  auto path = r.result;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (!std::filesystem::exists(path / "result.json"))
      throw fastp_input_error("'" + path.string() + "' is a folder without result.json");
    path /= "result.json";
  }
  const auto result = read_json_file(path);
  const auto& doc = result.doc;
  if (doc.is_object() && doc.contains("schema") && doc.contains("kind")) {
    if (r.baseline || r.level || r.dataset)
      throw fastp_input_error("--baseline, --level and --dataset apply to KernelBench files; '" +
                              path.string() + "' is a kernelgate result");
    return eval_results_source(result, r.candidate);
  }
  if (!doc.is_object())
    throw fastp_input_error("'" + path.string() +
                            "' is neither a kernelgate result nor a KernelBench eval_results.json "
                            "(the top level is " +
                            doc.type_name() + ", not an object)");
  if (!r.baseline)
    throw fastp_input_error("'" + path.string() +
                            "' is a KernelBench eval_results.json: --baseline FILE "
                            "(baseline_time_torch.json) is required");
  if (r.candidate)
    throw fastp_input_error("--candidate applies to kernelgate results; '" + path.string() +
                            "' is a KernelBench eval_results.json (one model, sample_id 0)");
  return kernelbench_source(result, read_json_file(*r.baseline), r.level.value_or(1), r.dataset);
}

std::vector<candidate_report> score(const fastp_source& src, const fastp_request& r) {
  fast_p_options opt;
  opt.min_effect = r.min_effect;
  opt.no_interval_reason = src.no_interval_reason;
  std::vector<candidate_report> out;
  for (const auto& c : src.candidates) {
    candidate_report rep;
    rep.name = c.name;
    for (const double p : r.p)
      rep.scores.push_back(score_fast_p(c.tasks, p, opt));
    rep.geomean = geomean_speedup(c.tasks);
    for (const auto& t : c.tasks) {
      if (task_speedup(t)) ++rep.geomean_tasks;
      if (t.evaluated)
        ++rep.evaluated;
      else
        rep.missing.push_back(&t);
    }
    out.push_back(std::move(rep));
  }
  return out;
}

nlohmann::json candidate_json(const candidate_report& c, bool with_scores) {
  const auto& s = c.scores.front(); // counts and exclusions do not depend on p
  nlohmann::json ex = nlohmann::json::array(), miss = nlohmann::json::array();
  for (const auto& [task, reason] : s.exclusions)
    ex.push_back({{"task", task}, {"reason", reason}});
  for (const auto* t : c.missing)
    miss.push_back({{"task", t->task}, {"note", t->note}});
  nlohmann::json j = {
      {"candidate", c.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.name)},
      {"tasks",
       {{"intended", s.intended},
        {"aligned", s.aligned},
        {"excluded", s.intended - s.aligned},
        {"evaluated", c.evaluated},
        {"missing", s.missing},
        {"correct", s.correct},
        {"incorrect", s.incorrect},
        {"unjudged", s.unjudged}}},
      {"geomean_speedup",
       {{"value", c.geomean ? nlohmann::json(*c.geomean) : nlohmann::json(nullptr)},
        {"tasks", c.geomean_tasks},
        {"over", "correct aligned timed tasks, log space"}}},
      {"exclusions", std::move(ex)},
      {"missing", std::move(miss)}};
  if (with_scores) {
    nlohmann::json scores = nlohmann::json::array();
    for (const auto& sc : c.scores)
      scores.push_back(sc.to_json(false));
    j["scores"] = std::move(scores);
  }
  return j;
}

std::string frac_or_na(double v, int n) {
  return n ? fixed(v, 4) : "n/a";
}
std::string interval_or_na(const interval& i, int n) {
  return n ? "[" + fixed(i.lo, 3) + ", " + fixed(i.hi, 3) + "]" : "n/a";
}

void print_source(std::ostream& out, const fastp_source& src) {
  const auto& d = src.description;
  if (d["format"] == "kernelbench") {
    const auto& b = d["baseline"];
    out << "input: KernelBench " << d["eval_results"]["path"].get<std::string>()
        << " (scoring sample_id " << d["sample_id"].get<int>() << "), baseline "
        << b["path"].get<std::string>() << " " << b["level"].get<std::string>() << " ("
        << b["entries"].get<std::size_t>() << " entries";
    if (!b["hardware"].empty()) {
      out << "; hardware:";
      for (const auto& h : b["hardware"])
        out << " " << h.get<std::string>();
    }
    out << ")\n";
  } else {
    out << "input: kernelgate eval result " << d["result"]["path"].get<std::string>() << "\n";
  }
  for (const auto& n : src.notes)
    out << "note: " << n << "\n";
}

void print_candidate(std::ostream& out, const candidate_report& c, double min_effect) {
  const auto& s0 = c.scores.front();
  if (!c.name.empty()) out << "\ncandidate: " << c.name << "\n";
  out << "tasks: " << s0.intended << " intended, " << s0.aligned << " aligned ("
      << s0.intended - s0.aligned << " excluded); " << c.evaluated << " evaluated (" << s0.correct
      << " correct, " << s0.incorrect << " incorrect, " << s0.unjudged << " unjudged), "
      << s0.missing << " missing\n";
  out << "fast at p: correct and baseline/candidate > p (strict); fast_p aligned (n = aligned) is "
         "KernelBench's number\n";
  text_table strict({"p", "fast", "fast_p intended", "Wilson 95%", "bootstrap 95%",
                     "fast_p aligned", "Wilson 95%", "bootstrap 95%"});
  for (const auto& s : c.scores)
    strict.add_row(
        {short_number(s.p), std::to_string(s.fast), frac_or_na(s.fast_p_intended, s.intended),
         interval_or_na(s.wilson_intended, s.intended), interval_or_na(s.ci_intended, s.intended),
         frac_or_na(s.fast_p_aligned, s.aligned), interval_or_na(s.wilson_aligned, s.aligned),
         interval_or_na(s.ci_aligned, s.aligned)});
  out << strict.render();
  out << "bootstrap: over tasks, exact (the resampled fast count is Binomial(n, fast/n))\n";
  const std::string band = short_number(100 * min_effect) + "%";
  if (s0.noise_aware.available) {
    out << "noise-aware: a task counts when the lower bound of its speedup_ci95 exceeds p\n";
    text_table noise({"p", "noise-aware fast", "fast_p intended", "Wilson 95%", "fast_p aligned",
                      "Wilson 95%", "near-ties"});
    for (const auto& s : c.scores) {
      const auto& na = s.noise_aware;
      noise.add_row(
          {short_number(s.p), std::to_string(na.fast), frac_or_na(na.fast_p_intended, s.intended),
           interval_or_na(na.wilson_intended, s.intended), frac_or_na(na.fast_p_aligned, s.aligned),
           interval_or_na(na.wilson_aligned, s.aligned), std::to_string(s.near_ties.size())});
    }
    out << noise.render();
  } else {
    out << "noise-aware fast_p: unavailable: " << s0.noise_aware.reason << "\n";
  }
  out << "near-ties (speedup interval contains p, or speedup within " << band << " of p):";
  bool any = false;
  for (const auto& s : c.scores) {
    for (const auto& t : s.near_ties) {
      any = true;
      out << "\n  p=" << short_number(s.p) << "  " << t.task << ": speedup " << fixed(t.speedup, 4);
      if (t.ci95) out << " [" << fixed(t.ci95->lo, 4) << ", " << fixed(t.ci95->hi, 4) << "]";
      out << " (" << (t.interval_contains_p ? "interval contains p" : "")
          << (t.interval_contains_p && t.within_min_effect ? ", " : "")
          << (t.within_min_effect ? "within " + band + " of p" : "") << ")";
    }
  }
  out << (any ? "\n" : " none\n");
  out << "geomean speedup (correct aligned timed tasks, log space): "
      << (c.geomean ? fixed(*c.geomean, 4) + " over " + std::to_string(c.geomean_tasks) + " tasks"
                    : std::string("n/a (no correct timed aligned task)"))
      << "\n";
  out << "excluded from aligned (" << s0.exclusions.size() << "):\n";
  for (const auto& [task, reason] : s0.exclusions)
    out << "  " << task << ": " << reason << "\n";
  out << "missing (" << c.missing.size() << "; counted as not fast, not as measured failures):\n";
  for (const auto* t : c.missing)
    out << "  " << t->task << ": " << t->note << "\n";
}

nlohmann::json p_list_json(const std::vector<double>& ps) {
  nlohmann::json j = nlohmann::json::array();
  for (const double p : ps)
    j.push_back(p);
  return j;
}

} // namespace

std::vector<double> parse_p_list(const std::string& text) {
  std::vector<double> ps;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    const auto v = parse_number(std::string_view(text).substr(start, comma - start));
    if (!v || *v < 0)
      throw std::invalid_argument("invalid --p '" + text +
                                  "' (a comma-separated list of numbers >= 0)");
    ps.push_back(*v);
    if (comma == std::string::npos) return ps;
    start = comma + 1;
  }
}

int run_fastp_command(const fastp_options& req, const std::vector<std::string>& args,
                      std::ostream& out, std::ostream& err) {
  fastp_source src;
  try {
    src = load_source(req);
  } catch (const fastp_input_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  // The output folder is set up before any work, so an unusable one is bad input that prints
  // nothing and leaves no result.json.
  std::unique_ptr<result_writer> writer;
  if (req.out) {
    nlohmann::json config = {
        {"source", src.description},
        {"notes", src.notes},
        {"p_values", p_list_json(req.p)},
        {"min_effect", req.min_effect},
        {"candidate", req.candidate ? nlohmann::json(*req.candidate) : nlohmann::json("all")}};
    try {
      writer =
          std::make_unique<result_writer>(*req.out, "fastp", args, collect_environment(), config);
    } catch (const output_error& e) {
      err << "kernelgate: " << printable(e.what(), 400) << "\n";
      return exit_code::bad_input;
    }
  }
  const auto reports = score(src, req);

  if (req.json) {
    nlohmann::json doc = {{"source", src.description},
                          {"notes", src.notes},
                          {"p_values", p_list_json(req.p)},
                          {"min_effect", req.min_effect},
                          {"candidates", nlohmann::json::array()}};
    for (const auto& c : reports)
      doc["candidates"].push_back(candidate_json(c, true));
    out << doc.dump(2) << "\n";
  } else {
    print_source(out, src);
    for (const auto& c : reports)
      print_candidate(out, c, req.min_effect);
  }

  if (writer) {
    nlohmann::json summary = {{"status", "complete"}, {"candidates", nlohmann::json::array()}};
    for (const auto& c : reports) {
      const std::string who = c.name.empty() ? "kernelbench" : c.name;
      for (const auto& s : c.scores)
        writer->append(
            {{"type", "fast_p"},
             {"id", "fast_p/" + who + "/p=" + short_number(s.p)},
             {"candidate", c.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.name)},
             {"p", s.p},
             {"result", s.to_json(false)}});
      summary["candidates"].push_back(candidate_json(c, false));
    }
    const auto path = writer->finish(summary);
    if (!req.json) out << "Wrote " << path.string() << "\n";
  }
  return exit_code::ok;
}

} // namespace kg
