"""Tests of the Python module mlc_manifest (run by ctest under /usr/bin/python3 -m pytest).

MLC_SOURCE_DIR (the checkout), MLC_SHARED_DIR (../shared) and MLC_CLI_PATH (the built CLI) come
from the environment ctest sets; the CLI serves as the reference the binding must agree with.
"""
import hashlib
import io
import json
import math
import os
import pathlib
import struct
import subprocess
import wave

import numpy as np
import pytest

import mlc_manifest

SOURCE = pathlib.Path(os.environ.get("MLC_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
SHARED = pathlib.Path(os.environ.get("MLC_SHARED_DIR", SOURCE.parent / "shared"))
CLI = os.environ.get("MLC_CLI_PATH", "mlc-manifest")
GEMMA = SOURCE / "examples" / "gemma-4-E2B-it-q4f16_1"


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, check=False)


# ---- the MLC producer's id algorithm, in plain Python ----

def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_id(value):
    return "sha256:" + hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


def producer_interface_id(package):
    return sha256_id({"tasks": package["tasks"]})


def producer_parameter_schema_id(doc):
    if isinstance(doc, list):
        params = [{"name": p["name"], "shape": p["shape"], "dtype": p["dtype"]} for p in doc]
    else:  # a tensor cache: every record of every shard
        params = [{"name": r["name"], "shape": r["shape"], "dtype": r["dtype"]}
                  for shard in doc["records"] for r in shard["records"]]
    return sha256_id(sorted(params, key=lambda p: p["name"]))


def documents():
    roots = [SOURCE / "examples", SHARED / "testdata" / "real"]
    return sorted(p for root in roots if root.is_dir() for p in root.rglob("*.json"))


def test_import_and_version():
    version = cli("--version").stdout.split()[-1]
    assert mlc_manifest.__version__ == version
    assert cli("version").stdout.startswith("mlc-manifest " + version)


def test_ids_equal_the_producers_algorithm_on_every_document():
    checked = {"interface_id": 0, "parameter_schema_id": 0}
    for path in documents():
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and doc.get("schema") == "mlc.model-package":
            assert mlc_manifest.interface_id(doc) == producer_interface_id(doc), path
            assert doc["interface_id"] == producer_interface_id(doc), path
            checked["interface_id"] += 1
        elif isinstance(doc, dict) and doc.get("schema") == "mlc.compiled-program":
            assert mlc_manifest.interface_id(doc) == doc["interface_id"], path
        elif isinstance(doc, dict) and "records" in doc:
            assert mlc_manifest.parameter_schema_id(doc) == producer_parameter_schema_id(doc), path
            checked["parameter_schema_id"] += 1
    assert checked["interface_id"] >= 1 and checked["parameter_schema_id"] >= 3, checked
    # The example's recorded parameter_schema_id is its tensor cache's.
    package = json.loads((GEMMA / "mlc-model-manifest.json").read_text())
    cache = json.loads((GEMMA / "tensor-cache.json").read_text())
    assert package["weights"]["parameter_schema_id"] == producer_parameter_schema_id(cache)


def test_documents_as_dicts_in_and_out():
    text = (GEMMA / "mlc-model-manifest.json").read_text()
    package = mlc_manifest.validate_package(json.loads(text))
    assert package == mlc_manifest.read_package(str(GEMMA))
    assert package == mlc_manifest.validate_package(text)
    # The producer's bytes: json.dump(doc, indent=2) + "\n".
    assert mlc_manifest.emit(package) == json.dumps(package, indent=2, ensure_ascii=False) + "\n"
    program = mlc_manifest.read_program(str(GEMMA / "compiled-program.json"))
    assert program["interface_id"] == package["interface_id"]
    cache = json.loads((GEMMA / "tensor-cache.json").read_text())
    emitted = json.loads(mlc_manifest.emit_package(package, cache))
    assert emitted == package


def test_errors_carry_the_error_list():
    doc = json.loads((GEMMA / "mlc-model-manifest.json").read_text())
    doc["tasks"]["chat.completions"]["executor"] = 5
    with pytest.raises(mlc_manifest.Error) as info:
        mlc_manifest.validate_package(doc)
    errors = info.value.errors
    assert errors and errors[0]["code"] == "invalid"
    assert errors[0]["path"].startswith("/tasks/chat.completions")
    assert set(errors[0]) == {"code", "document", "path", "message"}
    with pytest.raises(mlc_manifest.Error) as info:
        mlc_manifest.read_package("/nonexistent/mlc-model-manifest.json")
    assert info.value.errors[0]["code"] == "io"
    assert info.value.errors[0]["document"] == "/nonexistent/mlc-model-manifest.json"


def test_bind_matches_the_cli():
    bound = mlc_manifest.bind(str(GEMMA), str(GEMMA / "compiled-program.json"))
    out = cli("bind", GEMMA, GEMMA / "compiled-program.json", "--json")
    assert out.returncode == 0, out.stderr
    assert bound == json.loads(out.stdout)["contract"]
    package = json.loads((GEMMA / "mlc-model-manifest.json").read_text())
    assert mlc_manifest.bind(package, str(GEMMA / "compiled-program.json")) == bound
    with pytest.raises(mlc_manifest.Error):
        mlc_manifest.bind(str(GEMMA), str(GEMMA / "compiled-program.json"), task="no.such.task")


def test_check_report_is_the_clis():
    program = str(GEMMA / "compiled-program.json")
    report = mlc_manifest.check(str(GEMMA), program=program)
    out = cli("check", GEMMA, "--program", program, "--json")
    assert report.json + "\n" == out.stdout
    assert report.ok == json.loads(out.stdout)["ok"]
    assert [i[0] for i in report.items] == [c["check"] for c in report.to_dict()["checks"]]


def wav_bytes(rate, samples):
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(32767 * s)) for s in samples))
    return buf.getvalue()


