// Cooperative interruption: SIGINT/SIGTERM set a flag that long loops poll between observations,
// so an interrupted run still writes what it measured (marked incomplete) instead of dying.
#pragma once

#include <chrono>
#include <stdexcept>

namespace kg {
// Thrown by throw_if_stop_requested(): a long run catches it, writes what it has with status
// "interrupted" and exits 130.
struct interrupted_error : std::runtime_error {
  interrupted_error() : std::runtime_error("interrupted by a signal") {}
};
void throw_if_stop_requested();
void install_interrupt_handlers();
bool stop_requested();
// Polls the flag for at most `wait`: true as soon as it is set. For a child that died of a job
// manager's SIGTERM, whose signal to us may not have been handled yet.
bool stop_requested_within(std::chrono::milliseconds wait);
void request_stop(); // tests use this to simulate a signal
void clear_stop();
} // namespace kg
