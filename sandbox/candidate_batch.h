// Many candidates made from one file (the mutants of a kernel) compiled in one nvcc call: nvcc's
// fixed cost per call (the host compiler's start, cudafe, ptxas, the link) is most of what a small
// candidate costs, so one call over 24 LayerNorm mutants took 3.4 s of one core where 24 calls
// took 30.9 (docs/performance.md). Each member's text goes into a namespace of its own in one
// translation unit, its kg_run renamed kg_run_<k> (compile_result::symbol), its macros undefined
// after it; the #include lines, which must come before any other directive, are hoisted once.
// A batch that fails to compile falls back to one call per member, so one broken mutant costs
// its batch a second pass and never another member its verdict.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/candidate_compiler.h"

namespace kg {

// The translation unit of a batch, or nullopt (why set) when a member cannot share one: a
// preprocessor directive other than #include before its last #include, or members whose
// #include lines differ.
std::optional<std::string> batch_translation_unit(const std::vector<std::string>& sources,
                                                  std::string* why = nullptr);

// Called once per source as its result is known, from the compile thread that made it, with the
// source's index in the flat result list (groups in order); calls may come from several threads
// at once.
using compiled_callback = std::function<void(std::size_t, const compile_result&)>;

// How compile_in_batches orders and ends its work.
struct batch_options {
  std::size_t batch_size = 24;
  // The jobs in the groups' order (each group's batches in turn), not the groups of one first and
  // then the batches largest first: for a caller that uses each result as soon as it is known.
  bool as_given = false;
  compiled_callback on_compiled;
  const std::atomic<bool>* cancel = nullptr; // once set, no job is started (results left empty)
  // Batches sized by a probe. probes[g] (where it is not npos): a group whose first source stands
  // for group g's members (the audit: a file's control for the file's mutants). Once its compile
  // is known, g's batches hold as many members as fit batch_seconds by the estimate p + (m - 1)
  // x (p - c): p the probe's nvcc_seconds, c the cheapest of all the probes' compiles (nvcc's
  // fixed cost). A file whose members each cost about what a whole call costs gains nothing from
  // sharing one, and a batch of them only meets the compile's timeout (sdpa_fp32's mutants: 21 s
  // alone, 45 s two in one call, 91 s four: docs/performance.md). Until every probe is known, the
  // probed groups wait and the queue's other jobs go first: the batches then do not depend on
  // which compile finished first (a cached run's probes all finish at once), nor do the cache's
  // entries.
  std::vector<std::size_t> probes;
  double batch_seconds = 0; // 0: every batch of batch_size
};

// The members a batch of a group takes (1..batch_size): see batch_options::probes.
std::size_t probed_batch_size(double probe_seconds, double cheapest_seconds, double batch_seconds,
                              std::size_t batch_size);

// Compiles each group's sources (files of one origin) in batches of at most `batch_size`, the
// batch files written under `batch_dir`; returns one result per source, groups in order. A
// member of a batch that compiled has the batch's object and its own symbol; the others are
// compiled alone. One queue feeds opt.jobs threads: the groups of one first (in order), then the
// batches largest first (b.as_given: each group's jobs in the groups' order); a batch that fails
// puts its members back at the queue's front, one compile each, so no thread waits for the slowest
// batch before the single compiles start.
std::vector<compile_result>
compile_in_batches(const std::vector<std::vector<std::filesystem::path>>& groups,
                   const std::filesystem::path& batch_dir, const compile_options& opt,
                   const batch_options& b);
std::vector<compile_result>
compile_in_batches(const std::vector<std::vector<std::filesystem::path>>& groups,
                   const std::filesystem::path& batch_dir, const compile_options& opt,
                   std::size_t batch_size = 24, const compiled_callback& on_compiled = {});

} // namespace kg
