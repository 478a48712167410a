#!/usr/bin/python3
"""Converts a converted MLC package (mlc-chat-config.json, tensor-cache.json or ndarray-cache.json and
its shards) to a GGUF v3 file that llama.cpp loads, holding the same weights, so the tests can compare
the CPU program with llama.cpp on identical numbers.

Weights: MLC's 4-bit group quantisation (q in 0..14, weight (q - 7) * scale, 32 values per group
along the input axis, eight 4-bit values per uint32, value j of a word in bits 4j..4j+3) maps
exactly onto Q4_0 (value q + 1, weight (q' - 8) * d, d the same float16 scale); q4f32_1 (float32
scales, which Q4_0 cannot hold) is written dequantised as F32. q0f32 / q0f16 matrices are written as
F32 / F16; one-dimensional tensors (norms, biases) as F32.

Per family the tensors follow llama.cpp's architecture: fused qkv and gate_up matrices are split
(phi3 keeps both fused, as llama.cpp's phi3 reads them), llama's query and key rows are reordered
for llama.cpp's adjacent-pair rotation (MLC rotates halves, as Hugging Face does), gemma's norm
weights are copied as stored (MLC's converter already stored 1 + w, which llama.cpp also expects),
gemma2's query_pre_attn_scalar is folded into its query rows (written F32) since llama.cpp scales
scores by head_dim^-0.5, and Llama 3 / longrope scaling become llama.cpp's rope factor tensors.

Gemma 3 (model_type gemma3 / gemma3_text, the decoder of text_config under language_model.model.):
unfused projections as they are, norms copied as stored, query_pre_attn_scalar folded into the
query norm's gains (the query is normalized per head after its projection), the sliding layers a bool
pattern with their own rotary base, a linear rope_scaling llama.cpp's scaling keys (llama.cpp scales
the global layers only, as Hugging Face does).

Gemma 4 (model_type gemma4, the text decoder of text_config; audio and vision towers are left out):
norm weights are copied as stored (Gemma 4 multiplies by the weight itself, and so does llama.cpp's
gemma4, whose own converter shifts nothing); MLC's per-layer embedding tables (one a layer) become one table of
the layers side by side; layer_scalar becomes layer_output_scale; the full layers' head size, rotary
base and rotary width are the common keys, the sliding layers' the *_swa keys, the window pattern a
bool array; the double-wide MLPs of the shared layers a per-layer feed_forward_length array. The
proportional rotary of full layers (only partial_rotary_factor of the pairs turn, at the
frequencies of the whole head) is llama.cpp's NeoX rotary over the whole head with a
rope_freqs.weight divisor of 1e30 on the pairs that do not turn. llama.cpp fixes the attention
scale at 1 and multiplies embeddings by sqrt(hidden) and per-layer rows by sqrt(width) in float32,
as the CPU program does. One limit: llama.cpp lets a shared-KV sliding layer read layer
first_shared - 2 and a full one first_shared - 1, where Gemma 4 reads the last unshared layer of the
same type; packages where these differ are refused.
The vocabulary is a minimal SentencePiece-style token list (the tests feed token ids).

Usage: mlc_to_gguf.py PACKAGE_DIR OUT.gguf
"""

import json
import math
import os
import struct
import sys

import numpy as np

GGUF_ALIGNMENT = 32
# GGUF metadata value types.
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
# ggml tensor types.
GGML_F32, GGML_F16, GGML_Q4_0 = 0, 1, 2
QK4_0 = 32
MLC_GROUP = 32


class ConvertError(Exception):
    pass


# ---- Reading the package ----------------------------------------------------------------------

DTYPES = {"float32": np.float32, "float16": np.float16, "uint32": np.uint32, "int32": np.int32,
          "bfloat16": np.uint16, "uint8": np.uint8, "int8": np.int8}


