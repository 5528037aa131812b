"""In-process llama.cpp backend (llama-cpp-python), the embedded default's runtime.

One loaded model is shared by every worker and conductor that names the same file, context
size and LoRA adapter; calls on it are serialised by a per-model lock (a llama.cpp context serves one call at a
time), so different models can still run side by side. Loading is lazy: a model is read (and its
sha256 verified) on its first call. A worker may add a GGUF LoRA adapter (a GRPO-trained
conductor, :mod:`podium.train.export`), sha256-checked against the hash recorded at export
before llama.cpp applies it on top of the base weights.

Prompts are rendered with the model's own chat template from the GGUF metadata. The rendered
prompt is tokenised with special tokens parsed (the template's ``<|im_start|>`` must be one
token), so the text of messages is first cleared of the model's own special tokens: every
control, user-defined and unknown token of the loaded vocabulary (SmolLM2's ``<jupyter_output>``
and ``<file_sep>``, Qwen's ``<tool_call>``, whatever the file holds) is defanged where it occurs
in a message's content, and text in a message never becomes a control token. llama.cpp keeps
the previous call's tokens in its KV cache; the shared prefix is reported as
``Usage.cached_input_tokens``.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from podium.errors import ConfigError, ContextOverflow, ProviderError, WorkerTimeout
from podium.llama_runtime import llama_errors, load_llama_cpp
from podium.local_models import EMBEDDED_MODELS, remembered_fact, resolve_model, sha256_file
from podium.unicode import valid_text
from podium.workers.base import Call, CallContext, Completion, Message, Price, Usage, WorkerInfo, WorkerSettings
from podium.workers.offload import offload

load_llama_cpp()  # the short OpenMP spin, then the import; ConfigError with the fix when it is missing

import llama_cpp  # noqa: E402  (loaded above)
from llama_cpp.llama import StoppingCriteriaList  # noqa: E402
from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: E402
from llama_cpp.llama_grammar import LlamaGrammar  # noqa: E402

__all__ = ["LlamaCppWorker", "chat_formatter"]

_MIN_NEW_TOKENS = 16


@dataclass
class _LoadedModel:
    llama: llama_cpp.Llama
    formatter: Jinja2ChatFormatter
    lock: threading.Lock
    n_ctx: int
    controls: re.Pattern[str] | None = None
    """Any special token text of the model's vocabulary (:func:`_control_pattern`)."""

    def prompt_tokens(self, messages: Sequence[Message], prefix: str = "") -> tuple[list[int], Any]:
        """The tokens of a call's prompt, and the rendered template (for its stop strings): the
        messages' content with the vocabulary's special tokens defanged, rendered with the chat
        template, ``prefix`` appended; special tokens parsed (those of the template only)."""
        safe = [cast(Message, {**m, "content": _defang_controls(m["content"], self.controls)}) for m in messages]
        formatted = self.formatter(messages=cast(Any, safe))
        text = valid_text(formatted.prompt + prefix).encode("utf-8")
        return self.llama.tokenize(text, add_bos=not formatted.added_special, special=True), formatted


_SPECIAL_KINDS = (
    llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
)
"""Token kinds llama.cpp splits out of text as one token: control tokens (with special tokens
parsed) and user-defined and unknown ones (always)."""


def _control_texts(llama: llama_cpp.Llama, path: Path) -> list[str]:
    """:func:`_special_texts` of the model file ``path``, remembered by the file's stamp and the
    token kinds asked for (:func:`~podium.local_models.remembered_fact`): reading all the token
    attributes takes 0.05 s for a 152k-token vocabulary, on the path of a run's first call."""
    texts = remembered_fact(path, f"control_texts:{_SPECIAL_KINDS}", lambda: _special_texts(llama))
    if isinstance(texts, list) and all(isinstance(t, str) for t in texts):
        return texts
    return _special_texts(llama)  # a cache edited by hand


def _special_texts(llama: llama_cpp.Llama) -> list[str]:
    """The text of every control, user-defined or unknown token of the model's vocabulary (read
    from the GGUF vocabulary's token attributes, so it holds for any model file)."""
    vocab = llama._model.vocab
    texts = []
    for token in range(llama.n_vocab()):
        if llama_cpp.llama_vocab_get_attr(vocab, token) & _SPECIAL_KINDS:
            try:
                texts.append(llama_cpp.llama_vocab_get_text(vocab, token).decode("utf-8"))
            except UnicodeDecodeError:  # no text can spell it
                continue
    return texts


