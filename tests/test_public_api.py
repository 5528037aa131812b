"""The public surface is exactly ``podium.__all__``, and everything in it exists."""

from __future__ import annotations

import podium


def test_all_names_exist_and_are_listed_once() -> None:
    for name in podium.__all__:
        assert hasattr(podium, name), name
    assert len(set(podium.__all__)) == len(podium.__all__)


def test_no_private_names_exported() -> None:
    assert not [n for n in podium.__all__ if n.startswith("_") and n != "__version__"]
