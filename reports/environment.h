// The environment every result embeds: GPU, clocks and throttle reasons, driver and runtime,
// build, git revision, CPU and OS. A field that cannot be read is the string "unavailable".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kg {
nlohmann::json collect_environment();
std::string format_environment(const nlohmann::json& env); // `kernelgate env` without --json
} // namespace kg
