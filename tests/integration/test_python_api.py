"""The Python API: ``mockdcp.Server`` (a thread) and ``mockdcp.serve`` (trio) apply the
same steps; a bad step list changes nothing and the server goes on."""

from __future__ import annotations

import pytest

import mockdcp
from mockdcp.scenario import ScenarioProblems, Set


def test_a_server_in_a_thread_takes_steps_from_synchronous_code() -> None:
    with mockdcp.Server(port=0, http_port=0, vbuckets=4) as server:
        assert server.connection_string == f"couchbase://127.0.0.1:{server.kv_port}"
        server.apply(Set(key="a", value={"n": 1}), {"set": {"key": "b", "value": "x"}})
        assert {key for _, key in server.oracle()} == {b"a", b"b"}
        vbuckets = server.state()["vbuckets"]
        assert isinstance(vbuckets, list)
        assert sum(vb["high_seqno"] for vb in vbuckets) == 2


def test_a_bad_step_list_changes_nothing_and_the_server_goes_on() -> None:
    with mockdcp.Server(port=0, http_port=0, vbuckets=4) as server:
        with pytest.raises(ScenarioProblems, match="step 2"):
            server.apply(Set(key="a", value="1"), {"persist": {"upto": "x"}})
        with pytest.raises(ScenarioProblems, match="no live document"):
            server.apply(Set(key="a", value="1"), {"delete": {"key": "zzz"}})
        assert server.oracle() == {}
        server.apply(Set(key="a", value="1"))
        assert len(server.oracle()) == 1


async def test_serve_applies_a_scenarios_initial_steps_before_clients_connect(
    tmp_path: object,
) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "s.yaml"
    path.write_text(
        "name: s\nseed: 4\nbucket: {vbuckets: 4}\n"
        "steps:\n  - generate: {docs: 20}\n  - wait: {seconds: 0}\n  - set: {key: last, value: x}\n"
    )
    async with mockdcp.serve(port=0, http_port=0, scenario=path) as server:
        assert len(server.oracle()) == 20  # before the background part ran
        await server.scenario_done.wait()
        assert len(server.oracle()) == 21
        assert server.state()["scenario"]["finished"] is True  # type: ignore[index]


