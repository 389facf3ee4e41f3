"""The op parity tests: the check that every registered op has a sample runs after all of them."""

from __future__ import annotations

import pytest

LAST = "test_every_registered_op_has_a_sample"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.name == LAST)  # stable: everything else keeps its order
