/* glibc's fenv_private.h: wasm always rounds to nearest in the type's precision. */
#define SET_RESTORE_ROUND(mode)
#define SET_RESTORE_ROUND_53BIT(mode)
