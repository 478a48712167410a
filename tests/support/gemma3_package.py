#!/usr/bin/python3
"""Writes a tiny random-weight Gemma 3 text package in the layout MLC's converter writes for
gemma-3-1b-it-q4f16_1-MLC (its python/mlc_llm/model/gemma3/), independently of the project's own
writer (src/runtime/cpu/writer.cc): model_type gemma3_text, the parameter list in the converter's
order (the decoder under language_model.model.: the tied embedding, per layer unfused
q/k/v/o projections, the per-head q/k norms, the fused gate_up MLP and the four norms, gains stored
as 1 + w as MLC's loader stores them), q4f16_1, tensor-cache.json and mlc-chat-config.json with
model_config as the converter writes it (text_config nested with the Hugging Face fields MLC's
Gemma3TextConfig does not name under its "kwargs"; the context, prefill and window sizes at both
levels, and the window copied to the chat config's outer sliding_window_size as MLC's gen_config
copies it) and the gemma3_instruction
conversation template over the test tokenizer's ids. The shared parts are in mlc_package.py. A
legacy package: no manifest; --tasks also writes the tasks document (text chat) that
`mlc-manifest emit package OUT_DIR --tasks PATH` turns into one.
Usage:

    gemma3_package.py OUT_DIR TOKENIZER_JSON [--seed N] [--tasks PATH]
"""
import math
import sys

sys.dont_write_bytecode = True  # the tests run it from the source tree: no __pycache__ there
import mlc_package  # noqa: E402  (beside this script: its folder is first on sys.path)

# The tiny shape: six layers, so that Gemma 3's sliding_window_pattern of 6 makes layers 0..4
# sliding and layer 5 global; one KV head; a window shorter than the tests' prompts; a query
# scalar other than head_dim; the local and global rotaries of the 1B model with the linear
# scaling of the 4B..27B ones.
VOCAB = 512
HIDDEN = 128
INTERMEDIATE = 256
LAYERS = 6
HEADS = 4
KV_HEADS = 1
HEAD_DIM = 32
WINDOW = 8
PATTERN = 6
QUERY_SCALAR = 40
GLOBAL_THETA = 1000000.0
LOCAL_THETA = 10000.0
ROPE_SCALING = {"factor": 8.0, "rope_type": "linear"}
EPS = 1e-6
# MLC's Gemma3TextConfig raises the context to max(window, 8192); the prefill chunk defaults to
# min(its default context 131072, 8192).
CONTEXT = max(WINDOW, 8192)
PREFILL = 8192