def test_decode_audio_from_path_and_bytes(tmp_path):
    tone = [0.5 * math.sin(2 * math.pi * 440 * i / 8000) for i in range(8000)]
    data = wav_bytes(8000, tone)
    path = tmp_path / "tone.wav"
    path.write_bytes(data)
    a = mlc_manifest.decode_audio(path)
    b = mlc_manifest.decode_audio(data)
    assert a.dtype == np.float32 and a.shape == (16000,)
    assert np.array_equal(a, b)
    assert not a.flags.owndata  # the decoded buffer itself, not a copy
    # The tone survives resampling: its level is that of a 0.5 sine.
    rms = float(np.sqrt(np.mean(a[1000:-1000].astype(np.float64) ** 2)))
    assert abs(rms - 0.5 / math.sqrt(2)) < 0.01
    with pytest.raises(mlc_manifest.Error) as info:
        mlc_manifest.decode_audio(b"not audio")
    assert info.value.errors[0]["document"] == "<bytes>"


def test_decode_image_matches_the_cli(tmp_path):
    from PIL import Image
    rng = np.random.default_rng(4)
    pixels = rng.integers(0, 256, size=(30, 50, 3), dtype=np.uint8)
    path = tmp_path / "noise.png"
    Image.fromarray(pixels).save(path)
    a = mlc_manifest.decode_image(path, 16, 24, mode="center_crop")
    assert a.shape == (1, 16, 24, 3) and a.dtype == np.uint8
    assert not a.flags.owndata
    wide = mlc_manifest.decode_image(path.read_bytes(), 16, 24, mode="center_crop", dtype="uint32")
    assert wide.dtype == np.uint32 and np.array_equal(wide, a.astype(np.uint32))
    npy = tmp_path / "out.npy"
    out = cli("image", path, "--height", 16, "--width", 24, "--mode", "center_crop", "--output", npy)
    assert out.returncode == 0, out.stderr
    assert np.array_equal(np.load(npy), a)
    with pytest.raises(mlc_manifest.Error):
        mlc_manifest.decode_image(path, 0, 24)


