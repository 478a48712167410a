/* glibc's public-name aliases: none here; the functions keep their mlc_glibc_ names (names.h). */
#define libm_alias_float(from, to)
