#!/usr/bin/python3
"""Writes a tiny random-weight LLaVA 1.5 package the way MLC's converter lays one out (its
python/mlc_llm/model/llava/), independently of the project's own writer (src/runtime/cpu/writer.cc):
the parameter list in the converter's order (the CLIP vision tower, kept in float16 since MLC's
CLIPVisionModel sets no_quantization; the projector multi_modal_projector.linear_{1,2} quantized,
with biases; the llama decoder under language_model. with fused qkv_proj and gate_up_proj),
q4f16_1 (or q0f16), tensor-cache.json and mlc-chat-config.json (model_type llava, the llava
conversation template); the shared parts are in mlc_package.py. A legacy package: no manifest;
--tasks also writes the tasks document (chat with an image input) that
`mlc-manifest emit package OUT_DIR --tasks PATH` turns into one.
Usage:

    llava_package.py OUT_DIR TOKENIZER_JSON [--seed N] [--quantization q4f16_1|q0f16] [--tasks PATH]
"""
import sys

sys.dont_write_bytecode = True  # the tests run it from the source tree: no __pycache__ there
import mlc_package  # noqa: E402  (beside this script: its folder is first on sys.path)

# The tiny shape: a two-layer llama decoder with grouped KV heads; a three-layer CLIP tower over
# 28 x 28 images cut into 7 x 7 patches (16 image rows; the last layer is not run, since LLaVA
# reads the hidden state before it).
VOCAB = 512
HIDDEN = 128
INTERMEDIATE = 256
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 32
VISION_HIDDEN = 64
VISION_INTERMEDIATE = 128
VISION_HEADS = 2
VISION_LAYERS = 3
PATCH = 7
IMAGE = 28
IMAGE_TOKEN = VOCAB - 1  # the reference tokenizer's last id
CONTEXT = 512
PREFILL = 64
QUANTIZATIONS = ["q4f16_1", "q0f16"]


