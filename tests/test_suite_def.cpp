// The regression suites as data (data/suites, workloads/suite_def.h): nightly.json's 160 workloads
// cover issue 20's matrix and validate, smoke.json's 12 are a subset, every SOL quantity is the
// model's, the run order is a function of the set alone, docs/suites.md carries the generated
// tables, and each kind of bad input is one suite_error naming the file and the problem; then
// `kernelgate suite list|show`.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "cli_run.h"
#include "reports/colocation.h"
#include "scratch_dir.h"

#include "suite/cli.h"
#include "suite/exit_codes.h"
#include "suite/suite_catalog.h"
#include "workloads/qwen3.h"
#include "workloads/suite_def.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

const fs::path suites_dir = fs::path(KG_SOURCE_DIR) / "data" / "suites";

suite_def nightly() {
  static const suite_def s = load_suite_validated("nightly", suites_dir);
  return s;
}

suite_def smoke() {
  return load_suite_validated("smoke", suites_dir);
}

nlohmann::json read_json(const fs::path& f) {
  std::ifstream in(f);
  return nlohmann::json::parse(in);
}

fs::path scratch() {
  return kg::test::scratch_dir("suite-def");
}
using kg::test::slurp;

fs::path write_text(const std::string& name, const std::string& text) {
  const fs::path f = scratch() / name;
  std::ofstream(f) << text;
  return f;
}

fs::path write_doc(const std::string& name, const nlohmann::json& doc) {
  return write_text(name, doc.dump(1));
}

// The message load_suite_validated throws for `file`, or "" when it loads.
std::string error_of(const fs::path& file) {
  try {
    (void)load_suite_validated(file.string(), suites_dir);
  } catch (const suite_error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::int64_t p(const suite_workload& w, const char* key) {
  return w.params.at(key).get<std::int64_t>();
}

std::string s(const suite_workload& w, const char* key) {
  return w.params.at(key).get<std::string>();
}

// What a workload covers: its kind and the parameters the issue's matrix varies.
std::string coverage_key(const suite_workload& w) {
  const std::string k = w.kind;
  if (k == "gemv") return k + " " + s(w, "projection") + " b" + std::to_string(p(w, "batch"));
  if (k == "attention" || k == "decode_step") {
    std::string key =
        k + " b" + std::to_string(p(w, "batch")) + " ctx" + std::to_string(p(w, "context"));
    return k == "decode_step" ? key + " " + s(w, "placement") : key;
  }
  if (k == "lora_gemm") return k + " " + s(w, "op") + " seq" + std::to_string(p(w, "seq"));
  if (k == "serving_throughput" || k == "serving_p99")
    return k + " " + s(w, "request_mix") + " " + s(w, "context_band") + " " + s(w, "tenant");
  if (k == "lora_training")
    return k + " jobs" + std::to_string(p(w, "jobs")) + " " + s(w, "placement");
  return k + " b" + std::to_string(p(w, "batch")); // the row kernels
}

// Issue 20's matrix, as the contract composes it.
std::multiset<std::string> expected_coverage() {
  std::multiset<std::string> want;
  for (const char* proj : {"qkv", "o_proj", "gate_up", "down", "lm_head"})
    for (int b : {1, 2, 4, 8, 16, 32})
      want.insert(std::string("gemv ") + proj + " b" + std::to_string(b));
  for (int b : {1, 8, 32})
    for (int c : {512, 2048, 8192})
      want.insert("attention b" + std::to_string(b) + " ctx" + std::to_string(c));
  for (const char* kind : {"rmsnorm", "add_rmsnorm", "qk_norm_rope", "silu_mul", "argmax"})
    for (int b : {1, 8, 32})
      want.insert(std::string(kind) + " b" + std::to_string(b));
  for (int b : {1, 32})
    want.insert("embedding b" + std::to_string(b));
  for (const char* op :
       {"q_base_fwd", "v_base_fwd", "lora_a_fwd", "lora_b_fwd", "lora_a_grad", "lora_b_grad"})
    want.insert(std::string("lora_gemm ") + op + " seq2048");
  for (int b : {1, 4, 8, 32})
    for (int c : {512, 2048, 8192})
      for (const char* where : {"solo", "colocated"})
        want.insert("decode_step b" + std::to_string(b) + " ctx" + std::to_string(c) + " " + where);
  const std::vector<std::string> mixes = {"all1", "all8", "production"},
                                 bands = {"512-2048", "2048-8192", "log512-8192"};
  for (const char* kind : {"serving_throughput", "serving_p99"}) {
    for (const auto& m : mixes)
      for (const auto& b : bands)
        want.insert(std::string(kind) + " " + m + " " + b + " solo");
    for (const char* tenant : {"partition", "hog", "lora1", "lora4", "lora16"}) {
      for (const auto& b : bands)
        want.insert(std::string(kind) + " production " + b + " " + tenant);
      for (const char* m : {"all1", "all8"})
        want.insert(std::string(kind) + " " + m + " log512-8192 " + tenant);
    }
  }
  for (int jobs : {1, 4, 16})
    for (const char* where : {"solo", "beside_decode"})
      want.insert("lora_training jobs" + std::to_string(jobs) + " " + where);
  return want;
}

std::vector<std::string> ids_of(const std::vector<suite_workload>& w) {
  std::vector<std::string> ids;
  for (const auto& x : w)
    ids.push_back(x.id);
  return ids;
}

} // namespace

TEST(suite_def, nightly_has_160_unique_ids_and_validates) {
  EXPECT_TRUE(validate_suite_document(read_json(suites_dir / "nightly.json")).empty());
  const auto n = nightly();
  EXPECT_EQ(n.name, "nightly");
  ASSERT_EQ(n.workloads.size(), 160u);
  const auto ids = ids_of(n.workloads);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 160u);
  std::map<std::string, int> per_level;
  for (const auto& w : n.workloads)
    ++per_level[w.level];
  EXPECT_EQ(per_level, (std::map<std::string, int>{
                           {"kernel", 62}, {"step", 24}, {"serving", 68}, {"training", 6}}));
}

