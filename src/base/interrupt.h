// Cooperative interruption of long calls: a caller that may want to stop a call it makes on its
// own thread (the engine, for a request whose client went away) lends it a flag for the call's
// length (InterruptScope); long loops ask Interrupted() between their steps (tower layers, a
// prefill's decoder layers) and give up with InterruptedError. Threads without a scope are never
// interrupted; the flag is only read, so one flag may serve several calls.
#pragma once

#include <atomic>
#include <string>

#include "mlc_manifest/error.h"

namespace mlc {

class InterruptScope {
 public:
  explicit InterruptScope(const std::atomic<bool>* flag);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

// True when this thread's innermost scope's flag is set.
bool Interrupted();

// "<function>: interrupted (the request was cancelled)", as a kUsage error.
Status InterruptedError(const std::string& function);

// Ok, or InterruptedError when Interrupted(): for a loop's step boundary.
Status CheckInterrupt(const std::string& function);

}  // namespace mlc
