#!/usr/bin/env python3
"""Samples structured replies from `mlc-manifest serve` and checks them with an independent
validator (Debian's python3-jsonschema), for serve_test.

  json_replies.py BASE_URL FORMAT_FILE COUNT PARALLEL MAX_TOKENS

FORMAT_FILE holds the request's response_format. COUNT requests (temperature 1, seeds 0..COUNT-1)
go out PARALLEL at a time so that they share the engine's batches. Prints one JSON object: how
many replies parsed and validated, and the first failures.
"""
import concurrent.futures
import json
import sys
import urllib.request

import jsonschema


def ask(url, fmt, seed, max_tokens):
    body = {"model": "reference", "temperature": 1, "seed": seed, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "Reply in JSON, please (%d)." % seed}],
            "response_format": fmt}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def check(reply, fmt):
    choice = reply["choices"][0]
    if choice["finish_reason"] != "stop":
        return "finish_reason " + choice["finish_reason"]
    text = choice["message"]["content"]
    try:
        value = json.loads(text)
    except ValueError as e:
        return "does not parse: %s: %r" % (e, text)
    if fmt["type"] == "json_object":
        return None if isinstance(value, dict) else "not an object: %r" % text
    schema = fmt["json_schema"]["schema"]
    try:
        jsonschema.Draft202012Validator(schema).validate(value)
    except jsonschema.ValidationError as e:
        return "does not validate: %s: %r" % (e.message, text)
    return None


def main():
    url, fmt_file, count, parallel, max_tokens = sys.argv[1:6]
    with open(fmt_file) as f:
        fmt = json.load(f)
    jsonschema.Draft202012Validator.check_schema(fmt.get("json_schema", {}).get("schema", {}))
    failures, ok, tokens = [], 0, []
    with concurrent.futures.ThreadPoolExecutor(int(parallel)) as pool:
        replies = pool.map(lambda s: ask(url, fmt, s, int(max_tokens)), range(int(count)))
        for seed, reply in enumerate(replies):
            problem = check(reply, fmt)
            tokens.append(reply["usage"]["completion_tokens"])
            if problem is None:
                ok += 1
            elif len(failures) < 5:
                failures.append({"seed": seed, "problem": problem})
    print(json.dumps({"ok": ok, "failures": failures, "max_completion_tokens": max(tokens),
                      "mean_completion_tokens": sum(tokens) / len(tokens)}))


if __name__ == "__main__":
    main()
