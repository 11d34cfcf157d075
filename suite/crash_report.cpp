#include "suite/crash_report.h"

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include <dlfcn.h>
#include <execinfo.h>
#include <ucontext.h>
#include <unistd.h>

namespace kg {
namespace {

void say(const char* s) {
  (void)!::write(2, s, std::strlen(s));
}

// "module+0xoffset" of a code address (dladdr: not formally async-signal-safe, but the process
// is ending anyway, and the name is what makes the report useful).
void say_address(const char* what, std::uintptr_t a) {
  char line[512];
  Dl_info info{};
  if (a && ::dladdr(reinterpret_cast<void*>(a), &info) && info.dli_fname)
    std::snprintf(line, sizeof line, "  %s 0x%zx = %s+0x%zx (%s)\n", what, static_cast<size_t>(a),
                  info.dli_fname,
                  static_cast<size_t>(a - reinterpret_cast<std::uintptr_t>(info.dli_fbase)),
                  info.dli_sname ? info.dli_sname : "?");
  else
    std::snprintf(line, sizeof line, "  %s 0x%zx\n", what, static_cast<size_t>(a));
  say(line);
}

void on_crash(int sig, siginfo_t* info, void* context) {
  say("kernelgate: internal error: ");
  say(strsignal(sig));
  say("; stack:\n");
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, 2);
#if defined(__x86_64__)
  // A call through a null pointer leaves nothing for the unwinder: the faulting instruction and
  // the words on top of the stack (the caller's return address among them) say where it was.
  const auto* uc = static_cast<const ucontext_t*>(context);
  say_address("fault address", reinterpret_cast<std::uintptr_t>(info->si_addr));
  say_address("rip", static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]));
  const auto* sp = reinterpret_cast<const std::uintptr_t*>(uc->uc_mcontext.gregs[REG_RSP]);
  for (int k = 0; k < 24; ++k) {
    Dl_info di{};
    if (::dladdr(reinterpret_cast<void*>(sp[k]), &di) && di.dli_fname) say_address("stack", sp[k]);
  }
#else
  (void)info;
  (void)context;
#endif
  std::signal(sig, SIG_DFL);
  ::raise(sig);
}

} // namespace

void install_crash_report() {
  void* warm[1];
  (void)::backtrace(warm, 1); // loads libgcc now: not inside the handler
  // The handler runs on a stack of its own: after a stack overflow the thread's stack has no
  // room left for it, and without one the process would die printing nothing.
  static std::uint8_t alt_stack[1 << 18];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_crash;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    ::sigaction(sig, &sa, nullptr);
}

} // namespace kg
