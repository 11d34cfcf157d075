// The thin kernelgate executable: all behaviour lives in the libraries.
#include <iostream>
#include <string>

#include "suite/cli.h"
#include "suite/crash_report.h"
#include "timing/interrupt.h"

int main(int argc, char** argv) {
  kg::install_interrupt_handlers();
  // Not in a worker: a crash there is the candidate's, reported by the parent as RUNTIME_ERROR.
  if (argc < 2 || std::string(argv[1]) != "worker") kg::install_crash_report();
  return kg::kernelgate_main(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr);
}
