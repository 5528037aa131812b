"""The public surface is exactly ``podium.__all__``, and everything in it exists."""

from __future__ import annotations

import pytest

import podium


def test_all_names_exist_and_are_listed_once() -> None:
    for name in podium.__all__:
        assert hasattr(podium, name), name
    assert len(set(podium.__all__)) == len(podium.__all__)


def test_no_private_names_exported() -> None:
    assert not [n for n in podium.__all__ if n.startswith("_") and n != "__version__"]


@pytest.mark.slow
def test_every_module_lists_exactly_its_public_names() -> None:
    """httpx's rule, for every module of the package (the core first held to it, then the upper
    layers): every public name a module defines is in its ``__all__``, and every name in
    ``__all__`` exists (defined or re-exported); a helper that is not API starts with an
    underscore. Alembic's migration scripts (loaded by path, not imported) are not modules."""
    import ast
    import importlib
    from pathlib import Path

    root = Path(podium.__file__).parent
    paths = [p for p in sorted(root.rglob("*.py")) if "migrations" not in p.parts and p.name != "__main__.py"]
    problems = []
    for path in paths:
        name = ".".join(["podium", *path.relative_to(root).with_suffix("").parts]).removesuffix(".__init__")
        defined = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign):
                defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined.add(node.target.id)
        try:
            module = importlib.import_module(name)
        except ImportError:  # an extra that is not installed here: the others are still checked
            continue
        declared = set(getattr(module, "__all__", ()))
        public = {n for n in defined if not n.startswith("_")}
        problems += [f"{name}.{n} is public but not in __all__" for n in sorted(public - declared)]
        problems += [f"{name}.__all__ lists {n!r}, which it lacks" for n in sorted(declared) if not hasattr(module, n)]
    assert not problems, "\n".join(problems)
