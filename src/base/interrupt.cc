// The thread's interruption flag (base/interrupt.h).
#include "base/interrupt.h"

namespace mlc {
namespace {
thread_local const std::atomic<bool>* current = nullptr;
}  // namespace

InterruptScope::InterruptScope(const std::atomic<bool>* flag) : previous_(current) { current = flag; }
InterruptScope::~InterruptScope() { current = previous_; }

bool Interrupted() { return current != nullptr && current->load(std::memory_order_relaxed); }

Status InterruptedError(const std::string& function) {
  return Error{ErrorCode::kUsage, "", function + ": interrupted (the request was cancelled)"};
}

Status CheckInterrupt(const std::string& function) {
  return Interrupted() ? InterruptedError(function) : Status::Ok();
}

}  // namespace mlc
