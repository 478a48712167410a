/* What glibc's internal math_private.h gives the libm sources scripts/wasm/build-c-deps compiles:
   symbol attributes (no-ops outside glibc), branch hints, errno, and word access to doubles. */
#ifndef MLC_GLIBC_MATH_PRIVATE_H
#define MLC_GLIBC_MATH_PRIVATE_H
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#define attribute_hidden
#ifndef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#endif
#define hidden_def(name)
#define strong_alias(name, alias)
#define __glibc_likely(c) __builtin_expect(!!(c), 1)
#define __glibc_unlikely(c) __builtin_expect(!!(c), 0)
#define __set_errno(e) (errno = (e))
#define EXTRACT_WORDS64(i, d) \
  do { double extract_d_ = (d); memcpy(&(i), &extract_d_, 8); } while (0)
#define INSERT_WORDS64(d, i) \
  do { int64_t insert_i_ = (i); memcpy(&(d), &insert_i_, 8); } while (0)
#endif
