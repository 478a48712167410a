"""The parts of MLC's converted-package layout that the separate package writers share
(gemma4_package.py, llava_package.py, gemma3_package.py): MLC's 4-bit group quantization (q4f16_1),
float32 records stored as bfloat16, the records of a parameter list drawn from one random stream, the
params_shard_N.bin files with tensor-cache.json, and the command line plus files every writer
ends with (mlc-chat-config.json around the model's config, the tokenizer copied in, the optional tasks document).
Written from MLC's format, independently of the project's own writer (src/runtime/cpu/writer.cc).
"""
import argparse
import hashlib
import json
import math
import os
import shutil

import numpy as np

GROUP = 32
SHARD_LIMIT = 32 * 1024 * 1024


def learned_values(rng, shape, near_one=False, small=False):
    """A learned float tensor's values: gains near 1, small offsets, else weights with variance
    1 / fan-in (the product of all but the first axis; a vector's fan-in is 1)."""
    n = int(np.prod(shape)) if shape else 1
    if near_one:
        return (1.0 + 0.1 * rng.uniform(-1, 1, n)).reshape(shape)
    if small:
        return (0.1 * rng.uniform(-1, 1, n)).reshape(shape)
    fan_in = int(np.prod(shape[1:]))
    return rng.uniform(-1, 1, n).reshape(shape) * math.sqrt(3.0 / fan_in)


def matrix_values(rng, name, rows, cols):
    """An [out, in] matrix: embedding tables with variance 1, projections 1 / in."""
    embedding = "embed_tokens" in name
    return rng.uniform(-1, 1, (rows, cols)) * math.sqrt(3.0 if embedding else 3.0 / cols)


def bf16_bytes(x):
    """float32 values rounded to nearest-even bfloat16, little-endian."""
    bits = np.asarray(x, dtype=np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def quantize(w):
    """MLC's q4f16_1: groups of 32 along the input axis, scale = max|w| / 7 in float16,
    q = clamp(round(w / scale) + 7, 0, 14), value j of a uint32 in bits 4j..4j+3."""
    rows, cols = w.shape
    groups = w.reshape(rows, cols // GROUP, GROUP)
    scale = (np.abs(groups).max(axis=2) / 7.0).astype(np.float16)
    s = scale.astype(np.float32)[:, :, None]
    safe = np.where(s > 0, s, 1.0)
    q = np.where(s > 0, np.rint(groups.astype(np.float32) / safe) + 7.0, 7.0)
    q = np.clip(q, 0, 14).astype(np.uint32).reshape(rows, cols // 8, 8)
    shifts = (4 * np.arange(8, dtype=np.uint32))[None, None, :]
    words = np.bitwise_or.reduce(q << shifts, axis=2).astype("<u4")
    return words, scale.astype("<f2")


def records(params, seed, values, matrix=matrix_values, quantized=True):
    """(name, shape, dtype, bytes) of every stored tensor, in the order of `params`:
    (name, shape, dtype, kind) with kind 'q' an [out, in] matrix (q_weight then q_scale, or
    quantized=False: one float16 `.weight`), else a float tensor of `values(rng, name, shape)`
    (float32 ones stored as bfloat16). One random stream in list order."""
    rng = np.random.default_rng(seed)
    out = []
    for name, shape, dtype, kind in params:
        if kind == "q" and quantized:
            words, scale = quantize(matrix(rng, name, *shape))
            out.append((name + ".q_weight", list(words.shape), "uint32", words.tobytes()))
            out.append((name + ".q_scale", list(scale.shape), "float16", scale.tobytes()))
        elif kind == "q":
            w = np.asarray(matrix(rng, name, *shape), dtype="<f2")
            out.append((name + ".weight", list(shape), "float16", w.tobytes()))
        elif dtype == "float32":
            out.append((name, list(shape), dtype, bf16_bytes(values(rng, name, shape))))
        else:
            v = np.asarray(values(rng, name, shape), dtype="<f2")
            out.append((name, list(shape), dtype, v.tobytes()))
    return out


def device_bytes(shape, dtype):
    n = int(np.prod(shape)) if shape else 1
    return n * {"uint32": 4, "float32": 4, "float16": 2}[dtype]


def write_shards(out_dir, recs):
    """Records sorted by name into params_shard_N.bin files; the tensor-cache.json document."""
    shards, current, data = [], [], b""

    def close():
        path = "params_shard_%d.bin" % len(shards)
        with open(os.path.join(out_dir, path), "wb") as f:
            f.write(data)
        shards.append({"dataPath": path, "format": "raw-shard", "nbytes": len(data),
                       "records": current, "md5sum": hashlib.md5(data).hexdigest()})

    for name, shape, dtype, blob in sorted(recs, key=lambda r: r[0]):
        if data and len(data) + len(blob) > SHARD_LIMIT:
            close()
            current, data = [], b""
        current.append({"name": name, "shape": shape, "dtype": dtype, "format": "f32-to-bf16",
                        "nbytes": len(blob), "byteOffset": len(data)})
        data += blob
    close()
    total = sum(device_bytes(shape, dtype) for _, shape, dtype, _ in recs)
    return {"metadata": {"ParamSize": len(recs), "ParamBytes": float(total)}, "records": shards}


def chat_config(model_type, quantization, model_config, vocab, context, prefill, template):
    """mlc-chat-config.json: the converter's fields around the model's own config, MLC's sampling
    defaults, the conversation template, ids 1 and 2 for begin and end of text."""
    return {
        "version": "0.1.0", "model_type": model_type, "quantization": quantization,
        "model_config": model_config,
        "vocab_size": vocab, "context_window_size": context, "sliding_window_size": -1,
        "prefill_chunk_size": prefill, "attention_sink_size": -1, "tensor_parallel_shards": 1,
        "temperature": 0.7, "top_p": 0.95, "repetition_penalty": 1.0, "presence_penalty": 0.0,
        "frequency_penalty": 0.0, "tokenizer_files": ["tokenizer.json"], "conv_template": template,
        "bos_token_id": 1, "eos_token_id": 2,
    }


def arguments(doc, argv, quantizations=None):
    """OUT_DIR TOKENIZER_JSON [--seed N] [--tasks PATH] (and --quantization when a writer offers
    more than one)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("tokenizer")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--tasks", help="also write the tasks document here")
    if quantizations:
        parser.add_argument("--quantization", choices=quantizations, default=quantizations[0])
    return parser.parse_args(argv[1:])


def write_package(args, recs, chat_config, tasks):
    """The package's files in args.out_dir; the tasks document at args.tasks when asked."""
    os.makedirs(args.out_dir, exist_ok=True)
    cache = write_shards(args.out_dir, recs)
    with open(os.path.join(args.out_dir, "tensor-cache.json"), "w") as f:
        json.dump(cache, f, indent=1)
    with open(os.path.join(args.out_dir, "mlc-chat-config.json"), "w") as f:
        json.dump(chat_config, f, indent=2)
    shutil.copyfile(args.tokenizer, os.path.join(args.out_dir, "tokenizer.json"))
    if args.tasks:
        with open(args.tasks, "w") as f:
            json.dump(tasks, f, indent=1)
    return 0
