"""The published matrix: ``mockdcp check -j 2`` over the library against each real client
as its users configure it gives the table checked in as ``tests/interop/matrix.json``
(the documentation's matrix page renders it: ``tests/test_docs.py``). A scenario added to the
library, or a verdict that changed, fails here with how to regenerate the table."""

from __future__ import annotations

import pytest

from . import matrix

pytestmark = pytest.mark.interop

REGENERATE = (
    f"regenerate with `{matrix.REGENERATE} [CLIENT]` (then explain each new failure in "
    "tests/interop/matrix.json: whose fault, the source line) and commit matrix.json"
)


def test_the_table_covers_the_library_and_explains_every_failure() -> None:
    expected = matrix.load()
    table, library = list(expected["scenarios"]), matrix.library()
    assert sorted(table) == sorted(library), (
        f"new in the library: {sorted(set(library) - set(table))}; gone from it: "
        f"{sorted(set(table) - set(library))}; {REGENERATE}"
    )
    assert matrix.validate(expected) == []
    assert set(expected["clients"]) == set(matrix.BY_NAME)


@pytest.mark.parametrize("client", [c.name for c in matrix.CLIENTS])
def test_check_over_the_library_gives_the_published_matrix(client: str) -> None:
    runner = matrix.BY_NAME[client]
    matrix.build([runner])
    expected = matrix.load()
    got = matrix.verdicts(matrix.check(runner))
    found = matrix.differences(client, got, expected)
    if found:
        # a cell that departs is run once more on its own: a race the table does not
        # know yet (each was found from a few runs) must not turn CI red, but one that
        # departs twice is a change in mockdcp or the client
        again = [name for name in got if any(line.startswith(f"{name}: ") for line in found)]
        retried = matrix.verdicts(matrix.check(runner, again))
        found = matrix.differences(client, {**got, **retried}, expected)
    assert found == [], f"{client}: " + "; ".join(found) + f"; {REGENERATE}"
