// The scores of a protocol audit's kill matrix, shared by `audit checker --protocol` and `audit
// merge`: per protocol column its score, families, false rejections and escapes (summary.json's
// "protocols"), the family x protocol table of escape rates, and KernelBench-M's published rates
// printed beside a kernelbench column.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mutants/kill_matrix.h"
#include "oracles/protocol.h"

namespace kg {

// summary.json's "protocols": per protocol, {protocol, score, families, false_rejections, valid,
// escapes}. `invalid` gets, per protocol that rejected a correct kernel, the controls' tasks.
nlohmann::json protocol_scores(const kill_matrix& km, const std::vector<protocol>& ps,
                               std::map<std::string, std::vector<std::string>>& invalid);

// The family x column table: each cell the escape rate of the witnessed mutants with a verdict,
// and its Wilson interval.
void print_escape_table(std::ostream& out, const kill_matrix& km,
                        const std::vector<std::string>& columns);

// KernelBench-M's published escape rates of KernelBench's own check (summary.json's
// "published_reference"), and the line printed beside a kernelbench column.
nlohmann::json published_reference();
void print_published_reference(std::ostream& out);

} // namespace kg