TEST(suite_def, smoke_selects_12_of_nightly_and_validates) {
  EXPECT_TRUE(validate_suite_document(read_json(suites_dir / "smoke.json")).empty());
  const auto sm = smoke();
  ASSERT_EQ(sm.workloads.size(), 12u);
  ASSERT_EQ(sm.files.size(), 2u);
  EXPECT_EQ(fs::path(sm.files[1]).filename(), "nightly.json");
  std::map<std::string, nlohmann::json> base;
  for (const auto& w : nightly().workloads)
    base[w.id] = suite_workload_json(w);
  std::set<std::string> levels;
  for (const auto& w : sm.workloads) {
    ASSERT_TRUE(base.count(w.id)) << w.id;
    EXPECT_EQ(suite_workload_json(w), base[w.id]) << w.id; // the base's workload, unchanged
    levels.insert(w.level);
  }
  EXPECT_EQ(levels.size(), 4u) << "smoke has every level";
}

// Every workload placed beside something has its solo twin in the nightly suite, so a full run
// reports each as a fraction of solo (reports/colocation.h): records made from the suite's
// workloads, two samples each, pair 65 of 65 and leave no gap.
TEST(suite_def, every_workload_beside_others_has_a_solo_twin_in_nightly) {
  const auto s = load_suite_validated("nightly", suites_dir);
  std::vector<nlohmann::json> records;
  int beside = 0;
  for (const auto& w : s.workloads) {
    records.push_back(
        {{"type", "suite_workload"},
         {"id", w.id},
         {"kind", w.kind},
         {"params", w.params},
         {"metric",
          {{"name", w.metric.name}, {"direction", w.metric.direction}, {"unit", w.metric.unit}}},
         {"samples", {1.0, 2.0}}});
    for (const char* k : {"placement", "tenant"})
      if (w.params.contains(k)) {
        beside += w.params[k] != "solo";
        break;
      }
  }
  const auto r = colocation_fractions(records);
  EXPECT_EQ(beside, 65); // 12 co-located steps, 50 serving workloads beside others, 3 training
  EXPECT_EQ(static_cast<int>(r.pairs.size()), beside);
  for (const auto& g : r.gaps)
    ADD_FAILURE() << g.id << ": " << g.reason;
}

TEST(suite_def, nightly_covers_the_issues_matrix) {
  std::multiset<std::string> got;
  for (const auto& w : nightly().workloads)
    got.insert(coverage_key(w));
  EXPECT_EQ(got, expected_coverage());
}

