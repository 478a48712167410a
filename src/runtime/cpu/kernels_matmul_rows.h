// MatMulRows (kernels.h) over a path's register tile, shared by the x86 paths: included inside
// mlc::cpu::detail's anonymous namespace of a file compiled for that path, after its
//   template <int R, int V, bool kFull> void MatMulTile(a, lda, k, b_rows, j0, tail, c, ldc)
// (rows [0, R) of c, columns [j0, j0 + V vectors), the last vector `tail` columns, all of them when
// kFull) and the constants kMatMulVector (floats per vector) and kMatMulRows (rows of a full tile).

// Rows [0, R) of a and c over every column: two vectors at a time, then the rest.
template <int R>
void MatMulRowBlock(const float* a, int64_t lda, int64_t k, const float* const* b_rows, int64_t n, float* c,
                    int64_t ldc) {
  constexpr int64_t w = kMatMulVector;
  int64_t j = 0;
  for (; j + 2 * w <= n; j += 2 * w) MatMulTile<R, 2, true>(a, lda, k, b_rows, j, static_cast<int>(w), c, ldc);
  if (n - j > w) MatMulTile<R, 2, false>(a, lda, k, b_rows, j, static_cast<int>(n - j - w), c, ldc);
  else if (n > j) MatMulTile<R, 1, false>(a, lda, k, b_rows, j, static_cast<int>(n - j), c, ldc);
}

// The last `rows` (< kMatMulRows) rows, through the tile of exactly that height.
template <int R>
void MatMulRemainder(int64_t rows, const float* a, int64_t lda, int64_t k, const float* const* b_rows, int64_t n,
                     float* c, int64_t ldc) {
  if constexpr (R > 0) {
    if (rows == R) return MatMulRowBlock<R>(a, lda, k, b_rows, n, c, ldc);
    MatMulRemainder<R - 1>(rows, a, lda, k, b_rows, n, c, ldc);
  }
}

void MatMulRows(const float* a, int64_t lda, int64_t m, int64_t k, const float* const* b_rows, int64_t n, float* c,
                int64_t ldc) {
  int64_t r = 0;
  for (; r + kMatMulRows <= m; r += kMatMulRows) {
    MatMulRowBlock<kMatMulRows>(a + r * lda, lda, k, b_rows, n, c + r * ldc, ldc);
  }
  MatMulRemainder<kMatMulRows - 1>(m - r, a + r * lda, lda, k, b_rows, n, c + r * ldc, ldc);
}
