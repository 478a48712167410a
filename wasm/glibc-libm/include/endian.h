/* glibc's internal endian.h: the word order the dbl-64 tables are written for (wasm is little-endian). */
#include_next <endian.h>
#define LITTLE_ENDI 1
#define HIGH_HALF 1
#define LOW_HALF 0
