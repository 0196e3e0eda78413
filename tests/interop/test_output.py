"""A failure report shows the end of a real client's output, where its crash is (the
full tier's CI lost a go-dcp panic behind the log lines before it). No client runs here
(the default tier)."""

from __future__ import annotations

from ._output import CRASH_CHARS, TAIL_CHARS, output_excerpt

#: go-dcp's log lines before its panic, then the panic as the Go runtime prints it
LOG = "".join(
    f"16:08:54.{i:03d} godcp-consumer: go-dcp INFO: re-open stream, vbID: {i % 64}\n"
    for i in range(400)
)
PANIC = """panic: cant find self in cluster

goroutine 165 [running]:
github.com/Trendyol/go-dcp/couchbase.(*cbMembership).rebalance(0x2f44acb5e000, {0x0, 0x0, 0x0})
\tgithub.com/Trendyol/go-dcp@v1.3.6/couchbase/membership.go:280 +0x3a5
created by github.com/Trendyol/go-dcp/couchbase.(*cbMembership).startMonitor in goroutine 163
\tgithub.com/Trendyol/go-dcp@v1.3.6/couchbase/membership.go:311 +0x58
"""


def test_a_panic_is_shown_first_with_its_whole_stack_and_the_lines_before_it() -> None:
    shown = output_excerpt(LOG + PANIC)
    assert shown.startswith("--- the crash ---\npanic: cant find self in cluster\n")
    assert "membership.go:311 +0x58" in shown
    assert shown.endswith("re-open stream, vbID: 15\n")  # the last line before the panic
    assert len(shown) < CRASH_CHARS + TAIL_CHARS + 200


def test_a_long_crash_is_cut_after_its_beginning() -> None:
    """A runtime fatal error prints every goroutine: its message and the top of the first
    stack are kept."""
    dump = "fatal error: concurrent map writes\n" + "goroutine 1 [running]:\n" * 2000
    shown = output_excerpt(LOG + dump)
    assert shown.startswith("--- the crash ---\nfatal error: concurrent map writes\n")
    assert "more characters]" in shown


def test_without_a_crash_the_end_of_the_output_is_shown() -> None:
    shown = output_excerpt(LOG)
    assert shown.endswith("re-open stream, vbID: 15\n")
    assert shown.startswith("[... ")
    assert output_excerpt("short\n") == "short\n"
