#!/usr/bin/python3
"""One request through `mlc-manifest serve`, for tests that need no server helper of their own:
starts `CLI serve PACKAGE --port 0`, reads the port from its log line ("...:PORT"), POSTs the JSON
body in BODY_FILE to PATH, prints {"status", "body", "exit_code"} (the server stopped with SIGTERM),
and exits 0 unless the server never listened. Usage:

    serve_once.py CLI PACKAGE PATH BODY_FILE
"""
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def wait_for_port(log_path, proc, seconds=30.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        with open(log_path) as f:
            m = re.search(r":([0-9]+)\n", f.read())
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    return 0


def post(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main(argv):
    if len(argv) != 5:
        sys.stderr.write("usage: serve_once.py CLI PACKAGE PATH BODY_FILE\n")
        return 2
    cli, package, path, body_file = argv[1:]
    with open(body_file, "rb") as f:
        body = f.read()
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        proc = subprocess.Popen([cli, "serve", package, "--port", "0"], stdout=subprocess.DEVNULL,
                                stderr=log)
        try:
            port = wait_for_port(log.name, proc)
            if not port:
                log.seek(0)
                sys.stderr.write("the server did not listen:\n" + log.read())
                return 1
            status, text = post(port, path, body)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
    print(json.dumps({"status": status, "body": text, "exit_code": code}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
