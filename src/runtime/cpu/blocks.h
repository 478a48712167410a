// The blocks the CPU decoders and the vision and audio towers are built from: RMSNorm and LayerNorm,
// rotary positions, the MLP activations, attention of query rows over a sequence's keys and values
// in the paged KV cache (causal, with a per-layer sliding window, sinks and soft-capping),
// bidirectional attention among the rows of one input (towers), and patch extraction for a patch
// embedding. Rows are spread over the thread pool; matrix products are kernels.h's.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/family.h"
#include "runtime/cpu/kv_cache.h"

namespace mlc::cpu {

// out = x / rms(x) * gain over n values (gain nullptr: 1; out may be x).
void RmsNorm(const float* x, const float* gain, int64_t n, double eps, float* out);
// The same over `rows` rows of n.
void RmsNormRows(const float* x, const std::vector<float>& gain, int64_t rows, int64_t n, double eps,
                 float* out);

// out = (x - mean) / sqrt(var + eps) * gain + bias over each of `rows` rows of n (out may be x).
void LayerNormRows(const float* x, const std::vector<float>& gain, const std::vector<float>& bias,
                   int64_t rows, int64_t n, double eps, float* out);

// Rotary positions with their frequencies tabled once: rotate-half over the first rotary_dim
// dims of each head.
struct RopeTable {
  int64_t rotary_dim = 0;
  std::vector<double> inv_freq;  // the pairs that turn (rotary_dim / 2, fewer when the rest stay still)
  double magnitude = 1.0;
  static RopeTable Of(const Rope& rope, int64_t context_window_size);
  // The cosines, then the sines (times magnitude) of the turning pairs at position pos
  // (2 * inv_freq.size() floats), worked out once per row and step for all its layers.
  void Angles(int64_t pos, float* out) const;
  // Rotates `heads` heads of head_dim at x (each head contiguous) by those angles.
  void Rotate(float* x, int64_t heads, int64_t head_dim, const float* angles) const;
};

float GeluTanh(float x);
float GeluErf(float x);     // the exact GeLU: x * Phi(x)
float QuickGelu(float x);   // CLIP's: x * sigmoid(1.702 x)
// x[i] = f(x[i]) over n values, on the pool.
void ApplyRows(float (*f)(float), float* x, int64_t n);
// out[i] = act(gate[i]) * up[i] for i < n.
void GatedActivation(Activation act, const float* gate, const float* up, float* out, int64_t n);

// Where row t of a call sits: its sequence and its absolute position.
struct RowPlace {
  int64_t seq_id = 0;
  int64_t pos = 0;
};

struct AttentionSpec {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t sliding_window = 0;  // > 0: only the last sliding_window positions
  float scale = 1.0f;          // scores are q.k * scale
  float softcap = 0.0f;        // > 0: scores become softcap * tanh(score / softcap)
};

// out[t] ([num_heads * head_dim]) = the attention of row t's queries (q + t * q_stride, heads
// contiguous) over the keys and values of its sequence held for `kv_layer` up to its position
// (the cache's window and sinks applied), on the pool in tasks of consecutive rows of a sequence x
// the query heads of one KV head; a row's result does not depend on the rows beside it.
void PagedAttention(const AttentionSpec& spec, PagedKvCache& kv, int64_t kv_layer, const float* q,
                    int64_t q_stride, const std::vector<RowPlace>& rows, float* out);

// Bidirectional multi-head attention among n rows of one input: out[t] ([heads * head_dim]) =
// softmax_j(q[t] . k[j] * scale) v[j] per head, every row seeing every row. q, k and v are rows
// of `stride` floats (heads contiguous, head_dim each) at their own pointers.
void DenseAttention(const float* q, const float* k, const float* v, int64_t stride, int64_t n,
                    int64_t heads, int64_t head_dim, float scale, float* out);

// The patches of a channel-major image [channels, height, width] as rows for a patch embedding
// (a convolution with stride = kernel = patch): row py * (width / patch) + px holds the
// channels x patch x patch values of that patch in (channel, row, column) order, as a
// convolution weight [out, channels, patch, patch] is laid out.
std::vector<float> PatchRows(const float* chw, int64_t channels, int64_t height, int64_t width,
                             int64_t patch);

}  // namespace mlc::cpu