class Package:
    """The package's config and its parameters, read from the mapped shards."""

    def __init__(self, folder):
        self.folder = folder
        with open(os.path.join(folder, "mlc-chat-config.json")) as f:
            self.chat = json.load(f)
        cache = None
        for name in ("tensor-cache.json", "ndarray-cache.json"):
            if os.path.exists(os.path.join(folder, name)):
                cache = name
                break
        if cache is None:
            raise ConvertError(f"{folder}: no tensor-cache.json or ndarray-cache.json")
        with open(os.path.join(folder, cache)) as f:
            index = json.load(f)
        self.records = {}
        for shard in index["records"]:
            for rec in shard["records"]:
                self.records[rec["name"]] = (shard["dataPath"], rec)
        self._maps = {}

    def has(self, name):
        return name in self.records

    def array(self, name):
        if name not in self.records:
            raise ConvertError(f"parameter {name} is missing from the package")
        path, rec = self.records[name]
        if path not in self._maps:
            self._maps[path] = np.memmap(os.path.join(self.folder, path), dtype=np.uint8, mode="r")
        shape = tuple(rec["shape"])
        count = int(np.prod(shape)) if shape else 1
        raw = self._maps[path][rec["byteOffset"]:rec["byteOffset"] + rec["nbytes"]]
        dtype = rec["dtype"]
        if dtype == "float32" and rec.get("format") == "f32-to-bf16" and rec["nbytes"] == count * 2:
            bits = raw.view(np.uint16).astype(np.uint32) << 16
            return bits.view(np.float32).reshape(shape)
        if dtype not in DTYPES:
            raise ConvertError(f"parameter {name}: dtype {dtype} is not supported")
        out = raw.view(DTYPES[dtype])
        if out.size != count:
            raise ConvertError(f"parameter {name}: {rec['nbytes']} bytes do not hold shape {list(shape)} of {dtype}")
        out = out.reshape(shape)
        if dtype == "bfloat16":
            out = (out.astype(np.uint32) << 16).view(np.float32)
        return out


class Matrix:
    """A [rows, cols] matrix: either 4-bit (q uint8 0..14 and per-group scales) or plain floats."""

    def __init__(self, q=None, scale=None, dense=None):
        self.q, self.scale, self.dense = q, scale, dense

    @property
    def rows(self):
        return (self.q if self.q is not None else self.dense).shape[0]

    def take_rows(self, index):
        if self.q is not None:
            return Matrix(q=self.q[index], scale=self.scale[index])
        return Matrix(dense=self.dense[index])

    def dequantized(self):
        if self.q is None:
            return self.dense.astype(np.float32)
        w = self.q.astype(np.float32) - 7.0
        groups = w.reshape(w.shape[0], -1, MLC_GROUP)
        return (groups * self.scale.astype(np.float32)[:, :, None]).reshape(w.shape)


def unpack_q4(q_weight, cols):
    """uint32 [rows, cols / 8] -> uint8 [rows, cols]; value j of a word sits in bits 4j..4j+3, so
    in the little-endian bytes of the words value 2k is the low and 2k + 1 the high nibble of byte k."""
    packed = np.ascontiguousarray(q_weight).view(np.uint8)
    out = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    out[:, 0::2] = packed & 15
    out[:, 1::2] = packed >> 4
    return out[:, :cols]


def read_matrix(pkg, base):
    if pkg.has(base + ".q_weight"):
        qw = pkg.array(base + ".q_weight")
        scale = pkg.array(base + ".q_scale")
        if qw.ndim != 2 or scale.ndim != 2 or scale.shape[0] != qw.shape[0] or scale.shape[1] * MLC_GROUP != qw.shape[1] * 8:
            raise ConvertError(f"{base}: q_weight {list(qw.shape)} and q_scale {list(scale.shape)} are not a group-32 pair")
        q = unpack_q4(qw, qw.shape[1] * 8)
        if q.max(initial=0) > 14:
            raise ConvertError(f"{base}.q_weight: a 4-bit value above 14 (MLC stores 0..14)")
        return Matrix(q=q, scale=scale)
    w = pkg.array(base + ".weight")
    if w.ndim != 2:
        raise ConvertError(f"{base}.weight: expected a matrix, got shape {list(w.shape)}")
    return Matrix(dense=w)


# ---- Architecture mapping ---------------------------------------------------------------------

def cfg_get(mc, names, default=None):
    for n in names:
        if n in mc and mc[n] is not None:
            return mc[n]
    if default is None:
        raise ConvertError(f"model_config has none of {names}")
    return default


