// The fused 4-bit products of the x86 vector paths, compiled once per instruction set: included by
// kernels_avx2.cc (vpmaddubsw + vpmaddwd), kernels_avxvnni.cc and kernels_avx512.cc (vpdpbusd; the
// latter uses only the one-token product and the helpers), each giving its own
// `Dot::Block`, the exact int32 partial sums of one block's 32 unsigned weight nibbles against 32
// int8 activations over 8 lanes. Everything here has internal linkage, so the copies compiled for
// different instruction sets never meet at link time. Include only inside an unnamed namespace
// of mlc::cpu::detail, after <immintrin.h>, and call ThreadScratch for memory.
//
// A block's 16 bytes unpack to the low nibbles, then the high ones (inputs 0, 2, .., 30, then
// 1, 3, .., 31), the order of the int8 activation block. Sums are scaled and accumulated in
// float32; the weights' offset of 7 is taken off once per row from the blocks' offset terms (see
// Q8Activations). Decode (one token) unpacks on the fly; prefill unpacks four rows once and reuses
// them over the tokens in tiles of 4 rows x 2 tokens.
#pragma once

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The 32 nibbles of one block as bytes: inputs 0, 2, .., 30, then 1, 3, .., 31.
__m256i UnpackBlock(const uint8_t* p, __m256i low_mask) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1),
                          low_mask);
}

// Row o's group scales as float32 (8 at a time from half), into out[0, blocks).
void RowScales(const Weight& w, int64_t o, int64_t blocks, float* out) {
  if (w.format == WeightFormat::kQ4F32) {
    const float* s = static_cast<const float*>(w.scale) + o * blocks;
    for (int64_t b = 0; b < blocks; ++b) out[b] = s[b];
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(w.scale) + o * blocks;
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    _mm256_storeu_ps(out + b, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + b))));
  }
  for (; b < blocks; ++b) out[b] = _cvtsh_ss(s[b]);
}

// One token: scale[b] becomes the row's scale times the token's, and the row's offset term
// sum_b scale_w[b] * offset[b] is returned.
float TokenScales(const Q8Activations& x, int64_t blocks, float* scale) {
  __m256 offset = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const __m256 ws = _mm256_loadu_ps(scale + b);
    _mm256_storeu_ps(scale + b, _mm256_mul_ps(ws, _mm256_loadu_ps(x.d + b)));
    offset = _mm256_fmadd_ps(ws, _mm256_loadu_ps(x.offset + b), offset);
  }
  float sum = HorizontalSum(offset);
  for (; b < blocks; ++b) {
    sum += scale[b] * x.offset[b];
    scale[b] *= x.d[b];
  }
  return sum;
}

// One token: every row streams once, unpacked on the fly.
template <class Dot>
void MatVecQ4(const Weight& w, const Q8Activations& x, float* y, const float* bias, int64_t o_begin,
              int64_t o_end) {
  const int64_t blocks = x.blocks;
  const auto* data = static_cast<const uint8_t*>(w.data);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  float* scale = reinterpret_cast<float*>(ThreadScratch(static_cast<size_t>(blocks) * sizeof(float)));
  for (int64_t o = o_begin; o < o_end; ++o) {
    RowScales(w, o, blocks, scale);
    const float offset = TokenScales(x, blocks, scale);
    const uint8_t* row = data + o * blocks * 16;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + b * 32));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + b * 32 + 32));
      const __m256i p0 = Dot::Block(UnpackBlock(row + b * 16, low_mask), x0);
      const __m256i p1 = Dot::Block(UnpackBlock(row + b * 16 + 16, low_mask), x1);
      acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(scale + b), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_broadcast_ss(scale + b + 1), acc1);
    }
    for (; b < blocks; ++b) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + b * 32));
      const __m256i p0 = Dot::Block(UnpackBlock(row + b * 16, low_mask), x0);
      acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(scale + b), acc0);
    }
    y[o] = HorizontalSum(_mm256_add_ps(acc0, acc1)) - offset + (bias ? bias[o] : 0.0f);
  }
}

