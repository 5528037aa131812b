"""What the options of ``podium tasks`` and ``podium drift`` resolve to: the embedder
``--embedder`` names, the ``--tag`` values checked against the trace store, output folders that
must exist, and the pseudonymizer used unless ``--allow-pii``.

Raises ConfigError with the fix for a value that names nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.errors import ConfigError

if TYPE_CHECKING:
    from podium.embed import Embedder
    from podium.traffic.export import Pseudonymize

__all__ = ["check_tags", "check_target", "embedder_for", "pseudonymizer"]


def embedder_for(choice: str) -> Embedder | None:
    """The embedder ``--embedder`` names: ``hash`` (the model-free
    :class:`~podium.traffic.features.HashingEncoder`, nothing cached), ``minilm`` or an embedded
    model id (vectors cached in podium's cache folder), or None for ``none``. Raises ConfigError
    for anything else."""
    from podium.embed import Embedder, LlamaCppEncoder, MiniLMEncoder
    from podium.local_models import EMBEDDED_MODELS, cache_dir
    from podium.traffic.features import HashingEncoder

    if choice == "none":
        return None
    if choice == "hash":
        return Embedder(None, encoder=HashingEncoder())
    cache = cache_dir() / "traffic" / "embeddings.sqlite3"
    if choice == "minilm":
        return Embedder(cache, encoder=MiniLMEncoder())
    if choice in EMBEDDED_MODELS:
        return Embedder(cache, encoder=LlamaCppEncoder(choice))
    raise ConfigError(
        f"--embedder {choice!r}: use hash, minilm, none or an embedded model id ({', '.join(EMBEDDED_MODELS)})"
    )


def check_tags(store: Any, tags: Sequence[str]) -> None:
    """ConfigError naming the tags no stored request carries, and the tags there are."""
    from podium.traffic import source

    known = source.known_tags(store)
    unknown = source.unknown_tags(tags, known)
    if unknown:
        raise ConfigError(
            f"no stored request carries tag(s) {', '.join(map(repr, unknown))}; tags in the store: "
            f"{', '.join(sorted(known)) or 'none'}"
        )


def check_target(path: Path | None, flag: str) -> None:
    """Raises ConfigError when ``path``, a file a command will write, cannot be one: its folder
    does not exist (a typo must not create folders), or ``path`` is a folder itself."""
    if path is None:
        return
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a folder; name a file, e.g. {path / 'NAME'}")
    if not path.parent.is_dir():
        raise ConfigError(f"{flag} {path}: folder {path.parent} does not exist; create it first (mkdir -p)")


def pseudonymizer() -> Pseudonymize:
    """Masks one request's texts with one vault (:mod:`podium.pii`): ``texts → (masked, counts
    per PII kind)``. Presidio's analyzer is built on the first call, not here. ConfigError
    without the pii extra, naming ``--allow-pii``."""
    from collections import Counter

    from podium.pii.protection import PIIProtection
    from podium.pii.vault import Vault

    try:
        protection = PIIProtection()
    except ConfigError as exc:
        raise ConfigError(f"{exc}; or pass --allow-pii to keep personal data in clear") from None

    def mask(texts: Sequence[str]) -> tuple[list[str], Counter[str]]:
        masker, vault = protection.pseudonymizer(), Vault()
        counts: Counter[str] = Counter()
        masked = []
        for text in texts:
            out, found = masker.mask(text, vault)
            masked.append(out)
            counts.update(found)
        return masked, counts

    return mask
