"""The public surface is exactly ``podium.__all__``, and everything in it exists."""

from __future__ import annotations

import ast
from pathlib import Path

import podium


def test_all_names_exist_and_are_listed_once() -> None:
    for name in podium.__all__:
        assert hasattr(podium, name), name
    assert len(set(podium.__all__)) == len(podium.__all__)


def test_no_private_names_exported() -> None:
    assert not [n for n in podium.__all__ if n.startswith("_") and n != "__version__"]


def _names(tree: ast.Module) -> tuple[set[str], set[str], list[str] | None]:
    """(names a module defines, names it imports, its ``__all__``: ``[]`` when it has none, None
    when it is not a literal list or tuple of strings), read from its top-level statements and
    the ``if``/``try``/``with`` blocks among them."""
    defined: set[str] = set()
    imported: set[str] = set()
    declared: list[str] | None = []
    body = list(tree.body)
    while body:
        node = body.pop(0)
        if isinstance(node, ast.If | ast.Try | ast.With):
            body += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            body += [n for h in getattr(node, "handlers", []) for n in h.body]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            names = {t.id for t in flat if isinstance(t, ast.Name)}
            if "__all__" in names:
                items = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
                literal = all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in items)
                declared = [e.value for e in items if isinstance(e, ast.Constant)] if literal else None
            defined |= names - {"__all__"}
    return defined, imported, declared


def test_every_module_lists_exactly_its_public_names() -> None:
    """httpx's rule, for every module of the package (the core first held to it, then the upper
    layers): every public name a module defines is in its ``__all__``, and every name in
    ``__all__`` exists (defined or re-exported); a helper that is not API starts with an
    underscore. Read from the source with ``ast``, so it is fast and sees modules whose optional
    dependency is not installed; a module that resolves names lazily (``__getattr__``, the
    package root: the tests above) is checked for the first half only. Alembic's migration
    scripts (loaded by path, not imported) are not modules."""
    root = Path(podium.__file__).parent
    paths = [p for p in sorted(root.rglob("*.py")) if "migrations" not in p.parts and p.name != "__main__.py"]
    problems = []
    for path in paths:
        name = ".".join(["podium", *path.relative_to(root).with_suffix("").parts]).removesuffix(".__init__")
        defined, imported, declared = _names(ast.parse(path.read_text(encoding="utf-8")))
        if declared is None:
            problems.append(f"{name} has no literal __all__ (a list or tuple of strings)")
            continue
        public = {n for n in defined if not n.startswith("_")}
        problems += [f"{name}.{n} is public but not in __all__" for n in sorted(public - set(declared))]
        if "__getattr__" not in defined:
            problems += [f"{name}.__all__ lists {n!r}, which it lacks" for n in declared if n not in defined | imported]
        problems += [
            f"{name}.__all__ lists {n!r} twice" for n in sorted({n for n in declared if declared.count(n) > 1})
        ]
    assert not problems, "\n".join(problems)
