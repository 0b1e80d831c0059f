"""The hostile tier's counts at the end of its pytest output: the reader fault matrix's, the campaign's tally
(harness.Tally) and the generated option campaign's, from each case's recorded properties (test_reader_matrix.py's
``reader_matrix``, test_campaign.test_case's ``campaign``, test_generated_options.py's ``generated_options``; xdist
carries them to the controller). tests/conftest.py calls :func:`print_summary`: under xdist the controller collects
nothing, so it loads that conftest only, never tests/hostile/conftest.py (whose hook printed nothing in CI's -n 2).
"""

from __future__ import annotations

from harness import Case, Tally


def print_summary(terminalreporter) -> None:
    _reader_matrix(terminalreporter)
    tally = Tally()
    counts = []  # test_generated_options.py's "tasks x options x values" line
    for name, value in _properties(terminalreporter):
        if name == "generated_options":
            counts.append(value)
        if name == "campaign":
            tally.add(Case(value["id"], value["area"], run=None, message=""), list(value["bad"]))
    if tally.total:
        terminalreporter.write_sep("=", "hostile campaign tally (docs/RELIABILITY.md)")
        terminalreporter.write_line(tally.render())
    for line in counts:
        terminalreporter.write_line(line)


def _reader_matrix(terminalreporter) -> None:
    """The reader fault matrix's counts (test_reader_matrix.py records each cell: run, or not applicable)."""
    cells: dict[tuple[str, str], bool] = {}
    for name, value in _properties(terminalreporter):
        if name == "reader_matrix":
            cells[(value["reader"], value["fault"])] = value["applies"]
    if cells:
        readers = sorted({r for r, _ in cells})
        faults = sorted({f for _, f in cells})
        run = sum(cells.values())
        terminalreporter.write_sep("=", "reader fault matrix (docs/RELIABILITY.md)")
        terminalreporter.write_line(
            f"{len(readers)} readers x {len(faults)} faults: {run} cells run, {len(cells) - run} not applicable"
            f" (readers: {', '.join(readers)})"
        )


def _properties(terminalreporter):
    """Every (name, value) a test recorded with ``record_property`` in its call phase (under xdist too: the
    workers send them with their reports)."""
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if getattr(rep, "when", None) == "call":
                yield from getattr(rep, "user_properties", ())
