// The shared blocks of the CPU programs (blocks.h).
#include "runtime/cpu/blocks.h"

#include <algorithm>
#include <cmath>

#include "runtime/cpu/kernels.h"

namespace mlc::cpu {

void RmsNorm(const float* x, const float* gain, int64_t n, double eps, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  if (!gain) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * gain[i];
}

void RmsNormRows(const float* x, const std::vector<float>& gain, int64_t rows, int64_t n, double eps,
                 float* out) {
  ParallelFor(rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) RmsNorm(x + r * n, gain.data(), n, eps, out + r * n);
  });
}

void LayerNormRows(const float* x, const std::vector<float>& gain, const std::vector<float>& bias,
                   int64_t rows, int64_t n, double eps, float* out) {
  ParallelFor(rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * n;
      float* o = out + r * n;
      double sum = 0, ss = 0;
      for (int64_t i = 0; i < n; ++i) sum += xr[i];
      const double mean = sum / static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
      const float m = static_cast<float>(mean);
      for (int64_t i = 0; i < n; ++i) {
        o[i] = (xr[i] - m) * inv * gain[static_cast<size_t>(i)] + bias[static_cast<size_t>(i)];
      }
    }
  });
}

RopeTable RopeTable::Of(const Rope& rope, int64_t context_window_size) {
  RopeTable t;
  t.rotary_dim = rope.rotary_dim;
  for (int64_t j = 0; j < rope.rotary_dim / 2; ++j) {
    const double f = rope.InvFrequency(j, context_window_size);
    if (rope.scaling == RopeScaling::kProportional && f == 0.0) break;  // the pairs that stay still
    t.inv_freq.push_back(f);
  }
  t.magnitude = rope.Magnitude();
  return t;
}

void RopeTable::Angles(int64_t pos, float* out) const {
  const auto pairs = static_cast<int64_t>(inv_freq.size());
  for (int64_t j = 0; j < pairs; ++j) {
    const double angle = static_cast<double>(pos) * inv_freq[static_cast<size_t>(j)];
    out[j] = static_cast<float>(std::cos(angle) * magnitude);
    out[pairs + j] = static_cast<float>(std::sin(angle) * magnitude);
  }
}

void RopeTable::Rotate(float* x, int64_t heads, int64_t head_dim, const float* angles) const {
  const int64_t half = rotary_dim / 2, pairs = static_cast<int64_t>(inv_freq.size());
  for (int64_t j = 0; j < pairs; ++j) {
    const float cs = angles[j], sn = angles[pairs + j];
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + h * head_dim;
      float a = v[j], b = v[j + half];
      v[j] = a * cs - b * sn;
      v[j + half] = b * cs + a * sn;
    }
  }
}

float GeluTanh(float x) {
  const float kC = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(kC * (x + 0.044715f * x * x * x)));
}

float GeluErf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

float QuickGelu(float x) { return x / (1.0f + std::exp(-1.702f * x)); }

void ApplyRows(float (*f)(float), float* x, int64_t n) {
  ParallelFor(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] = f(x[i]);
  });
}

