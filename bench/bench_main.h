// What every bench's main() shares: no bench ends in an uncaught exception (a std::filesystem
// error, a JSON field of an unexpected type, memory running out). It is printed after the
// bench's name and the bench exits with status 1.
#pragma once

#include <exception>
#include <iostream>

namespace bench {

// run() (returning the exit status), with any exception it throws turned into status 1.
template <class Run>
int Guarded(const char* name, Run&& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
  } catch (...) {
    std::cerr << name << ": an unknown exception\n";
  }
  return 1;
}

}  // namespace bench
