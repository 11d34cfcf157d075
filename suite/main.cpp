// The thin kernelgate executable: all behaviour lives in the libraries.
#include <iostream>

#include "suite/cli.h"
#include "timing/interrupt.h"

int main(int argc, char** argv) {
  kg::install_interrupt_handlers();
  return kg::kernelgate_main(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr);
}
