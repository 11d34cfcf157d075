// The LayerNorm affine ablation (docs/cli.md, audit): 18 configurations x 4 affine regimes x
// (6 altered formulas + the copied-reference control) = 504 observations under one checker, two
// extra controls outside the 504, and a second table: which protocol presets accept each formula
// with the inputs each preset would really generate.
#include <chrono>
#include <functional>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "base/sha256.h"
#include "kernels/layernorm_backend.h"
#include "mutants/outcome_matrix.h"
#include "oracles/layernorm_oracle.h"
#include "oracles/protocol.h"
#include "reports/environment.h"
#include "reports/json_input.h"
#include "reports/result_writer.h"
#include "reports/text_table.h"
#include "stats/proportion.h"
#include "suite/audit.h"
#include "suite/exit_codes.h"
#include "suite/progress_meter.h"
#include "timing/interrupt.h"

namespace kg {
namespace {

constexpr const char* copied_control = "control: copied reference";
constexpr const char* independent_control = "control: independent LayerNorm";
constexpr const char* oracle_control = "control: fp64 oracle (cast)";

// One implementation under audit: an altered formula or a control.
struct implementation {
  std::string row;  // row label in the tables
  std::string name; // machine name in records
  std::string role; // mutant | control | extra_control
  std::string family;
  std::function<host_tensor(layernorm_backend&, const layernorm_inputs&, const host_tensor& ref,
                            const host_tensor& oracle)>
      run;
};

std::vector<implementation> implementations() {
  std::vector<implementation> out;
  for (const auto& f : altered_formulas()) {
    const affine_formula formula = f.formula;
    out.push_back({std::string(f.label), std::string(f.name), "mutant", std::string(f.family),
                   [formula](layernorm_backend& b, const layernorm_inputs& in, const host_tensor&,
                             const host_tensor&) { return b.run(formula, in, layernorm_eps); }});
  }
  out.push_back({copied_control, "copied_reference", "control", "none",
                 [](layernorm_backend&, const layernorm_inputs&, const host_tensor& ref,
                    const host_tensor&) { return ref; }});
  out.push_back({independent_control, "independent", "extra_control", "none",
                 [](layernorm_backend& b, const layernorm_inputs& in, const host_tensor&,
                    const host_tensor&) { return b.run_independent(in, layernorm_eps); }});
  out.push_back({oracle_control, "fp64_oracle_cast", "extra_control", "none",
                 [](layernorm_backend&, const layernorm_inputs& in, const host_tensor&,
                    const host_tensor& oracle) { return oracle.cast(in.x.type); }});
  return out;
}

nlohmann::json tensor_ref(const host_tensor& t) {
  return {{"dtype", dtype_name(t.type)},
          {"shape", t.shape},
          {"sha256", sha256_hex(std::span<const std::byte>(t.bytes))}};
}

nlohmann::json inputs_json(const layernorm_inputs& in) {
  return {
      {"x", tensor_ref(in.x)}, {"weight", tensor_ref(in.weight)}, {"bias", tensor_ref(in.bias)}};
}

nlohmann::json config_json(const layernorm_config& c) {
  return {{"shape", {c.rows, c.cols}}, {"dtype", dtype_name(c.type)}, {"seed", c.seed}};
}

std::string config_key(const layernorm_config& c) {
  return std::to_string(c.rows) + "x" + std::to_string(c.cols) + "/" +
         std::string(dtype_name(c.type)) + "/seed" + std::to_string(c.seed);
}

// Verdict of one implementation on one set of inputs.
struct evaluation {
  outcome verdict = outcome::error;
  compare_result stats;
  std::string output_sha256;
  std::string error;
};

evaluation evaluate(const implementation& impl, layernorm_backend& backend,
                    const layernorm_inputs& in, const host_tensor& ref, const host_tensor& oracle,
                    const comparator_spec& spec) {
  evaluation e;
  try {
    const host_tensor cand = impl.run(backend, in, ref, oracle);
    e.output_sha256 = sha256_hex(std::span<const std::byte>(cand.bytes));
    e.stats = compare(spec, ref, cand, &oracle);
    e.verdict = e.stats.pass ? outcome::accepted : outcome::rejected;
  } catch (const std::exception& ex) {
    e.verdict = outcome::error;
    e.error = ex.what();
  }
  return e;
}

std::string cell_text(const outcome_counts& c) {
  std::string s = std::to_string(c.accepted) + "/" + std::to_string(c.total());
  if (c.error) s += " (" + std::to_string(c.error) + " err)";
  if (c.missing) s += " (" + std::to_string(c.missing) + " missing)";
  return s;
}

std::string percent(double v) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << 100.0 * v << "%";
  return o.str();
}

struct grid_run {
  outcome_matrix matrix;
  outcome_matrix extra;
  // Verdicts of every grid observation, keyed by record id, for the fp16 path cross-check.
  std::map<std::string, outcome> verdicts;
};

// Runs the 504-observation grid (plus the two extra controls) on `backend`. When `writer` is
// null nothing is recorded (the fp16 cross-check reruns the grid this way).
void run_grid(layernorm_backend& backend, const protocol& checker,
              const std::vector<implementation>& impls, grid_run& run, result_writer* writer,
              bool only_half, progress_meter* meter = nullptr) {
  for (const auto& cfg : layernorm_affine_grid()) {
    if (only_half && cfg.type != dtype::float16) continue;
    if (meter) meter->start("grid " + config_key(cfg));
    int observed = 0;
    const layernorm_inputs drawn = draw_layernorm_inputs(cfg);
    for (affine_regime regime : all_affine_regimes) {
      const layernorm_inputs in = select_regime(drawn, regime);
      const std::string regime_name(affine_regime_name(regime));
      host_tensor ref, oracle;
      std::string ref_error;
      try {
        ref = backend.run(affine_formula::reference, in, layernorm_eps);
        oracle = layernorm_oracle_fp64(in, layernorm_eps);
      } catch (const std::exception& ex) {
        ref_error = std::string("reference failed: ") + ex.what();
      }
      const comparator_spec& spec = checker.comparator_for(cfg.type);
      for (const auto& impl : impls) {
        if (stop_requested()) return;
        const std::string id = "grid/" + config_key(cfg) + "/" + regime_name + "/" + impl.name;
        evaluation e;
        if (ref_error.empty())
          e = evaluate(impl, backend, in, ref, oracle, spec);
        else
          e.error = ref_error;
        run.verdicts[id] = e.verdict;
        ++observed;
        outcome_matrix& m = impl.role == "extra_control" ? run.extra : run.matrix;
        m.resolve(impl.row, regime_name, e.verdict);
        if (!writer) continue;
        nlohmann::json rec = {{"type", "observation"},
                              {"id", id},
                              {"section", impl.role == "extra_control" ? "extra_controls" : "grid"},
                              {"config", config_json(cfg)},
                              {"regime", regime_name},
                              {"implementation", impl.name},
                              {"role", impl.role},
                              {"family", impl.family},
                              {"checker", checker.name},
                              {"backend", backend.name()},
                              {"verdict", outcome_name(e.verdict)},
                              {"inputs", inputs_json(in)}};
        if (ref_error.empty()) {
          rec["reference_sha256"] = sha256_hex(std::span<const std::byte>(ref.bytes));
          rec["oracle_sha256"] = sha256_hex(std::span<const std::byte>(oracle.bytes));
        }
        if (e.verdict != outcome::error) {
          rec["stats"] = e.stats.to_json();
          rec["output_sha256"] = e.output_sha256;
        } else {
          rec["error"] = e.error;
        }
        writer->append(std::move(rec));
      }
    }
    if (meter)
      meter->done("grid " + config_key(cfg) + ": " + std::to_string(observed) + " observations");
  }
}

// Which presets accept each implementation, with the inputs each preset generates.
void run_presets(layernorm_backend& backend, const std::vector<implementation>& impls,
                 outcome_matrix& matrix, result_writer& writer, progress_meter& meter) {
  for (auto pname : protocol_names()) {
    const protocol p = *find_protocol(pname);
    meter.start("preset " + std::string(pname));
    for (const auto& cfg : layernorm_affine_grid()) {
      auto shapes = [&](int variant) {
        // The tail-crossing variant crosses warp (32) and block (128) boundaries with odd sizes.
        const std::int64_t rows = variant ? cfg.rows + 3 : cfg.rows;
        const std::int64_t cols = variant ? 2 * cfg.cols + 33 : cfg.cols;
        return std::vector<input_decl>{{"x", input_role::activation, cfg.type, {rows, cols}},
                                       {"weight", input_role::norm_weight, cfg.type, {cols}},
                                       {"bias", input_role::norm_bias, cfg.type, {cols}}};
      };
      const auto trials = generate_trials(p, shapes, cfg.seed);
      struct trial_data {
        layernorm_inputs in;
        host_tensor ref, oracle;
      };
      std::vector<trial_data> data;
      nlohmann::json trial_inputs = nlohmann::json::array();
      std::string ref_error;
      for (const auto& t : trials) {
        trial_data d{{t.inputs[0], t.inputs[1], t.inputs[2]}, {}, {}};
        try {
          d.ref = backend.run(affine_formula::reference, d.in, layernorm_eps);
          d.oracle = layernorm_oracle_fp64(d.in, layernorm_eps);
        } catch (const std::exception& ex) {
          ref_error = std::string("reference failed: ") + ex.what();
        }
        nlohmann::json ti = inputs_json(d.in);
        ti["label"] = t.label;
        trial_inputs.push_back(std::move(ti));
        data.push_back(std::move(d));
      }
      const comparator_spec& spec = p.comparator_for(cfg.type);
      for (const auto& impl : impls) {
        if (stop_requested()) return;
        outcome verdict = outcome::accepted;
        nlohmann::json failing = nullptr;
        std::string error = ref_error;
        if (!ref_error.empty()) verdict = outcome::error;
        for (std::size_t i = 0; i < data.size() && verdict == outcome::accepted; ++i) {
          const evaluation e =
              evaluate(impl, backend, data[i].in, data[i].ref, data[i].oracle, spec);
          if (e.verdict == outcome::error) {
            verdict = outcome::error;
            error = e.error;
          } else if (e.verdict == outcome::rejected) {
            verdict = outcome::rejected;
            failing = {{"trial", trials[i].label}, {"stats", e.stats.to_json()}};
          }
        }
        matrix.resolve(impl.row, std::string(pname), verdict);
        nlohmann::json rec = {
            {"type", "preset_observation"},
            {"id", "presets/" + std::string(pname) + "/" + config_key(cfg) + "/" + impl.name},
            {"protocol", pname},
            {"config", config_json(cfg)},
            {"implementation", impl.name},
            {"role", impl.role},
            {"backend", backend.name()},
            {"verdict", outcome_name(verdict)},
            {"trials", trial_inputs.size()},
            {"trial_inputs", trial_inputs}};
        if (!failing.is_null()) rec["first_failing_trial"] = failing;
        if (verdict == outcome::error) rec["error"] = error;
        writer.append(std::move(rec));
      }
    }
    meter.done("preset " + std::string(pname) + ": " +
               std::to_string(layernorm_affine_grid().size()) + " configurations x " +
               std::to_string(impls.size()) + " implementations");
  }
}

std::vector<std::string> row_labels(const std::vector<implementation>& impls, bool extra) {
  std::vector<std::string> rows;
  for (const auto& i : impls)
    if ((i.role == "extra_control") == extra) rows.push_back(i.row);
  return rows;
}

std::vector<std::string> regime_labels() {
  std::vector<std::string> cols;
  for (auto r : all_affine_regimes)
    cols.emplace_back(affine_regime_name(r));
  return cols;
}

} // namespace