async def test_the_same_scenario_and_seed_give_the_same_model_every_run(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "d.yaml"
    path.write_text(
        "name: d\nseed: 9\nbucket: {vbuckets: 8}\nsteps:\n  - generate: {docs: 50}\n"
        "  - delete: {key: doc::000004}\n  - persist: {}\n  - failover: {vbuckets: 3}\n"
    )
    runs = []
    for _ in range(2):
        async with mockdcp.serve(port=0, http_port=0, scenario=path) as server:
            runs.append(
                [
                    (
                        vb.failover.entries,
                        [(i.seqno, i.cas, i.key, i.value) for i in vb.items.values()],
                    )
                    for vb in server.bucket.vbuckets
                ]
            )
    assert runs[0] == runs[1]


def test_state_reports_the_nodes_limits() -> None:
    with mockdcp.Server(port=0, http_port=0, vbuckets=2, max_connections=7) as server:
        limits = server.state()["limits"]
        assert limits == {"max_connections": 7, "auth_timeout": 120.0, "output_limit": 8 << 20}


def test_a_server_declares_collections_whose_creation_events_come_first() -> None:
    with mockdcp.Server(
        port=0, http_port=0, vbuckets=2, collections={"inventory": ["hotel", "air"]}
    ) as server:
        scopes = server.bucket.manifest_json()["scopes"]
        assert isinstance(scopes, list)
        assert sorted(s["name"] for s in scopes) == ["_default", "inventory"]
        vbuckets = server.state()["vbuckets"]
        assert isinstance(vbuckets, list)
        assert [vb["high_seqno"] for vb in vbuckets] == [3, 3]  # scope and 2 collections


def test_serve_command_line_takes_scope_dot_collection_paths() -> None:
    from mockdcp.cli import build_parser

    args = build_parser().parse_args(
        ["serve", "--collections", "inventory.hotel,inventory.air,travel.route"]
    )
    assert args.collections == {"inventory": ["hotel", "air"], "travel": ["route"]}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--collections", "hotel"])


async def test_serve_takes_the_bucket_s_backfills_per_connection() -> None:
    """kv_engine ``dcp_backfill_in_progress_per_connection_limit``: ``serve`` and
    ``mockdcp serve --backfills-per-connection`` set it (1 by default; 0 refused)."""
    from mockdcp.cli import build_parser

    assert build_parser().parse_args(["serve"]).backfills_per_connection == 1
    args = build_parser().parse_args(["serve", "--backfills-per-connection", "8"])
    assert args.backfills_per_connection == 8
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--backfills-per-connection", "0"])
    async with mockdcp.serve(port=0, http_port=0, vbuckets=2, backfills_per_connection=8) as s:
        assert s.bucket.backfills_per_connection == 8


async def test_serve_loads_generated_documents_as_serve_docs_does() -> None:
    async with mockdcp.serve(port=0, http_port=0, vbuckets=8, docs=100) as server:
        oracle = server.oracle()
        assert len(oracle) == 100
        assert {key for _, key in oracle} == {b"user::%06d" % i for i in range(100)}
        assert all(vb.persisted_seqno == vb.high_seqno for vb in server.bucket.vbuckets)


def test_a_server_in_a_thread_takes_docs_and_its_oracle_has_rows() -> None:
    with mockdcp.Server(port=0, http_port=0, vbuckets=4, docs=10, seed=3) as server:
        oracle = server.oracle()
        rows = oracle.rows()
        assert [row["key"] for row in rows] == sorted(key.decode() for _, key in oracle)
        assert {(row["scope"], row["collection"]) for row in rows} == {("_default", "_default")}
        assert oracle.to_json()["rows"][0]["value"] == rows[0]["value"].decode()


@pytest.mark.parametrize(
    "options",
    [{"docs": -1}, {"docs": 5, "scenario": "x.yaml"}],
    ids=["negative", "with-a-scenario"],
)
async def test_serve_refuses_docs_it_cannot_load(options: dict[str, object]) -> None:
    with pytest.raises(mockdcp.ServerError, match="docs is a count"):
        async with mockdcp.serve(port=0, http_port=0, **options):  # type: ignore[arg-type]
            pass


def test_an_error_that_kills_the_server_after_it_was_ready_is_raised_not_swallowed() -> None:
    """A task of the server's (here its flusher) raises after the ready: the thread's
    run ends, and ``stop()`` raises it as ``ServerError`` (it kept it and raised
    nothing, so the plugin showed only a ``RunFinishedError`` of a later call), as does
    any call made after it died."""
    from mockdcp.util import ServerError

    server = mockdcp.Server(port=0, http_port=0, vbuckets=4).start()

    def broken(now: float) -> list[int]:
        raise RuntimeError("the disk is on fire")

    def break_the_flusher_and_write() -> None:  # returns before the flusher runs
        server.bucket.flusher.flush = broken  # type: ignore[method-assign]
        server.bucket.set("a", "1")  # the flusher's next flush raises

    server.call(break_the_flusher_and_write)
    with pytest.raises(ServerError, match=r"died after it was ready") as called:
        _call_for(server, 20.0)  # until the flusher ran
    assert isinstance(called.value.__cause__, RuntimeError)
    with pytest.raises(ServerError, match=r"died after it was ready.*the disk is on fire") as info:
        server.stop()
    assert isinstance(info.value.__cause__, RuntimeError)
    server.stop()  # once: stopping it again is a no-op


def _call_for(server: mockdcp.Server, seconds: float) -> None:
    """Call into ``server`` every 20 ms for ``seconds`` (what a call raises ends it)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        server.call(lambda: None)
        time.sleep(0.02)
