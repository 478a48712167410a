/* Included first in every soxr source of the WebAssembly build: soxr's filter design and DFT
   tables call glibc's libm (the Debian glibc source, built by scripts/wasm/build-c-deps) instead of
   musl's. The two libraries round some sin, sinf/cosf and exp results differently, and the native
   library's soxr calls glibc's: with the same functions, the resampled audio is the same float32
   values in both builds. */
#ifndef MLC_SOXR_LIBM_H
#define MLC_SOXR_LIBM_H
#include <math.h>
double mlc_glibc_sin(double);
double mlc_glibc_cos(double);
void mlc_glibc_sincos(double, double *, double *);
float mlc_glibc_sinf(float);
float mlc_glibc_cosf(float);
void mlc_glibc_sincosf(float, float *, float *);
double mlc_glibc_exp(double);
double mlc_glibc_log(double);
double mlc_glibc_pow(double, double);
double mlc_glibc_asin(double);
double mlc_glibc_atan2(double, double);
double mlc_glibc_log10(double);
#define sin(x) mlc_glibc_sin(x)
#define cos(x) mlc_glibc_cos(x)
#define sincos(x, s, c) mlc_glibc_sincos(x, s, c)
#define sinf(x) mlc_glibc_sinf(x)
#define cosf(x) mlc_glibc_cosf(x)
#define sincosf(x, s, c) mlc_glibc_sincosf(x, s, c)
#define exp(x) mlc_glibc_exp(x)
#define log(x) mlc_glibc_log(x)
#define pow(x, y) mlc_glibc_pow(x, y)
#define asin(x) mlc_glibc_asin(x)
#define atan2(y, x) mlc_glibc_atan2(y, x)
#define log10(x) mlc_glibc_log10(x)
#endif