// What the result records as the audit's configuration.
nlohmann::json audit_config(const audit_request& req, const protocol& checker,
                            const layernorm_backend& backend) {
  return {{"audit", req.name},
          {"backend", backend.describe()},
          {"checker", checker.to_json()},
          {"grid",
           {{"shapes", {{1, 8}, {4, 64}, {4, 127}}},
            {"dtypes", {"float32", "float16"}},
            {"seeds", {7, 42, 2026}},
            {"regimes", regime_labels()},
            {"eps", layernorm_eps},
            {"x", "N(0,1)"},
            {"varied_weight", "1 + 0.1 N(0,1)"},
            {"varied_bias", "0.1 N(0,1)"},
            {"rng", "xoshiro256** seeded by splitmix64(seed, FNV-1a(role)); Box-Muller; values "
                    "drawn in double and rounded once to the dtype"},
            {"planned_observations", 504}}},
          {"presets", [] {
             nlohmann::json p = nlohmann::json::array();
             for (auto n : protocol_names())
               p.push_back(find_protocol(n)->to_json());
             return p;
           }()}};
}

// LibTorch 1.13 has no CPU float16 layer_norm: reruns the float16 half of the grid with the
// normalization done the other way and counts the verdicts that change.
nlohmann::json float16_path_check(const layernorm_backend& backend, const protocol& checker,
                                  const std::vector<implementation>& impls, const grid_run& run) {
  const std::string primary = backend.describe().value("float16_normalization", "");
  const half_norm_path alt = primary == "float64_then_cast" ? half_norm_path::float32_then_cast
                                                            : half_norm_path::float64_then_cast;
  auto alt_backend = make_torch_layernorm_backend(alt);
  grid_run alt_run{outcome_matrix(row_labels(impls, false), regime_labels()),
                   outcome_matrix(row_labels(impls, true), regime_labels()),
                   {}};
  alt_run.matrix.plan_every_cell(9); // the float16 half of the grid
  alt_run.extra.plan_every_cell(9);
  run_grid(*alt_backend, checker, impls, alt_run, nullptr, true);
  int compared = 0, differing = 0;
  nlohmann::json differ_ids = nlohmann::json::array();
  for (const auto& [id, v] : alt_run.verdicts) {
    ++compared;
    if (run.verdicts.at(id) != v) {
      ++differing;
      differ_ids.push_back(id);
    }
  }
  return {{"primary", primary},
          {"alternative", half_norm_path_name(alt)},
          {"float16_observations_compared", compared},
          {"verdicts_differing", differing},
          {"differing_ids", differ_ids}};
}