def _control_pattern(texts: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern that finds any of ``texts`` (the longest where several start at one place),
    built as a trie so a scan costs at most the longest text per position whatever the number of
    tokens; None for none. A text of one character or of whitespace only is left out: it cannot
    be defanged without changing the text (a whitespace run token is ordinary text)."""
    trie: dict[str, Any] = {}
    for text in texts:
        if len(text) < 2 or not text.strip():
            continue
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = {}
    return re.compile(_trie_pattern(trie)) if trie else None


def _trie_pattern(node: dict[str, Any]) -> str:
    branches = [re.escape(ch) + _trie_pattern(child) for ch, child in sorted(node.items()) if ch]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in node else body  # greedy: the longer token first


_DEFANG_TOKEN = str.maketrans(
    {"<": "\u2039", ">": "\u203a", "[": "\u2045", "]": "\u2046", "|": "\u00a6", "\uff5c": "\u00a6"}
)


def _defang_token(match: re.Match[str]) -> str:
    text = match.group()
    defanged = text.translate(_DEFANG_TOKEN)  # <|im_start|> -> ‹¦im_start¦›, [INST] -> ⁅INST⁆
    return defanged if defanged != text else text[0] + "\u2060" + text[1:]  # a word joiner splits it


def _defang_controls(text: str, pattern: re.Pattern[str] | None) -> str:
    """``text`` with every occurrence of a special token text found by ``pattern`` defanged: its
    brackets and bars as look-alikes (as :func:`podium.messages.neutralise` writes them), or, for
    a token without any, a word joiner after its first character. Repeated until none is left
    (defanging one token cannot spell another, short of a vocabulary of look-alikes: then every
    character of what is left is split)."""
    if pattern is None:
        return text
    for _ in range(4):
        if pattern.search(text) is None:
            return text
        text = pattern.sub(_defang_token, text)
    return pattern.sub(lambda m: "\u2060".join(m.group()), text)


_LOADED: dict[tuple[str, int, str | None], _LoadedModel] = {}
_LOAD_LOCK = threading.Lock()
_GRAMMARS: dict[str, LlamaGrammar] = {}


def _model_path(model: str) -> Path:
    if model in EMBEDDED_MODELS:
        return resolve_model(model)
    path = Path(model).expanduser()
    if path.suffix.lower() == ".gguf" and path.is_file():
        return path
    raise ConfigError(
        f"model {model!r} is neither an embedded model ({', '.join(EMBEDDED_MODELS)}) nor an existing .gguf file"
    )


def _key(model: str, n_ctx: int, lora: Path | None) -> tuple[str, int, str | None]:
    return (model, n_ctx, str(lora) if lora is not None else None)


def _load(model: str, n_ctx: int, lora: Path | None = None, lora_sha256: str | None = None) -> _LoadedModel:
    """The shared llama.cpp instance of ``model`` (+ ``lora``) with ``n_ctx`` tokens of context.

    Raises ConfigError when the model or adapter is missing, the adapter fails its sha256
    check, or llama.cpp cannot load them (e.g. an adapter made for another base model);
    ModelNotInstalled for a missing embedded model."""
    key = _key(model, n_ctx, lora)
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        path = _model_path(model)
        if lora is not None:
            _check_adapter(lora, lora_sha256)
        llama_errors()  # what earlier loads said is not this one's
        try:
            llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=os.cpu_count() or 1,
                lora_path=str(lora) if lora is not None else None,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            what = f"{path} with LoRA adapter {lora}" if lora is not None else str(path)
            said = f" (llama.cpp: {errors})" if (errors := llama_errors()) else ""
            raise ConfigError(f"llama.cpp could not load {what}: {exc}{said}") from None
        formatter = chat_formatter(llama)
        if formatter is None:
            raise ConfigError(f"{path} has no chat template; podium needs an instruct (chat) model")
        loaded = _LoadedModel(
            llama=llama,
            formatter=formatter,
            lock=threading.Lock(),
            n_ctx=n_ctx,
            controls=_control_pattern(_control_texts(llama, path)),
        )
        _LOADED[key] = loaded
        return loaded


def chat_formatter(llama: llama_cpp.Llama) -> Jinja2ChatFormatter | None:
    """The model's own chat template (GGUF metadata ``tokenizer.chat_template``, with its BOS and
    EOS texts) as a formatter that adds the generation prompt, or None when the file has none."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        return None
    eos, bos = llama.token_eos(), llama.token_bos()
    return Jinja2ChatFormatter(
        template=template,
        eos_token=llama.detokenize([eos], special=True).decode("utf-8", "replace"),
        bos_token=llama.detokenize([bos], special=True).decode("utf-8", "replace") if bos >= 0 else "",
        add_generation_prompt=True,
    )


