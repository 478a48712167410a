#!/usr/bin/python3
"""Writes a tiny random-weight Gemma 4 (E2B layout, with the audio tower) q4f16_1 package the way
MLC's converter lays one out, independently of the project's own writer (src/runtime/cpu/writer.cc):
the parameter list in the converter's order, MLC's 4-bit group quantization, float32 records stored
as bfloat16, the preprocessor's fixed tables computed here from their definitions, tensor-cache.json
and mlc-chat-config.json (the parts shared with llava_package.py in mlc_package.py). A legacy
package: no manifest; --tasks also writes the tasks document (chat with an audio input) that
`mlc-manifest emit package OUT_DIR --tasks PATH` turns into one.
Usage:

    gemma4_package.py OUT_DIR TOKENIZER_JSON [--seed N] [--tasks PATH]
"""
import math
import sys

import numpy as np

sys.dont_write_bytecode = True  # the tests run it from the source tree: no __pycache__ there
import mlc_package  # noqa: E402  (beside this script: its folder is first on sys.path)

# The tiny shape: six decoder layers (every third one full attention, the last three sharing the
# KV of earlier ones and with a double-wide MLP), a two-layer audio conformer.
VOCAB = 512
HIDDEN = 128
INTERMEDIATE = 256
HEADS = 4
KV_HEADS = 1
HEAD_DIM = 32
GLOBAL_HEAD_DIM = 64
LAYERS = 6
KV_SHARED = 3
PER_LAYER = 32
LAYER_TYPES = ["sliding_attention", "sliding_attention", "full_attention"] * 2
AUDIO_HIDDEN = 64
AUDIO_HEADS = 4
AUDIO_LAYERS = 2
AUDIO_CHANNELS = (16, 8)
MEL_BINS = 16
CONV_KERNEL = 5
CHUNK = 12
CONTEXT_LEFT = 13
OUTPUT_PROJ = 96
FRAME = 320  # samples per analysis frame
FFT_BINS = 257  # of a 512-point DFT
SAMPLE_RATE = 16000
BOA, AUDIO, EOA = 3, 4, 5  # ids inside the reference tokenizer's vocabulary
CLIP_BOUND = 16.0


