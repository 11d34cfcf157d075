// Batched compiles (sandbox/candidate_batch.h): the translation unit a batch makes, and nvcc over
// it -- each member's entry point under its own symbol, a member that does not compile falling
// back to a call of its own without costing the others, and sources that cannot share a unit
// compiled alone.
#include <dlfcn.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reports/remove_tree.h"
#include "sandbox/candidate_batch.h"
#include "scratch_dir.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

std::string kernel(const std::string& factor, const std::string& extra = "") {
  return "#include \"kg_candidate.h\"\n" + extra + "#define FACTOR " + factor +
         "\n"
         "__global__ void scale(float* y, long n) {\n"
         "  long i = blockIdx.x * 256L + threadIdx.x;\n"
         "  if (i < n) y[i] *= FACTOR;\n"
         "}\n"
         "extern \"C\" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out,\n"
         "                        cudaStream_t s) {\n"
         "  scale<<<1, 256, 0, s>>>((float*)out[0].data, out[0].shape[0]);\n"
         "  return 0;\n"
         "}\n";
}

constexpr std::size_t npos_group = static_cast<std::size_t>(-1);

} // namespace

TEST(candidate_batch, members_get_namespaces_renamed_entries_and_their_macros_undefined) {
  const auto tu = batch_translation_unit({kernel("2.0f"), kernel("3.0f")});
  ASSERT_TRUE(tu);
  // One #include, hoisted; each member's kg_run renamed and FACTOR undefined after it.
  EXPECT_EQ(tu->find("#include \"kg_candidate.h\""), tu->rfind("#include \"kg_candidate.h\""));
  for (const char* want : {"#define kg_run kg_run_0\nnamespace kg_batch_0 {",
                           "#define kg_run kg_run_1\nnamespace "
                           "kg_batch_1 {",
                           "} // namespace kg_batch_0\n#undef kg_run\n#undef FACTOR\n"})
    EXPECT_NE(tu->find(want), std::string::npos) << want << "\n" << *tu;
  std::string why;
  EXPECT_FALSE(batch_translation_unit({kernel("2.0f"), "#define X 1\n#include <cmath>\n"}, &why));
  EXPECT_NE(why.find("before an #include"), std::string::npos) << why;
  EXPECT_FALSE(
      batch_translation_unit({kernel("2.0f"), "#include <cmath>\n" + kernel("1.0f")}, &why));
  EXPECT_NE(why.find("differ"), std::string::npos) << why;
}