def test_decode_image_ignores_an_icc_profile_unless_colour_managed(tmp_path):
    from PIL import Image, ImageCms
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, size=(30, 50, 3), dtype=np.uint8)
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB"))
    path = tmp_path / "tagged.png"
    # A profile with other primaries: sRGB's own colorants swapped around (red <-> blue).
    Image.fromarray(pixels).save(path, icc_profile=swapped_primaries_profile(srgb.tobytes()))
    plain = mlc_manifest.decode_image(path, 30, 50)
    assert np.array_equal(plain[0], np.asarray(Image.open(path).convert("RGB")))
    managed = mlc_manifest.decode_image(path, 30, 50, colour_manage=True)
    assert not np.array_equal(managed, plain)


def swapped_primaries_profile(icc):
    """icc with its rXYZ and bXYZ tags' offsets exchanged: a valid profile of other primaries."""
    import struct
    data = bytearray(icc)
    count = struct.unpack(">I", data[128:132])[0]
    entries = {}
    for i in range(count):
        at = 132 + 12 * i
        entries[bytes(data[at:at + 4])] = at
    r, b = entries[b"rXYZ"], entries[b"bXYZ"]
    data[r + 4:r + 12], data[b + 4:b + 12] = data[b + 4:b + 12], data[r + 4:r + 12]
    return bytes(data)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ref") / "pkg"
    out = cli("reference-model", folder, "--seed", 5)
    assert out.returncode == 0, out.stderr
    return folder


def test_tokenizer_prompt_and_plan(reference, tmp_path):
    tok = mlc_manifest.Tokenizer(str(reference))
    ids = tok.encode("hello world")
    assert ids and tok.decode(ids) == "hello world"
    assert tok.vocab_size > 0
    messages = [{"role": "user", "content": "hello world"}]
    got = mlc_manifest.prompt(str(reference), messages)
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages))
    out = cli("prompt", reference, "--messages", path, "--program", reference / "compiled-program.json", "--json")
    assert out.returncode == 0, out.stderr
    expected = json.loads(out.stdout)
    assert got["prompt"] == expected["prompt"] and got["segments"] == expected["segments"]
    plan = mlc_manifest.plan(str(reference), [{"tokens": [1, 10, 11]}],
                             program=str(reference / "compiled-program.json"))
    assert plan["prompt_length"] == 3 and plan["chunks"][0]["token_ids"] == [1, 10, 11]
    with pytest.raises(mlc_manifest.Error) as info:
        mlc_manifest.prompt(str(reference), [{"role": "robot", "content": "x"}])
    assert info.value.errors[0]["path"].startswith("/0")


def test_session_generates_like_the_cli(reference):
    session = mlc_manifest.Session(str(reference), max_tokens=5)
    result = session.generate([{"tokens": [1, 30, 31, 32]}])
    assert 0 < len(result["tokens"]) <= 5
    assert result["stop_reason"] in ("stop_token", "length")
    assert session.kv_length >= 4
    again = mlc_manifest.Session(str(reference), max_tokens=5).generate({"turns": [[{"tokens": [1, 30, 31, 32]}]]})
    assert again["tokens"] == result["tokens"]
    with pytest.raises(mlc_manifest.Error):
        session.generate([{"image": "missing.png"}])


