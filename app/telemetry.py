"""OpenTelemetry tracing: on when OTEL_EXPORTER_OTLP_ENDPOINT is set, and off (nothing imported) otherwise.

setup(app) is create_app's call. With the setting empty it returns after one lookup: no OpenTelemetry
module is imported, no tracer provider or instrumentation is installed, and the functions below answer
from one module global (carrier() an empty dict, span() a shared do-nothing context manager). With it
set, the first call installs a tracer provider (service.name OTEL_SERVICE_NAME) whose spans go to
ENDPOINT/v1/traces over OTLP/HTTP in batches, and the psycopg and redis-py instrumentations (process-wide);
each app it is called for also gets the Flask instrumentation (the request span, continuing a
`traceparent` the caller sent). use_exporter() is the same installation with a span exporter of one's
own, each span exported as it ends (the tests' InMemorySpanExporter, a ConsoleSpanExporter to look).

The provider is this module's own, passed to every instrumentation, never set as the global one: so
shutdown() can take everything back out (the tests install and remove it within one process).

One trace per notification: the API request's span → the after-commit hand-off that enqueues its job
(app/unitofwork.py, parent from the committing request) → the RQ job (the carrier rides in job.meta,
app/queueing.py; the worker opens the job span, app/cli/worker.py) → one send span per row to its
provider (app/delivery/engine.py). A job may carry many requests' rows (coalesced drains, merged
hand-offs): each notification row keeps its request's traceparent (notifications.traceparent), and
span() makes a row's send span a child of the job when the job is in the row's trace, else a child of
the row's own request with a link to the job. Redis commands and SQL statements outside any request or
job (a worker's polling and heartbeats, the sweeper's idle passes) make no trace of their own.
A span that ends elsewhere (a frame, ended by the client's ack) is start_span()'s, named by carrier_of().
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# A carrier: W3C Trace Context headers ({"traceparent": …, "tracestate"?: …}), or a bare traceparent.
Carrier = Mapping[str, str] | str | None

TRACES_PATH = "/v1/traces"  # what OTLP/HTTP appends to OTEL_EXPORTER_OTLP_ENDPOINT for traces
# Long-lived requests (the websockets: one span for a socket's life) and scrapes make no request span.
EXCLUDED_URLS = r"/ws(\?|$),/v1/feed/socket,/metrics(\?|$),/healthz(\?|$),/static/"
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
INVALID_TRACE_ID = "0" * 32


class _NoSpan:
    """What span() gives when tracing is off: a reusable context manager whose span ignores everything."""

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        return None

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        return None

    def is_recording(self) -> bool:
        return False

    def end(self, end_time: int | None = None) -> None:
        return None


NO_SPAN = _NoSpan()


class _On:
    """The installed provider, its tracer, and what has to be taken out again on shutdown()."""

    def __init__(self, provider, apps: list) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider, self.apps = provider, apps
        self.tracer = provider.get_tracer("hato")
        self.propagator = TraceContextTextMapPropagator()
        self.trace, self.context = trace, context
        self.kinds = {
            "internal": trace.SpanKind.INTERNAL,
            "server": trace.SpanKind.SERVER,
            "client": trace.SpanKind.CLIENT,
            "producer": trace.SpanKind.PRODUCER,
            "consumer": trace.SpanKind.CONSUMER,
        }


_on: _On | None = None  # None: tracing is off in this process


# --- installing -----------------------------------------------------------------------------------


def setup(app) -> None:
    """Trace app (and this process's SQL and Redis calls) when OTEL_EXPORTER_OTLP_ENDPOINT is set; else nothing."""
    endpoint = app.config["OTEL_EXPORTER_OTLP_ENDPOINT"]
    if not endpoint:
        return
    if _on is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        _install(app.config, BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url(endpoint))))
    _instrument_app(app)


def use_exporter(app, exporter) -> None:
    """Trace app as setup() does, each span handed to exporter as it ends (alongside any OTLP export)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    processor = SimpleSpanProcessor(exporter)
    if _on is None:
        _install(app.config, processor)
    else:
        _on.provider.add_span_processor(processor)
    _instrument_app(app)


def shutdown() -> None:
    """Export what is buffered, then take every instrumentation out and turn tracing off in this process."""
    global _on
    if _on is None:
        return
    from opentelemetry.instrumentation.flask import FlaskInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    on, _on = _on, None
    for app in on.apps:
        FlaskInstrumentor.uninstrument_app(app)
    PsycopgInstrumentor().uninstrument()
    RedisInstrumentor().uninstrument()
    on.provider.shutdown()


def flush(timeout_seconds: float = 5.0) -> bool:
    """Export the spans still buffered (a forked work horse before its os._exit); True when off or done."""
    return _on is None or _on.provider.force_flush(int(timeout_seconds * 1000))


def enabled() -> bool:
    """Whether this process traces."""
    return _on is not None


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for OTEL_EXPORTER_OTLP_ENDPOINT: the base plus /v1/traces (as the spec says)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


def _install(config: Mapping, processor) -> None:
    global _on
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ParentBased

    provider = TracerProvider(
        resource=Resource.create({"service.name": config["OTEL_SERVICE_NAME"]}),
        sampler=ParentBased(root=_roots_sampler()),
    )
    provider.add_span_processor(processor)
    PsycopgInstrumentor().instrument(tracer_provider=provider)
    RedisInstrumentor().instrument(tracer_provider=provider)
    _on = _On(provider, [])


def _instrument_app(app) -> None:
    from opentelemetry.instrumentation.flask import FlaskInstrumentor

    if _on is not None and app not in _on.apps:
        FlaskInstrumentor.instrument_app(
            app, tracer_provider=_on.provider, excluded_urls=EXCLUDED_URLS, enable_commenter=False
        )
        _on.apps.append(app)


def _roots_sampler():
    """Sample every root span except a client call's (a Redis command or SQL statement outside any request or job)."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler
    from opentelemetry.trace import SpanKind

    class NoLoneClientCalls(Sampler):
        def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                          trace_state=None):  # fmt: skip
            chosen = ALWAYS_OFF if kind == SpanKind.CLIENT else ALWAYS_ON
            return chosen.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

        def get_description(self) -> str:
            return "NoLoneClientCalls"

    return NoLoneClientCalls()


