"""Tracing (app/telemetry.py): one trace per notification from the API to the send, and nothing at all when off.

The traced tests build an app of their own with the SDK's InMemorySpanExporter (telemetry.use_exporter), post
through its test client, run an RQ burst worker as tests/cli/test_worker.py does, and read the spans by name.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from rq.serializers import JSONSerializer
from werkzeug.serving import make_server

from app import create_app, telemetry, unitofwork
from app.api_keys.scopes import SCOPES
from app.api_keys.service import create_api_key
from app.cli.worker import AppSimpleWorker
from app.config import Config, check
from app.extensions import db, redis
from app.models import Notification, NotificationDelivery
from app.providers.registry import registered_names
from app.queueing import QUEUE_NAMES, enqueue_deliveries, get_queue
from app.realtime.hub import hub_for
from tests.conftest import TEST_CONFIG
from tests.factories import NotificationTypeFactory, UserFactory
from tests.realtime.helpers import ack, close_quietly, connect, session_cookie, wait_for_count, wait_for_frame
from tests.support.waiting import free_port, wait_for

ROOT = Path(__file__).resolve().parents[1]
API_SPAN = "POST /v1/notifications"
# One notification's trace, in order: each span a child of the one before. The realtime side (issue 30) adds
# its spans here and in test_one_trace_from_the_api_to_the_send: the badge publish, the frame, the client's ack.
ONE_TRACE = (API_SPAN, "hato.after_commit", "hato.job", "hato.delivery.send")
# Its realtime branch: the badge event's publish after the commit, the frame to the member's tab, ended by the ack.
REALTIME_TRACE = (API_SPAN, "hato.after_commit", "hato.realtime.publish", "hato.realtime.frame")


@pytest.fixture
def exporter():
    """The SDK's in-memory exporter; tracing is off again (every instrumentation taken out) afterwards."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    found = InMemorySpanExporter()
    yield found
    telemetry.shutdown()


@pytest.fixture
def traced(app, exporter, smtp_sink):
    """An app of its own (a Flask app is instrumented before its first request) that traces into exporter,
    mailing through the SMTP sink; with an e-mailing type, a recipient, an operator and an API key committed."""
    NotificationTypeFactory(type="comment", default_email=True, priority="default")
    app.recipients = [UserFactory(external_id=f"ext-{uuid.uuid4().hex[:8]}") for _ in range(2)]
    app.operator = UserFactory(role="operator")
    app.api_key = create_api_key(None, "tests", SCOPES)
    db.session.commit()
    application = create_app(dict(TEST_CONFIG, SMTP_URL=smtp_sink.url, EMAIL_PROVIDER="smtp"))
    telemetry.use_exporter(application, exporter)
    yield application
    unitofwork.wait_idle(application)
    with application.app_context():
        db.session.remove()
        db.engine.dispose()


def post_notification(application, key: str, recipient) -> dict:
    """POST /v1/notifications for one recipient; return once its post-commit effects have run."""
    body = {"type": "comment", "recipients": [recipient.external_id], "title": "New comment", "body": "Hello"}
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": str(uuid.uuid4())}
    response = application.test_client().post("/v1/notifications", json=body, headers=headers)
    assert response.status_code in (200, 201, 202), response.get_data(as_text=True)
    assert unitofwork.wait_idle(application, 10)
    return response.get_json()


def run_worker(application) -> None:
    """Drain the queues with a burst SimpleWorker, as `flask worker --burst` would."""
    with application.app_context():
        connection = redis.client()
        worker = AppSimpleWorker([get_queue(n, connection) for n in QUEUE_NAMES], connection=connection,
                                 serializer=JSONSerializer)  # fmt: skip
        assert worker.work(burst=True, with_scheduler=False) is True


def spans_named(exporter, name: str, **attributes) -> list:
    """The finished spans called name whose attributes include these, in start order."""
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    found = [s for s in found if all(s.attributes.get(k) == v for k, v in attributes.items())]
    return sorted(found, key=lambda s: s.start_time)


def assert_child(child, parent) -> None:
    """child is parent's direct child, in its trace, and started after it."""
    assert child.context.trace_id == parent.context.trace_id, (child.name, parent.name)
    assert child.parent is not None and child.parent.span_id == parent.context.span_id, (child.name, parent.name)
    assert child.start_time >= parent.start_time, (child.name, parent.name)