def test_session_embed(reference, tmp_path):
    folder = tmp_path / "llama"
    out = cli("reference-model", folder, "--family", "llama", "--quantization", "q0f32", "--seed", 5)
    assert out.returncode == 0, out.stderr
    hidden = json.loads((folder / "mlc-chat-config.json").read_text())["model_config"]["hidden_size"]
    session = mlc_manifest.Session(str(folder), max_tokens=3)
    first = session.generate([{"tokens": [1, 30, 31, 32]}])
    held = session.kv_length
    mean = session.embed([{"tokens": [1, 5, 9, 12]}])
    last = session.embed({"turns": [[{"tokens": [1, 5, 9, 12]}]]}, pooling="last")
    assert len(mean) == hidden and len(last) == hidden
    assert math.isclose(sum(x * x for x in mean), 1.0, rel_tol=1e-5)
    assert math.isclose(sum(x * x for x in last), 1.0, rel_tol=1e-5)
    assert mean != last
    # One position: its mean is itself.
    one_mean, one_last = session.embed([{"tokens": [7]}]), session.embed([{"tokens": [7]}], pooling="last")
    assert max(abs(a - b) for a, b in zip(one_mean, one_last)) < 1e-6
    assert session.embed([{"tokens": [1, 5, 9, 12]}]) == mean
    # The conversation is untouched: the next turn continues as without the embeddings.
    assert session.kv_length == held
    again = mlc_manifest.Session(str(folder), max_tokens=3)
    assert again.generate([{"tokens": [1, 30, 31, 32]}])["tokens"] == first["tokens"]
    assert again.generate([{"tokens": [4, 5]}])["tokens"] == session.generate([{"tokens": [4, 5]}])["tokens"]
    with pytest.raises(ValueError):
        session.embed([{"tokens": [1]}], pooling="max")
    with pytest.raises(mlc_manifest.Error):
        session.embed({"turns": [[{"tokens": [1]}], [{"tokens": [2]}]]})
    with pytest.raises(mlc_manifest.Error, match="prefill_to_last_hidden_states"):
        mlc_manifest.Session(str(reference)).embed([{"tokens": [1, 2]}])


def test_session_tool_calls(reference):
    params = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9},
                                               "b": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["a", "b"], "additionalProperties": False}
    tools = {"tools": [{"type": "function", "function": {"name": "add", "parameters": params}}],
             "tool_choice": "required", "parallel_tool_calls": False}
    prompt = mlc_manifest.prompt(str(reference), {"messages": [{"role": "user", "content": "2 + 3?"}], **tools})
    assert '<tools>\n{"type": "function", "function": {"name": "add"' in prompt["prompt"]
    ids = [i for seg in prompt["segments"] for i in seg.get("system_prefix_token_ids", []) + seg.get("token_ids", [])]
    session = mlc_manifest.Session(str(reference), max_tokens=200, temperature=1.0, seed=2, tools=tools)
    result = session.generate([{"tokens": ids}])
    assert result["stop_reason"] == "stop_token", result
    (call,) = result["tool_calls"]
    assert call["id"] == "call_0_0" and call["type"] == "function" and call["function"]["name"] == "add"
    args = json.loads(call["function"]["arguments"])
    assert set(args) == {"a", "b"} and all(isinstance(v, int) and 0 <= v <= 9 for v in args.values()), args
    with pytest.raises(mlc_manifest.Error) as info:
        mlc_manifest.Session(str(reference), tools={"tools": [{"type": "function", "function": {
            "name": "f", "parameters": {"not": {}}}}]})
    assert info.value.errors[0]["path"] == "/tools/0/function/parameters/not"


def test_session_structured_output_and_logprobs(reference):
    schema = {"type": "object", "properties": {"mood": {"enum": ["calm", "stormy"]}, "n": {"type": "integer"}},
              "required": ["mood"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "weather", "schema": schema}}
    session = mlc_manifest.Session(str(reference), max_tokens=48, temperature=1.0, seed=11,
                                   response_format=fmt, logprobs=3)
    result = session.generate([{"tokens": [1, 30, 31, 32]}])
    assert result["stop_reason"] == "stop_token", result
    reply = json.loads(result["text"])
    assert reply["mood"] in ("calm", "stormy") and set(reply) <= {"mood", "n"}
    assert len(result["logprobs"]) == len(result["tokens"])
    for entry, token in zip(result["logprobs"], result["tokens"]):
        assert entry["token"] == token and entry["logprob"] <= 0
        assert 1 <= len(entry["top_logprobs"]) <= 3
        assert all(math.isfinite(lp) for _, lp in entry["top_logprobs"])  # masked tokens never listed
    with pytest.raises(mlc_manifest.Error):
        mlc_manifest.Session(str(reference), response_format={"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "string", "not": {"const": "x"}}}})
    plain = mlc_manifest.Session(str(reference), max_tokens=5, prefix_cache=False)
    assert plain.generate([{"tokens": [1, 30, 31, 32]}])["cached_tokens"] == 0