TEST(candidate_batch, a_broken_member_is_compiled_alone_and_the_others_share_one_object) {
  const auto dir = kg::test::scratch_dir("candidate-batch") / "batch";
  fs::create_directories(dir);
  std::vector<fs::path> group;
  const std::vector<std::string> texts = {kernel("2.0f"), kernel("3.0f"), kernel("2.0f +"),
                                          kernel("4.0f")};
  for (std::size_t i = 0; i < texts.size(); ++i) {
    group.push_back(dir / ("m" + std::to_string(i) + ".cu"));
    std::ofstream(group.back()) << texts[i];
  }
  // A fifth source that cannot share the unit (a directive before its #include).
  group.push_back(dir / "m4.cu");
  std::ofstream(group.back()) << "#define EARLY 1\n" << kernel("5.0f");
  compile_options opt;
  opt.cache_dir = dir / "cache";
  // Batches of 4: {m0..m3} fails (m2), so all four are compiled alone; then {m4} alone. A second
  // group without the broken one shares one object.
  std::vector<fs::path> good = {group[0], group[1], group[3]};
  const auto r = compile_in_batches({group, good}, dir / "batches", opt, 4);
  ASSERT_EQ(r.size(), 8u);
  for (const std::size_t i : {0u, 1u, 3u, 4u}) {
    EXPECT_TRUE(r[i].ok) << i << r[i].log;
    EXPECT_EQ(r[i].symbol, "kg_run") << i;
  }
  EXPECT_FALSE(r[2].ok);
  for (std::size_t j = 5; j < 8; ++j) {
    ASSERT_TRUE(r[j].ok) << r[j].log;
    EXPECT_EQ(r[j].shared_object, r[5].shared_object);
    EXPECT_EQ(r[j].symbol, "kg_run_" + std::to_string(j - 5));
    EXPECT_EQ(r[j].source, good[j - 5]);
  }
  void* h = ::dlopen(r[5].shared_object.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  for (const char* s : {"kg_run_0", "kg_run_1", "kg_run_2"})
    EXPECT_NE(::dlsym(h, s), nullptr) << s;
  EXPECT_EQ(::dlsym(h, "kg_run"), nullptr);
  ::dlclose(h);
}

TEST(candidate_batch, one_queue_sources_alone_first_then_batches_largest_first_then_fallbacks) {
  const auto dir = kg::test::scratch_dir("candidate-batch") / "queue";
  fs::create_directories(dir);
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  // Flat order: a (alone), b0 b1 (a batch of two), c0 c1 c2 (a batch of three, c1 broken), d.
  const std::vector<std::vector<fs::path>> groups = {
      {file("a.cu", kernel("6.0f"))},
      {file("b0.cu", kernel("7.0f")), file("b1.cu", kernel("8.0f"))},
      {file("c0.cu", kernel("9.0f")), file("c1.cu", kernel("9.0f +")),
       file("c2.cu", kernel("10.0f"))},
      {file("d.cu", kernel("11.0f"))}};
  compile_options opt;
  opt.cache_dir = dir / "cache";
  opt.jobs = 1; // one thread: the callback's order is the queue's
  std::vector<std::size_t> order;
  std::vector<std::string> symbols(7);
  const auto r = compile_in_batches(groups, dir / "batches", opt, 4,
                                    [&](std::size_t i, const compile_result& c) {
                                      order.push_back(i);
                                      symbols.at(i) = c.symbol;
                                    });
  ASSERT_EQ(r.size(), 7u);
  // The sources alone (the audit's controls) first; the batch of three before the batch of two;
  // the failed batch's members at once, each alone, before the next batch.
  EXPECT_EQ(order, (std::vector<std::size_t>{0, 6, 3, 4, 5, 1, 2}));
  const std::vector<std::string> names = {"a.cu",  "b0.cu", "b1.cu", "c0.cu",
                                          "c1.cu", "c2.cu", "d.cu"};
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].source, dir / names[i]) << i;
    EXPECT_EQ(r[i].symbol, symbols[i]) << i;
    EXPECT_EQ(r[i].ok, i != 4) << i << r[i].log;
  }
  for (const std::size_t i : {0u, 3u, 5u, 6u})
    EXPECT_EQ(r[i].symbol, "kg_run") << i;
  EXPECT_NE(r[3].shared_object, r[5].shared_object);
  EXPECT_EQ(r[1].shared_object, r[2].shared_object);
  EXPECT_EQ(r[1].symbol, "kg_run_0");
  EXPECT_EQ(r[2].symbol, "kg_run_1");
  // Again on two threads, from the cache: the same results, each callback once.
  opt.jobs = 2;
  std::atomic<int> calls{0};
  const auto again = compile_in_batches(groups, dir / "batches", opt, 4,
                                        [&](std::size_t, const compile_result&) { ++calls; });
  EXPECT_EQ(calls, 7);
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(again[i].ok, r[i].ok) << i;
    EXPECT_EQ(again[i].symbol, r[i].symbol) << i;
    EXPECT_EQ(again[i].shared_object, r[i].shared_object) << i;
  }
}

