/* glibc's nan-high-order-bit.h for IEEE NaN encodings. */
#define HIGH_ORDER_BIT_IS_SET_FOR_SNAN 0
