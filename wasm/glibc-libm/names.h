/* Included first in every glibc libm source scripts/wasm/build-c-deps compiles: each global the
   sources define gets an mlc_glibc_ name, so none meets musl's own internals (musl shares some of
   these names, e.g. __exp_data, with other layouts) and soxr calls them by the names in wasm/soxr/libm.h. */
#define __sin mlc_glibc_sin
#define __cos mlc_glibc_cos
#define __sincos mlc_glibc_sincos
#define __sinf mlc_glibc_sinf
#define __cosf mlc_glibc_cosf
#define __sincosf mlc_glibc_sincosf
#define __exp mlc_glibc_exp
#define __ieee754_exp mlc_glibc_exp
#define __log mlc_glibc_log
#define __ieee754_log mlc_glibc_log
#define __pow mlc_glibc_pow
#define __ieee754_pow mlc_glibc_pow
#define __ieee754_asin mlc_glibc_asin
#define __ieee754_acos mlc_glibc_acos
#define __ieee754_atan2 mlc_glibc_atan2
#define __ieee754_log10 mlc_glibc_log10
#define __branred mlc_glibc_branred
#define __sincostab mlc_glibc_sincostab
#define __exp_data mlc_glibc_exp_data
#define __log_data mlc_glibc_log_data
#define __pow_log_data mlc_glibc_pow_log_data
#define __sincosf_table mlc_glibc_sincosf_table
#define __inv_pio4 mlc_glibc_inv_pio4
#define __math_check_oflow mlc_glibc_math_check_oflow
#define __math_check_uflow mlc_glibc_math_check_uflow
#define __math_divzero mlc_glibc_math_divzero
#define __math_divzerof mlc_glibc_math_divzerof
#define __math_invalid mlc_glibc_math_invalid
#define __math_invalidf mlc_glibc_math_invalidf
#define __math_may_uflow mlc_glibc_math_may_uflow
#define __math_may_uflowf mlc_glibc_math_may_uflowf
#define __math_oflow mlc_glibc_math_oflow
#define __math_oflowf mlc_glibc_math_oflowf
#define __math_uflow mlc_glibc_math_uflow
#define __math_uflowf mlc_glibc_math_uflowf
/* e_log10.c calls the log of e_log.c without a prototype in scope. */
double mlc_glibc_log(double);