@pytest.mark.committed
def test_one_trace_from_the_api_to_the_send(app, traced, exporter, smtp_sink, client, login_as):
    post_notification(traced, app.api_key, app.recipients[0])
    run_worker(traced)

    assert len(smtp_sink.messages) == 1
    api = spans_named(exporter, API_SPAN)
    enqueue = spans_named(exporter, "hato.after_commit", **{"hato.effect": "EnqueueDeliveries"})
    job = spans_named(exporter, "hato.job", **{"hato.job.function": "jobs.delivery.drain_deliveries"})
    send = spans_named(exporter, "hato.delivery.send")
    assert [len(api), len(enqueue), len(job), len(send)] == [1, 1, 1, 1]
    chain = [api[0], enqueue[0], job[0], send[0]]
    assert [s.name for s in chain] == list(ONE_TRACE)
    assert api[0].parent is None  # the caller sent no traceparent: the request starts the trace
    for parent, child in zip(chain, chain[1:], strict=False):
        assert_child(child, parent)
    assert send[0].attributes["hato.channel"] == "email" and send[0].attributes["hato.provider"] == "smtp"
    assert send[0].attributes["hato.outcome"] == "sent"
    # The instrumentations: the request's SQL and Redis calls, and the worker's, are in the trace too.
    trace_id = api[0].context.trace_id
    in_trace = [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id]
    clients = {s.instrumentation_scope.name for s in in_trace if s.kind.name == "CLIENT"}
    assert {"opentelemetry.instrumentation.psycopg", "opentelemetry.instrumentation.redis"} <= clients

    # The notification keeps the request's traceparent; the delivery log shows its trace id.
    notification = db.session.query(Notification).filter_by(user_id=app.recipients[0].id).one()
    assert telemetry.trace_id_of(notification.traceparent) == format(trace_id, "032x")
    delivery = db.session.query(NotificationDelivery).filter_by(notification_id=notification.id).one()
    login_as(app.operator)
    for language, label in (("en", "Trace ID"), ("ja", "トレース ID")):
        page = client.get(f"/console/deliveries/{delivery.id}", headers={"Accept-Language": language})
        shown = BeautifulSoup(page.get_data(as_text=True), "html.parser").select_one("#trace-id")
        assert shown.get_text() == format(trace_id, "032x")
        assert shown.find_parent("dd").find_previous_sibling("dt").get_text() == label