def param_list():
    """(name, shape, dtype, kind) in the converter's order. kind: 'q' for a quantized [out, in]
    matrix (expanded to q_weight then q_scale), 'f' a float16 tensor, 'f32' a float32 one."""
    out = []

    def quant(name, rows, cols):
        out.append((name, (rows, cols), None, "q"))

    def flt(name, shape, dtype="float16"):
        out.append((name, tuple(shape), dtype, "f"))

    lm = "language_model."
    quant(lm + "embed_tokens", VOCAB, HIDDEN)
    for l in range(LAYERS):
        quant(lm + "embed_tokens_per_layer.%d" % l, VOCAB, PER_LAYER)
    quant(lm + "per_layer_model_projection", LAYERS * PER_LAYER, HIDDEN)
    flt(lm + "per_layer_projection_norm.weight", [PER_LAYER])
    for l in range(LAYERS):
        p = lm + "layers.%d." % l
        hd = GLOBAL_HEAD_DIM if LAYER_TYPES[l] == "full_attention" else HEAD_DIM
        shared = l >= LAYERS - KV_SHARED
        inter = INTERMEDIATE * (2 if shared else 1)
        quant(p + "self_attn.q_proj", HEADS * hd, HIDDEN)
        flt(p + "self_attn.q_norm.weight", [hd])
        if not shared:
            quant(p + "self_attn.k_proj", KV_HEADS * hd, HIDDEN)
            quant(p + "self_attn.v_proj", KV_HEADS * hd, HIDDEN)
            flt(p + "self_attn.k_norm.weight", [hd])
        quant(p + "self_attn.o_proj", HIDDEN, HEADS * hd)
        quant(p + "mlp.gate_up_proj", 2 * inter, HIDDEN)
        quant(p + "mlp.down_proj", HIDDEN, inter)
        for norm in ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"]:
            flt(p + norm + ".weight", [HIDDEN])
        flt(p + "per_layer_input_gate.weight", [PER_LAYER, HIDDEN])
        quant(p + "per_layer_projection", HIDDEN, PER_LAYER)
        flt(p + "post_per_layer_input_norm.weight", [HIDDEN])
        flt(p + "layer_scalar", [1])
    flt(lm + "norm.weight", [HIDDEN])

    flt("audio_preprocessor.dft_matrix", [FRAME, 2 * FFT_BINS], "float32")
    flt("audio_preprocessor.mel_filters", [FFT_BINS, MEL_BINS], "float32")
    sub = "audio_tower.subsample_conv_projection."
    flt(sub + "layer0.conv.weight", [AUDIO_CHANNELS[0], 1, 3, 3])
    flt(sub + "layer0.norm.weight", [AUDIO_CHANNELS[0]])
    flt(sub + "layer1.conv.weight", [AUDIO_CHANNELS[1], AUDIO_CHANNELS[0], 3, 3])
    flt(sub + "layer1.norm.weight", [AUDIO_CHANNELS[1]])
    # Two stride-2 convolutions quarter the mel bins; channel-last rows feed the projection.
    quant(sub + "input_proj_linear", AUDIO_HIDDEN, (MEL_BINS // 4) * AUDIO_CHANNELS[1])

    def clipped(name, rows, cols):
        quant(name + ".linear", rows, cols)
        for bound in ["input_min", "input_max", "output_min", "output_max"]:
            flt(name + "." + bound, [])

    h = AUDIO_HIDDEN
    for l in range(AUDIO_LAYERS):
        p = "audio_tower.layers.%d." % l
        for ff in ["feed_forward1.", "feed_forward2."]:
            clipped(p + ff + "ffw_layer_1", 4 * h, h)
            clipped(p + ff + "ffw_layer_2", h, 4 * h)
            flt(p + ff + "pre_layer_norm.weight", [h])
            flt(p + ff + "post_layer_norm.weight", [h])
        for proj in ["q_proj", "k_proj", "v_proj", "post"]:
            clipped(p + "self_attn." + proj, h, h)
        quant(p + "self_attn.relative_k_proj", h, h)
        flt(p + "self_attn.per_dim_scale", [h // AUDIO_HEADS])
        flt(p + "self_attn.relative_positions", [CONTEXT_LEFT, h])
        clipped(p + "lconv1d.linear_start", 2 * h, h)
        clipped(p + "lconv1d.linear_end", h, h)
        flt(p + "lconv1d.depthwise_conv1d.weight", [h, 1, CONV_KERNEL])
        flt(p + "lconv1d.pre_layer_norm.weight", [h])
        flt(p + "lconv1d.conv_norm.weight", [h])
        for norm in ["norm_pre_attn", "norm_post_attn", "norm_out"]:
            flt(p + norm + ".weight", [h])
    quant("audio_tower.output_proj", OUTPUT_PROJ, h)
    flt("audio_tower.output_proj.bias", [OUTPUT_PROJ])
    quant("embed_audio.embedding_projection", HIDDEN, OUTPUT_PROJ)
    return out


# ---- the fixed tables ----

def dft_matrix():
    """[320, 514]: a frame times it gives the 257 real then the 257 imaginary parts of the
    512-point DFT of the frame under a periodic Hann window of 320 samples."""
    j = np.arange(FRAME)[:, None]
    k = np.arange(FFT_BINS)[None, :]
    fft = 2 * (FFT_BINS - 1)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * j / FRAME)
    angle = 2 * np.pi * ((j * k) % fft) / fft  # reduced first: exact zeros stay zeros
    return np.concatenate([window * np.cos(angle), -window * np.sin(angle)], axis=1)


def mel_filters():
    """[257, mel bins]: HTK-scale triangles over 0..8000 Hz, unnormalized."""
    def to_mel(hz):
        return 2595.0 * np.log10(1.0 + hz / 700.0)

    def to_hz(mel):
        return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)

    top = SAMPLE_RATE / 2
    edges = to_hz(np.linspace(0.0, to_mel(top), MEL_BINS + 2))
    freqs = np.linspace(0.0, top, FFT_BINS)[:, None]
    down = (freqs - edges[None, :-2]) / (edges[1:-1] - edges[:-2])[None, :]
    up = (edges[None, 2:] - freqs) / (edges[2:] - edges[1:-1])[None, :]
    return np.maximum(0.0, np.minimum(down, up))


def relative_positions():
    """[context_left, hidden]: row r is [sin(p t), cos(p t)] for position p = rows - 1 - r with
    timescales t_i = exp(-i ln(10000) / (hidden / 2 - 1))."""
    half = AUDIO_HIDDEN // 2
    t = np.exp(-np.arange(half, dtype=np.float64) * math.log(10000.0) / max(half - 1, 1))
    p = np.arange(CONTEXT_LEFT - 1, -1, -1, dtype=np.float64)[:, None]
    return np.concatenate([np.sin(p * t), np.cos(p * t)], axis=1)


# ---- values and encodings ----

def values(rng, name, shape):
    """A float tensor's values: fixed tables, wide clip bounds, norm gains and layer scalars
    near 1, small biases and per-dim scales, weights with variance 1 / fan-in."""
    leaf = name.rsplit(".", 1)[1]
    if name == "audio_preprocessor.dft_matrix":
        return dft_matrix()
    if name == "audio_preprocessor.mel_filters":
        return mel_filters()
    if leaf == "relative_positions":
        return relative_positions()
    if leaf in ("input_min", "output_min"):
        return np.full(shape, -CLIP_BOUND)
    if leaf in ("input_max", "output_max"):
        return np.full(shape, CLIP_BOUND)
    return mlc_package.learned_values(rng, shape, near_one="norm" in name or leaf == "layer_scalar",
                                      small=leaf in ("bias", "per_dim_scale"))


def chat_config():
    context, prefill = 512, 64
    text = {
        "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "global_head_dim": GLOBAL_HEAD_DIM, "num_global_key_value_heads": None,
        "hidden_size_per_layer_input": PER_LAYER, "vocab_size": VOCAB,
        "vocab_size_per_layer_input": VOCAB, "num_kv_shared_layers": KV_SHARED,
        "layer_types": LAYER_TYPES, "sliding_window": 8, "rms_norm_eps": 1e-6,
        "final_logit_softcapping": 30.0, "hidden_activation": "gelu_pytorch_tanh",
        "use_double_wide_mlp": True, "tie_word_embeddings": True, "attention_bias": False,
        "attention_k_eq_v": False, "enable_moe_block": False, "use_bidirectional_attention": None,
        "max_position_embeddings": 131072, "pad_token_id": 0,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0,
                               "partial_rotary_factor": 0.25},
        },
    }
    audio = {
        "hidden_size": AUDIO_HIDDEN, "num_attention_heads": AUDIO_HEADS,
        "num_hidden_layers": AUDIO_LAYERS, "feature_size": MEL_BINS,
        "subsampling_conv_channels": list(AUDIO_CHANNELS), "conv_kernel_size": CONV_KERNEL,
        "attention_chunk_size": CHUNK, "attention_context_left": CONTEXT_LEFT,
        "attention_context_right": 0, "attention_logit_cap": 50.0,
        "attention_invalid_logits_value": -1e9, "output_proj_dims": OUTPUT_PROJ,
        "residual_weight": 0.5, "rms_norm_eps": 1e-6, "gradient_clipping": 1e10,
        "use_clipped_linears": True, "hidden_act": "silu", "sampling_rate": SAMPLE_RATE,
        "max_samples": 480000,
    }
    template = {
        "name": "gemma_instruction", "system_template": "{system_message}", "system_message": "",
        "system_prefix_token_ids": [1], "add_role_after_system_message": True,
        "roles": {"user": "<start_of_turn>user", "assistant": "<start_of_turn>model"},
        "seps": ["<end_of_turn>\n"], "role_content_sep": "\n", "role_empty_sep": "\n",
        "stop_str": ["<end_of_turn>"], "stop_token_ids": [2],
    }
    model_config = {"text_config": text, "audio_config": audio, "boa_token_id": BOA,
                    "audio_token_id": AUDIO, "eoa_token_index": EOA,
                    "context_window_size": context, "prefill_chunk_size": prefill,
                    "sliding_window_size": -1, "tensor_parallel_shards": 1, "max_batch_size": 1}
    return mlc_package.chat_config("gemma4", "q4f16_1", model_config, VOCAB, context, prefill, template)


def tasks():
    """The chat task: text through the tokenizer, audio decoded to 16 kHz mono float samples
    (at least one frame's 161, at most 30 s) whose audio_embed rows sit between the begin- and
    end-of-audio ids."""
    audio = {
        "processor": {"kind": "audio_decode", "format": "pcm_f32", "sample_rate_hz": SAMPLE_RATE,
                      "channels": 1, "min_samples": FRAME // 2 + 1, "max_samples": 480000},
        "adapter": "audio",
        "prompt": {"prefix_token_ids": [BOA], "placeholder_token_id": AUDIO, "suffix_token_ids": [EOA]},
    }
    return {"chat.completions": {"executor": "generation", "output": "text",
                                 "inputs": {"text": {"processor": "tokenizer"}, "audio": audio}}}


def main(argv):
    args = mlc_package.arguments(__doc__, argv)
    return mlc_package.write_package(args, mlc_package.records(param_list(), args.seed, values),
                                     chat_config(), tasks())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
