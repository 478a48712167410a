/* glibc's math-barriers.h: keep a value from being folded or dropped by the optimizer. */
#define math_opt_barrier(x) ({ __typeof(x) barrier_x_ = (x); __asm__("" : "+r"(barrier_x_)); barrier_x_; })
#define math_force_eval(x) ({ __typeof(x) barrier_x_ = (x); __asm__ __volatile__("" : : "r"(barrier_x_)); })