TEST(suite_def, each_level_has_its_metric_gates_setup_and_roles) {
  const std::set<std::string> decode_roles = {
      "gemv.qkv", "gemv.o_proj",  "gemv.gate_up", "gemv.down", "gemv.lm_head", "attention",
      "rmsnorm",  "qk_norm_rope", "silu_mul",     "argmax",    "embedding"};
  auto role_names = [](const suite_workload& w) {
    std::set<std::string> r;
    for (const auto& [role, impl] : w.roles)
      r.insert(role);
    return r;
  };
  for (const auto& w : nightly().workloads) {
    EXPECT_GT(w.cost_seconds, 0) << w.id;
    EXPECT_FALSE(w.roles.empty()) << w.id;
    if (w.level == "kernel") {
      EXPECT_EQ(w.metric.name, "kernel_seconds") << w.id;
      EXPECT_EQ(w.gates, std::vector<std::string>{"oracle_fp64"}) << w.id;
      EXPECT_EQ(w.setup, "kernels") << w.id;
      EXPECT_TRUE(w.sol.has_value()) << w.id;
      if (w.kind == "gemv") {
        EXPECT_EQ(role_names(w), std::set<std::string>{"gemv." + s(w, "projection")});
      }
    } else if (w.kind == "decode_step") {
      const bool solo = s(w, "placement") == "solo";
      EXPECT_EQ(w.setup, solo ? "engine.whole" : "engine.partition.lora1") << w.id;
      const bool bit_identical =
          std::count(w.gates.begin(), w.gates.end(), "logits_bit_identical_to_solo") == 1;
      EXPECT_EQ(bit_identical, !solo) << w.id;
      EXPECT_EQ(std::count(w.gates.begin(), w.gates.end(), "logits_finite"), 1) << w.id;
      EXPECT_EQ(role_names(w), decode_roles) << w.id;
    } else if (w.level == "serving") {
      EXPECT_FALSE(w.sol.has_value()) << w.id;
      EXPECT_EQ(p(w, "itl_limit_ms"), 50) << w.id;
      const bool throughput = w.kind == "serving_throughput";
      EXPECT_EQ(w.metric.name, throughput ? "tokens_per_second" : "p99_itl_ms") << w.id;
      EXPECT_EQ(w.metric.direction, throughput ? "higher" : "lower") << w.id;
      EXPECT_EQ(w.params.contains("offered_sequences_per_second"), !throughput) << w.id;
      // Real prefill: the decode roles and the prefill's, chunks the serving engine can take.
      auto serving_roles = decode_roles;
      serving_roles.insert({"prefill.attention", "prefill.gemm"});
      EXPECT_EQ(role_names(w), serving_roles) << w.id;
      EXPECT_GE(p(w, "prefill_chunk_tokens"), 1) << w.id;
      EXPECT_LE(p(w, "prefill_chunk_tokens"), 2048) << w.id;
    } else {
      ASSERT_EQ(w.kind, "lora_training");
      EXPECT_EQ(w.gates, (std::vector<std::string>{"loss_rel_1e-3_vs_reference",
                                                   "params_grads_rel_1e-2_vs_reference",
                                                   "bf16_step_vs_fp32", "losses_finite"}))
          << w.id;
      EXPECT_EQ(w.setup, s(w, "placement") == "solo"
                             ? "training.whole"
                             : "engine.partition.lora" + std::to_string(p(w, "jobs")))
          << w.id;
    }
  }
}