# --- the API the code calls -----------------------------------------------------------------------


def carrier() -> dict[str, str]:
    """The current span's context as W3C Trace Context headers ({} when off or outside any span)."""
    if _on is None:
        return {}
    headers: dict[str, str] = {}
    _on.propagator.inject(headers)
    return headers


def traceparent() -> str | None:
    """The current span's W3C traceparent (what notifications.traceparent keeps), None when off or outside a span."""
    return carrier().get("traceparent") if _on is not None else None


def trace_id_of(carrier: Carrier) -> str | None:
    """The trace id (32 hex digits) a carrier or traceparent names, None for none; works with tracing off."""
    value = carrier.get("traceparent") if isinstance(carrier, Mapping) else carrier
    found = TRACEPARENT.match(value.strip().lower()) if value else None
    return found.group(1) if found and found.group(1) != INVALID_TRACE_ID else None


def span(name: str, carrier: Carrier = None, *, kind: str = "internal", links: Iterable[Carrier] = (),
         **attributes: Any):  # fmt: skip
    """A context manager that runs its block in a new current span (a do-nothing one when off); yields the span.

    The parent: the current span, unless carrier names another trace; then carrier's span, with a link
    to the current span (a job that serves many requests' rows: each row's span joins its own request's
    trace and points at the job). links: carriers of other traces this span also serves. kind: internal,
    server, client, producer or consumer. Attributes whose value is None are left out. An exception
    leaving the block is recorded and marks the span failed.
    """
    if _on is None:
        return NO_SPAN
    return _on.tracer.start_as_current_span(name, **_start(carrier, kind, links, attributes))


def start_span(name: str, carrier: Carrier = None, *, kind: str = "internal", links: Iterable[Carrier] = (),
               **attributes: Any):  # fmt: skip
    """A span that starts now and ends when its end() is called, from any thread (a frame's span, ended by
    the client's ack); not made current. Parent, links and attributes as span(); NO_SPAN when off."""
    if _on is None:
        return NO_SPAN
    return _on.tracer.start_span(name, **_start(carrier, kind, links, attributes))


def carrier_of(span_) -> dict[str, str]:
    """The W3C headers naming span_ (from span() or start_span()), for spans elsewhere under it; {} when off."""
    if _on is None or span_ is NO_SPAN:
        return {}
    headers: dict[str, str] = {}
    _on.propagator.inject(headers, context=_on.trace.set_span_in_context(span_))
    return headers


def _start(carrier: Carrier, kind: str, links: Iterable[Carrier], attributes: Mapping[str, Any]) -> dict:
    """The tracer's arguments for a new span: its parent context, kind, links and attributes (see span())."""
    trace = _on.trace
    current = trace.get_current_span().get_span_context()
    parent = _context(carrier)
    linked = [c for c in (trace.get_current_span(_context(c)).get_span_context() for c in links) if c.is_valid]
    if parent is not None:
        wanted = trace.get_current_span(parent).get_span_context()
        if not wanted.is_valid or (current.is_valid and current.trace_id == wanted.trace_id):
            parent = None  # the current span is in the carrier's trace already, and nearer
        elif current.is_valid:
            linked.append(current)
    return {
        "context": parent,
        "kind": _on.kinds[kind],
        "links": [trace.Link(c) for c in linked],
        "attributes": {key: value for key, value in attributes.items() if value is not None},
    }


def failed(span_, description: str | None) -> None:
    """Mark span_ (from span()) failed with description, for an outcome that raised nothing (a refused send)."""
    if _on is not None and span_.is_recording():
        span_.set_status(_on.trace.Status(_on.trace.StatusCode.ERROR, description))


def bind(fn: Callable) -> Callable:
    """fn, to run in another thread within the caller's current span (fn itself when off)."""
    if _on is None:
        return fn
    context = _on.context
    captured = context.get_current()

    def bound(*args, **kwargs):
        token = context.attach(captured)
        try:
            return fn(*args, **kwargs)
        finally:
            context.detach(token)

    return bound


def _context(carrier: Carrier):
    """The OTel Context a carrier names (None for an empty one)."""
    if not carrier:
        return None
    headers = carrier if isinstance(carrier, Mapping) else {"traceparent": carrier}
    return _on.propagator.extract(headers)