def param_list():
    """(name, shape, dtype, kind) in the converter's order (vision_tower, multi_modal_projector,
    language_model; inside a module, its attributes in definition order). kind: 'q' for an
    [out, in] matrix the quantization applies to, 'f' a float16 tensor."""
    out = []

    def quant(name, rows, cols):
        out.append((name, (rows, cols), None, "q"))

    def flt(name, shape):
        out.append((name, tuple(shape), "float16", "f"))

    def layer_norm(name, width):
        flt(name + ".weight", [width])
        flt(name + ".bias", [width])

    def float_linear(name, rows, cols):
        flt(name + ".weight", [rows, cols])
        flt(name + ".bias", [rows])

    v = "vision_tower.vision_model."
    flt(v + "embeddings.class_embedding", [VISION_HIDDEN])
    flt(v + "embeddings.patch_embedding.weight", [VISION_HIDDEN, 3, PATCH, PATCH])
    flt(v + "embeddings.position_embedding.weight", [(IMAGE // PATCH) ** 2 + 1, VISION_HIDDEN])
    layer_norm(v + "pre_layrnorm", VISION_HIDDEN)
    for l in range(VISION_LAYERS):
        p = v + "encoder.layers.%d." % l
        for proj in ["k_proj", "v_proj", "q_proj", "out_proj"]:
            float_linear(p + "self_attn." + proj, VISION_HIDDEN, VISION_HIDDEN)
        layer_norm(p + "layer_norm1", VISION_HIDDEN)
        float_linear(p + "mlp.fc1", VISION_INTERMEDIATE, VISION_HIDDEN)
        float_linear(p + "mlp.fc2", VISION_HIDDEN, VISION_INTERMEDIATE)
        layer_norm(p + "layer_norm2", VISION_HIDDEN)
    layer_norm(v + "post_layernorm", VISION_HIDDEN)

    quant("multi_modal_projector.linear_1", HIDDEN, VISION_HIDDEN)
    flt("multi_modal_projector.linear_1.bias", [HIDDEN])
    quant("multi_modal_projector.linear_2", HIDDEN, HIDDEN)
    flt("multi_modal_projector.linear_2.bias", [HIDDEN])

    lm = "language_model."
    quant(lm + "model.embed_tokens", VOCAB, HIDDEN)
    for l in range(LAYERS):
        p = lm + "model.layers.%d." % l
        quant(p + "self_attn.qkv_proj", (HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN)
        quant(p + "self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM)
        quant(p + "mlp.gate_up_proj", 2 * INTERMEDIATE, HIDDEN)
        quant(p + "mlp.down_proj", HIDDEN, INTERMEDIATE)
        flt(p + "input_layernorm.weight", [HIDDEN])
        flt(p + "post_attention_layernorm.weight", [HIDDEN])
    flt(lm + "model.norm.weight", [HIDDEN])
    quant(lm + "lm_head", VOCAB, HIDDEN)  # not tied to the embedding
    return out


def values(rng, name, shape):
    """A float tensor's values: small biases, norm gains near 1, embeddings and weights with
    variance 1 / fan-in (a class embedding: 1)."""
    leaf = name.rsplit(".", 1)[1]
    return mlc_package.learned_values(rng, shape, near_one=leaf == "weight" and "norm" in name,
                                      small=leaf == "bias")


def chat_config(quantization):
    text = {
        "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE, "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS, "rms_norm_eps": 1e-5, "vocab_size": VOCAB,
        "tie_word_embeddings": False, "position_embedding_base": 10000.0,
        "context_window_size": CONTEXT, "prefill_chunk_size": PREFILL,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "tensor_parallel_shards": 1,
        "pipeline_parallel_stages": 1, "max_batch_size": 1, "hidden_act": "silu",
    }
    vision = {
        "hidden_size": VISION_HIDDEN, "image_size": IMAGE, "intermediate_size": VISION_INTERMEDIATE,
        "num_attention_heads": VISION_HEADS, "num_hidden_layers": VISION_LAYERS, "patch_size": PATCH,
        "projection_dim": VISION_HIDDEN, "vocab_size": 32000, "num_channels": 3,
        "layer_norm_eps": 1e-5,
    }
    template = {
        "name": "llava", "system_template": "{system_message}", "system_message": "\n",
        "system_prefix_token_ids": [1], "add_role_after_system_message": False,
        "roles": {"user": "USER", "assistant": "ASSISTANT"}, "seps": [" "],
        "role_content_sep": ": ", "role_empty_sep": ":", "stop_str": ["</s>"], "stop_token_ids": [2],
    }
    model_config = {"image_token_index": IMAGE_TOKEN, "text_config": text, "vision_config": vision,
                    "vocab_size": VOCAB, "context_window_size": CONTEXT, "sliding_window_size": -1,
                    "prefill_chunk_size": PREFILL, "tensor_parallel_shards": 1, "max_batch_size": 1,
                    "text_architecture": "LlamaForCausalLM", "vision_feature_layer": -2,
                    "vision_feature_select_strategy": "default", "projector_hidden_act": "gelu"}
    return mlc_package.chat_config("llava", quantization, model_config, VOCAB, CONTEXT, PREFILL, template)


def tasks():
    """The chat task: text through the tokenizer, an image resized on its shortest edge to 28 and
    center-cropped (Hugging Face's CLIP processor), whose 16 image_embed rows stand at the
    image token."""
    image = {
        "processor": {"kind": "image_decode", "format": "rgb_u8", "layout": "nhwc",
                      "resize": {"mode": "center_crop", "height": IMAGE, "width": IMAGE},
                      "num_embeddings": (IMAGE // PATCH) ** 2},
        "adapter": "image",
        "prompt": {"prefix_token_ids": [], "placeholder_token_id": IMAGE_TOKEN, "suffix_token_ids": []},
    }
    return {"chat.completions": {"executor": "generation", "output": "text",
                                 "inputs": {"text": {"processor": "tokenizer"}, "image": image}}}


def main(argv):
    args = mlc_package.arguments(__doc__, argv, QUANTIZATIONS)
    recs = mlc_package.records(param_list(), args.seed, values, quantized=args.quantization != "q0f16")
    return mlc_package.write_package(args, recs, chat_config(args.quantization), tasks())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
