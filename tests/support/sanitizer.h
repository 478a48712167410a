// Whether the test was built with AddressSanitizer: tests that bound memory or time relax those
// bounds under it (the sanitizer's shadow memory and slow-down are not the program's).
#pragma once

namespace mlc::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace mlc::test
