/* glibc's math-narrow-eval.h: wasm evaluates in the type's own precision. */
#define math_narrow_eval(x) (x)