def _check_adapter(lora: Path, sha256: str | None) -> None:
    """Raises ConfigError when the adapter file is missing or its sha256 is not ``sha256``."""
    if not lora.is_file():
        raise ConfigError(f"LoRA adapter {lora} does not exist; export it: podium conductor export NAME@vN")
    if sha256 is not None and (actual := sha256_file(lora)) != sha256:
        raise ConfigError(
            f"LoRA adapter {lora} fails its sha256 check (recorded {sha256[:12]}…, file {actual[:12]}…); "
            "export it again: podium conductor export NAME@vN"
        )


def _grammar(text: str) -> LlamaGrammar:
    if text not in _GRAMMARS:
        _GRAMMARS[text] = LlamaGrammar.from_string(text, verbose=False)
    return _GRAMMARS[text]


class LlamaCppWorker:
    """A worker running a GGUF model in-process with llama.cpp.

    Args:
        name: the worker's name in the pool.
        model: an embedded model id (see ``podium models list``) or a path to a ``.gguf`` file.
        settings: default decoding settings.
        price: price table, USD per 1M tokens.
        n_ctx: context window, tokens.
        description: capability note shown to the conductor.
        system_prompt: optional system message before each call.
        lora: a GGUF LoRA adapter applied on top of the model (:mod:`podium.train.export`).
        lora_sha256: the adapter's recorded sha256 (hex), checked before it is loaded.
    """

    def __init__(
        self,
        name: str,
        model: str,
        *,
        settings: WorkerSettings,
        price: Price,
        n_ctx: int = 4096,
        description: str = "",
        system_prompt: str | None = None,
        lora: Path | None = None,
        lora_sha256: str | None = None,
    ) -> None:
        self.model = model
        self.n_ctx = n_ctx
        self.lora = lora
        self.lora_sha256 = lora_sha256
        self.info = WorkerInfo(
            name,
            description,
            price,
            settings,
            system_prompt,
            backend="llama_cpp",
            model=model,
            adapter_sha256=lora_sha256,
            grammar=True,
        )

    @property
    def loaded(self) -> bool:
        """Whether this worker's model (with its adapter and context size) is in memory."""
        return _key(self.model, self.n_ctx, self.lora) in _LOADED

    def preload(self) -> None:
        """Load the model now (shared by every worker of the same model, adapter and context
        size); a no-op once loaded. Raises ConfigError or ModelNotInstalled as a call would."""
        _load(self.model, self.n_ctx, self.lora, self.lora_sha256)

    def count_tokens(self, messages: Sequence[Message], prefix: str = "") -> int:
        """Exact prompt tokens of a call (loads the model if needed)."""
        model = _load(self.model, self.n_ctx, self.lora, self.lora_sha256)
        return len(model.prompt_tokens(messages, prefix)[0])

    async def complete(self, call: Call) -> Completion:
        """A chat call, or a continuation of ``call.prefix`` under ``call.grammar`` (only the
        new text is returned). Raises ContextOverflow, WorkerTimeout, ProviderError."""
        cancel = threading.Event()
        call.context.mark_pending()  # queued for the model until _generate holds its lock
        settings = call.settings_for(self)
        try:
            return await offload(  # the main thread under podium run (podium.workers.offload)
                self._generate,
                list(call.messages),
                call.prefix or "",
                settings,
                call.grammar,
                list(call.stop),
                cancel,
                call.context,
            )
        except asyncio.CancelledError:
            cancel.set()  # the thread stops within one prefill chunk or one token
            raise

    def _generate(
        self,
        messages: list[Message],
        prefix: str,
        settings: WorkerSettings,
        grammar: str | None,
        stop: list[str],
        cancel: threading.Event,
        context: CallContext,
    ) -> Completion:
        started = time.perf_counter()
        timeout = context.call_timeout_s()
        stop_at = None if timeout is None else time.monotonic() + timeout

        def should_stop() -> bool:
            return cancel.is_set() or (stop_at is not None and time.monotonic() >= stop_at)

        model = _load(self.model, self.n_ctx, self.lora, self.lora_sha256)
        with model.lock:
            if should_stop():  # timed out or cancelled while queued for the model
                raise WorkerTimeout(
                    f"worker {self.info.name!r} waited past its deadline for the model", worker=self.info.name
                )
            context.mark_sent()  # the model works on it from here
            llama = model.llama
            tokens, formatted = model.prompt_tokens(messages, prefix)
            room = model.n_ctx - len(tokens)
            if room < _MIN_NEW_TOKENS:
                raise ContextOverflow(
                    f"worker {self.info.name!r}: the prompt is {len(tokens)} tokens, its context window is "
                    f"{model.n_ctx}; shorten the question or raise n_ctx in the pool file",
                    worker=self.info.name,
                    prompt_tokens=len(tokens),
                    n_ctx=model.n_ctx,
                )
            cached = _common_prefix(llama.input_ids[: llama.n_tokens].tolist(), tokens)
            stream = context.stream

            def progress(ids: Any) -> bool:
                """Report the text so far to the answer stream, if this call is the answer."""
                if stream is not None:
                    generated = llama.detokenize(list(ids[len(tokens) :]))
                    context.report_text(generated.decode("utf-8", errors="ignore"))
                return False

            try:
                _prefill(llama, tokens, cached, should_stop)
            except _Stopped:
                raise WorkerTimeout(
                    f"worker {self.info.name!r} stopped at its deadline", worker=self.info.name
                ) from None
            try:
                out: Any = llama.create_completion(
                    tokens,
                    max_tokens=min(settings.max_tokens, room),
                    temperature=settings.temperature,
                    top_p=settings.top_p,
                    seed=settings.seed,
                    stop=[*stop, *_as_list(formatted.stop)],
                    grammar=_grammar(grammar) if grammar else None,
                    stopping_criteria=StoppingCriteriaList([lambda ids, _logits: progress(ids) or should_stop()]),
                )
            except (ValueError, RuntimeError) as exc:
                raise ProviderError(
                    f"llama.cpp failed in worker {self.info.name!r}: {exc}", worker=self.info.name
                ) from None
        if should_stop():
            raise WorkerTimeout(f"worker {self.info.name!r} stopped at its deadline", worker=self.info.name)
        choice = out["choices"][0]
        usage = Usage(
            input_tokens=int(out["usage"]["prompt_tokens"]),
            output_tokens=int(out["usage"]["completion_tokens"]),
            cached_input_tokens=min(cached, int(out["usage"]["prompt_tokens"]) - 1) if cached else 0,
        )
        return Completion(
            text=choice["text"],
            usage=usage,
            cost_usd=self.info.price.cost(usage),
            latency_s=time.perf_counter() - started,
            finish_reason=choice.get("finish_reason") or "stop",
        )


_PREFILL_CHUNK = 64
"""Prompt tokens evaluated between two deadline checks (≈0.2–0.6 s on 2 cores for 1.5B)."""


class _Stopped(Exception):
    pass


def _prefill(llama: llama_cpp.Llama, tokens: list[int], cached: int, should_stop: Callable[[], bool]) -> None:
    """Evaluate the uncached prompt (all but its last token) in small chunks, checking
    ``should_stop`` between them, so a deadline or a cancellation interrupts a long prompt
    instead of holding the model for seconds. ``create_completion`` then finds every token but
    the last in the KV cache, evaluates that one and samples, exactly as it would have.

    Raises _Stopped when ``should_stop()`` turns true.
    """
    keep = min(cached, len(tokens) - 1)
    if keep < llama.n_tokens:
        if not llama._ctx.kv_cache_seq_rm(-1, keep, -1):  # this model's cache can't be cut: start over
            cast(Any, llama).reset()
            keep = 0
        llama.n_tokens = keep
    for pos in range(keep, len(tokens) - 1, _PREFILL_CHUNK):
        if should_stop():
            raise _Stopped
        llama.eval(tokens[pos : min(pos + _PREFILL_CHUNK, len(tokens) - 1)])


def _as_list(stop: str | list[str] | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
