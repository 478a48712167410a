/* glibc's fix-int-fp-convert-zero.h: integer zero converts to +0. */
#define FIX_INT_FP_CONVERT_ZERO 0
