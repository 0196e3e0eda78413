"""What starting a server imports, and where (issue 44): the HTTP stack (hypercorn,
Starlette, the application) in a worker thread, so that its imports do not hold the
event loop, the KV port and ``mockdcp serve``'s ready line; serve() itself imports the
scenario package only for a scenario; the TLS material (cryptography) on first use.
Each case runs in a fresh interpreter: this one has imported them already."""

from __future__ import annotations

import json
import subprocess
import sys

_SCRIPT = """
import json, sys, threading
import trio
import mockdcp

importers = {}


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in ("hypercorn", "starlette", "mockdcp.scenario", "cryptography"):
            importers.setdefault(name, threading.current_thread() is threading.main_thread())
        return None


sys.meta_path.insert(0, Watch())


async def main():
    async with mockdcp.serve(port=0, http_port=0) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.http_port)
        await stream.send_all(b"GET /pools HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        with trio.fail_after(60):
            head = await stream.receive_some()
        await stream.aclose()
    return head.split(b"\\r\\n")[0].decode()


status = trio.run(main)
print(json.dumps({"status": status, "on_main_thread": importers}))
"""


def test_the_http_stack_is_imported_off_the_event_loop_and_a_scenario_only_for_one() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, check=True, timeout=120
    ).stdout
    report = json.loads(out.splitlines()[-1])
    assert report["status"] == "HTTP/1.1 401 ", report  # answered (no credentials given)
    # first imported by a worker thread, not the event loop's (the scenario package too:
    # the HTTP application imports it; without a scenario, serve() itself does not)
    on_main_thread = report["on_main_thread"]
    assert {"hypercorn", "starlette"} <= set(on_main_thread)
    assert not any(on_main_thread.values()), on_main_thread
    # TLS is served (issue 42) but its material is made on a TLS client's first use
    assert "cryptography" not in on_main_thread


def test_import_mockdcp_leaves_the_server_until_it_is_used() -> None:
    # pytest imports mockdcp at every start (the plugin's pytest11 entry point)
    script = (
        "import json, sys, mockdcp\n"
        "before = sorted(m for m in ('trio', 'mockdcp.server') if m in sys.modules)\n"
        "from mockdcp.server import Server, serve\n"
        "print(json.dumps([before, mockdcp.serve is serve, mockdcp.Server is Server]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, check=True, timeout=60
    ).stdout
    assert json.loads(out) == [[], True, True]