// Prints the outcome matrix, the extra controls, the parameter-use escape rates with their
// intervals and the presets' table; returns the escape rates as the summary records them.
nlohmann::json print_audit_tables(std::ostream& out, const protocol& checker,
                                  const layernorm_backend& backend, const grid_run& run,
                                  const outcome_matrix& presets, std::size_t grid_size) {
  const std::vector<std::string> preset_cols(protocol_names().begin(), protocol_names().end());
  out << "LayerNorm affine ablation: checker '" << checker.name << "' (" << checker.models
      << "), backend " << backend.name() << "\n";
  out << "Cells count accepted observations of " << grid_size << " configurations.\n\n";
  text_table t({"altered formula", "identity", "weight only", "bias only", "both"});
  for (const auto& r : run.matrix.rows()) {
    if (r == copied_control) t.add_rule();
    std::vector<std::string> row{r};
    for (const auto& c : run.matrix.cols())
      row.push_back(cell_text(run.matrix.cell(r, c)));
    t.add_row(row);
  }
  out << t.render();
  const outcome_counts totals = run.matrix.total();
  const outcome_counts controls = run.matrix.row_total(copied_control);
  out << "Controls: " << controls.accepted << "/" << controls.total() << " accepted.\n";
  out << "Totals: " << totals.accepted << " accepted (" << controls.accepted
      << " controls included), " << totals.rejected << " rejected, " << totals.error << " errors, "
      << totals.missing << " missing (" << totals.total() << " planned).\n\n";

  out << "Extra controls (outside the 504):\n";
  text_table x({"control", "identity", "weight only", "bias only", "both"});
  for (const auto& r : run.extra.rows()) {
    std::vector<std::string> row{r};
    for (const auto& c : run.extra.cols())
      row.push_back(cell_text(run.extra.cell(r, c)));
    x.add_row(row);
  }
  out << x.render() << "\n";

  // Escape rate of the parameter-use family per regime, with exact 95% intervals.
  nlohmann::json family = nlohmann::json::object();
  out << "Parameter-use faults let through (Clopper-Pearson 95%):\n";
  for (const auto& c : run.matrix.cols()) {
    int k = 0, n = 0;
    for (const auto& f : altered_formulas()) {
      const auto& cell = run.matrix.cell(std::string(f.label), c);
      k += cell.accepted;
      n += cell.accepted + cell.rejected;
    }
    const interval ci = clopper_pearson_interval(k, n);
    family[c] = {{"accepted", k}, {"decided", n}, {"ci95", {ci.lo, ci.hi}}};
    out << "  " << std::left << std::setw(12) << c << std::right << k << "/" << n << "  ["
        << percent(ci.lo) << ", " << percent(ci.hi) << "]\n";
  }
  out << "\n";

  out << "Which presets accept each formula (configurations accepted of " << grid_size
      << ", inputs as each preset generates them):\n";
  std::vector<std::string> header{"implementation"};
  for (const auto& c : preset_cols)
    header.push_back(c);
  text_table pt(header);
  for (const auto& r : presets.rows()) {
    if (r == copied_control) pt.add_rule();
    std::vector<std::string> row{r};
    for (const auto& c : preset_cols)
      row.push_back(cell_text(presets.cell(r, c)));
    pt.add_row(row);
  }
  out << pt.render() << "\n";

  return family;
}

