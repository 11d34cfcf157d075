// The environment every result embeds: GPU, clocks and throttle reasons, driver and runtime,
// build, git revision, CPU, OS and NVML. A field that cannot be read is the string "unavailable",
// never null and never omitted, so readers can tell "not measured" from "missing key".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kg {

// Never throws for a missing GPU, driver or NVML; those read as "unavailable" with a reason.
nlohmann::json collect_environment();

// The text `kernelgate env` prints without --json: one block per top-level section.
std::string format_environment(const nlohmann::json& env);

} // namespace kg