TEST(candidate_batch, as_given_keeps_the_groups_order_and_a_cancel_starts_nothing_more) {
  const auto dir = kg::test::scratch_dir("candidate-batch") / "as-given";
  fs::create_directories(dir);
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  // Flat order: b0 b1 (a batch), a (alone), c0 c1 c2 (a batch, c1 broken), d (alone).
  const std::vector<std::vector<fs::path>> groups = {
      {file("b0.cu", kernel("12.0f")), file("b1.cu", kernel("13.0f"))},
      {file("a.cu", kernel("14.0f"))},
      {file("c0.cu", kernel("15.0f")), file("c1.cu", kernel("15.0f +")),
       file("c2.cu", kernel("16.0f"))},
      {file("d.cu", kernel("17.0f"))}};
  compile_options opt;
  opt.cache_dir = dir / "cache";
  opt.jobs = 1;
  batch_options bo;
  bo.batch_size = 4;
  bo.as_given = true;
  std::vector<std::size_t> order;
  bo.on_compiled = [&](std::size_t i, const compile_result&) { order.push_back(i); };
  const auto r = compile_in_batches(groups, dir / "batches", opt, bo);
  // The groups in order; the failed batch's members alone, before the group after it.
  EXPECT_EQ(order, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(r.size(), 7u);
  for (std::size_t i = 0; i < r.size(); ++i)
    EXPECT_EQ(r[i].ok, i != 4) << i << r[i].log;
  EXPECT_EQ(r[1].symbol, "kg_run_1");
  EXPECT_EQ(r[3].symbol, "kg_run");
  // Cancelled at the first result: no other job starts; the others' results stay empty.
  std::atomic<bool> cancel{false};
  bo.cancel = &cancel;
  order.clear();
  bo.on_compiled = [&](std::size_t i, const compile_result&) {
    order.push_back(i);
    cancel = true;
  };
  const auto cut = compile_in_batches(groups, dir / "batches", opt, bo);
  EXPECT_EQ(order, (std::vector<std::size_t>{0, 1})); // (the batch's members come together)
  ASSERT_EQ(cut.size(), 7u);
  EXPECT_TRUE(cut[0].ok && cut[1].ok);
  for (std::size_t i = 2; i < cut.size(); ++i) {
    EXPECT_FALSE(cut[i].ok) << i;
    EXPECT_TRUE(cut[i].key.empty()) << i;
  }
}

TEST(candidate_batch, a_probe_sizes_its_groups_batches_by_what_one_compile_costs) {
  // By hand: members past the first fit (batch_seconds - probe) / (probe - cheapest).
  EXPECT_EQ(probed_batch_size(21, 2.5, 40, 24), 2u);   // sdpa_fp32-like: 19 / 18.5
  EXPECT_EQ(probed_batch_size(4.2, 2.5, 40, 24), 22u); // 1 + 35.8 / 1.7
  EXPECT_EQ(probed_batch_size(3.1, 2.5, 40, 24), 24u); // 61 more fit: the cap
  EXPECT_EQ(probed_batch_size(50, 3, 40, 24), 1u);     // one alone is past the budget already
  EXPECT_EQ(probed_batch_size(2.5, 2.5, 40, 24), 24u); // costs nothing beyond nvcc's own
  EXPECT_EQ(probed_batch_size(0, 2.5, 40, 24), 24u);   // not known: as before
  EXPECT_EQ(probed_batch_size(21, 2.5, 0, 24), 24u);   // no budget: as before
  EXPECT_EQ(probed_batch_size(21, 2.5, 40, 0), 1u);
}

namespace {

// A stand-in for nvcc in `dir`: 0.1 s a call plus 1 s for each SLOW member; it logs each call's
// member count and SLOW lines (a batch's first line says the count) to dir/calls.log and makes
// the object.
fs::path fake_nvcc(const fs::path& dir) {
  const auto nvcc = dir / "nvcc";
  std::ofstream(nvcc) << "#!/bin/sh\n"
                         "[ \"$1\" = --version ] && { echo fake nvcc 1; exit 0; }\n"
                         "out=; for a; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\n"
                         "src=$a; slow=$(grep -c SLOW \"$src\")\n"
                         "n=$(sed -n 's,^// A batch of \\([0-9]*\\) candidates.*,\\1,p' \"$src\")\n"
                         "echo \"${n:-1} $slow\" >>" +
                             (dir / "calls.log").string() +
                             "\n"
                             "sleep 0.1; [ \"$slow\" -gt 0 ] && sleep \"$slow\"\n"
                             ": >\"$out\"\n";
  fs::permissions(nvcc, fs::perms::owner_all);
  return nvcc;
}

std::multiset<std::string> logged_calls(const fs::path& dir) {
  std::multiset<std::string> calls;
  std::ifstream log(dir / "calls.log");
  for (std::string line; std::getline(log, line);)
    calls.insert(line);
  return calls;
}

} // namespace

TEST(candidate_batch, a_slow_files_mutants_are_batched_by_its_probe_and_a_fast_files_whole) {
  const auto dir = kg::test::scratch_dir("candidate-batch") / "probed";
  fs::create_directories(dir);
  const auto nvcc = fake_nvcc(dir);
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  std::vector<std::vector<fs::path>> groups = {{file("fast.cu", kernel("2.0f"))},
                                               {file("slow.cu", kernel("3.0f", "// SLOW\n"))}};
  groups.emplace_back();
  for (int i = 0; i < 6; ++i)
    groups.back().push_back(
        file("f" + std::to_string(i) + ".cu", kernel(std::to_string(i) + ".5f")));
  groups.emplace_back();
  for (int i = 0; i < 4; ++i)
    groups.back().push_back(
        file("s" + std::to_string(i) + ".cu", kernel(std::to_string(i) + ".25f", "// SLOW\n")));
  compile_options opt;
  opt.nvcc = nvcc.string();
  opt.cache_dir = dir / "cache";
  opt.jobs = 2;
  batch_options bo;
  bo.batch_size = 24;
  bo.as_given = true;
  bo.probes = {npos_group, npos_group, 0, 1};
  // The slow probe ~1.1 s, the cheapest ~0.1 s: (2.6 - 1.1) / 1.0 -> one more, batches of 2;
  // the fast file's 6 in one batch.
  bo.batch_seconds = 2.6;
  const auto r = compile_in_batches(groups, dir / "batches", opt, bo);
  ASSERT_EQ(r.size(), 12u);
  for (std::size_t i = 0; i < r.size(); ++i)
    EXPECT_TRUE(r[i].ok) << i << r[i].log;
  EXPECT_GT(r[1].nvcc_seconds, 1.0);
  const auto calls = logged_calls(dir);
  // Members and SLOW lines per call: the two probes, the fast batch, two slow batches of two.
  EXPECT_EQ(calls, (std::multiset<std::string>{"1 0", "1 1", "6 0", "2 2", "2 2"}));
  EXPECT_EQ(r[8].shared_object, r[9].shared_object);
  EXPECT_NE(r[9].shared_object, r[10].shared_object);
  EXPECT_EQ(r[10].symbol, "kg_run_0");
  EXPECT_EQ(r[11].symbol, "kg_run_1");
  // From the cache: the probe's cost is read back, so the batches (and their entries) are the
  // same and nothing is compiled again.
  fs::remove(dir / "calls.log");
  const auto again = compile_in_batches(groups, dir / "batches", opt, bo);
  EXPECT_TRUE(again[1].cached);
  EXPECT_NEAR(again[1].nvcc_seconds, r[1].nvcc_seconds, 0.01);
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_TRUE(again[i].cached) << i;
    EXPECT_EQ(again[i].shared_object, r[i].shared_object) << i;
  }
  EXPECT_FALSE(fs::exists(dir / "calls.log"));
  // Without a budget: the slow file's 4 in one batch, as before.
  kg::remove_tree(dir / "cache");
  bo.batch_seconds = 0;
  const auto plain = compile_in_batches(groups, dir / "batches", opt, bo);
  EXPECT_EQ(logged_calls(dir), (std::multiset<std::string>{"1 0", "1 1", "6 0", "4 4"}));
}

