#!/usr/bin/env python3
"""Samples tool calls from `mlc-manifest serve` and checks each with an independent validator
(Debian's python3-jsonschema), for serve_tools_test.

  tool_replies.py BASE_URL TOOLS_FILE COUNT PARALLEL MAX_TOKENS

TOOLS_FILE holds the request's tools. COUNT requests (tool_choice "required", parallel calls for even
seeds, temperature 1, seeds 0..COUNT-1) go out PARALLEL at a time. Prints one JSON object: how many replies ended
with their calls (replies_ok) or were cut by max_tokens (cut), how many calls parsed, named a tool
and validated (a cut reply's whole ones included), and the first failures.
"""
import concurrent.futures
import json
import sys
import urllib.request

import jsonschema


def ask(url, tools, seed, max_tokens):
    body = {"temperature": 1, "seed": seed, "max_tokens": max_tokens, "tools": tools,
            "tool_choice": "required", "parallel_tool_calls": seed % 2 == 0,
            "messages": [{"role": "user", "content": "Use a tool, please (%d)." % seed}]}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def check(reply, schemas):
    """Problems of one reply's calls, and how many calls validated. A reply cut by max_tokens
    has every call but its last whole."""
    choice = reply["choices"][0]
    calls = choice["message"].get("tool_calls") or []
    if choice["finish_reason"] == "length":
        calls = calls[:-1]
    elif choice["finish_reason"] != "tool_calls":
        return ["finish_reason " + choice["finish_reason"]], 0
    problems, ok = [], 0
    for call in calls:
        name = call["function"]["name"]
        if call.get("type") != "function" or not call.get("id"):
            problems.append("call without type or id: %r" % call)
            continue
        if name not in schemas:
            problems.append("unknown tool %r" % name)
            continue
        try:
            args = json.loads(call["function"]["arguments"])
            jsonschema.Draft202012Validator(schemas[name]).validate(args)
            ok += 1
        except (ValueError, jsonschema.ValidationError) as e:
            problems.append("%s: %s: %r" % (name, e, call["function"]["arguments"]))
    if not choice["message"].get("tool_calls") and choice["finish_reason"] != "length":
        problems.append("no calls")
    return problems, ok


def main():
    url, tools_file, count, parallel, max_tokens = sys.argv[1:6]
    with open(tools_file) as f:
        tools = json.load(f)
    empty = {"type": "object", "properties": {}, "additionalProperties": False}
    schemas = {t["function"]["name"]: t["function"].get("parameters", empty) for t in tools}
    for s in schemas.values():
        jsonschema.Draft202012Validator.check_schema(s)
    failures, replies_ok, calls_ok, cut = [], 0, 0, 0
    with concurrent.futures.ThreadPoolExecutor(int(parallel)) as pool:
        replies = pool.map(lambda s: ask(url, tools, s, int(max_tokens)), range(int(count)))
        for seed, reply in enumerate(replies):
            problems, ok = check(reply, schemas)
            calls_ok += ok
            if problems:
                failures.append({"seed": seed, "problems": problems[:3]})
            elif reply["choices"][0]["finish_reason"] == "length":
                cut += 1
            else:
                replies_ok += 1
    print(json.dumps({"replies_ok": replies_ok, "calls_ok": calls_ok, "cut": cut, "failures": failures[:5]}))


main()
