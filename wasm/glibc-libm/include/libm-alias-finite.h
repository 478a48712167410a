/* glibc's __*_finite aliases: none here. */
#define libm_alias_finite(from, to)