void GatedActivation(Activation act, const float* gate, const float* up, float* out, int64_t n) {
  if (act == Activation::kSilu) {
    SiluMul(gate, up, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = GeluTanh(gate[i]) * up[i];
}

namespace {

// Query rows of one DenseAttention task: a [block, n] score matrix of one head.
constexpr int64_t kDenseBlockRows = 32;
// Query rows x heads of one PagedAttention task (its score matrix's rows).
constexpr int64_t kPagedTaskRows = 64;

// A run of rows of one sequence at consecutive positions (a prefill chunk; a decode row alone).
struct RowRun {
  int64_t begin = 0, end = 0;  // rows [begin, end) of the call
};

// One unit of PagedAttention's work: rows [row_begin, row_end) of a run, query heads
// [head_begin, head_end), all of KV head kv_head.
struct AttentionTask {
  int64_t row_begin = 0, row_end = 0;
  int64_t kv_head = 0, head_begin = 0, head_end = 0;
};

std::vector<RowRun> RowRuns(const std::vector<RowPlace>& rows) {
  std::vector<RowRun> runs;
  for (int64_t t = 0; t < static_cast<int64_t>(rows.size()); ++t) {
    const RowPlace& place = rows[static_cast<size_t>(t)];
    if (!runs.empty()) {
      const RowPlace& last = rows[static_cast<size_t>(runs.back().end - 1)];
      if (last.seq_id == place.seq_id && last.pos + 1 == place.pos) {
        runs.back().end = t + 1;
        continue;
      }
    }
    runs.push_back({t, t + 1});
  }
  return runs;
}

// The tasks of a call: per run, per KV head, blocks of rows whose rows x heads fill about
// kPagedTaskRows score rows; a KV head's query heads are split when there would be fewer tasks
// than threads (a decode row of a model with one KV head still spreads).
std::vector<AttentionTask> AttentionTasks(const std::vector<RowRun>& runs, int64_t kv_heads, int64_t group) {
  int64_t head_parts = 1;
  int64_t rows = 0;
  for (const RowRun& r : runs) rows += r.end - r.begin;
  if (rows * kv_heads < ThreadCount()) head_parts = std::min<int64_t>(group, ThreadCount());
  const int64_t heads_per_part = (group + head_parts - 1) / head_parts;
  const int64_t rows_per_task = std::max<int64_t>(1, kPagedTaskRows / heads_per_part);
  std::vector<AttentionTask> tasks;
  for (const RowRun& run : runs) {
    for (int64_t r0 = run.begin; r0 < run.end; r0 += rows_per_task) {
      for (int64_t kvh = 0; kvh < kv_heads; ++kvh) {
        for (int64_t h0 = 0; h0 < group; h0 += heads_per_part) {
          tasks.push_back({r0, std::min(run.end, r0 + rows_per_task), kvh, kvh * group + h0,
                           kvh * group + std::min(group, h0 + heads_per_part)});
        }
      }
    }
  }
  return tasks;
}

// Scratch of one thread's tasks.
struct AttentionScratch {
  std::vector<int64_t> positions;           // the keys gathered, in attention order
  std::vector<const float*> value_rows;     // per gathered position, its KV head's value row
  std::vector<const float*> key_rows;       // a page run's key dimensions (KeyColumns)
  std::vector<float> queries, scores, outputs;  // [rows x heads][head_dim | keys | head_dim]
  std::vector<float> inv_sums;                  // [rows x heads]
};

// The value rows (from float `offset`: a KV head's) of `positions`, one page lookup per page:
// consecutive positions of a page are a row stride apart.
void GatherValues(PagedKvCache& kv, int64_t seq_id, int64_t layer, int64_t offset, const std::vector<int64_t>& positions,
                  std::vector<const float*>& values) {
  const int64_t stride = kv.RowStride(layer), page = kv.PageSize();
  values.resize(positions.size());
  const float* v = nullptr;
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t p = positions[i];
    if (i > 0 && p == positions[i - 1] + 1 && p % page != 0) {
      v += stride;
    } else {
      v = kv.Value(seq_id, layer, p) + offset;
    }
    values[i] = v;
  }
}

// scores[r][j] = queries[r] . key(positions[j]) for r < m and every gathered position: per run of
// positions within one page, one MatMulRows over that page's key columns (the cache keeps keys
// transposed; the KV head's dimensions start at row `offset`), written at the run's columns.
// MatMulRows computes each value alone, so the runs give what one product over all keys would.
void KeyScores(PagedKvCache& kv, int64_t seq_id, int64_t layer, int64_t offset, int64_t d, const float* queries,
               int64_t m, AttentionScratch& s, float* scores) {
  const int64_t page = kv.PageSize(), nk = static_cast<int64_t>(s.positions.size());
  s.key_rows.resize(static_cast<size_t>(d));
  for (int64_t j = 0; j < nk;) {
    const int64_t p = s.positions[static_cast<size_t>(j)];
    int64_t run = 1;
    while (j + run < nk && s.positions[static_cast<size_t>(j + run)] == p + run && (p + run) % page != 0) ++run;
    const float* column = kv.KeyColumn(seq_id, layer, p) + offset * page;
    for (int64_t i = 0; i < d; ++i) s.key_rows[static_cast<size_t>(i)] = column + i * page;
    MatMulRows(queries, d, m, d, s.key_rows.data(), run, scores + j, nk);
    j += run;
  }
}

// One task: the keys and values every row of it sees, gathered for its KV head (the sinks, then
// [first window start, last position]); the scores of every (row, head) as matrix products over
// the cache's key columns (KeyScores), each row's softmax over its own keys (the sinks before its
// window, then its window up to its position; the others weigh 0), the weighted values as a
// second product. Every value is computed the same way whichever rows share its task (kernels.h's
// MatMulRows; the softmax sums per contiguous piece of a row's keys), so a row's output does not
// depend on the batch or chunk.
void AttendTask(const AttentionSpec& spec, PagedKvCache& kv, int64_t kv_layer, const float* q, int64_t q_stride,
                const std::vector<RowPlace>& rows, const AttentionTask& task, AttentionScratch& s, float* out) {
  const int64_t d = spec.head_dim, heads = spec.num_heads, g = task.head_end - task.head_begin;
  const int64_t seq_id = rows[static_cast<size_t>(task.row_begin)].seq_id;
  auto window_start = [&](int64_t pos) {
    int64_t lo = kv.WindowStart(pos);
    if (spec.sliding_window > 0) lo = std::max<int64_t>(lo, pos - spec.sliding_window + 1);
    return lo;
  };
  const int64_t first_pos = rows[static_cast<size_t>(task.row_begin)].pos;
  const int64_t last_pos = rows[static_cast<size_t>(task.row_end - 1)].pos;
  const int64_t lo_min = window_start(first_pos), sink_end = kv.SinkEnd();
  const int64_t sinks = std::min(sink_end, lo_min);
  s.positions.clear();
  for (int64_t p = 0; p < sinks; ++p) s.positions.push_back(p);
  for (int64_t p = lo_min; p <= last_pos; ++p) s.positions.push_back(p);
  const int64_t nk = static_cast<int64_t>(s.positions.size());
  GatherValues(kv, seq_id, kv_layer, task.kv_head * d, s.positions, s.value_rows);

  const int64_t m = (task.row_end - task.row_begin) * g;
  s.queries.resize(static_cast<size_t>(m * d));
  s.scores.resize(static_cast<size_t>(m * nk));
  s.outputs.resize(static_cast<size_t>(m * d));
  for (int64_t t = task.row_begin; t < task.row_end; ++t) {
    std::copy_n(q + t * q_stride + task.head_begin * d, g * d, s.queries.data() + (t - task.row_begin) * g * d);
  }
  KeyScores(kv, seq_id, kv_layer, task.kv_head * d, d, s.queries.data(), m, s, s.scores.data());

  std::vector<float>& inv_sums = s.inv_sums;
  inv_sums.resize(static_cast<size_t>(m));
  for (int64_t t = task.row_begin; t < task.row_end; ++t) {
    const int64_t pos = rows[static_cast<size_t>(t)].pos, lo = window_start(pos);
    // The row's keys in the gathered order: [0, sink_count) its sinks, [from, to) its window.
    const int64_t own_sinks = std::min(sink_end, lo);
    const int64_t sink_count = own_sinks > lo_min ? sinks + own_sinks - lo_min : sinks;
    const int64_t from = sinks + lo - lo_min, to = sinks + pos - lo_min + 1;
    for (int64_t hh = 0; hh < g; ++hh) {
      const int64_t r = (t - task.row_begin) * g + hh;
      float* row = s.scores.data() + r * nk;
      float max_s = -INFINITY;
      auto score = [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          float v = row[j] * spec.scale;
          if (spec.softcap > 0) v = spec.softcap * std::tanh(v / spec.softcap);
          row[j] = v;
          max_s = std::max(max_s, v);
        }
      };
      score(0, sink_count);
      score(from, to);
      const float sum = ExpShiftedSum(row, sink_count, max_s) + ExpShiftedSum(row + from, to - from, max_s);
      std::fill(row + sink_count, row + from, 0.0f);
      std::fill(row + to, row + nk, 0.0f);
      inv_sums[static_cast<size_t>(r)] = 1.0f / sum;
    }
  }
  MatMulRows(s.scores.data(), nk, m, nk, s.value_rows.data(), d, s.outputs.data(), d);
  for (int64_t r = 0; r < m; ++r) {
    const int64_t t = task.row_begin + r / g, h = task.head_begin + r % g;
    const float inv = inv_sums[static_cast<size_t>(r)];
    const float* o = s.outputs.data() + r * d;
    float* dst = out + t * heads * d + h * d;
    for (int64_t i = 0; i < d; ++i) dst[i] = o[i] * inv;
  }
}

}  // namespace

