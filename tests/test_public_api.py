"""The public surface is exactly ``podium.__all__``, and everything in it exists."""

from __future__ import annotations

import podium


def test_all_names_exist_and_are_listed_once() -> None:
    for name in podium.__all__:
        assert hasattr(podium, name), name
    assert len(set(podium.__all__)) == len(podium.__all__)


def test_no_private_names_exported() -> None:
    assert not [n for n in podium.__all__ if n.startswith("_") and n != "__version__"]


def test_core_modules_list_exactly_their_public_names() -> None:
    """httpx's rule for the core (request path, workers, conductors): every public name a module
    defines is in its ``__all__``, and every name in ``__all__`` exists (defined or re-exported);
    a helper that is not API starts with an underscore."""
    import ast
    import importlib
    from pathlib import Path

    root = Path(podium.__file__).parent
    core = ["workflow", "parse", "messages", "budget", "executor", "orchestrator", "records", "errors",
            "streaming", "roles", "answers"]  # fmt: skip
    paths = [root / f"{m}.py" for m in core] + sorted((root / "workers").glob("*.py"))
    paths += sorted((root / "conductor").glob("*.py"))
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
        module = importlib.import_module(name)
        declared = set(getattr(module, "__all__", ()))
        public = {n for n in defined if not n.startswith("_")}
        problems += [f"{name}.{n} is public but not in __all__" for n in sorted(public - declared)]
        problems += [f"{name}.__all__ lists {n!r}, which it lacks" for n in sorted(declared) if not hasattr(module, n)]
    assert not problems, "\n".join(problems)
