/* glibc's math-svid-compat.h: no SVID error handling. */
#define LIBM_SVID_COMPAT 0
