#!/usr/bin/python3
# Renders a published chat template (models/templates/NAME inside llama.cpp's source, the git
# bundle node-llama-cpp ships) with Jinja2 as Hugging Face transformers does (trim_blocks,
# lstrip_blocks, tojson = json.dumps keeping key order and non-ASCII): prints the prompt text.
# usage: chat_template.py BUNDLE CACHE_DIR TEMPLATE_NAME REQUEST.json  (messages, tools)
import json
import os
import subprocess
import sys

import jinja2


def template_text(bundle, cache, name):
    repo = os.path.join(cache, "llama-cpp.git")
    if not os.path.isdir(repo):
        tmp = repo + ".%d" % os.getpid()
        subprocess.run(["git", "clone", "--quiet", "--bare", bundle, tmp], check=True)
        try:
            os.rename(tmp, repo)
        except OSError:
            subprocess.run(["rm", "-rf", tmp], check=True)  # another process won
    out = subprocess.run(["git", "--git-dir", repo, "show", "HEAD:models/templates/" + name],
                         check=True, capture_output=True)
    return out.stdout.decode("utf-8")


def main():
    bundle, cache, name, request = sys.argv[1:5]
    with open(request, encoding="utf-8") as f:
        req = json.load(f)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(template_text(bundle, cache, name))
    # OpenAI sends a call's arguments as a JSON string; templates take the object.
    for m in req["messages"]:
        for call in m.get("tool_calls") or []:
            if isinstance(call["function"].get("arguments"), str):
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    sys.stdout.write(tmpl.render(messages=req["messages"], tools=req.get("tools"), add_generation_prompt=True,
                                 bos_token="", eos_token=""))


main()
