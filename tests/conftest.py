"""The test tiers and the Hypothesis profiles.

``python -m pytest`` runs the fast tier: every test not marked ``interop``, ``docker``,
``slow`` or ``full`` (unit, property with the ``quick`` profile, integration against the
server in-process, the scenario library). ``python -m pytest --full-only`` runs only the
tests that tier leaves out (real clients, Docker, the benches, the tooling checks, the
fuzzers), with the ``thorough`` profile; ``python -m pytest --full`` runs both.
``--hypothesis-profile`` (or ``MOCKDCP_HYPOTHESIS``) names another profile.

The whole fast tier runs in ``FAST_WORKERS`` processes (pytest-xdist). Its time is the
two cores' work, not waits on the wall clock: a run costs some 360 CPU seconds (user and
system, the processes its tests start included), so its wall time is what share of the
cores it gets; the processes beyond two keep both busy while a test waits (a scenario's
faults, a consumer's reconnect). It is dealt out by work stealing (``--dist
worksteal``): a worker that has run its share takes half of what another one still has
queued (dealt in chunks of neighbours, ``--dist load``, the scenario library's slow
tests, last in collection order, went to one or two workers that ran them alone for the
run's last 40 s). The whole full tier runs in ``FULL_WORKERS``, its real clients
wait more than they compute; every test that uses the Docker engine goes to one process
(one engine and one image a session: ``--dist loadgroup`` and the ``docker`` group), and
the interop builds take a lock (tests/interop/conftest.py). ``-n N`` chooses otherwise
(``-n 0``: one process); a run of named tests stays in one process.

Where the environment says not to write bytecode (``PYTHONDONTWRITEBYTECODE``, as on
this machine), the session's processes write and read it in a cache directory of their
own, ``$MOCKDCP_CACHE/test-pycache`` (``_bytecode_cached``): else every worker rewrote
the assertions of every test module and plugin it imports again (15 CPU seconds a worker
to collect the fast tier, 6.5 with the cache written) and every ``python -m mockdcp`` or
``pytest`` a test starts compiled its imports again, all on two cores.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import settings

from tests.tiers import FULL_MARKERS, Tier, split

# A test's own @settings(max_examples=...) wins over either profile.
settings.register_profile("quick", max_examples=50, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None)

# the docker fixtures (one image per session) serve tests/docker and the container
# modes of the Java and Go helpers (tests/integrations)
pytest_plugins = ["tests.docker.fixtures"]

#: processes for the whole fast tier (with 6 on this 2-core machine shared with other
#: work, load average 6-9: 6.1 to 8.8 min, 344 to 370 CPU seconds, three runs)
FAST_WORKERS = 6
#: processes for the whole full tier (27-28 min in one on this 2-core machine; more
#: than two starve the real clients and the image build)
FULL_WORKERS = 2
#: the fixtures that reach the Docker engine: their tests share one process
DOCKER_FIXTURES = frozenset(
    {"docker_engine", "base_image_tag", "docker_context", "mockdcp_image", "container_mode"}
)

_TIER_KEY = pytest.StashKey[Tier]()
_LEFT_OUT_KEY = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mockdcp tiers")
    group.addoption(
        "--full",
        action="store_true",
        default=False,
        help="run both tiers: the fast default and the full tier (tests marked "
        + ", ".join(FULL_MARKERS)
        + ")",
    )
    group.addoption(
        "--full-only",
        action="store_true",
        default=False,
        help="run only the full tier: the tests the fast default leaves out",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``python -m pytest`` (a whole tier, its tests found from ``testpaths``) runs in
    ``FAST_WORKERS`` processes by work stealing (unless ``--dist`` says otherwise),
    ``--full-only`` in ``FULL_WORKERS``, set before pytest-xdist reads ``-n``."""
    whole_suite = config.args_source is pytest.Config.ArgsSource.TESTPATHS
    if not (
        whole_suite
        and config.pluginmanager.hasplugin("xdist")
        and config.getoption("numprocesses", None) is None
        and not config.getoption("collectonly")
        and "PYTEST_XDIST_WORKER" not in os.environ
    ):
        return
    full_only = config.getoption("--full-only")
    config.option.numprocesses = FULL_WORKERS if full_only else FAST_WORKERS
    if full_only or config.getoption("--full"):
        config.option.dist = "loadgroup"
    elif config.getoption("dist") == "no":
        config.option.dist = "worksteal"


def _bytecode_cached() -> None:
    """This process and those it starts (the xdist workers, the commands the tests run)
    write and read their bytecode in ``$MOCKDCP_CACHE/test-pycache`` when the
    environment says not to write any (module docstring), as ``mockdcp bench`` does for
    the servers it times (``bench._harness.bytecode_cached``): the source tree and
    site-packages stay as they are, and a module whose source changed is compiled again
    (Python and pytest's assertion rewriter check its size and mtime). Nothing changes
    where bytecode is written already or a cache directory was chosen."""
    if not sys.dont_write_bytecode or sys.pycache_prefix or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    from mockdcp.data import cache_root

    prefix = str(cache_root() / "test-pycache")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix


def pytest_configure(config: pytest.Config) -> None:
    _bytecode_cached()
    full: bool = config.getoption("--full")
    full_only: bool = config.getoption("--full-only")
    if full and full_only:
        raise pytest.UsageError("--full runs both tiers, --full-only the full tier: give one")
    tier = Tier.BOTH if full else Tier.FULL if full_only else Tier.FAST
    config.stash[_TIER_KEY] = tier
    chosen = config.getoption("--hypothesis-profile", None)
    if chosen is None:
        default = "quick" if tier is Tier.FAST else "thorough"
        settings.load_profile(os.environ.get("MOCKDCP_HYPOTHESIS", default))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if DOCKER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("docker"))
    kept, left_out = split(items, config.stash[_TIER_KEY])
    config.stash[_LEFT_OUT_KEY] = len(left_out)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A tier with none of the selected tests ran nothing, which is not a failure (exit
    code 5 would make ``pytest tests/bench`` fail without --full-only)."""
    left_out = session.config.stash.get(_LEFT_OUT_KEY, 0)
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and left_out:
        session.exitstatus = pytest.ExitCode.OK


def pytest_report_header(config: pytest.Config) -> str:
    tier = config.stash[_TIER_KEY]
    return f"mockdcp tier: {tier.value} (Hypothesis: {settings().max_examples} examples a test)"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    left_out = config.stash.get(_LEFT_OUT_KEY, 0)
    if not left_out:
        return
    tier = config.stash[_TIER_KEY]
    if tier is Tier.FAST:
        hint = "python -m pytest --full-only runs them, --full both tiers"
        what = "of the full tier"
    else:
        hint = "python -m pytest runs them, --full both tiers"
        what = "of the fast tier"
    terminalreporter.write_line(f"mockdcp: {left_out} tests {what} left out ({hint})")
