"""Prove that mockdcp's image serves: ``mockdcp serve --docs 1000`` streamed to the end
by ``mockdcp tail``, its health and state endpoints, the bundled scenarios listed,
validated and one of them served, and ``mockdcp serve --tls``: its HTTPS health endpoint
and KV TLS port reached trusting the CA it made (in a temporary directory, deleted after:
no CA is baked into the image).

docker/slim.py runs the checks in the build stage (``run_the_image``). docker/Dockerfile
runs this file in the finished image (``FROM scratch`` with the tree docker/runtime.py
assembled), as root before it switches to its user: first writing bytecode, which leaves
that of each standard library module the server imports (the base's is not taken: most
of it is for modules no server loads), then again without, so that the build fails if
the image lacks a file it needs.

Usage: python imagecheck.py  (with the venv's python)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import sysconfig
import tempfile
import urllib.request
from pathlib import Path

VENV = Path(sys.prefix)
SITE = Path(sysconfig.get_paths()["purelib"])
DOCS = 1000
TIMEOUT = 120


def environment(write_bytecode: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def serve_and_stream(env: dict[str, str], *extra: str, docs: int = DOCS) -> None:
    """Start ``mockdcp serve``, check its HTTP endpoints and stream ``docs`` mutations."""
    mockdcp = str(VENV / "bin" / "mockdcp")
    args = [mockdcp, "serve", "--json", "--port", "0", "--http-port", "0", *extra]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("event") == "ready":
                break
        else:
            raise SystemExit(f"mockdcp serve {' '.join(extra)} exited {server.wait()}")
        for path in ("/mock/health", "/mock/state"):
            with urllib.request.urlopen(event["http"] + path, timeout=10) as response:
                response.read()
        if docs:
            tail = [mockdcp, "tail", "--port", str(event["kv_port"]), "--json"]
            out = subprocess.run(
                [*tail, "--limit", str(docs)],
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=True,
            ).stdout
            streamed = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            keys = {e["key"] for e in streamed if e["event"] == "Mutation"}
            if len(keys) != docs:
                raise SystemExit(f"mockdcp tail streamed {len(keys)} documents, not {docs}")
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def serve_over_tls(env: dict[str, str]) -> None:
    """``mockdcp serve --tls`` with a CA of its own: HTTPS and the KV TLS port answer,
    with the certificate the CA signed."""
    mockdcp = str(VENV / "bin" / "mockdcp")
    private = tempfile.mkdtemp(prefix="mockdcp-imagecheck-")
    args = [mockdcp, "serve", "--json", "--port", "0", "--http-port", "0", "--docs", "0"]
    args += ["--tls", "--tls-port", "0", "--https-port", "0", "--tls-dir", private]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert server.stdout is not None
        ready = json.loads(server.stdout.readline())
        context = ssl.create_default_context(cafile=ready["ca_file"])
        with urllib.request.urlopen(
            ready["https"] + "/mock/health", timeout=10, context=context
        ) as response:
            response.read()
        with (
            socket.create_connection(("127.0.0.1", ready["tls_port"]), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            assert tls.version() is not None
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(private, ignore_errors=True)


def run_the_image(env: dict[str, str]) -> None:
    """The checks, with a cache directory of their own (``MOCKDCP_CACHE``, deleted after):
    each run draws the documents' Faker pools, so Faker is proven to import and draw
    every time, and nothing is kept in the image."""
    mockdcp = str(VENV / "bin" / "mockdcp")
    cache = tempfile.mkdtemp(prefix="mockdcp-imagecheck-")
    env = {**env, "MOCKDCP_CACHE": cache}
    try:
        serve_and_stream(env, "--docs", str(DOCS))
        bundled = sorted((SITE / "mockdcp" / "scenarios").glob("*.yaml"))
        subprocess.run([mockdcp, "scenarios"], env=env, capture_output=True, check=True)
        subprocess.run([mockdcp, "validate", *bundled], env=env, capture_output=True, check=True)
        serve_and_stream(env, "--scenario", str(bundled[0]), docs=0)
        serve_over_tls(env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    run_the_image(environment(write_bytecode=True))
    run_the_image(environment(write_bytecode=False))


if __name__ == "__main__":
    main()