// A probed group waits for every probe, not only its own: with one compile at a time and the slow
// file's group queued before the fast file's probe, the slow probe is known first; sized then,
// nvcc's fixed cost would be the slow probe's own (nothing cheaper known yet: one batch of 4, and
// a cached rerun, whose probes finish in any order, could size it otherwise). Waiting for the
// fast probe (0.1 s) gives (2.6 - 1.1) / (1.1 - 0.1): batches of 2, whatever the order.
TEST(candidate_batch, a_probed_group_waits_for_every_probe_so_its_batches_do_not_depend_on_order) {
  const auto dir = kg::test::scratch_dir("candidate-batch") / "order";
  fs::create_directories(dir);
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  std::vector<std::vector<fs::path>> groups = {{file("slow.cu", kernel("3.0f", "// SLOW\n"))}};
  groups.emplace_back();
  for (int i = 0; i < 4; ++i)
    groups.back().push_back(
        file("s" + std::to_string(i) + ".cu", kernel(std::to_string(i) + ".25f", "// SLOW\n")));
  groups.push_back({file("fast.cu", kernel("2.0f"))});
  groups.emplace_back();
  for (int i = 0; i < 6; ++i)
    groups.back().push_back(
        file("f" + std::to_string(i) + ".cu", kernel(std::to_string(i) + ".5f")));
  compile_options opt;
  opt.nvcc = fake_nvcc(dir).string();
  opt.cache_dir = dir / "cache";
  opt.jobs = 1;
  batch_options bo;
  bo.batch_size = 24;
  bo.as_given = true;
  bo.probes = {npos_group, 0, npos_group, 2};
  bo.batch_seconds = 2.6;
  const auto r = compile_in_batches(groups, dir / "batches", opt, bo);
  ASSERT_EQ(r.size(), 12u);
  for (std::size_t i = 0; i < r.size(); ++i)
    EXPECT_TRUE(r[i].ok) << i << r[i].log;
  EXPECT_EQ(logged_calls(dir), (std::multiset<std::string>{"1 1", "1 0", "2 2", "2 2", "6 0"}));
  EXPECT_EQ(r[1].shared_object, r[2].shared_object);
  EXPECT_NE(r[2].shared_object, r[3].shared_object);
}