constexpr int kTileRows = 4;

// Four unpacked rows (stride blocks * 32 bytes; scales [blocks][4]) against T tokens from t0;
// rows at and past `valid` are padding and not stored.
template <class Dot, int T>
void Tile(const uint8_t* rows, const float* scales, const Q8Activations& x, int64_t t0, int64_t o0,
          int valid, int64_t out, float* y, const float* bias) {
  const int64_t blocks = x.blocks;
  __m256 acc[kTileRows][T];
  __m128 offset[T];
  alignas(16) float s[T][kTileRows];
  for (int t = 0; t < T; ++t) {
    offset[t] = _mm_setzero_ps();
    for (int r = 0; r < kTileRows; ++r) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const __m128 ws = _mm_loadu_ps(scales + b * kTileRows);
    __m256i xv[T];
    for (int t = 0; t < T; ++t) {
      const int64_t at = (t0 + t) * blocks + b;
      xv[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + at * 32));
      _mm_store_ps(s[t], _mm_mul_ps(ws, _mm_set1_ps(x.d[at])));
      offset[t] = _mm_fmadd_ps(ws, _mm_set1_ps(x.offset[at]), offset[t]);
    }
    for (int r = 0; r < kTileRows; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + (r * blocks + b) * 32));
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Dot::Block(wv, xv[t])),
                                    _mm256_broadcast_ss(&s[t][r]), acc[r][t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(16) float off[kTileRows];
    _mm_store_ps(off, offset[t]);
    for (int r = 0; r < valid; ++r) {
      y[(t0 + t) * out + o0 + r] = HorizontalSum(acc[r][t]) - off[r] + (bias ? bias[o0 + r] : 0.0f);
    }
  }
}

// Several tokens: four rows at a time are unpacked once into a per-thread buffer, then meet the
// tokens two at a time.
template <class Dot>
void MatMulQ4(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias,
              int64_t o_begin, int64_t o_end) {
  const int64_t blocks = x.blocks;
  const auto* data = static_cast<const uint8_t*>(w.data);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const size_t unpacked_bytes = static_cast<size_t>(kTileRows * blocks * 32);
  uint8_t* unpacked =
      ThreadScratch(unpacked_bytes + static_cast<size_t>((kTileRows + 1) * blocks) * sizeof(float));
  float* scales = reinterpret_cast<float*>(unpacked + unpacked_bytes);  // [blocks][4]
  float* row_scale = scales + kTileRows * blocks;                         // [blocks]
  for (int64_t o0 = o_begin; o0 < o_end; o0 += kTileRows) {
    const int valid = static_cast<int>(o_end - o0 < kTileRows ? o_end - o0 : kTileRows);
    for (int r = 0; r < kTileRows; ++r) {
      uint8_t* dst = unpacked + r * blocks * 32;
      if (r >= valid) {  // padding rows: zero weights
        for (int64_t b = 0; b < blocks; ++b) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 32), _mm256_setzero_si256());
          scales[b * kTileRows + r] = 0.0f;
        }
        continue;
      }
      const uint8_t* row = data + (o0 + r) * blocks * 16;
      for (int64_t b = 0; b < blocks; ++b) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 32), UnpackBlock(row + b * 16, low_mask));
      }
      RowScales(w, o0 + r, blocks, row_scale);
      for (int64_t b = 0; b < blocks; ++b) scales[b * kTileRows + r] = row_scale[b];
    }
    int64_t t = 0;
    for (; t + 2 <= n; t += 2) Tile<Dot, 2>(unpacked, scales, x, t, o0, valid, w.out, y, bias);
    if (t < n) Tile<Dot, 1>(unpacked, scales, x, t, o0, valid, w.out, y, bias);
  }
}

template <class Dot>
void LinearQ4(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias,
              int64_t o_begin, int64_t o_end) {
  if (n == 1) {
    MatVecQ4<Dot>(w, x, y, bias, o_begin, o_end);
  } else {
    MatMulQ4<Dot>(w, x, n, y, bias, o_begin, o_end);
  }
}