void PagedAttention(const AttentionSpec& spec, PagedKvCache& kv, int64_t kv_layer, const float* q,
                    int64_t q_stride, const std::vector<RowPlace>& rows, float* out) {
  const int64_t group = spec.num_heads / spec.num_kv_heads;
  const std::vector<AttentionTask> tasks = AttentionTasks(RowRuns(rows), spec.num_kv_heads, group);
  ParallelFor(static_cast<int64_t>(tasks.size()), 1, [&](int64_t begin, int64_t end) {
    thread_local AttentionScratch scratch;  // kept between calls: no allocation per layer
    for (int64_t i = begin; i < end; ++i) {
      AttendTask(spec, kv, kv_layer, q, q_stride, rows, tasks[static_cast<size_t>(i)], scratch, out);
    }
  });
}

void DenseAttention(const float* q, const float* k, const float* v, int64_t stride, int64_t n,
                    int64_t heads, int64_t head_dim, float scale, float* out) {
  // Per head, its keys transposed and scaled once; then per (head, block of query rows) the scores
  // as one matrix product, each row's softmax numerators, and the numerators times the value rows
  // (read where they are), divided by the row's sum.
  const int64_t d = head_dim;
  thread_local std::vector<float> keys_t;  // [heads][d][n]
  keys_t.resize(static_cast<size_t>(heads * d * n));
  float* keys = keys_t.data();
  ParallelFor(heads, 1, [&](int64_t h_begin, int64_t h_end) {
    std::vector<const float*> rows(static_cast<size_t>(n));
    for (int64_t h = h_begin; h < h_end; ++h) {
      for (int64_t j = 0; j < n; ++j) rows[static_cast<size_t>(j)] = k + j * stride + h * d;
      float* kt = keys + h * d * n;
      TransposeRows(rows.data(), n, d, kt, n);
      for (int64_t i = 0; i < d * n; ++i) kt[i] *= scale;
    }
  });
  const int64_t blocks = (n + kDenseBlockRows - 1) / kDenseBlockRows;
  ParallelFor(heads * blocks, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores, heads_out, sums;
    thread_local std::vector<const float*> key_rows, value_rows;
    scores.resize(static_cast<size_t>(kDenseBlockRows * n));
    heads_out.resize(static_cast<size_t>(kDenseBlockRows * d));
    sums.resize(static_cast<size_t>(kDenseBlockRows));
    key_rows.resize(static_cast<size_t>(d));
    value_rows.resize(static_cast<size_t>(n));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t h = task / blocks, r0 = (task % blocks) * kDenseBlockRows;
      const int64_t rows = std::min(kDenseBlockRows, n - r0);
      for (int64_t i = 0; i < d; ++i) key_rows[static_cast<size_t>(i)] = keys + (h * d + i) * n;
      for (int64_t j = 0; j < n; ++j) value_rows[static_cast<size_t>(j)] = v + j * stride + h * d;
      MatMulRows(q + r0 * stride + h * d, stride, rows, d, key_rows.data(), n, scores.data(), n);
      for (int64_t t = 0; t < rows; ++t) {
        float* row = scores.data() + t * n;
        sums[static_cast<size_t>(t)] = ExpShiftedSum(row, n, *std::max_element(row, row + n));
      }
      MatMulRows(scores.data(), n, rows, n, value_rows.data(), d, heads_out.data(), d);
      for (int64_t t = 0; t < rows; ++t) {
        const float inv = 1.0f / sums[static_cast<size_t>(t)];
        float* o = out + (r0 + t) * heads * d + h * d;
        for (int64_t i = 0; i < d; ++i) o[i] = heads_out[static_cast<size_t>(t * d + i)] * inv;
      }
    }
  });
}

std::vector<float> PatchRows(const float* chw, int64_t channels, int64_t height, int64_t width,
                             int64_t patch) {
  const int64_t gx = width / patch, gy = height / patch, row = channels * patch * patch;
  std::vector<float> out(static_cast<size_t>(gx * gy * row));
  for (int64_t py = 0; py < gy; ++py) {
    for (int64_t px = 0; px < gx; ++px) {
      float* o = out.data() + (py * gx + px) * row;
      for (int64_t ch = 0; ch < channels; ++ch) {
        for (int64_t y = 0; y < patch; ++y) {
          const float* src = chw + (ch * height + py * patch + y) * width + px * patch;
          std::copy(src, src + patch, o + (ch * patch + y) * patch);
        }
      }
    }
  }
  return out;
}

}  // namespace mlc::cpu