TEST(suite_def, sol_quantities_are_the_models_rooflines) {
  const qwen3_config c;
  int checked = 0;
  for (const auto& w : nightly().workloads) {
    if (!w.sol) continue;
    const auto& sol = *w.sol;
    EXPECT_EQ(sol.ceiling, sol.bound == "bytes" ? "copy_bandwidth" : "bf16_dense_peak") << w.id;
    EXPECT_FALSE(sol.note.empty()) << w.id;
    std::optional<double> want;
    if (w.kind == "gemv") {
      for (const auto& g : decode_gemms(c))
        if (g.name == s(w, "projection")) want = gemm_roofline(g, p(w, "batch")).bytes;
    } else if (w.kind == "attention") {
      want = attention_roofline(p(w, "batch"), p(w, "context")).bytes;
    } else if (w.kind == "decode_step") {
      want = decode_step_roofline(p(w, "batch"), p(w, "context")).bytes;
    }
    if (want) {
      EXPECT_EQ(sol.bound, "bytes") << w.id;
      EXPECT_DOUBLE_EQ(sol.quantity, *want) << w.id;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 30 + 9 + 24);
  // The lm_head GEMV at batch 8: weight 151936 x 2560 plus x and y, bf16.
  for (const auto& w : nightly().workloads)
    if (w.id == "kernel.gemv.lm_head.b8") {
      EXPECT_DOUBLE_EQ(w.sol->quantity, 2.0 * (151936.0 * 2560 + 8 * 2560 + 8 * 151936));
    }
}

TEST(suite_def, the_other_kernels_bounds_count_their_bytes_or_flops) {
  const double hidden = 2560, inter = 9728, vocab = 151936;
  for (const auto& w : nightly().workloads) {
    const double b = w.params.value("batch", 0.0);
    std::optional<double> want;
    if (w.kind == "rmsnorm") want = 2 * (2 * b * hidden + hidden);
    if (w.kind == "add_rmsnorm") want = 2 * (4 * b * hidden + hidden);
    if (w.kind == "silu_mul") want = 2 * 3 * b * inter;
    if (w.kind == "argmax") want = 2 * b * vocab + 4 * b;
    if (w.kind == "embedding") want = 2 * 2 * b * hidden;
    if (w.kind == "qk_norm_rope") // q, k in and out; v in; k, v appended; two norm weights
      want = 2 * (2 * b * 40 * 128 + b * 8 * 128 + 2 * b * 8 * 128 + 2 * 128);
    if (w.kind == "lora_gemm") {
      const double m = p(w, "m"), n = p(w, "n"), k = p(w, "k");
      const bool skinny = std::min({m, n, k}) == 8;
      EXPECT_EQ(w.sol->bound, skinny ? "bytes" : "flops") << w.id;
      want = skinny ? 2 * (m * k + k * n + m * n) : 2 * m * n * k;
    }
    if (want) {
      EXPECT_DOUBLE_EQ(w.sol->quantity, *want) << w.id;
    }
  }
}

TEST(suite_def, run_order_ignores_input_order_and_groups_by_setup) {
  const auto ordered = order_for_run(nightly().workloads);
  std::mt19937 rng(20261201);
  for (int k = 0; k < 5; ++k) {
    auto shuffled = nightly().workloads;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    EXPECT_EQ(ids_of(order_for_run(shuffled)), ids_of(ordered));
  }
  // Set-up groups in the fixed order, each one contiguous, ids in natural order within.
  std::set<std::string> finished;
  for (std::size_t k = 1; k < ordered.size(); ++k) {
    const auto &a = ordered[k - 1], &b = ordered[k];
    EXPECT_LE(setup_rank(a.setup), setup_rank(b.setup)) << a.id << " then " << b.id;
    if (a.setup != b.setup) {
      EXPECT_TRUE(finished.insert(a.setup).second) << a.setup << " comes back";
    } else {
      EXPECT_TRUE(natural_id_less(a.id, b.id)) << a.id << " then " << b.id;
    }
  }
  EXPECT_EQ(ordered.front().id, "kernel.add_rmsnorm.b1");
  EXPECT_EQ(ordered.back().id, "training.lora.jobs16.solo");
  const auto ids = ids_of(ordered);
  const auto at = [&](const std::string& id) { return std::find(ids.begin(), ids.end(), id); };
  EXPECT_LT(at("kernel.gemv.qkv.b2"), at("kernel.gemv.qkv.b16")) << "numbers in natural order";
  EXPECT_EQ(suite_setup_order().size(), 8u);
  EXPECT_EQ(setup_rank("no.such.setup"), 8u);
}

TEST(suite_def, natural_id_order_is_strict_and_total) {
  EXPECT_TRUE(natural_id_less("a.b2", "a.b16"));
  EXPECT_FALSE(natural_id_less("a.b16", "a.b2"));
  EXPECT_TRUE(natural_id_less("a.b", "a.b1"));
  EXPECT_TRUE(natural_id_less("a.b01", "a.b1")); // equal numbers: by bytes
  EXPECT_FALSE(natural_id_less("a.b1", "a.b1"));
  EXPECT_TRUE(natural_id_less("x.1", "x.a")); // digits before letters, as in bytes
}

TEST(suite_def, filter_keeps_the_ids_a_regex_finds) {
  const auto all = nightly().workloads;
  EXPECT_EQ(filter_workloads(all, "^kernel\\.gemv\\.down\\.").size(), 6u);
  EXPECT_EQ(filter_workloads(all, "lora16").size(), 10u) << "serving beside 16 jobs";
  EXPECT_EQ(filter_workloads(all, "jobs16").size(), 2u);
  EXPECT_EQ(filter_workloads(all, "").size(), 160u);
  EXPECT_TRUE(filter_workloads(all, "^nothing$").empty());
  try {
    (void)filter_workloads(all, "kernel.(gemv");
    ADD_FAILURE() << "a bad regex was accepted";
  } catch (const suite_error& e) {
    EXPECT_TRUE(has(e.what(), "bad workload filter 'kernel.(gemv'")) << e.what();
  }
}

TEST(suite_def, json_form_round_trips_and_validates) {
  const auto n = nightly();
  const auto doc = suite_json(n);
  EXPECT_TRUE(validate_suite_document(doc).empty());
  EXPECT_EQ(doc, read_json(suites_dir / "nightly.json")); // the file, field for field
  const auto again = load_suite_validated(write_doc("round_trip.json", doc).string(), suites_dir);
  EXPECT_EQ(suite_json(again), doc);
}

TEST(suite_def, docs_carry_the_generated_tables) {
  const std::string doc = slurp(fs::path(KG_SOURCE_DIR) / "docs" / "suites.md");
  for (const char* name : {"nightly", "smoke"}) {
    const std::string head =
        std::string("<!-- kernelgate suite show ") + name + " --markdown -->\n";
    const auto at = doc.find(head);
    ASSERT_NE(at, std::string::npos) << "docs/suites.md has no block " << head;
    const auto end = doc.find("<!-- end -->", at);
    ASSERT_NE(end, std::string::npos);
    const std::string block = doc.substr(at + head.size(), end - at - head.size());
    EXPECT_EQ(block, suite_markdown_table(load_suite_validated(name, suites_dir)))
        << "docs/suites.md's table of '" << name
        << "' differs from data/suites: scripts/suite_docs.sh build/suite/kernelgate rewrites it";
  }
}

TEST(suite_def, markdown_table_lists_the_workloads_in_run_order) {
  const auto table = suite_markdown_table(smoke());
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2 + 12 + 2);
  EXPECT_TRUE(has(table, "| 1 | `kernel.add_rmsnorm.b8` | kernel | kernels | kernel_seconds (s, "
                         "lower) | 169 kB / copy_bandwidth | oracle_fp64 | 1 |"))
      << table;
  // 7 kernels x 1 s + 3 steps x 2 s + a serving p99 x 5 s + a training step x 10 s = 28 s.
  EXPECT_TRUE(has(table, "\n12 workloads, about 28 s (0.5 min)")) << table;
}

