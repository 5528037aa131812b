"""Export a trained LoRA adapter (peft) to a llama.cpp GGUF LoRA adapter, so a GRPO-trained LM
conductor runs in the in-process llama.cpp runtime with no torch at inference.

llama.cpp applies an adapter at inference as ``y = W·x + (alpha / r) · B·(A·x)`` on each base
weight ``W`` named in the adapter file, on top of the base model's own (quantised) weights; the
adapter file holds, per adapted weight ``blk.N.<tensor>.weight``, the pair

* ``blk.N.<tensor>.weight.lora_a`` — peft's ``lora_A``, numpy shape ``(r, in)``;
* ``blk.N.<tensor>.weight.lora_b`` — peft's ``lora_B``, numpy shape ``(out, r)``;

(ggml reverses the order: ``ne = [in, r]`` and ``[r, out]``), plus ``general.type = "adapter"``,
``adapter.type = "lora"`` and ``adapter.lora.alpha``. peft scales by ``lora_alpha / r`` too, so
the two agree. One subtlety: for the ``llama`` architecture the GGUF conversion reorders the rows
of the query and key projections (rotary embedding layout; transformers undoes it when it loads a
GGUF), so ``lora_B`` of ``q_proj`` / ``k_proj`` gets the same row order here.

Supported: plain LoRA (peft ``LORA``, no DoRA, no rank-stabilised scaling, no bias, no extra
trained modules, one alpha) on the linear layers of a ``llama`` or ``qwen2`` base — the
architectures of the embedded models. Anything else is refused with a ConfigError rather than
exported wrong. Needs ``gguf`` and ``safetensors`` (the ``train`` extra); torch only for bf16
adapters.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from podium.errors import ConfigError
from podium.llama_runtime import load_llama_cpp
from podium.local_models import EMBEDDED_MODELS, hub_offline, resolve_model, sha256_file

__all__ = [
    "ARCHITECTURES",
    "Agreement",
    "BaseInfo",
    "ExportedAdapter",
    "base_info",
    "check_adapter_config",
    "drop_gguf_marker",
    "gguf_tensor_name",
    "load_base_model",
    "logit_agreement",
    "lora_to_gguf",
]

ARCHITECTURES = ("llama", "qwen2")
"""Base architectures the export supports (the embedded models': SmolLM2 is ``llama``, Qwen2.5 is
``qwen2``)."""

_PEFT_KEY = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<part>[AB])\.weight$")

# adapter_config.json options that change what the adapter computes; llama.cpp's plain LoRA
# cannot express them. (option, the one non-empty value allowed, why)
_REFUSED: tuple[tuple[str, Any, str], ...] = (
    ("use_dora", False, "DoRA (weight-decomposed LoRA) adds a magnitude vector"),
    ("use_rslora", False, "rank-stabilised LoRA scales by alpha/sqrt(r), llama.cpp by alpha/r"),
    ("bias", "none", "trained biases are not part of a GGUF LoRA adapter"),
    ("lora_bias", False, "a bias on lora_B is not part of a GGUF LoRA adapter"),
    ("fan_in_fan_out", False, "transposed (Conv1D) base weights are not supported"),
    ("modules_to_save", None, "fully trained extra modules would need a merged model"),
    ("alpha_pattern", {}, "llama.cpp keeps one alpha per adapter"),
    ("layer_replication", None, "replicated layers do not exist in the base GGUF"),
    ("target_parameters", None, "LoRA on raw parameters (e.g. MoE experts) is not supported"),
)


@dataclass(frozen=True)
class ExportedAdapter:
    """What :func:`lora_to_gguf` wrote.

    Attributes:
        file: the GGUF adapter's file name (it sits next to the ``adapter/`` folder).
        sha256: hex sha256 of the file, checked when llama.cpp loads it.
        base_model: the embedded model id (or ``.gguf`` file name) it applies to.
        architecture: the base's GGUF architecture (``llama``, ``qwen2``).
        tensors: adapted base weights (each one lora_a / lora_b pair).
        rank: LoRA rank r (the largest, with a ``rank_pattern``); alpha: LoRA alpha
            (llama.cpp scales by alpha / r, as peft does).
        identity: every lora_B is zero, so the adapter changes nothing (peft starts lora_B at
            zero; GRPO leaves it there when no question's rollouts ever got different rewards).
    """

    file: str
    sha256: str
    base_model: str
    architecture: str
    tensors: int
    rank: int
    alpha: float
    identity: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BaseInfo:
    """What the export needs from the base GGUF: architecture, block count, attention heads
    (query and key/value) and every tensor's ggml shape ``(ne0, ne1, ...)``."""

    architecture: str
    blocks: int
    heads: int
    kv_heads: int
    shapes: dict[str, tuple[int, ...]]


def base_info(path: Path) -> BaseInfo:
    """Read the architecture, sizes and tensor shapes of a GGUF model file (memory-mapped; no
    weights are loaded; ≈ 5 s for SmolLM2, whose 49,152-token vocabulary gguf parses field by
    field, so it is cached per file version). Raises ConfigError for a file that is not a GGUF
    model."""
    stat = path.stat()
    return _base_info(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _base_info(path_text: str, size: int, mtime_ns: int) -> BaseInfo:
    import gguf

    path = Path(path_text)
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"{path.name} is not a readable GGUF file: {exc}") from None

    def field(key: str) -> Any:
        found = reader.fields.get(key)
        return None if found is None else found.contents()

    arch = field(gguf.Keys.General.ARCHITECTURE)
    if not isinstance(arch, str):
        raise ConfigError(f"{path.name} has no general.architecture; is it a GGUF model file?")
    blocks, heads = field(f"{arch}.block_count"), field(f"{arch}.attention.head_count")
    kv_heads = field(f"{arch}.attention.head_count_kv") or heads
    shapes = {t.name: tuple(int(n) for n in t.shape) for t in reader.tensors}
    return BaseInfo(arch, int(blocks or 0), int(heads or 0), int(kv_heads or 0), shapes)


def gguf_tensor_name(peft_key: str, base: BaseInfo) -> tuple[str, str]:
    """The GGUF name of a peft adapter tensor and its part: for
    ``base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight`` on a ``llama`` base,
    ``("blk.3.attn_q.weight.lora_a", "a")``.

    Raises ConfigError for a tensor that is not a LoRA A/B matrix (DoRA magnitudes, embedding
    LoRA, biases), a module with no GGUF counterpart, or one whose base weight is missing from
    the base file (e.g. ``lm_head`` on a model with tied embeddings) or is the token embedding
    (llama.cpp stores its adapter transposed; not supported here)."""
    match = _PEFT_KEY.match(peft_key)
    if match is None:
        raise ConfigError(
            f"adapter tensor {peft_key!r} is not a LoRA A/B weight (DoRA, embedding LoRA and trained "
            "biases cannot be exported); train with a plain LoRA on linear layers"
        )
    mapped = _name_map(base.architecture, base.blocks).get_name(match["module"])
    if mapped is None:
        raise ConfigError(
            f"adapter module {match['module']!r} has no GGUF counterpart for a {base.architecture} base; "
            "target only the attention and MLP projections"
        )
    weight = f"{mapped}.weight"
    if weight not in base.shapes or len(base.shapes[weight]) != 2:
        raise ConfigError(
            f"adapter module {match['module']!r} maps to {weight}, which the base model does not have "
            "as a matrix (tied or absent); leave it out of target_modules"
        )
    if mapped == "token_embd":
        raise ConfigError("a LoRA on the token embedding cannot be exported; leave embed_tokens out of target_modules")
    part = match["part"].lower()
    return f"{weight}.lora_{part}", part


@functools.cache
def _name_map(architecture: str, blocks: int) -> Any:
    """gguf's HF → GGUF tensor-name map (building one takes ≈ 25 ms; an adapter has hundreds of
    tensors)."""
    import gguf

    return gguf.get_tensor_name_map(_arch(architecture), blocks)


def _arch(name: str) -> Any:
    import gguf

    if name not in ARCHITECTURES:
        raise ConfigError(f"LoRA export supports base architectures {', '.join(ARCHITECTURES)}; this base is {name!r}")
    return {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}[name]


def check_adapter_config(config: dict[str, Any]) -> float:
    """Validate a peft ``adapter_config.json``; returns its ``lora_alpha``. (A ``rank_pattern``
    is fine: llama.cpp reads each weight's rank from its tensors.)

    Raises ConfigError naming the first option llama.cpp cannot express (see ``_REFUSED``)."""
    if config.get("peft_type") != "LORA":
        raise ConfigError(f"adapter type {config.get('peft_type')!r}: only peft LORA adapters can be exported")
    for option, wanted, why in _REFUSED:
        value = config.get(option)
        if value and value != wanted:
            raise ConfigError(f"adapter_config.json {option} = {value!r} cannot be exported: {why}")
    alpha = config.get("lora_alpha")
    if not isinstance(alpha, int | float) or alpha <= 0:
        raise ConfigError(f"adapter_config.json lora_alpha = {alpha!r}: need a positive number")
    return float(alpha)


def lora_to_gguf(adapter_dir: Path, base_model: str, out_path: Path) -> ExportedAdapter:
    """Convert the peft LoRA adapter in ``adapter_dir`` (``adapter_config.json`` +
    ``adapter_model.safetensors``) into a llama.cpp GGUF LoRA adapter at ``out_path`` (F32,
    written atomically) for ``base_model``: an embedded model id (its file sha256-verified) or a
    ``.gguf`` path.

    Raises ConfigError for a missing or unsupported adapter (see the module docstring), an
    unsupported base architecture, or tensors whose shapes do not fit the base model;
    ModelNotInstalled for a missing embedded base."""
    import gguf

    config_file, weights_file = adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors"
    if not config_file.is_file() or not weights_file.is_file():
        raise ConfigError(f"{adapter_dir} is not a peft adapter (adapter_config.json, adapter_model.safetensors)")
    alpha = check_adapter_config(json.loads(config_file.read_text(encoding="utf-8")))
    base_path = resolve_model(base_model) if base_model in EMBEDDED_MODELS else Path(base_model)
    if not base_path.is_file():
        raise ConfigError(f"base model {base_model!r} is neither an embedded model nor an existing .gguf file")
    base = base_info(base_path)
    _arch(base.architecture)
    tensors = _read_safetensors(weights_file)
    pairs: dict[str, dict[str, np.ndarray[Any, Any]]] = {}
    for key, value in tensors.items():
        name, part = gguf_tensor_name(key, base)
        pairs.setdefault(name[: -len(".lora_a")], {})[part] = value
    if not pairs:
        raise ConfigError(f"{weights_file.name} holds no LoRA tensors")
    writer_path = out_path.parent / f".{out_path.name}.tmp"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(writer_path, base.architecture)
    ranks = []
    moved = False
    try:
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
        for weight in sorted(pairs):
            pair = pairs[weight]
            if set(pair) != {"a", "b"}:
                raise ConfigError(f"adapter weight {weight} has only lora_{''.join(pair)}; the adapter is incomplete")
            a, b = _oriented(weight, pair["a"], pair["b"], base)
            ranks.append(a.shape[0])
            moved = moved or bool(np.any(b))
            writer.add_tensor(f"{weight}.lora_a", a)
            writer.add_tensor(f"{weight}.lora_b", b)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(writer_path, out_path)
    finally:
        writer.close()
        writer_path.unlink(missing_ok=True)
    return ExportedAdapter(
        file=out_path.name,
        sha256=sha256_file(out_path),
        base_model=base_model if base_model in EMBEDDED_MODELS else base_path.name,
        architecture=base.architecture,
        tensors=len(pairs),
        rank=max(ranks),
        alpha=alpha,
        identity=not moved,
    )


def _oriented(
    weight: str, a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], base: BaseInfo
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(lora_a, lora_b) as float32 in llama.cpp's layout, checked against the base weight's shape
    (ggml ``ne = [in, out]``); ``lora_b`` of the llama query/key projections row-permuted."""
    n_in, n_out = base.shapes[weight]
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != n_in or b.shape[0] != n_out or a.shape[0] != b.shape[1]:
        raise ConfigError(
            f"adapter weight {weight}: lora_A {a.shape} / lora_B {b.shape} do not fit the base weight "
            f"({n_out} × {n_in}); was the adapter trained on this base model?"
        )
    b = b.astype(np.float32)
    if base.architecture == "llama" and (".attn_q." in weight or ".attn_k." in weight):
        heads = base.heads if ".attn_q." in weight else base.kv_heads
        b = _rope_permute(b, heads)
    return np.ascontiguousarray(a.astype(np.float32)), np.ascontiguousarray(b)


def _rope_permute(rows: np.ndarray[Any, Any], heads: int) -> np.ndarray[Any, Any]:
    """The row order the llama GGUF conversion gives query/key weights: within each head, the
    two rotary halves are interleaved (row ``h, j, i`` of ``(heads, 2, d/2)`` moves to ``h, i, j``).
    The inverse of what transformers' GGUF loader applies."""
    out = rows.shape[0]
    if heads <= 0 or out % (2 * heads):
        raise ConfigError(f"cannot reorder {out} query/key rows over {heads} heads; is the base model right?")
    return rows.reshape(heads, 2, out // heads // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def _read_safetensors(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    """The adapter's tensors as numpy arrays; bf16 files (numpy has no bf16) go through torch."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return dict(load_file(str(path)))
    except TypeError:  # bfloat16
        from safetensors.torch import load_file as load_torch

        return {k: v.float().numpy() for k, v in load_torch(str(path)).items()}
    except SafetensorError as exc:
        raise ConfigError(f"{path.name} is not a readable safetensors file: {exc}") from None


@dataclass(frozen=True)
class Agreement:
    """How well llama.cpp running an exported adapter agrees with transformers + peft running
    the original, on one text (:func:`logit_agreement`).

    Attributes:
        cosine: cosine between the two changes of the next-token logits the adapter causes
            (adapted − base, every position of the text, flattened); 1 = the same direction.
        norm_ratio: ‖change in llama.cpp‖ / ‖change in transformers‖; 1 = the same size (0 when
            transformers shows no change: an identity adapter).
        signal: ‖change in transformers‖ / ‖llama.cpp base − transformers base‖: how far the
            adapter's effect stands above the two runtimes' disagreement on the base model
            (llama.cpp quantises activations; re-rounding alone moves its logits about as much
            as that disagreement). Below ≈ 3 the cosine says little; raise ``amplify``.
        positions: tokens of the text (logit rows compared).
    """

    cosine: float
    norm_ratio: float
    signal: float
    positions: int


def load_base_model(base_model: str) -> Any:
    """The base model as transformers loads it from its GGUF file: dequantised to float32, in
    eval mode, its GGUF marker dropped (see :mod:`podium.train.grpo`)."""
    hub_offline()
    import torch
    from transformers import AutoModelForCausalLM

    path = resolve_model(base_model) if base_model in EMBEDDED_MODELS else Path(base_model)
    model: Any = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    drop_gguf_marker(model)
    model.eval()
    return model


def logit_agreement(
    adapter_dir: Path,
    base_model: str,
    adapter_gguf: Path,
    text: str,
    *,
    amplify: float = 1.0,
    model: Any = None,
) -> Agreement:
    """Run ``text`` through the base model with and without the adapter twice — transformers +
    peft on ``adapter_dir`` (the base dequantised from its GGUF file) and llama.cpp on
    ``adapter_gguf`` — and compare the logit changes (:class:`Agreement`). ``amplify`` scales
    the adapter on both sides alike (peft's ``lora_B`` and llama.cpp's adapter scale), so the
    effect of a lightly trained adapter stands out of the runtimes' numerical disagreement.
    ``model``: the base as :func:`load_base_model` returns it, to reuse (it is left as it was);
    None loads it.

    Needs torch, transformers, peft (the ``train`` extra) and llama-cpp-python; about 30 s on
    2 CPU cores for SmolLM2-135M, most of it transformers reading the GGUF file."""
    import torch
    from peft import PeftModel

    llama_cpp = load_llama_cpp()

    base_path = resolve_model(base_model) if base_model in EMBEDDED_MODELS else Path(base_model)

    def llama_logits(tokens: list[int], lora: Path | None) -> np.ndarray[Any, Any]:
        llama = llama_cpp.Llama(
            model_path=str(base_path),
            lora_path=str(lora) if lora else None,
            lora_scale=amplify,
            n_ctx=max(64, len(tokens) + 8),
            logits_all=True,
            verbose=False,
        )
        try:
            llama.eval(tokens)
            return np.array(llama.scores[: len(tokens)], dtype=np.float64)
        finally:
            llama.close()

    vocab = llama_cpp.Llama(model_path=str(base_path), vocab_only=True, verbose=False)
    try:
        tokens = vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    finally:
        vocab.close()
    if not tokens:
        raise ConfigError("logit_agreement needs a non-empty text")
    if model is None:
        model = load_base_model(base_model)
    ids = torch.tensor([tokens])
    with torch.no_grad():
        base_hf = model(ids).logits[0].double().numpy()
        peft = PeftModel.from_pretrained(model, str(adapter_dir))
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.mul_(amplify)
        adapted_hf = peft(ids).logits[0].double().numpy()
        peft.unload()  # the LoRA layers out again: ``model`` is the plain base once more
    base_ll, adapted_ll = llama_logits(tokens, None), llama_logits(tokens, adapter_gguf)
    d_hf, d_ll = (adapted_hf - base_hf).ravel(), (adapted_ll - base_ll).ravel()
    n_hf, n_ll = float(np.linalg.norm(d_hf)), float(np.linalg.norm(d_ll))
    return Agreement(
        cosine=float(d_hf @ d_ll) / (n_hf * n_ll) if n_hf and n_ll else 0.0,
        norm_ratio=n_ll / n_hf if n_hf else 0.0,
        signal=n_hf / max(float(np.linalg.norm(base_ll - base_hf)), 1e-12),
        positions=len(tokens),
    )


def drop_gguf_marker(model: Any) -> None:
    """transformers loads a GGUF file dequantised to float32 but still marks the model as
    GGUF-quantised, and then refuses to train or save it (docs/design.md, "The embedded default
    pool"). The weights are plain float32, so the marker is dropped."""
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.quantization_method = None
