// The AVX-512 path's unpacked 4-bit weight panels (kernels_avx512.cc's register tiles, for weights
// without the packed panels): 16 output rows unpacked once into 64-byte vectors that hold four
// consecutive block inputs of each of the 16 rows, the layout of VNNI's 4-byte groups. Include only inside an unnamed namespace of
// mlc::cpu::detail, after kernels_x86_q4.h (RowScales), in a file compiled with AVX-512 F/BW.
#pragma once

constexpr int kPanelRows = 16;
// One block of a panel: 8 groups of 4 inputs x 16 rows x 4 bytes.
constexpr int64_t kPanelBlockBytes = 8 * kPanelRows * 4;

// Rows o0 .. o0 + 15 unpacked into panel ([blocks][8 groups][16 rows][4 bytes]) with their
// scales ([blocks][16], zero for rows at and past `valid`, which repeat row o0's weights).
// Group g < 4 of a block holds activation positions 4g .. 4g + 3: the low nibbles of the row's
// packed dword g; group g >= 4 the high nibbles of dword g - 4 (see Q8Activations' order).
void UnpackPanel(const Weight& w, int64_t blocks, int64_t o0, int valid, uint8_t* panel, float* scales,
                 float* row_scale) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  const uint8_t* rows[kPanelRows];
  for (int r = 0; r < kPanelRows; ++r) rows[r] = data + (o0 + (r < valid ? r : 0)) * blocks * 16;
  const __m512i low = _mm512_set1_epi8(0x0F);
  auto load = [](const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  for (int64_t b = 0; b < blocks; ++b) {
    if ((b & 3) == 0 && b + 8 < blocks) {  // 16 streams, more than the hardware follows: the line after next
      for (int r = 0; r < kPanelRows; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(rows[r] + (b + 8) * 16), _MM_HINT_T0);
      }
    }
    // z[j], 128-bit lane L: row 4L + j's block (dwords D0 .. D3).
    __m512i z[4];
    for (int j = 0; j < 4; ++j) {
      __m512i v = _mm512_castsi128_si512(load(rows[j] + b * 16));
      v = _mm512_inserti32x4(v, load(rows[4 + j] + b * 16), 1);
      v = _mm512_inserti32x4(v, load(rows[8 + j] + b * 16), 2);
      z[j] = _mm512_inserti32x4(v, load(rows[12 + j] + b * 16), 3);
    }
    // A 4 x 4 dword transpose in each lane: d[k] holds dword k of rows 0 .. 15 in order.
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    const __m512i d[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                          _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
    auto* dst = reinterpret_cast<__m512i*>(panel + b * kPanelBlockBytes);
    for (int k = 0; k < 4; ++k) {
      _mm512_storeu_si512(dst + k, _mm512_and_si512(d[k], low));
      _mm512_storeu_si512(dst + 4 + k, _mm512_and_si512(_mm512_srli_epi16(d[k], 4), low));
    }
  }
  for (int r = 0; r < kPanelRows; ++r) {
    if (r < valid) {
      RowScales(w, o0 + r, blocks, row_scale);
      for (int64_t b = 0; b < blocks; ++b) scales[b * kPanelRows + r] = row_scale[b];
    } else {
      for (int64_t b = 0; b < blocks; ++b) scales[b * kPanelRows + r] = 0.0f;
    }
  }
}

