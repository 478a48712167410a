/* glibc's public-name aliases: none here; the functions keep their mlc_glibc_ names (names.h). */
#define libm_alias_double(from, to)
#define libm_alias_double_other(from, to)