// --- bad input: one suite_error naming the file and the problem ---

TEST(suite_def, malformed_json_names_line_and_column) {
  const auto f = write_text("malformed.json", "{\n  \"schema\": \"kernelgate.suite/1\",\n  "
                                              "\"name\": ,\n}\n");
  const auto e = error_of(f);
  EXPECT_TRUE(has(e, f.string())) << e;
  EXPECT_TRUE(has(e, "malformed JSON")) << e;
  EXPECT_TRUE(has(e, "line 3, column")) << e;
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 0) << e;
}

TEST(suite_def, a_schema_violation_names_the_pointer) {
  auto doc = read_json(suites_dir / "nightly.json");
  doc["workloads"][3]["level"] = "kernal";
  const auto f = write_doc("bad_level.json", doc);
  const auto e = error_of(f);
  EXPECT_TRUE(has(e, f.string())) << e;
  EXPECT_TRUE(has(e, "/workloads/3/level")) << e;

  doc = read_json(suites_dir / "nightly.json");
  doc["workloads"][0]["params"]["projection"] = "q_proj";
  EXPECT_TRUE(has(error_of(write_doc("bad_projection.json", doc)), "/workloads/0/params"));

  doc = read_json(suites_dir / "nightly.json");
  doc["base"] = "nightly.json"; // both forms at once
  EXPECT_TRUE(has(error_of(write_doc("both_forms.json", doc)), "not a kernelgate.suite/1 file"));
}

