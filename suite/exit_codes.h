// Exit codes of the kernelgate CLI (docs/cli.md lists them; tests assert them).
#pragma once

namespace kg::exit_code {
inline constexpr int ok = 0;
inline constexpr int failures = 1;      // the command ran to the end, but an observation errored
                                        // or a validated file does not conform
inline constexpr int bad_input = 2;     // usage, unknown name, malformed or missing file,
                                        // unusable output folder or history database (an
                                        // append that fails after the result was written too)
inline constexpr int unavailable = 3;   // the requested backend cannot run here (no GPU, ...)
inline constexpr int internal = 4;      // an unexpected failure; records written so far are kept
inline constexpr int interrupted = 130; // SIGINT/SIGTERM: partial result kept, marked incomplete
} // namespace kg::exit_code