class Dims:
    def __init__(self, chat):
        mc = chat["model_config"]
        self.family = chat["model_type"]
        if self.family in ("gemma4", "gemma3", "gemma3_text"):
            mc = mc.get("text_config") or {}
        # The Hugging Face fields MLC's config classes have no member for are in "kwargs".
        mc = {**(mc.get("kwargs") or {}), **{k: v for k, v in mc.items() if k != "kwargs"}}
        # gemma3_text packages are llama.cpp's gemma3.
        self.arch = "gemma3" if self.family == "gemma3_text" else self.family
        self.quantization = chat["quantization"]
        self.hidden = int(cfg_get(mc, ["hidden_size"]))
        self.ff = int(cfg_get(mc, ["intermediate_size"]))
        self.layers = int(cfg_get(mc, ["num_hidden_layers"]))
        self.heads = int(cfg_get(mc, ["num_attention_heads"]))
        self.kv_heads = int(cfg_get(mc, ["num_key_value_heads"], self.heads))
        self.head_dim = int(cfg_get(mc, ["head_dim"], self.hidden // self.heads))
        self.vocab = int(cfg_get(mc, ["vocab_size"], chat.get("vocab_size")))
        self.eps = float(cfg_get(mc, ["rms_norm_eps", "layer_norm_eps"], 1e-5))
        self.theta = float(cfg_get(mc, ["rope_theta", "position_embedding_base"], 10000.0))
        self.context = int(cfg_get(mc, ["context_window_size", "max_position_embeddings"], chat.get("context_window_size", 4096)))
        self.tied = bool(mc.get("tie_word_embeddings", False))
        self.mc = mc


def permute_for_adjacent_rope(m, heads, head_dim):
    """Rows of each head reordered from rotate-half pairs (i, i + d/2) to adjacent pairs (2i, 2i+1)."""
    half = head_dim // 2
    order = np.arange(heads * head_dim).reshape(heads, 2, half).transpose(0, 2, 1).reshape(-1)
    return m.take_rows(order)


def split_rows(m, sizes):
    out, start = [], 0
    for s in sizes:
        out.append(m.take_rows(np.arange(start, start + s)))
        start += s
    if start != m.rows:
        raise ConvertError(f"a fused matrix has {m.rows} rows, expected {start}")
    return out


def family_tensors(pkg, d):
    """Yields (gguf name, Matrix or 1-D array) in llama.cpp's naming for the package's family."""
    fam = d.arch
    if fam == "gemma4":
        yield from gemma4_tensors(pkg, d, Gemma4Layout(d))
        return
    q_rows, kv_rows = d.heads * d.head_dim, d.kv_heads * d.head_dim
    if fam == "phi3":
        root, embed, final_norm = "transformer.h.{}.", "transformer.embd", "transformer.norm"
    elif fam in ("llama", "qwen2", "gemma", "gemma2"):
        root, embed, final_norm = "model.layers.{}.", "model.embed_tokens", "model.norm"
    elif fam == "gemma3":
        root, embed, final_norm = ("language_model.model.layers.{}.", "language_model.model.embed_tokens",
                                   "language_model.model.norm")
    else:
        raise ConvertError(f"model_type {fam} is not supported (llama, qwen2, gemma, gemma2, gemma3, gemma4, phi3)")

    yield "token_embd.weight", read_matrix(pkg, embed)
    for i in range(d.layers):
        p, b = root.format(i), f"blk.{i}."
        if fam == "phi3":
            yield b + "attn_norm.weight", pkg.array(p + "ln.weight")
            yield b + "attn_qkv.weight", read_matrix(pkg, p + "mixer.qkv_proj")
            yield b + "attn_output.weight", read_matrix(pkg, p + "mixer.out_proj")
            yield b + "ffn_norm.weight", pkg.array(p + "post_attention_layernorm.weight")
            yield b + "ffn_up.weight", read_matrix(pkg, p + "mlp.gate_up_proj")  # gate then up, fused
            yield b + "ffn_down.weight", read_matrix(pkg, p + "mlp.down_proj")
            continue
        yield b + "attn_norm.weight", pkg.array(p + "input_layernorm.weight")
        if fam == "gemma3":
            yield from gemma3_layer(pkg, d, p, b)
            continue
        qkv_name = p + ("self_attn.c_attn" if fam == "qwen2" else "self_attn.qkv_proj")
        q, k, v = split_rows(read_matrix(pkg, qkv_name), [q_rows, kv_rows, kv_rows])
        if fam == "llama":
            q = permute_for_adjacent_rope(q, d.heads, d.head_dim)
            k = permute_for_adjacent_rope(k, d.kv_heads, d.head_dim)
        q_factor = query_factor(d)
        if q_factor != 1.0:  # written as F32: exact up to float32 rounding
            q = Matrix(dense=q.dequantized() * np.float32(q_factor))
        yield b + "attn_q.weight", q
        yield b + "attn_k.weight", k
        yield b + "attn_v.weight", v
        if pkg.has(qkv_name + ".bias"):
            bias = pkg.array(qkv_name + ".bias")
            yield b + "attn_q.bias", bias[:q_rows].astype(np.float32) * np.float32(q_factor)
            yield b + "attn_k.bias", bias[q_rows:q_rows + kv_rows]
            yield b + "attn_v.bias", bias[q_rows + kv_rows:]
        yield b + "attn_output.weight", read_matrix(pkg, p + "self_attn.o_proj")
        if fam == "gemma2":
            yield b + "post_attention_norm.weight", pkg.array(p + "post_attention_layernorm.weight")
            yield b + "ffn_norm.weight", pkg.array(p + "pre_feedforward_layernorm.weight")
            yield b + "post_ffw_norm.weight", pkg.array(p + "post_feedforward_layernorm.weight")
        else:
            yield b + "ffn_norm.weight", pkg.array(p + "post_attention_layernorm.weight")
        gate, up = split_rows(read_matrix(pkg, p + "mlp.gate_up_proj"), [d.ff, d.ff])
        yield b + "ffn_gate.weight", gate
        yield b + "ffn_up.weight", up
        yield b + "ffn_down.weight", read_matrix(pkg, p + "mlp.down_proj")
    yield "output_norm.weight", pkg.array(final_norm + ".weight")
    if pkg.has("lm_head.q_weight") or pkg.has("lm_head.weight"):
        yield "output.weight", read_matrix(pkg, "lm_head")
    elif fam in ("gemma", "gemma2", "gemma3"):
        pass  # llama.cpp's gemma reads the embedding as the output matrix when there is none
    elif not d.tied:
        raise ConvertError("no lm_head and tie_word_embeddings is not set")
    yield from rope_tensors(d)


# ---- Gemma 3 ----------------------------------------------------------------------------------

def gemma3_layer(pkg, d, p, b):
    """One Gemma 3 layer after its attention norm: unfused projections, the per-head q/k norms (the
    query's times query_factor: a factor on the rows before the norm would vanish in it), the norms
    around attention and MLP as Gemma 2's."""
    for ours, theirs in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
        yield b + theirs + ".weight", read_matrix(pkg, p + "self_attn." + ours)
    yield b + "attn_q_norm.weight", pkg.array(p + "self_attn.q_norm.weight").astype(np.float32) * np.float32(query_factor(d))
    yield b + "attn_k_norm.weight", pkg.array(p + "self_attn.k_norm.weight")
    yield b + "post_attention_norm.weight", pkg.array(p + "post_attention_layernorm.weight")
    yield b + "ffn_norm.weight", pkg.array(p + "pre_feedforward_layernorm.weight")
    yield b + "post_ffw_norm.weight", pkg.array(p + "post_feedforward_layernorm.weight")
    gate, up = split_rows(read_matrix(pkg, p + "mlp.gate_up_proj"), [d.ff, d.ff])
    yield b + "ffn_gate.weight", gate
    yield b + "ffn_up.weight", up
    yield b + "ffn_down.weight", read_matrix(pkg, p + "mlp.down_proj")


def gemma3_global_layers(d):
    """True for the layers that attend to everything: layer_types, else every pattern-th layer."""
    types = d.mc.get("layer_types")
    if types:
        return [t == "full_attention" for t in types]
    pattern = int(d.mc.get("sliding_window_pattern") or 6)
    return [(i + 1) % pattern == 0 for i in range(d.layers)]


def gemma3_metadata(d):
    """Gemma 3's own keys: the window, which layers slide, the local rotary base; a linear scaling
    of the global rotary."""
    a = d.arch
    window = d.mc.get("sliding_window_size") or d.mc.get("sliding_window")
    kv = [(f"{a}.attention.sliding_window", T_UINT32, int(window)),
          (f"{a}.attention.sliding_window_pattern", (T_ARRAY, T_BOOL), [not g for g in gemma3_global_layers(d)]),
          (f"{a}.rope.freq_base_swa", T_FLOAT32, float(d.mc.get("rope_local_base_freq") or 10000.0))]
    kind, rs = rope_scaling(d)
    if kind == "linear":
        kv += [(f"{a}.rope.scaling.type", T_STRING, "linear"),
               (f"{a}.rope.scaling.factor", T_FLOAT32, float(rs["factor"]))]
    return kv


# ---- Gemma 4 ----------------------------------------------------------------------------------

class Gemma4Layout:
    """The per-layer facts of a Gemma 4 text decoder (text_config), checked against what llama.cpp's
    gemma4 can express."""

    def __init__(self, d):
        mc = d.mc
        types = mc.get("layer_types")
        if not isinstance(types, list) or len(types) != d.layers:
            raise ConvertError("text_config.layer_types: expected one entry per layer")
        self.swa = [t == "sliding_attention" for t in types]
        self.head_dim_swa = d.head_dim
        self.head_dim_full = int(mc.get("global_head_dim") or d.head_dim)
        self.window = int(cfg_get(mc, ["sliding_window"]))
        self.plw = int(mc.get("hidden_size_per_layer_input") or 0)
        self.shared = int(mc.get("num_kv_shared_layers") or 0)
        self.first_shared = d.layers - self.shared
        wide = bool(mc.get("use_double_wide_mlp")) and self.shared > 0
        self.ff = [d.ff * (2 if wide and l >= self.first_shared else 1) for l in range(d.layers)]
        rope = mc.get("rope_parameters") or {}
        slide, full = rope.get("sliding_attention") or {}, rope.get("full_attention") or {}
        self.theta_swa = float(slide.get("rope_theta", 10000.0))
        self.theta_full = float(full.get("rope_theta", 1000000.0))
        partial = float(full.get("partial_rotary_factor", 1.0)) if full.get("rope_type") == "proportional" else 1.0
        self.rotated_pairs = int(math.floor(partial * self.head_dim_full / 2))
        for key in ("attention_k_eq_v", "enable_moe_block"):
            if mc.get(key):
                raise ConvertError(f"text_config.{key}: not supported by this converter")
        self.check_kv_sharing()

    def check_kv_sharing(self):
        """Hugging Face: a shared layer reads the last non-shared layer of its own type. llama.cpp
        assumes the non-shared part ends with a sliding then a full layer (E2B, E4B): a shared
        sliding layer reads layer first_shared - 2, a full one first_shared - 1."""
        if self.shared == 0:
            return
        for l in range(self.first_shared, len(self.swa)):
            ours = next((j for j in range(self.first_shared - 1, -1, -1) if self.swa[j] == self.swa[l]), None)
            theirs = self.first_shared - (2 if self.swa[l] else 1)
            if ours != theirs:
                raise ConvertError(f"layer {l} reads the keys and values of layer {ours}; llama.cpp's gemma4 "
                                   f"would read layer {theirs} (the non-shared layers must end sliding, full)")


def gemma4_tensors(pkg, d, g):
    """Gemma 4's text decoder under language_model. (audio and vision towers are not converted).
    MLC keeps one per-layer embedding table per layer ([vocab, width] each); llama.cpp one table of
    all layers side by side ([vocab, layers * width]), layer l in columns l * width onwards."""
    root = "language_model."
    yield "token_embd.weight", read_matrix(pkg, root + "embed_tokens")
    if g.plw > 0:
        yield "per_layer_token_embd.weight", SideBySide(pkg, [f"{root}embed_tokens_per_layer.{l}" for l in range(d.layers)])
        yield "per_layer_model_proj.weight", read_matrix(pkg, root + "per_layer_model_projection")
        yield "per_layer_proj_norm.weight", pkg.array(root + "per_layer_projection_norm.weight")
    for i in range(d.layers):
        p, b = f"{root}layers.{i}.", f"blk.{i}."
        yield b + "attn_norm.weight", pkg.array(p + "input_layernorm.weight")
        yield b + "attn_q.weight", read_matrix(pkg, p + "self_attn.q_proj")
        yield b + "attn_q_norm.weight", pkg.array(p + "self_attn.q_norm.weight")
        if i < g.first_shared:
            yield b + "attn_k.weight", read_matrix(pkg, p + "self_attn.k_proj")
            yield b + "attn_v.weight", read_matrix(pkg, p + "self_attn.v_proj")
            yield b + "attn_k_norm.weight", pkg.array(p + "self_attn.k_norm.weight")
        yield b + "attn_output.weight", read_matrix(pkg, p + "self_attn.o_proj")
        yield b + "post_attention_norm.weight", pkg.array(p + "post_attention_layernorm.weight")
        yield b + "ffn_norm.weight", pkg.array(p + "pre_feedforward_layernorm.weight")
        gate, up = split_rows(read_matrix(pkg, p + "mlp.gate_up_proj"), [g.ff[i], g.ff[i]])
        yield b + "ffn_gate.weight", gate
        yield b + "ffn_up.weight", up
        yield b + "ffn_down.weight", read_matrix(pkg, p + "mlp.down_proj")
        yield b + "post_ffw_norm.weight", pkg.array(p + "post_feedforward_layernorm.weight")
        if g.plw > 0:
            yield b + "inp_gate.weight", read_matrix(pkg, p + "per_layer_input_gate")
            yield b + "proj.weight", read_matrix(pkg, p + "per_layer_projection")
            yield b + "post_norm.weight", pkg.array(p + "post_per_layer_input_norm.weight")
        yield b + "layer_output_scale.weight", np.asarray(pkg.array(p + "layer_scalar"), np.float32).reshape(1)
    yield "output_norm.weight", pkg.array(root + "norm.weight")
    # Proportional rotary: llama.cpp turns every pair of the full head (NeoX halves, as MLC), so
    # the pairs past the rotated ones get a frequency divisor so large their angle is 0.
    half = g.head_dim_full // 2
    yield "rope_freqs.weight", np.array([1.0] * g.rotated_pairs + [1e30] * (half - g.rotated_pairs), np.float32)


class SideBySide:
    """Matrices of equal rows side by side, read and encoded one at a time (E2B's 35 per-layer
    tables are 1.3 GB packed): a row of 4-bit Q4_0 blocks is its pieces' blocks in order, since the
    pieces are whole groups of 32."""

    def __init__(self, pkg, names):
        self.pkg, self.names = pkg, names

    def encode(self, quantization):
        parts, gtype = [], None
        for name in self.names:
            kind, dims, data = encode(name, read_matrix(self.pkg, name), quantization)
            if gtype not in (None, kind):
                raise ConvertError(f"{name}: stored unlike the other tables")
            gtype = kind
            parts.append(np.frombuffer(data, np.uint8).reshape(dims[1], -1))
        cols = sum(encode_cols(gtype, p.shape[1]) for p in parts)
        return gtype, [cols, parts[0].shape[0]], np.concatenate(parts, axis=1).tobytes()


def encode_cols(gtype, row_bytes):
    """Values in a row of row_bytes bytes of the ggml type."""
    if gtype == GGML_Q4_0:
        return row_bytes // (2 + QK4_0 // 2) * QK4_0
    return row_bytes // (4 if gtype == GGML_F32 else 2)


def gemma4_metadata(d, g):
    """Gemma 4's own keys: per-layer head sizes, window pattern, KV sharing and MLP widths."""
    a = d.family
    kv = [(f"{a}.attention.key_length_swa", T_UINT32, g.head_dim_swa),
          (f"{a}.attention.value_length_swa", T_UINT32, g.head_dim_swa),
          (f"{a}.attention.sliding_window", T_UINT32, g.window),
          (f"{a}.attention.sliding_window_pattern", (T_ARRAY, T_BOOL), g.swa),
          (f"{a}.attention.shared_kv_layers", T_UINT32, g.shared),
          (f"{a}.embedding_length_per_layer_input", T_UINT32, g.plw),
          (f"{a}.rope.freq_base_swa", T_FLOAT32, g.theta_swa),
          (f"{a}.rope.dimension_count_swa", T_UINT32, g.head_dim_swa)]
    if d.mc.get("final_logit_softcapping"):
        kv.append((f"{a}.final_logit_softcapping", T_FLOAT32, float(d.mc["final_logit_softcapping"])))
    return kv


def query_factor(d):
    """Gemma 2 divides attention scores by sqrt(query_pre_attn_scalar); llama.cpp (below 27B) by
    sqrt(head_dim). Scaling the query rows by sqrt(head_dim / query_pre_attn_scalar) makes them equal."""
    scalar = d.mc.get("query_pre_attn_scalar") if d.arch in ("gemma2", "gemma3") else None
    return 1.0 if scalar is None else math.sqrt(d.head_dim / float(scalar))


def rope_scaling(d):
    rs = d.mc.get("rope_scaling")
    if not isinstance(rs, dict):
        return None, {}
    kind = (rs.get("rope_type") or rs.get("type") or "").lower()
    return (kind or None), rs


def rope_tensors(d):
    kind, rs = rope_scaling(d)
    rot = rotary_dim(d)
    if kind == "llama3":
        # The per-frequency divisors of Llama 3.1's rule (llama.cpp divides theta by them).
        factor = float(rs.get("factor", 8.0))
        low, high = float(rs.get("low_freq_factor", 1.0)), float(rs.get("high_freq_factor", 4.0))
        old = float(rs.get("original_max_position_embeddings", 8192))
        out = []
        for i in range(0, rot, 2):
            wavelen = 2 * math.pi * d.theta ** (i / rot)
            if wavelen < old / high:
                out.append(1.0)
            elif wavelen > old / low:
                out.append(factor)
            else:
                smooth = (old / wavelen - low) / (high - low)
                out.append(1.0 / ((1 - smooth) / factor + smooth))
        yield "rope_freqs.weight", np.array(out, np.float32)
    elif kind in ("longrope", "su"):
        long_f, short_f = rs.get("long_factor"), rs.get("short_factor")
        if not long_f or not short_f or len(long_f) != rot // 2 or len(short_f) != rot // 2:
            raise ConvertError(f"rope_scaling: long_factor and short_factor need {rot // 2} values each")
        yield "rope_factors_long.weight", np.array(long_f, np.float32)
        yield "rope_factors_short.weight", np.array(short_f, np.float32)
    elif kind == "linear" and d.arch == "gemma3":
        pass  # a metadata key (gemma3_metadata)
    elif kind not in (None, "default"):
        raise ConvertError(f"rope_scaling type {kind} is not supported")


def rotary_dim(d):
    partial = float(d.mc.get("partial_rotary_factor", 1.0))
    return int(d.mc.get("rotary_dim") or int(partial * d.head_dim))


def metadata(d):
    """(key, type, value) for llama.cpp's hyperparameters of the family."""
    a = d.arch
    g = Gemma4Layout(d) if a == "gemma4" else None
    # Gemma 4: the common keys describe the full layers (their head size, rotary base and width).
    head_dim = g.head_dim_full if g else d.head_dim
    theta = g.theta_full if g else d.theta
    rot = g.head_dim_full if g else rotary_dim(d)
    ff = (T_UINT32, d.ff) if not g or len(set(g.ff)) == 1 else ((T_ARRAY, T_UINT32), g.ff)
    kv = [("general.architecture", T_STRING, a),
          # (no family in the name: llama.cpp patches the vocabulary of names it recognises)
          ("general.name", T_STRING, f"mlc-package-{d.quantization}"),
          ("general.alignment", T_UINT32, GGUF_ALIGNMENT),
          (f"{a}.vocab_size", T_UINT32, d.vocab),
          (f"{a}.embedding_length", T_UINT32, d.hidden),
          (f"{a}.feed_forward_length", ff[0], ff[1]),
          (f"{a}.block_count", T_UINT32, d.layers),
          (f"{a}.attention.head_count", T_UINT32, d.heads),
          (f"{a}.attention.head_count_kv", T_UINT32, d.kv_heads),
          (f"{a}.attention.key_length", T_UINT32, head_dim),
          (f"{a}.attention.value_length", T_UINT32, head_dim),
          (f"{a}.attention.layer_norm_rms_epsilon", T_FLOAT32, d.eps),
          (f"{a}.rope.freq_base", T_FLOAT32, theta),
          (f"{a}.rope.dimension_count", T_UINT32, rot)]
    context = d.context
    kind, rs = rope_scaling(d)
    if kind in ("longrope", "su"):
        orig = int(rs.get("original_max_position_embeddings") or d.mc.get("original_max_position_embeddings"))
        longest = int(rs.get("max_position_embeddings") or d.mc.get("max_position_embeddings") or d.context)
        scale = longest / orig
        attn = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0
        context = longest
        kv += [(f"{a}.rope.scaling.original_context_length", T_UINT32, orig),
               (f"{a}.rope.scaling.attn_factor", T_FLOAT32, attn)]
    kv.append((f"{a}.context_length", T_UINT32, context))
    if a == "gemma2":
        window = d.mc.get("sliding_window") or d.mc.get("sliding_window_size") or d.context
        # llama.cpp always soft-caps gemma2 (defaults 50 and 30); a huge cap is no cap.
        kv += [(f"{a}.attention.sliding_window", T_UINT32, int(window)),
               (f"{a}.attn_logit_softcapping", T_FLOAT32, float(d.mc.get("attn_logit_softcapping") or 1e30)),
               (f"{a}.final_logit_softcapping", T_FLOAT32, float(d.mc.get("final_logit_softcapping") or 1e30))]
    if g:
        kv += gemma4_metadata(d, g)
    if a == "gemma3":
        kv += gemma3_metadata(d)
    return kv


def tokenizer_metadata(vocab):
    """A SentencePiece-style list llama.cpp accepts: <unk> <s> </s>, byte tokens, then plain pieces."""
    tokens, types = ["<unk>", "<s>", "</s>"], [2, 3, 3]
    for byte in range(256):
        if len(tokens) >= vocab:
            break
        tokens.append(f"<0x{byte:02X}>")
        types.append(6)
    while len(tokens) < vocab:
        tokens.append(f"piece{len(tokens)}")
        types.append(1)
    tokens, types = tokens[:vocab], types[:vocab]
    return [("tokenizer.ggml.model", T_STRING, "llama"),
            ("tokenizer.ggml.tokens", (T_ARRAY, T_STRING), tokens),
            ("tokenizer.ggml.scores", (T_ARRAY, T_FLOAT32), [0.0] * vocab),
            ("tokenizer.ggml.token_type", (T_ARRAY, T_INT32), types),
            ("tokenizer.ggml.bos_token_id", T_UINT32, 1),
            ("tokenizer.ggml.eos_token_id", T_UINT32, 2),
            ("tokenizer.ggml.unknown_token_id", T_UINT32, 0),
            ("tokenizer.ggml.add_bos_token", T_BOOL, False),
            ("tokenizer.ggml.add_eos_token", T_BOOL, False)]


# ---- Tensor encodings -------------------------------------------------------------------------

def encode_q4_0(m):
    """Q4_0 blocks [rows, cols / 32] of (float16 d, 16 bytes): byte j holds value j (low nibble)
    and value j + 16 (high nibble) of the block, each stored as q + 1 over the offset 8."""
    rows, cols = m.q.shape
    if cols % QK4_0:
        raise ConvertError(f"a row of {cols} values is not whole Q4_0 blocks")
    q = (m.q + 1).reshape(rows, cols // QK4_0, QK4_0)
    qs = (q[:, :, :16] | (q[:, :, 16:] << 4)).astype(np.uint8)
    d = np.ascontiguousarray(m.scale.astype(np.float16)).view(np.uint8).reshape(rows, cols // QK4_0, 2)
    return np.concatenate([d, qs], axis=2).tobytes()


def encode(name, t, quantization):
    """(ggml type, dims innermost first, bytes) for one tensor."""
    if isinstance(t, SideBySide):
        return t.encode(quantization)
    if isinstance(t, Matrix):
        rows = t.rows
        cols = (t.q if t.q is not None else t.dense).shape[1]
        if t.q is not None and quantization == "q4f16_1":
            return GGML_Q4_0, [cols, rows], encode_q4_0(t)
        if t.q is not None or t.dense.dtype == np.float32:
            return GGML_F32, [cols, rows], np.ascontiguousarray(t.dequantized(), np.float32).tobytes()
        return GGML_F16, [cols, rows], np.ascontiguousarray(t.dense, np.float16).tobytes()
    arr = np.asarray(t)
    if arr.ndim != 1:
        raise ConvertError(f"{name}: expected a vector, got shape {list(arr.shape)}")
    return GGML_F32, [arr.shape[0]], np.ascontiguousarray(arr, np.float32).tobytes()


# ---- GGUF v3 writer ---------------------------------------------------------------------------

def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


SCALAR = {T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?"}


def gguf_value(kind, value):
    if isinstance(kind, tuple):
        _, elem = kind
        out = struct.pack("<IIQ", T_ARRAY, elem, len(value))
        if elem == T_STRING:
            return out + b"".join(gguf_string(v) for v in value)
        return out + b"".join(struct.pack(SCALAR[elem], v) for v in value)
    if kind == T_STRING:
        return struct.pack("<I", T_STRING) + gguf_string(value)
    return struct.pack("<I", kind) + struct.pack(SCALAR[kind], value)


def write_gguf(path, kv, tensors):
    header = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(kv))]
    for key, kind, value in kv:
        header.append(gguf_string(key) + gguf_value(kind, value))
    offset = 0
    placed = []
    for name, gtype, dims, data in tensors:
        header.append(gguf_string(name) + struct.pack("<I", len(dims)) +
                      b"".join(struct.pack("<Q", x) for x in dims) + struct.pack("<IQ", gtype, offset))
        placed.append((offset, data))
        offset += len(data)
        offset += -offset % GGUF_ALIGNMENT
    head = b"".join(header)
    head += b"\0" * (-len(head) % GGUF_ALIGNMENT)
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(head)
        for off, data in placed:
            f.write(b"\0" * (len(head) + off - f.tell()))
            f.write(data)
    os.replace(tmp, path)


def convert(folder, out_path):
    pkg = Package(folder)
    d = Dims(pkg.chat)
    if d.quantization not in ("q0f32", "q0f16", "q4f16_1", "q4f32_1"):
        raise ConvertError(f"quantization {d.quantization} is not supported (q0f32, q0f16, q4f16_1, q4f32_1)")
    tensors = []
    for name, t in family_tensors(pkg, d):
        gtype, dims, data = encode(name, t, d.quantization)
        tensors.append((name, gtype, dims, data))
    write_gguf(out_path, metadata(d) + tokenizer_metadata(d.vocab), tensors)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: mlc_to_gguf.py PACKAGE_DIR OUT.gguf\n")
        return 2
    try:
        convert(argv[1], argv[2])
    except (ConvertError, OSError, KeyError, ValueError) as e:
        sys.stderr.write(f"mlc_to_gguf: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