TEST(suite_def, a_duplicate_id_is_named) {
  auto doc = read_json(suites_dir / "nightly.json");
  doc["workloads"][5]["id"] = doc["workloads"][4]["id"];
  const auto e = error_of(write_doc("duplicate.json", doc));
  EXPECT_TRUE(has(e, "duplicate.json: /workloads/5/id: duplicate workload id "
                     "'kernel.gemv.qkv.b16' (also /workloads/4)"))
      << e;
}

TEST(suite_def, an_unknown_select_id_is_named) {
  fs::copy_file(suites_dir / "nightly.json", scratch() / "nightly.json",
                fs::copy_options::overwrite_existing);
  auto doc = read_json(suites_dir / "smoke.json");
  doc["select"][2] = "kernel.gemv.nope.b1";
  const auto f = write_doc("smoke.json", doc);
  const auto e = error_of(f);
  EXPECT_TRUE(has(e, f.string() + ": /select/2: unknown workload id 'kernel.gemv.nope.b1' in "
                                  "smoke.json"))
      << e;

  doc = read_json(suites_dir / "smoke.json");
  doc["select"][3] = doc["select"][0];
  EXPECT_TRUE(has(error_of(write_doc("twice.json", doc)), "is selected twice"));
}

TEST(suite_def, a_base_is_one_level_deep) {
  fs::copy_file(suites_dir / "nightly.json", scratch() / "nightly.json",
                fs::copy_options::overwrite_existing);
  write_doc("smoke_base.json", read_json(suites_dir / "smoke.json"));
  auto doc = read_json(suites_dir / "smoke.json");
  doc["base"] = "smoke_base.json";
  const auto e = error_of(write_doc("smoke_of_smoke.json", doc));
  EXPECT_TRUE(has(e, "smoke_of_smoke.json: /base: 'smoke_base.json' itself has a base")) << e;
}

TEST(suite_def, missing_files_and_unknown_names_are_named) {
  const auto absent = scratch() / "absent.json";
  auto e = error_of(absent);
  EXPECT_EQ(e, absent.string() + ": no such file");

  auto doc = read_json(suites_dir / "smoke.json");
  doc["base"] = "gone.json";
  e = error_of(write_doc("orphan.json", doc));
  EXPECT_TRUE(has(e, "orphan.json: /base: 'gone.json': no such file")) << e;

  try {
    (void)load_suite_validated("nightlyy", suites_dir);
    ADD_FAILURE() << "an unknown suite name loaded";
  } catch (const suite_error& x) {
    EXPECT_TRUE(has(x.what(), "unknown suite 'nightlyy'")) << x.what();
    EXPECT_TRUE(has(x.what(), "nightly, smoke")) << x.what();
  }
  EXPECT_TRUE(has(error_of(scratch()), "not a regular file"));
}

TEST(suite_def, params_that_are_not_the_models_are_refused) {
  auto doc = read_json(suites_dir / "nightly.json");
  doc["workloads"][0]["params"]["n"] = 6145;
  auto e = error_of(write_doc("bad_n.json", doc));
  EXPECT_TRUE(has(e, "/workloads/0/params: gemv 'qkv' is 6144x2560 in Qwen3-4B, not 6145x2560"))
      << e;

  const auto index_of = [&](const std::string& id) {
    for (std::size_t k = 0; k < doc["workloads"].size(); ++k)
      if (doc["workloads"][k]["id"] == id) return k;
    return std::size_t{0};
  };
  doc = read_json(suites_dir / "nightly.json");
  const auto colocated = index_of("step.decode.colocated.b8.ctx2048");
  doc["workloads"][colocated]["setup"] = "engine.whole";
  e = error_of(write_doc("bad_setup.json", doc));
  EXPECT_TRUE(has(e, "/workloads/" + std::to_string(colocated) + "/setup")) << e;

  doc = read_json(suites_dir / "nightly.json");
  const auto step = index_of("step.decode.solo.b1.ctx2048");
  doc["workloads"][step]["sol"]["quantity"] = 8e9;
  e = error_of(write_doc("bad_sol.json", doc));
  EXPECT_TRUE(has(e, "/workloads/" + std::to_string(step) +
                         "/sol/quantity: 8000000000 is not "
                         "workloads/qwen3.h's"))
      << e;

  doc = read_json(suites_dir / "nightly.json");
  const auto lora = index_of("kernel.lora_gemm.lora_b_grad");
  doc["workloads"][lora]["params"]["rank"] = 16;
  EXPECT_TRUE(has(error_of(write_doc("bad_rank.json", doc)), "lora_gemm 'lora_b_grad'"));

  doc = read_json(suites_dir / "nightly.json");
  const auto jobs = index_of("training.lora.jobs4.beside_decode");
  doc["workloads"][jobs]["params"]["jobs"] = 3;
  e = error_of(write_doc("bad_jobs.json", doc));
  EXPECT_TRUE(has(e, "no partition set-up runs 3 training jobs")) << e;
}

