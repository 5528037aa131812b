"""OpenTelemetry export: span tree, attributes and timing from the record; a real OTLP/HTTP
collector stand-in on 127.0.0.1; the bounded queue's drops and failed exports are counted.

The requests here run on podium.testing's scripted fakes (ScriptedConductor / ScriptedWorker):
they are unit tests of the export, not of the models. The collector is a real HTTP server that
decodes the real OTLP protobuf the SDK's exporter sends. The end-to-end CLI test at the bottom
runs the real smallest local model (marker ``model``).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import re
import socket
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs podium[otel]")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from podium.builder import build_orchestrator, build_telemetry
from podium.errors import ConfigError
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.pool import PoolConfig, load_pool
from podium.records import RunRecord
from podium.telemetry import Telemetry, pool_models
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from tests.conftest import POOLS

INVALID = "I cannot plan this."
PLAN = 'model_id = [0, 1]\nsubtasks = ["Draft it.", "Finish it."]\naccess_list = [[], "all"]'
QUESTION = "QUESTION-MARKER: what is 6 * 7?"


def ns(iso: str) -> int:
    """The record's UTC ISO 8601 time in ns, computed independently of podium.telemetry."""
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000) * 1_000_000  # the record keeps milliseconds


def scripted(exporter: Telemetry, *, traces: TraceStore | None = None, rounds: int = 0) -> Orchestrator:
    """A fake pool: the conductor writes one invalid plan, then a valid two-step one (and, with
    ``rounds``, reviews it and keeps the answer)."""
    return Orchestrator(
        [ScriptedWorker("w0", reply="DRAFT-MARKER"), ScriptedWorker("w1", reply="ANSWER-MARKER")],
        ScriptedConductor([INVALID, PLAN]),
        Fallback(0, "Answer."),
        traces=traces,
        exporter=exporter,
        config=OrchestratorConfig(pool_name="fake", recursion_rounds=rounds),
    )


def run(orchestrator: Orchestrator, question: str = QUESTION, **kwargs: Any) -> RunRecord:
    return asyncio.run(orchestrator.run(question, **kwargs))


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        out.setdefault(span.name, []).append(span)
    return out


