"""docs/errors.md is generated from real runs: every error type has one, each exits with its documented
code, and the page matches what the code prints today."""

from __future__ import annotations

import pytest

from rlx_torch_import import errors
from tools import errors_doc


@pytest.fixture(scope="module")
def outcomes() -> list[errors_doc.Outcome]:
    return [errors_doc.run(s) for s in errors_doc.SCENARIOS]


def test_every_error_type_has_a_real_example(outcomes: list[errors_doc.Outcome]) -> None:
    shown = {o.scenario.error for o in outcomes}
    missing = [c.__name__ for c in errors_doc.error_classes() if c is not errors.RtiError and c.__name__ not in shown]
    assert not missing, f"error types without a scenario in errors_doc.SCENARIOS: {missing}"
    codes = {v for k, v in vars(errors.ExitCode).items() if not k.startswith("_")}
    assert codes == set(errors_doc.EXIT_MEANINGS), "every ExitCode needs a meaning in errors_doc.EXIT_MEANINGS"


def test_each_example_exits_with_its_types_code(outcomes: list[errors_doc.Outcome]) -> None:
    classes = {c.__name__: c for c in errors_doc.error_classes()}
    for o in outcomes:
        want = classes[o.scenario.error].exit_code
        assert o.exit_code == want, f"{o.scenario.did}: exit {o.exit_code}, {o.scenario.error} is {want}\n{o.message}"
        assert o.message.startswith("error: "), o.message
        assert "Traceback" not in o.message, o.message


def test_docs_errors_md_is_current(outcomes: list[errors_doc.Outcome]) -> None:
    text = errors_doc.render(outcomes)
    assert errors_doc.DOC.read_text() == text, "docs/errors.md is stale: python -m tools.errors_doc --write"
