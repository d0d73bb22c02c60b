"""docs/plan.md shows what `bringup plan` prints: its worked examples are the tool's own
output (tests/support/plan_docs.py renders them), so the page cannot drift from the tool
("1200 s ... 20.00" on the page while the tool printed "30 min ... 24.00")."""

from __future__ import annotations

from pathlib import Path

from tests.support.plan_docs import examples, render

PAGE = Path(__file__).parents[2] / "docs" / "plan.md"


def test_the_worked_examples_are_the_tools_output() -> None:
    page = PAGE.read_text()
    assert len(examples(page)) >= 2  # the fitting one and the one that does not fit
    assert page == render(page), (
        "docs/plan.md differs from `bringup plan`: "
        "run .venv/bin/python -m tests.support.plan_docs docs/plan.md"
    )


def test_the_prose_of_the_worked_example_quotes_the_output() -> None:
    """The figures the prose names are the ones the block shows."""
    page = PAGE.read_text()
    example = page[page.index("## Worked example") : page.index("## The check")]
    for figure in ("285.52", "37.16", "242.49", "40.9 h", "326.8", "980.49", "24.00"):
        assert example.count(figure) >= 2, figure  # in the prose and in the output