def test_span_tree_links_and_times_follow_the_record(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    telemetry = Telemetry(memory)
    record = run(scripted(telemetry, traces=TraceStore(tmp_path / "t.sqlite3"), rounds=1))
    stats = telemetry.shutdown()
    spans = memory.get_finished_spans()
    # 1 request + 3 conductor calls (invalid, valid, the review that keeps the answer), each a
    # plan span with its model call under it + 2 steps
    assert len(record.attempts) == 3
    assert len(spans) == 9 and stats.spans_exported == 9 and stats.spans_lost == 0
    names = by_name(spans)
    assert sorted(names) == ["chat scripted", "chat w0", "chat w1", "invoke_workflow fake", "plan scripted"]
    (root,) = names["invoke_workflow fake"]
    # one trace per request, and its id is the request id
    assert {s.context.trace_id for s in spans} == {int(record.id, 16)}
    assert root.parent is None
    plans = sorted(
        names["plan scripted"], key=lambda s: (s.attributes["podium.round"], s.attributes["podium.plan.attempt"])
    )
    for plan in plans:
        assert plan.parent.span_id == root.context.span_id
    for call in names["chat scripted"]:  # the conductor's inference sits under its plan span
        assert call.parent.span_id in {p.context.span_id for p in plans}
    steps = [names["chat w0"][0], names["chat w1"][0]]
    for step in steps:
        assert step.parent.span_id == root.context.span_id
    # times are the record's, not the export's
    assert root.start_time == ns(record.started_at) and root.end_time == ns(record.finished_at)
    for span, step in zip(steps, record.steps, strict=True):
        assert span.start_time == ns(step.started_at) and span.end_time == ns(step.finished_at)
    for span, attempt in zip(plans, record.attempts, strict=True):
        assert span.start_time == ns(attempt.started_at) and span.end_time == ns(attempt.finished_at)
    assert plans[1].end_time <= steps[0].start_time  # the plan came before its workflow ran
    assert plans[2].start_time >= steps[1].end_time  # and the review after it
    assert plans[2].attributes["podium.round"] == 1 and plans[2].attributes["podium.plan.steps"] == 0
    # the invalid attempt is an error span named by its parse error kind; the valid one is not
    assert record.attempts[0].error_kind == "missing_field"
    assert plans[0].status.status_code is StatusCode.ERROR and plans[0].attributes["error.type"] == "missing_field"
    assert plans[0].status.description == "missing_field"  # the detail may quote the conductor: opt-in
    assert plans[1].status.status_code is StatusCode.UNSET and plans[1].attributes["podium.plan.steps"] == 2
    assert root.status.status_code is StatusCode.UNSET and root.kind is SpanKind.INTERNAL


def test_attributes_carry_the_genai_names_and_the_records_numbers() -> None:
    memory = InMemorySpanExporter()
    telemetry = Telemetry(memory)
    record = run(scripted(telemetry), tags=("support", "da"), subject="customer-42")
    telemetry.shutdown()
    names = by_name(memory.get_finished_spans())
    root = dict(names["invoke_workflow fake"][0].attributes)
    assert root["gen_ai.operation.name"] == "invoke_workflow"
    assert root["podium.request.id"] == record.id and root["podium.request.status"] == "ok"
    assert root["podium.tags"] == ("support", "da")
    assert root["podium.cost_usd"] == pytest.approx(record.totals.total_cost_usd)
    assert root["podium.steps"] == 2 and root["podium.rounds"] == 1
    step = dict(names["chat w1"][0].attributes)
    s1 = record.steps[1]
    assert step["gen_ai.operation.name"] == "chat"
    assert step["gen_ai.request.model"] == "w1"  # fakes are not in a pool file: the name stands in
    assert step["gen_ai.provider.name"] == "unknown"
    assert step["gen_ai.usage.input_tokens"] == s1.usage.input_tokens > 0
    assert step["gen_ai.usage.output_tokens"] == s1.usage.output_tokens > 0
    assert step["gen_ai.response.finish_reasons"] == ("stop",)
    assert step["podium.cost_usd"] == pytest.approx(s1.cost_usd)
    assert step["podium.step.access"] == "all" and step["podium.step.visible"] == (0,)
    assert step["podium.worker.index"] == 1 and step["podium.step.phase"] == "workflow"
    conductor = dict(names["chat scripted"][0].attributes)
    assert conductor["gen_ai.usage.input_tokens"] == record.attempts[0].usage.input_tokens


def test_no_question_output_or_subject_on_spans_unless_content_capture_is_on() -> None:
    def values(capture: bool) -> str:
        memory = InMemorySpanExporter()
        telemetry = Telemetry(memory, capture_content=capture)
        run(scripted(telemetry), subject="SUBJECT-MARKER")
        telemetry.shutdown()
        return json.dumps([dict(s.attributes) for s in memory.get_finished_spans()])

    plain = values(False)
    for marker in ("QUESTION-MARKER", "DRAFT-MARKER", "ANSWER-MARKER", "SUBJECT-MARKER", "Draft it."):
        assert marker not in plain
    captured = values(True)
    for marker in ("QUESTION-MARKER", "DRAFT-MARKER", "ANSWER-MARKER", "SUBJECT-MARKER", "Draft it."):
        assert marker in captured
    assert "gen_ai.input.messages" in captured and "gen_ai.output.messages" in captured


def test_an_errored_step_and_the_fallback_are_recorded_as_such() -> None:
    from podium.errors import WorkerTimeout

    memory = InMemorySpanExporter()
    telemetry = Telemetry(memory)
    orchestrator = Orchestrator(
        [ScriptedWorker("w0", reply="fallback answer"), ScriptedWorker("w1", error=WorkerTimeout("slow", worker="w1"))],
        ScriptedConductor(['model_id = [1]\nsubtasks = ["Do it."]\naccess_list = [[]]']),
        Fallback(0, "Answer."),
        exporter=telemetry,
        config=OrchestratorConfig(pool_name="fake"),
    )
    record = run(orchestrator)
    telemetry.shutdown()
    assert record.status == "fallback"
    names = by_name(memory.get_finished_spans())
    (failed,) = names["chat w1"]
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["error.type"] == "WorkerTimeout"
    (fallback,) = names["chat w0"]
    assert fallback.attributes["podium.step.phase"] == "fallback"
    assert fallback.status.status_code is StatusCode.UNSET
    root = names["invoke_workflow fake"][0]
    assert root.attributes["podium.fallback.reason"] == "worker_error"
    assert root.status.status_code is StatusCode.UNSET  # answered by the fallback: not an error


def test_an_exporter_that_raises_never_fails_the_request(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def export(self, record: RunRecord) -> None:
            raise RuntimeError("collector client bug")

    store = TraceStore(tmp_path / "t.sqlite3")
    orchestrator = Orchestrator(
        [ScriptedWorker("w0", reply="fine")],
        ScriptedConductor(['model_id = [0]\nsubtasks = ["Do it."]\naccess_list = [[]]']),
        Fallback(0, "Answer."),
        traces=store,
        exporter=Broken(),
    )
    with caplog.at_level(logging.ERROR, logger="podium"):
        record = run(orchestrator)
    assert record.status == "ok" and record.answer == "fine"
    assert store.get(record.id) is not None  # stored before the exporter ran
    assert any(f"exporting request {record.id} failed" in r.getMessage() for r in caplog.records)


POOL_TOML = """
name = "mixed"
[conductor]
worker = "gpt"
temperature = 0.9
max_tokens = 300
[fallback]
worker = "gpt"
[defaults]
max_tokens = 256
[[workers]]
name = "gpt"
backend = "openai"
model = "my-model"
base_url = "http://127.0.0.1:9/v1"
temperature = 0.1
price = { input = 1.0, output = 2.0 }
[[workers]]
name = "py"
backend = "python"
[[workers]]
name = "local"
backend = "llama_cpp"
model = "/somewhere/models/tiny.gguf"
"""


def test_pool_file_workers_become_provider_model_server_and_tool_spans(tmp_path: Path) -> None:
    path = tmp_path / "pool.toml"
    path.write_text(POOL_TOML)
    config = load_pool(path)
    workers, conductors = pool_models(config)
    memory = InMemorySpanExporter()
    telemetry = Telemetry(memory, workers=workers, conductors=conductors)
    plan = 'model_id = [0, 1, 2]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], [0], "all"]'
    fakes = [ScriptedWorker("gpt", reply="x"), ScriptedWorker("py", reply="ran"), ScriptedWorker("local", reply="y")]
    # the LM conductor is named "lm:<worker>"; a fake with that name stands in for it here
    orchestrator = build_orchestrator(
        config,
        workers=fakes,
        conductor=ScriptedConductor([plan], name="lm:gpt"),
        exporter=telemetry,
    )
    run(orchestrator)
    telemetry.shutdown()
    names = by_name(memory.get_finished_spans())
    # the conductor's call and step 0 both go to my-model; only the step has a step index
    calls = names["chat my-model"]
    assert len(calls) == 2
    step = next(s for s in calls if "podium.step.index" in s.attributes).attributes
    assert step["gen_ai.provider.name"] == "openai" and step["gen_ai.request.model"] == "my-model"
    assert step["server.address"] == "127.0.0.1" and step["server.port"] == 9
    assert step["gen_ai.request.max_tokens"] == 256 and step["gen_ai.request.temperature"] == 0.1
    conductor = next(s for s in calls if "podium.step.index" not in s.attributes).attributes
    assert conductor["gen_ai.request.temperature"] == 0.9 and conductor["gen_ai.request.max_tokens"] == 300
    (tool,) = names["execute_tool py"]
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "py" and "gen_ai.usage.input_tokens" not in tool.attributes
    assert tool.kind is SpanKind.INTERNAL
    (local,) = names["chat tiny.gguf"]  # a file name only: no machine paths on spans
    assert local.attributes["gen_ai.provider.name"] == "llama.cpp" and local.kind is SpanKind.INTERNAL
    assert next(s for s in calls if "podium.step.index" in s.attributes).kind is SpanKind.CLIENT


class _Collector(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP collector stand-in: POST /v1/traces with protobuf; replies ``status``."""

    def __init__(self, status: int = 200) -> None:
        super().__init__(("127.0.0.1", 0), _CollectorHandler)
        self.status = status
        self.requests: list[ExportTraceServiceRequest] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> list[Any]:
        return [s for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


class _CollectorHandler(http.server.BaseHTTPRequestHandler):
    server: _Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path != "/v1/traces" or self.headers["Content-Type"] != "application/x-protobuf":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.requests.append(request)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[_Collector]:
    server = _Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _pool(tmp_path: Path, telemetry: str, base: Path | None = None) -> Path:
    path = tmp_path / "pool.toml"
    path.write_text(((base or POOLS / "smollm2.toml").read_text()) + "\n[telemetry]\n" + telemetry)
    return path


def _attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value"))
    return out


def test_spans_arrive_at_a_real_otlp_http_collector(tmp_path: Path, collector: _Collector) -> None:
    # a bare host:port endpoint gets the /v1/traces path appended
    config = load_pool(
        _pool(tmp_path, f'exporter = "otlp"\nendpoint = "{collector.url}"\nservice_name = "podium-test"\n')
    )
    telemetry = build_telemetry(config, environ={})
    assert telemetry is not None
    record = run(scripted(telemetry))
    stats = telemetry.shutdown()
    assert stats.spans_exported == 7 and stats.spans_lost == 0
    spans = collector.spans()
    assert len(spans) == 7
    assert {s.trace_id for s in spans} == {bytes.fromhex(record.id)}
    resource = {kv.key: kv.value.string_value for kv in collector.requests[0].resource_spans[0].resource.attributes}
    assert resource["service.name"] == "podium-test"
    root = next(s for s in spans if s.name == "invoke_workflow fake")
    assert _attrs(root)["podium.request.id"] == record.id
    step = next(s for s in spans if s.name == "chat w1")
    assert _attrs(step)["gen_ai.usage.output_tokens"] == record.steps[1].usage.output_tokens
    assert step.parent_span_id == root.span_id


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_failed_exports_are_counted_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{_closed_port()}/v1/traces", timeout=1)
    telemetry = Telemetry(exporter, export_timeout_s=5)
    with caplog.at_level(logging.WARNING, logger="podium.telemetry"):
        run(scripted(telemetry))
        stats = telemetry.shutdown()
    assert stats.spans_exported == 0 and stats.spans_failed == 7 and stats.spans_lost == 7
    assert stats.summary() == "telemetry: 0 spans exported, 7 lost (export failed: 7)"
    assert any("7 lost" in r.getMessage() for r in caplog.records)


class _BlockedExporter(InMemorySpanExporter):
    """An exporter stuck on a slow collector until ``gate`` is set (the queue backs up)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.gate.wait(10)
        return super().export(spans)


def test_a_full_queue_drops_whole_requests_counts_them_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    blocked = _BlockedExporter()
    telemetry = Telemetry(blocked, max_queue_size=8, max_export_batch_size=1, schedule_delay_s=0.01)
    with caplog.at_level(logging.WARNING, logger="podium.telemetry"):
        first = run(scripted(telemetry))  # 7 spans: fits in 8
        second = run(scripted(telemetry))  # 7 more cannot fit while the exporter is stuck: dropped whole
    stats = telemetry.stats()
    assert stats.requests == 2 and stats.spans_queued == 7
    assert stats.spans_dropped == 7 and stats.requests_dropped == 1
    assert any(second.id in r.getMessage() and "dropped the 7 spans" in r.getMessage() for r in caplog.records)
    blocked.gate.set()
    final = telemetry.shutdown(report=False)
    assert final.spans_exported == 7 and final.spans_lost == 7
    # what did arrive is one complete tree: the first request's, never a partial second one
    assert {s.context.trace_id for s in blocked.get_finished_spans()} == {int(first.id, 16)}
    assert final.summary() == (
        "telemetry: 7 spans exported, 7 lost (queue full: 7 spans of 1 requests (capacity 8 spans))"
    )


def test_spans_still_queued_when_shutdown_gives_up_count_as_unsent() -> None:
    """Spans never handed to the exporter are unsent (lost); spans in an export that has not
    answered when shutdown gives up are unconfirmed (the collector may have them)."""
    blocked = _BlockedExporter()
    telemetry = Telemetry(blocked, max_export_batch_size=4, schedule_delay_s=0.01)
    run(scripted(telemetry))
    stats = telemetry.shutdown(timeout_s=0.3)
    blocked.gate.set()
    # 7 spans: the first batch of 4 is in the blocked export, 3 wait behind it
    assert (stats.spans_unconfirmed, stats.spans_unsent, stats.spans_exported) == (4, 3, 0)
    assert stats.spans_lost == 3 and stats.summary().endswith("3 lost (unsent at shutdown: 3)")
    assert telemetry.stats() == stats  # final counters stay as reported
    run(scripted(telemetry))  # after shutdown: dropped and counted, never silently
    assert telemetry.stats() == stats


def test_console_exporter_writes_spans_to_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stderr", __import__("sys").stderr)  # the exporter binds stderr when built
    config = load_pool(_pool(tmp_path, 'exporter = "console"\n'))
    telemetry = build_telemetry(config, environ={})
    assert telemetry is not None
    record = run(scripted(telemetry))
    telemetry.shutdown()
    out, err = capsys.readouterr()
    assert out == ""  # stdout stays free for the answer and --json
    assert '"name": "invoke_workflow fake"' in err and record.id in err


def _config(tmp_path: Path, telemetry: str = "") -> PoolConfig:
    return load_pool(_pool(tmp_path, telemetry))


def test_configuration_from_the_pool_file_and_the_otel_environment(tmp_path: Path) -> None:
    assert build_telemetry(_config(tmp_path), environ={}) is None  # off by default
    from_env = build_telemetry(_config(tmp_path), environ={"OTEL_TRACES_EXPORTER": "console"})
    assert isinstance(from_env, Telemetry)
    from_env.shutdown()
    assert build_telemetry(_config(tmp_path, 'exporter = "none"\n'), environ={"OTEL_TRACES_EXPORTER": "otlp"}) is None
    off = {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}
    assert build_telemetry(_config(tmp_path), environ=off) is None
    sized = build_telemetry(
        _config(tmp_path, 'exporter = "console"\nmax_queue_size = 16\nmax_export_batch_size = 4\n'), environ={}
    )
    assert sized is not None and sized.max_queue_size == 16
    sized.shutdown()


@pytest.mark.parametrize(
    ("telemetry", "environ", "message"),
    [
        ("", {"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER='zipkin' is not supported"),
        ('exporter = "otlp"\n', {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "HTTP/protobuf"),
        ('exporter = "otlp"\nendpoint = "localhost:4318"\n', {}, "is not an http(s) URL"),
    ],
)
def test_bad_telemetry_settings_are_config_errors(
    tmp_path: Path, telemetry: str, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_telemetry(_config(tmp_path, telemetry), environ=environ)


def test_without_the_otel_extra_a_configured_exporter_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "podium.telemetry")
    assert build_telemetry(_config(tmp_path), environ={}) is None  # off: nothing is imported
    from podium.extras import install_command

    with pytest.raises(ConfigError, match=re.escape(install_command("otel"))):
        build_telemetry(_config(tmp_path, 'exporter = "console"\n'), environ={})


def test_pool_file_rejects_a_batch_larger_than_the_queue(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"telemetry: .*max_export_batch_size \(64\) must not exceed max_queue_size \(8\)"
    ):
        _config(tmp_path, "max_queue_size = 8\nmax_export_batch_size = 64\n")
    with pytest.raises(ConfigError, match=r"telemetry\.exporter"):
        _config(tmp_path, 'exporter = "jaeger"\n')


# -- end to end: the CLI on the real smallest local model, spans to a real collector ---------


@pytest.mark.model
def test_podium_run_exports_the_request_to_a_collector(
    tmp_path: Path, collector: _Collector, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("llama_cpp", reason="needs podium[local]")
    from podium.cli import cli

    pool = _pool(tmp_path, f'exporter = "otlp"\nendpoint = "{collector.url}/v1/traces"\n')
    code = cli(["run", "What is 2 + 3?", "--pool", str(pool), "--traces", str(tmp_path / "t.sqlite3"), "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err and "lost" not in err
    record = json.loads(out)
    spans = collector.spans()
    assert {s.trace_id for s in spans} == {bytes.fromhex(record["id"])}
    root = next(s for s in spans if s.name == "invoke_workflow smollm2-test")
    assert _attrs(root)["podium.request.status"] == record["status"]
    calls = [s for s in spans if s.name == "chat smollm2-135m-instruct"]
    # one model call per conductor attempt and per executed step, with the real token counts
    assert len(calls) == len(record["attempts"]) + len(record["steps"])
    step_tokens = sorted(_attrs(s)["gen_ai.usage.input_tokens"] for s in calls if "podium.step.index" in _attrs(s))
    assert step_tokens == sorted(s["usage"]["input_tokens"] for s in record["steps"])


@pytest.mark.model
def test_podium_run_reports_lost_spans_and_still_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("llama_cpp", reason="needs podium[local]")
    from podium.cli import cli

    pool = _pool(tmp_path, f'exporter = "otlp"\nendpoint = "http://127.0.0.1:{_closed_port()}"\nexport_timeout_s = 1\n')
    db = tmp_path / "t.sqlite3"
    code = cli(["run", "What is 2 + 3?", "--pool", str(pool), "--traces", str(db), "--json"])
    out, err = capsys.readouterr()
    record = json.loads(out)
    assert code == 0
    # reported, not silent: refused at once -> lost; on a loaded machine the exporter's retries
    # can use up its 1 s timeout, and a timed-out export is unconfirmed instead
    assert "telemetry: 0 spans exported" in err and ("lost (export failed: " in err or " unconfirmed (" in err)
    assert TraceStore(db).get(record["id"]) is not None  # the trace itself is never lost
