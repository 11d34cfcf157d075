// Cooperative interruption: SIGINT/SIGTERM set a flag that long loops poll between observations,
// so an interrupted run still writes what it measured (marked incomplete) instead of dying.
#pragma once

namespace kg {
void install_interrupt_handlers();
bool stop_requested();
void request_stop(); // tests use this to simulate a signal
void clear_stop();
} // namespace kg