TEST(suite_def, without_a_validator_wrong_types_are_still_one_line) {
  auto doc = read_json(suites_dir / "nightly.json");
  doc["workloads"][7]["gates"] = "oracle_fp64";
  const auto f = write_doc("unvalidated.json", doc);
  try {
    (void)load_suite(f.string(), suites_dir);
    ADD_FAILURE() << "a string of gates loaded";
  } catch (const suite_error& e) {
    EXPECT_TRUE(has(e.what(), "unvalidated.json: /workloads/7: unusable workload")) << e.what();
  }
}

// --- kernelgate suite list|show ---

namespace {
using cli_result = kg::test::run_result;
cli_result kernelgate(std::vector<std::string> args) {
  return kg::test::run(std::move(args));
}
} // namespace

TEST(suite_cli, list_counts_each_suites_workloads) {
  const auto r = kernelgate({"suite", "list"});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  // 62 x 1 + 24 x 2 + 34 x 12 + 34 x 5 + 6 x 10 = 748 s (scripts/make_suites.py's COST).
  EXPECT_TRUE(has(r.out, "  nightly   160 workloads  about  12.5 min")) << r.out;
  EXPECT_TRUE(has(r.out, "  smoke      12 workloads  about   0.5 min")) << r.out;
}

TEST(suite_cli, show_prints_the_workloads_in_run_order) {
  const auto r = kernelgate({"suite", "show", "smoke"});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  const auto ids = ids_of(order_for_run(smoke().workloads));
  std::size_t at = 0;
  for (const auto& id : ids) {
    const auto next = r.out.find("\n" + id + " ", at);
    ASSERT_NE(next, std::string::npos) << id << " missing or out of order:\n" << r.out;
    at = next;
  }
  EXPECT_TRUE(has(r.out, "12 workloads in run order, about 28 s")) << r.out;

  const auto filtered = kernelgate({"suite", "show", "nightly", "--filter", "gemv\\.down"});
  EXPECT_TRUE(has(filtered.out, "6 of 160 workloads")) << filtered.out;
}

TEST(suite_cli, show_markdown_and_json_are_the_libraries_forms) {
  const auto md = kernelgate({"suite", "show", "smoke", "--markdown"});
  ASSERT_EQ(md.rc, exit_code::ok) << md.err;
  auto sm = smoke();
  sm.workloads = order_for_run(sm.workloads);
  EXPECT_EQ(md.out, suite_markdown_table(sm));
  const auto js = kernelgate({"suite", "show", "smoke", "--json"});
  ASSERT_EQ(js.rc, exit_code::ok) << js.err;
  const auto doc = nlohmann::json::parse(js.out);
  EXPECT_TRUE(validate_suite_document(doc).empty());
  EXPECT_EQ(doc, suite_json(sm));
}

TEST(suite_cli, bad_input_is_one_line_and_exit_2) {
  const auto malformed = write_text("cli_malformed.json", "{ \"schema\": ");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"suite", "show", "nope"},
           {"suite", "show", malformed.string()},
           {"suite", "show", "smoke", "--filter", "("},
           {"suite", "show", "smoke", "--filter", "^no-such-workload$"},
           {"suite", "show", "smoke", "--markdown", "--json"},
           {"suite", "show"},
           {"suite"}}) {
    const auto r = kernelgate(args);
    EXPECT_EQ(r.rc, exit_code::bad_input) << args.back() << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("kernelgate: ", 0), 0u) << r.err;
  }
  EXPECT_TRUE(has(kernelgate({"suite", "show", "nope"}).err, "unknown suite 'nope'"));
}
