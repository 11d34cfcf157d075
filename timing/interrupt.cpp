#include "timing/interrupt.h"

#include <atomic>
#include <csignal>
#include <thread>

namespace kg {
namespace {
volatile std::sig_atomic_t stop_flag = 0;
extern "C" void on_signal(int) {
  stop_flag = 1;
}
} // namespace

void install_interrupt_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}
bool stop_requested() {
  return stop_flag != 0;
}
bool stop_requested_within(std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (stop_flag == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return stop_flag != 0;
}
void throw_if_stop_requested() {
  if (stop_flag != 0) throw interrupted_error();
}
void request_stop() {
  stop_flag = 1;
}
void clear_stop() {
  stop_flag = 0;
}
} // namespace kg