def param_list():
    """(name, shape, dtype, kind) in the converter's order (named_parameters of
    Gemma3ForCausalLM: the embedding, each layer's attention, MLP and norms, the final norm).
    kind: 'q' for a quantized [out, in] matrix (q_weight then q_scale), 'f' a float16 tensor."""
    out = []

    def quant(name, rows, cols):
        out.append((name, (rows, cols), None, "q"))

    def gain(name, width):
        out.append((name + ".weight", (width,), "float16", "f"))

    lm = "language_model.model."
    quant(lm + "embed_tokens", VOCAB, HIDDEN)  # tied: the logits are its rows too
    for l in range(LAYERS):
        p = lm + "layers.%d." % l
        quant(p + "self_attn.q_proj", HEADS * HEAD_DIM, HIDDEN)
        quant(p + "self_attn.k_proj", KV_HEADS * HEAD_DIM, HIDDEN)
        quant(p + "self_attn.v_proj", KV_HEADS * HEAD_DIM, HIDDEN)
        quant(p + "self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM)
        gain(p + "self_attn.q_norm", HEAD_DIM)
        gain(p + "self_attn.k_norm", HEAD_DIM)
        quant(p + "mlp.gate_up_proj", 2 * INTERMEDIATE, HIDDEN)
        quant(p + "mlp.down_proj", HIDDEN, INTERMEDIATE)
        for norm in ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"]:
            gain(p + norm, HIDDEN)
    gain(lm + "norm", HIDDEN)
    return out


def matrix(rng, name, rows, cols):
    """An [out, in] matrix with variance 1 / in; the embedding's a quarter of that. Through the
    tied embedding a token's logit grows with its own share of the last hidden state: an
    embedding of variance 1 would outweigh all the layers and greedy decoding would only echo
    one token."""
    scale = 0.5 if "embed_tokens" in name else 1.0
    return rng.uniform(-1, 1, (rows, cols)) * scale * math.sqrt(3.0 / cols)


def values(rng, name, shape):
    """Every float tensor here is a norm gain: 1 + w with w small (MLC's loader adds the 1)."""
    return mlc_package.learned_values(rng, shape, near_one=True)


def hugging_face_extras():
    """The fields of a gemma3_text config.json that MLC's Gemma3TextConfig has no field for: its
    ConfigBase keeps them in text_config's "kwargs", which dataclasses.asdict writes out (rope_theta
    is taken into position_embedding_base; vocab_size belongs to the outer config)."""
    return {
        "architectures": ["Gemma3ForCausalLM"], "attention_dropout": 0.0,
        "attn_logit_softcapping": None, "bos_token_id": 1, "cache_implementation": "hybrid",
        "eos_token_id": [2], "final_logit_softcapping": None, "initializer_range": 0.02,
        "max_position_embeddings": 32768, "model_type": "gemma3_text", "pad_token_id": 0,
        "rope_local_base_freq": LOCAL_THETA, "sliding_window": WINDOW,
        "sliding_window_pattern": PATTERN, "torch_dtype": "bfloat16",
        "transformers_version": "4.50.0.dev0", "use_cache": True,
    }


def chat_config():
    # Gemma3TextConfig's fields in its definition order, then its kwargs.
    text = {
        "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS,
        "attention_bias": False, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM, "rms_norm_eps": EPS, "hidden_activation": "gelu_pytorch_tanh",
        "position_embedding_base": GLOBAL_THETA, "rope_scaling": ROPE_SCALING,
        "context_window_size": CONTEXT, "prefill_chunk_size": PREFILL,
        "query_pre_attn_scalar": QUERY_SCALAR, "sliding_window_size": WINDOW,
        "kwargs": hugging_face_extras(),
    }
    # Gemma3Config's fields: the sizes it leaves at -1 come from text_config.
    model_config = {"text_config": text, "vocab_size": VOCAB, "tensor_parallel_shards": 1,
                    "max_batch_size": 1, "context_window_size": CONTEXT,
                    "sliding_window_size": WINDOW, "prefill_chunk_size": PREFILL,
                    "is_text_model": True}
    # MLC's gemma3_instruction: <bos> first, stop at <eos> or <end_of_turn> (the test tokenizer
    # has ids 1 and 2 for begin and end, and no <end_of_turn>).
    template = {
        "name": "gemma3_instruction", "system_template": "{system_message}", "system_message": "",
        "system_prefix_token_ids": [1], "add_role_after_system_message": True,
        "roles": {"user": "<start_of_turn>user", "assistant": "<start_of_turn>model"},
        "seps": ["<end_of_turn>\n"], "role_content_sep": "\n", "role_empty_sep": "\n",
        "stop_str": ["<end_of_turn>"], "stop_token_ids": [2],
    }
    # MLC's gen_config also copies the window to the outer sliding_window_size: MLC's runtime (and
    # this project's) reads it as the sliding layers' window, the global layers keeping the context.
    config = mlc_package.chat_config("gemma3_text", "q4f16_1", model_config, VOCAB, CONTEXT, PREFILL, template)
    config["sliding_window_size"] = WINDOW
    return config


def tasks():
    """The chat task: text through the tokenizer."""
    return {"chat.completions": {"executor": "generation", "output": "text",
                                 "inputs": {"text": {"processor": "tokenizer"}}}}


def main(argv):
    args = mlc_package.arguments(__doc__, argv)
    return mlc_package.write_package(args, mlc_package.records(param_list(), args.seed, values, matrix),
                                     chat_config(), tasks())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