int run_layernorm_affine_audit(const audit_request& req, const protocol& checker,
                               std::unique_ptr<layernorm_backend> backend, std::ostream& out,
                               std::ostream& err) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto impls = implementations();
  const auto grid = layernorm_affine_grid();

  const nlohmann::json config = audit_config(req, checker, *backend);

  std::unique_ptr<result_writer> writer;
  try {
    writer =
        std::make_unique<result_writer>(req.out, "audit", req.argv, collect_environment(), config);
  } catch (const output_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }

  grid_run run{outcome_matrix(row_labels(impls, false), regime_labels()),
               outcome_matrix(row_labels(impls, true), regime_labels()),
               {}};
  run.matrix.plan_every_cell(static_cast<int>(grid.size()));
  run.extra.plan_every_cell(static_cast<int>(grid.size()));
  // Progress: each grid configuration, then each preset (the fp16 cross-check is quick).
  progress_meter meter(out, progress_bar_wanted(out, req.no_progress),
                       grid.size() + protocol_names().size());
  run_grid(*backend, checker, impls, run, writer.get(), false, &meter);

  const nlohmann::json half_check = req.backend == "cpu" && !stop_requested()
                                        ? float16_path_check(*backend, checker, impls, run)
                                        : nlohmann::json(nullptr);

  const std::vector<std::string> preset_cols(protocol_names().begin(), protocol_names().end());
  std::vector<std::string> all_rows = row_labels(impls, false);
  for (const auto& r : row_labels(impls, true))
    all_rows.push_back(r);
  outcome_matrix presets(all_rows, preset_cols);
  presets.plan_every_cell(static_cast<int>(grid.size()));
  if (!stop_requested()) run_presets(*backend, impls, presets, *writer, meter);
  meter.finish();

  const nlohmann::json family =
      print_audit_tables(out, checker, *backend, run, presets, grid.size());
  if (!half_check.is_null())
    out << "float16 normalization: " << half_check["primary"].get<std::string>() << "; rerun with "
        << half_check["alternative"].get<std::string>() << ": "
        << half_check["verdicts_differing"].get<int>() << " of "
        << half_check["float16_observations_compared"].get<int>() << " verdicts differ.\n";

  const outcome_counts totals = run.matrix.total();
  const outcome_counts controls = run.matrix.row_total(copied_control);
  const bool interrupted = stop_requested();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const outcome_counts extra_totals = run.extra.total();
  const outcome_counts preset_totals = presets.total();
  nlohmann::json summary = {{"status", interrupted ? "interrupted" : "complete"},
                            {"matrix", run.matrix.to_json()},
                            {"totals", totals.to_json()},
                            {"controls", controls.to_json()},
                            {"extra_controls", run.extra.to_json()},
                            {"extra_control_totals", extra_totals.to_json()},
                            {"family_escape", {{"parameter-use", family}}},
                            {"presets", presets.to_json()},
                            {"float16_path_check", half_check},
                            {"wall_seconds", seconds}};
  std::filesystem::path path;
  try {
    path = writer->finish(summary);
  } catch (const output_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << " (records kept in "
        << (req.out / "records.jsonl").string() << ")\n";
    return exit_code::internal;
  }
  out << "Wrote " << path.string() << " (" << writer->record_count() << " records) in "
      << std::fixed << std::setprecision(2) << seconds << " s.\n";
  if (interrupted) {
    err << "kernelgate: interrupted; the partial result is marked incomplete\n";
    return exit_code::interrupted;
  }
  const bool errors = totals.error + totals.missing + extra_totals.error + extra_totals.missing +
                          preset_totals.error + preset_totals.missing >
                      0;
  return errors ? exit_code::failures : exit_code::ok;
}

} // namespace kg