@pytest.mark.committed
def test_the_trace_goes_on_to_the_members_tab_and_the_frame_span_ends_at_the_clients_ack(
    app, traced, exporter, smtp_sink
):
    port = free_port()
    traced.config["BASE_URL"] = f"http://127.0.0.1:{port}"  # the socket's Origin
    server = make_server("127.0.0.1", port, traced, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    recipient = app.recipients[0]
    ws = connect(traced.config["BASE_URL"], session_cookie(traced, recipient.id))
    try:
        wait_for_count(ws, 0, acking=True)
        post_notification(traced, app.api_key, recipient)
        frame = wait_for_frame(ws, lambda f: "New comment" in f)
        time.sleep(0.2)
        assert spans_named(exporter, "hato.realtime.frame") == []  # still open: the tab has not acked
        acked_at = time.time_ns()
        ack(ws, frame)
        wait_for(lambda: spans_named(exporter, "hato.realtime.frame"), 5, "the frame's span to end at the ack")
        run_worker(traced)
    finally:
        close_quietly(ws)
        hub_for(traced).shutdown()
        server.shutdown()

    (api,) = spans_named(exporter, API_SPAN)
    (effect,) = spans_named(exporter, "hato.after_commit", **{"hato.effect": "BadgeEvent"})
    (publish,) = spans_named(exporter, "hato.realtime.publish")
    (shown,) = spans_named(exporter, "hato.realtime.frame")
    chain = [api, effect, publish, shown]
    assert [s.name for s in chain] == list(REALTIME_TRACE)
    for parent, child in zip(chain, chain[1:], strict=False):
        assert_child(child, parent)
    assert shown.end_time >= acked_at and shown.status.is_ok  # the ack closed it
    assert publish.attributes["hato.users"] == 1 and publish.attributes["hato.nodes"] == 1
    (send,) = spans_named(exporter, "hato.delivery.send")
    assert send.context.trace_id == api.context.trace_id  # the e-mail's branch of the same trace


@pytest.mark.committed
def test_a_batch_of_two_requests_sends_each_row_in_its_own_trace(app, traced, exporter, smtp_sink):
    # Two requests' rows are coalesced on one drain list: one job, woken by the first, sends both.
    for recipient in app.recipients:
        post_notification(traced, app.api_key, recipient)
    run_worker(traced)

    assert len(smtp_sink.messages) == 2
    first, second = spans_named(exporter, API_SPAN)
    (job,) = spans_named(exporter, "hato.job", **{"hato.job.function": "jobs.delivery.drain_deliveries"})
    sends = {s.context.trace_id: s for s in spans_named(exporter, "hato.delivery.send")}
    assert set(sends) == {first.context.trace_id, second.context.trace_id}
    assert job.context.trace_id == first.context.trace_id
    assert_child(sends[first.context.trace_id], job)
    # The second row's send is a child of its own request, and points at the job that sent it.
    other = sends[second.context.trace_id]
    assert other.parent.span_id == second.context.span_id
    assert [link.context.span_id for link in other.links] == [job.context.span_id]


@pytest.mark.committed
def test_a_callers_traceparent_is_continued(app, traced, exporter):
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    body = {"type": "comment", "recipients": [app.recipients[0].external_id], "title": "T", "body": "B"}
    headers = {"Authorization": f"Bearer {app.api_key}", "Idempotency-Key": str(uuid.uuid4()), "traceparent": caller}
    assert traced.test_client().post("/v1/notifications", json=body, headers=headers).status_code < 300
    assert unitofwork.wait_idle(traced, 10)

    (api,) = spans_named(exporter, API_SPAN)
    assert format(api.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert format(api.parent.span_id, "016x") == "b7ad6b7169203331"


def test_span_parents_and_links_by_trace(app, exporter):
    application = create_app(dict(TEST_CONFIG))
    telemetry.use_exporter(application, exporter)
    with telemetry.span("job", kind="consumer") as job:
        mine = telemetry.carrier()
        with telemetry.span("same trace", mine):
            pass
        with telemetry.span("outside"):
            elsewhere = telemetry.traceparent()
        with telemetry.span("other trace", "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01", links=[elsewhere]):
            pass
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["same trace"].parent.span_id == job.get_span_context().span_id and not spans["same trace"].links
    other = spans["other trace"]
    assert format(other.context.trace_id, "032x") == "ab" * 16 and format(other.parent.span_id, "016x") == "cd" * 8
    assert {link.context.span_id for link in other.links} == {
        job.get_span_context().span_id,
        spans["outside"].context.span_id,
    }
    assert telemetry.trace_id_of(mine) == format(job.get_span_context().trace_id, "032x")


def test_a_span_ended_elsewhere_and_its_carrier(app, exporter):
    # The shape of a frame's span: started when it is written, ended by the client's ack (another thread).
    application = create_app(dict(TEST_CONFIG))
    telemetry.use_exporter(application, exporter)
    with telemetry.span("publish") as publish:
        frame = telemetry.start_span("frame", kind="producer", frame=7)
    assert [s.name for s in exporter.get_finished_spans()] == ["publish"]

    def ack():
        with telemetry.span("ack", telemetry.carrier_of(frame)):
            frame.end()

    thread = threading.Thread(target=ack)
    thread.start()
    thread.join()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["frame"].parent.span_id == publish.get_span_context().span_id
    assert spans["ack"].parent.span_id == spans["frame"].context.span_id
    assert spans["frame"].attributes["frame"] == 7 and spans["frame"].kind.name == "PRODUCER"
    assert spans["frame"].end_time >= spans["publish"].end_time
    assert telemetry.carrier_of(telemetry.NO_SPAN) == {}


def test_health_checks_and_scrapes_make_no_trace(app, exporter):
    application = create_app(dict(TEST_CONFIG))
    telemetry.use_exporter(application, exporter)
    client = application.test_client()
    assert client.get("/healthz").status_code == 200  # its SQL and Redis calls have no request span above them
    assert not exporter.get_finished_spans()
    assert client.get("/login").status_code == 200
    assert {s.context.trace_id for s in exporter.get_finished_spans()} == {
        s.context.trace_id for s in spans_named(exporter, "GET /login")
    }


def test_an_exception_marks_the_span_failed(app, exporter):
    application = create_app(dict(TEST_CONFIG))
    telemetry.use_exporter(application, exporter)
    with pytest.raises(ValueError), telemetry.span("boom"):
        raise ValueError("no")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code.name == "ERROR" and span.events[0].name == "exception"


# Run in a fresh interpreter: this process may have imported OpenTelemetry for another test.
OFF_PROBE = """
import json, sys
import psycopg, redis
from app import create_app, telemetry
application = create_app({"TESTING": True})
with application.app_context():
    application.test_client().get("/healthz")
    with telemetry.span("x", "00-" + "1" * 32 + "-" + "2" * 16 + "-01", a=1) as s:
        s.set_attribute("b", 2)
    report = {
        "modules": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
        "enabled": telemetry.enabled(),
        "carrier": telemetry.carrier(),
        "traceparent": telemetry.traceparent(),
        "no_span": telemetry.span("y") is telemetry.NO_SPAN,
        "bound": telemetry.bind(print) is print,
        "wrapped": [hasattr(f, "__wrapped__") for f in (psycopg.connect, redis.Redis.execute_command)],
        "before_request": len(application.before_request_funcs.get(None, [])),
    }
print(json.dumps(report))
"""


def test_with_the_endpoint_unset_nothing_is_imported_or_installed(app, database_url, redis_url):
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": database_url, "REDIS_URL": redis_url, "SECRET_KEY": "k" * 48,
           "HATO_DEV": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": ""}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", OFF_PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["modules"] == [] and report["enabled"] is False
    assert report["carrier"] == {} and report["traceparent"] is None
    assert report["no_span"] and report["bound"] and report["wrapped"] == [False, False]
    assert report["before_request"] == len(app.before_request_funcs.get(None, []))  # no request hook added


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver on loopback: keeps each POST's path and (decompressed) body."""

    received: list[tuple[str, bytes]]

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        return None


def test_setup_exports_to_the_endpoint_over_otlp_http(app):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    server, received = collector()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        application = create_app(dict(TEST_CONFIG, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SERVICE_NAME="hato-t"))
        assert telemetry.enabled()
        assert application.test_client().get("/login").status_code == 200
        assert telemetry.flush(10)
    finally:
        telemetry.shutdown()
        server.shutdown()
        server.server_close()
    assert received and {path for path, _ in received} == {"/v1/traces"}
    services = set()
    for _, body in received:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            services |= {a.value.string_value for a in resource.resource.attributes if a.key == "service.name"}
    assert services == {"hato-t"} and "GET /login" in {s.name for s in received_spans(received)}


def collector() -> tuple[ThreadingHTTPServer, list[tuple[str, bytes]]]:
    """An OTLP/HTTP receiver on a free loopback port, serving in a thread; and what it receives."""
    handler = type("Handler", (_Collector,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler.received


def received_spans(received: list[tuple[str, bytes]]) -> list:
    """Every span in the OTLP/HTTP export requests received."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    spans = []
    for _, body in received:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans += [s for resource in request.resource_spans for scope in resource.scope_spans for s in scope.spans]
    return spans


@pytest.mark.committed
def test_a_forked_work_horse_exports_its_spans_before_it_exits(app, tmp_path):
    """`flask worker --fork` with tracing on: the horse ends with os._exit, so it flushes its spans first."""
    import os

    from tests.support import load, processes

    server, received = collector()
    port = free_port()
    sink = processes.start_sink(port, tmp_path / "sink.log", tmp_path / "sink.out")
    try:
        with app.app_context():
            ids = load.create_email_deliveries(2, prefix="otel", per_user=2)
            assert enqueue_deliveries("default", "email", ids)
        env = dict(os.environ, SMTP_URL=f"smtp://127.0.0.1:{port}", EMAIL_PROVIDER="smtp",
                   OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}")  # fmt: skip
        done = subprocess.run([sys.executable, *processes.flask_args("worker", "--burst", "--fork")],
                              cwd=processes.ROOT, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        processes.stop(sink)
        server.shutdown()
        server.server_close()
    spans = received_spans(received)
    (job,) = [s for s in spans if s.name == "hato.job"]
    sends = [s for s in spans if s.name == "hato.delivery.send"]
    assert len(sends) == len(ids) == 2 and all(
        s.parent_span_id == job.span_id and s.trace_id == job.trace_id for s in sends
    )
    assert not job.parent_span_id  # enqueued outside any trace: the job starts one


def test_setup_and_shutdown_leave_nothing_behind(app):
    import psycopg
    import redis as redis_lib

    create_app(dict(TEST_CONFIG, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9"))
    assert telemetry.enabled() and hasattr(psycopg.connect, "__wrapped__")
    telemetry.shutdown()
    assert not telemetry.enabled() and telemetry.carrier() == {}
    assert not hasattr(psycopg.connect, "__wrapped__") and not hasattr(redis_lib.Redis.execute_command, "__wrapped__")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736"),
        (
            {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
            "4bf92f3577b34da6a3ce929d0e0e4736",
        ),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),
        ("not a traceparent", None),
        ({}, None),
        (None, None),
    ],
)
def test_trace_id_of(value, expected):
    assert telemetry.trace_id_of(value) == expected


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://collector:4318", "http://collector:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("https://otlp.example.com/v1/traces", "https://otlp.example.com/v1/traces"),
    ],
)
def test_traces_url(endpoint, url):
    assert telemetry.traces_url(endpoint) == url


def test_an_endpoint_that_is_not_http_is_refused():
    env = {"SECRET_KEY": "k" * 48, "HATO_DEV": "0", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}
    found = check(vars(Config(env)), registered_names())
    assert any(p.startswith("OTEL_EXPORTER_OTLP_ENDPOINT='collector:4318' is not a URL") for p in found), found
