// A crash of kernelgate itself (never of a candidate: those run in workers) ends with one line
// naming the signal and the stack, on stderr, so the failure can be reported and fixed; exit
// status is the signal's, as before.
#pragma once

namespace kg {
void install_crash_report();
} // namespace kg
