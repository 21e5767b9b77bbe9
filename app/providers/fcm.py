"""Firebase Cloud Messaging, HTTP v1: one POST per Android device of a message, up to FCM_CONCURRENCY at once.

Each device gets `POST {FCM_API_BASE}/v1/projects/<project_id>/messages:send` with the process's shared
access token (app/providers/fcm_transport.py) and `{"message": {"token", "notification", "data",
"android"}}` built from Message.mobile in the device's language. Answers (the FcmError errorCode of the
reply's details, else its status):

- 200: reached; the reply's name (projects/<p>/messages/<id>) is the provider message id.
- UNREGISTERED (404), or INVALID_ARGUMENT (400) that names the token: the device is gone for good
  (TargetOutcome.invalid, Receipt/PermanentError.invalidated). Any other INVALID_ARGUMENT: permanent.
- QUOTA_EXCEEDED (429), UNAVAILABLE (503), INTERNAL (500), other 5xx: transient, with Retry-After
  (strictly parsed, capped at RETRY_CAP_SECONDS) when given.
- 401 UNAUTHENTICATED: the access token is refused; one new token (one per process, whichever thread
  asks first) and one retry, then "misconfigured".
- SENDER_ID_MISMATCH (403), THIRD_PARTY_AUTH_ERROR (401), PERMISSION_DENIED, a 404 without UNREGISTERED,
  and a token endpoint that refuses the key's assertion: permanent, kind "misconfigured", and noted for
  configuration_problem() (the dashboard says the configuration is wrong, not the devices).
- Timeouts and transport errors: transient.

A message counts as sent when at least one device accepted it (retrying would duplicate it on the
others), like Web Push; every device's outcome is reported under one scope, fcm:<host of FCM_API_BASE>.
Tokens are secrets of the member's phone: they are never logged whole (token_hint).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx

from app.providers import problems
from app.providers.base import (
    Message,
    PermanentError,
    ProviderError,
    Receipt,
    TargetOutcome,
    TransientError,
    register,
)
from app.providers.fcm_transport import FcmSettings, FcmTransport, TokenRefused, TokenUnavailable, transport_for
from app.providers.mobile import DeviceTarget, MobileAlert, MobilePush, token_hint
from app.providers.webpush import retry_after

log = logging.getLogger(__name__)

FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
# The Android app's intent filter for a notification with action buttons (issue 33): its activity shows them
# from data.actions (a JSON list of {action, title, url[, post]}).
FCM_CLICK_ACTION = "HATO_NOTIFICATION_ACTIONS"
MAX_TTL_SECONDS = 28 * 86_400  # FCM keeps a message four weeks at most and refuses a longer ttl
# Error codes that say the project's setup is wrong (key, sender, APNs/web credentials), not the device.
MISCONFIGURED = ("SENDER_ID_MISMATCH", "THIRD_PARTY_AUTH_ERROR", "PERMISSION_DENIED", "UNAUTHENTICATED")
TRANSIENT_KINDS = {"QUOTA_EXCEEDED": "rate_limited", "UNAVAILABLE": "unavailable", "INTERNAL": "internal"}

_problem: tuple[str, datetime] | None = None
_problem_lock = threading.Lock()


def configuration_problem() -> str | None:
    """The last answer in this process that said FCM's configuration is wrong, and when; None if there was none."""
    with _problem_lock:
        if _problem is None:
            return None
        text, when = _problem
    return f"{when.isoformat(timespec='seconds')}: {text}"


def _note_problem(text: str) -> None:
    global _problem
    with _problem_lock:
        _problem = (text, datetime.now(UTC))
    problems.note("fcm", text)  # for every process's dashboard


def _problem_solved() -> None:
    """A send worked after this process noted a configuration problem: the dashboard stops showing it."""
    global _problem
    with _problem_lock:
        noted, _problem = _problem, None
    if noted is not None:
        problems.clear("fcm")


@dataclass(frozen=True)
class FcmReply:
    """What an FCM error reply says."""

    status: int
    code: str  # the FcmError errorCode, else the google.rpc status (UNAUTHENTICATED…), else http_<status>
    message: str
    names_token: bool  # INVALID_ARGUMENT about the registration token itself


def read_reply(response: httpx.Response) -> FcmReply:
    """Read an error reply: {"error": {"code", "message", "status", "details": [FcmError, BadRequest…]}}."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):  # a proxy's HTML page, or nothing
        return FcmReply(response.status_code, f"http_{response.status_code}", response.text[:200], False)
    details = [d for d in error.get("details") or () if isinstance(d, dict)]
    codes = [d.get("errorCode") for d in details if d.get("@type") == FCM_ERROR]
    code = next((c for c in codes if isinstance(c, str)), None) or error.get("status")
    violations = [d.get("fieldViolations") for d in details if d.get("@type") == BAD_REQUEST]
    fields = [v.get("field") for vs in violations if isinstance(vs, list) for v in vs if isinstance(v, dict)]
    message = str(error.get("message") or "")[:300]
    names_token = "message.token" in fields or "not a valid fcm registration token" in message.lower()
    return FcmReply(response.status_code, str(code or f"http_{response.status_code}"), message, names_token)


def fcm_message(target: DeviceTarget, push: MobilePush, alert: MobileAlert | None) -> dict:
    """The v1 send body for one device; without an alert, a data-only message (a background update)."""
    android: dict = {
        "priority": "HIGH" if push.priority == "high" else "NORMAL",
        "ttl": f"{max(0, min(int(push.ttl), MAX_TTL_SECONDS))}s",
    }
    if push.group_key:
        android["collapse_key"] = push.group_key
    if target.app_id:  # only the app the token was issued to (its package name) may receive it
        android["restricted_package_name"] = target.app_id
    message: dict = {"token": target.token, "android": android}
    if alert is not None:
        message["notification"] = {"title": alert.title, "body": alert.body}
    if alert is not None and push.actions:  # the app's activity for a notification with buttons shows them
        android["notification"] = {"click_action": FCM_CLICK_ACTION}
    data = {}  # FCM data values are strings, always
    if push.notification_id is not None:
        data["notification_id"] = str(push.notification_id)
    if push.link:
        data["link"] = push.link
    if push.actions:
        data["actions"] = json.dumps(list(push.actions), ensure_ascii=False, separators=(",", ":"))
    if data:
        message["data"] = data
    return {"message": message}


class _OutOfTime(Exception):
    """The batch's time (the delivery lease) ran out before this device."""


class FcmProvider:
    """Sends a Message to each of its Android targets through this process's FcmTransport."""

    name = "fcm"

    def __init__(self, settings: FcmSettings, retry_cap: float, batch_seconds: float | None = None) -> None:
        self.settings = settings
        self.retry_cap = retry_cap  # the longest Retry-After we honour (RETRY_CAP_SECONDS)
        self.batch_seconds = batch_seconds  # all sends of one batch (`with provider:`), None: unbounded
        self.deadline = float("inf")
        self.base = settings.api_base.rstrip("/")
        self.scope = f"fcm:{urlsplit(settings.api_base).netloc.lower()}"

    @classmethod
    def from_config(cls, config: Mapping) -> FcmProvider | None:
        """Build from the FCM_* settings; None (FCM off) without FCM_CREDENTIALS_FILE."""
        if not config["FCM_CREDENTIALS_FILE"]:
            return None
        settings = FcmSettings(
            credentials_file=config["FCM_CREDENTIALS_FILE"],
            api_base=config["FCM_API_BASE"],
            ca_file=config["FCM_CA_FILE"],
            concurrency=int(config["FCM_CONCURRENCY"]),
            timeout=float(config["FCM_TIMEOUT"]),
        )
        # The engine stops taking rows LEASE_MARGIN_SECONDS before its lease ends; a batch's sends stop then too.
        batch = float(config["DELIVERY_LEASE_SECONDS"]) - float(config["LEASE_MARGIN_SECONDS"])
        return cls(settings, float(config["RETRY_CAP_SECONDS"]), batch)

    def __enter__(self) -> FcmProvider:
        if self.batch_seconds is not None:
            self.deadline = time.monotonic() + self.batch_seconds
        return self

    def __exit__(self, *exc_info) -> None:
        # The HTTP client and the token outlive the batch: the next batch of this process reuses them.
        self.deadline = float("inf")

    def scope_of(self, target) -> str:
        """Every device answers through the same FCM host: one pause and breaker for all (app/providers/routing.py)."""
        return self.scope

    def send(self, message: Message) -> Receipt:
        """POST the message to every Android target; see the module docstring for how answers are classified."""
        targets = [t for t in message.targets if getattr(t, "platform", None) == "android"]
        if not targets:
            raise PermanentError("the recipient has no Android device", kind="no_device")
        if message.mobile is None:
            raise PermanentError("the message has no phone payload (Message.mobile)", kind="no_payload")
        transport = transport_for(self.settings)
        try:
            url = f"{self.base}/v1/projects/{transport.project_id}/messages:send"
            token = transport.token()
        except TokenRefused as exc:
            raise self._misconfigured(str(exc)) from exc
        except TokenUnavailable as exc:
            raise TransientError(str(exc), kind="token_unavailable") from exc
        push = message.mobile
        if len(targets) == 1:
            results = [self._send_one(transport, url, token, targets[0], push)]
        else:
            results = list(transport.pool.map(lambda t: self._send_one(transport, url, token, t, push), targets))
        return self._aggregate(targets, results)

    def _send_one(self, transport: FcmTransport, url: str, token: str, target: DeviceTarget,
                  push: MobilePush) -> tuple[TargetOutcome, ProviderError | None, str]:  # fmt: skip
        """One device's exchange: (its outcome, its failure or None, FCM's message name)."""
        alert = None if push.background else push.alert_for(target.locale)
        name = ""
        failure: ProviderError | None
        invalid: str | None = None
        if alert is None and not push.background:
            failure = PermanentError(f"no alert for locale {target.locale!r} and no fallback alert", kind="no_alert")
        else:
            body = fcm_message(target, push, alert)
            try:
                response = self._post(transport, url, token, body)
                if response.status_code == 401 and read_reply(response).code != "THIRD_PARTY_AUTH_ERROR":
                    # Expired early or revoked: a new token (made once for every thread that saw the old one fail).
                    response = self._post(transport, url, transport.token(stale=token), body)
                failure, invalid, name = self._answer(target, response)
            except TokenRefused as exc:
                failure = self._misconfigured(str(exc))
            except TokenUnavailable as exc:
                failure = TransientError(str(exc), kind="token_unavailable")
            except _OutOfTime as exc:
                failure = TransientError(f"timeout: {exc}", kind="timeout")
            except httpx.TimeoutException as exc:
                failure = TransientError(f"FCM did not answer in time ({type(exc).__name__})", kind="timeout")
            except httpx.HTTPError as exc:
                failure = TransientError(f"FCM connection: {type(exc).__name__}: {exc}", kind="connection")
            except Exception as exc:  # whatever one device's exchange does, the other devices still go out
                failure = TransientError(f"{type(exc).__name__}: {exc}", kind="error")
        if failure is None:
            return TargetOutcome(self.scope, "sent", target=target.token), None, name
        outcome = "transient" if failure.transient else "permanent"
        return (
            TargetOutcome(
                self.scope, outcome, failure.retry_after, target=target.token, invalid=invalid, error=str(failure)[:200]
            ),
            failure,
            "",
        )

    def _post(self, transport: FcmTransport, url: str, token: str, body: dict) -> httpx.Response:
        timeout = min(self.settings.timeout, self.deadline - time.monotonic())
        if timeout <= 0:
            raise _OutOfTime("the batch's time (the delivery lease) ran out before this device")
        return transport.client.post(url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)

    def _answer(self, target: DeviceTarget, response: httpx.Response) -> tuple[ProviderError | None, str | None, str]:
        """Classify one reply (module docstring): (failure or None, why the token is invalid or None, message name)."""
        if response.status_code == 200:
            try:
                name = response.json().get("name")
            except (ValueError, AttributeError):
                name = None
            return None, None, name if isinstance(name, str) else ""
        reply = read_reply(response)
        text = f"FCM {reply.status} {reply.code}: {reply.message}".replace(target.token, token_hint(target.token))
        if reply.code == "UNREGISTERED" or (reply.status == 400 and reply.names_token):
            log.info("FCM: device %s is gone (%s)", token_hint(target.token), reply.code)
            kind = "unregistered" if reply.code == "UNREGISTERED" else "invalid_token"
            return PermanentError(text, kind=kind), reply.code, ""
        if reply.status == 400:
            return PermanentError(text, kind="invalid_argument"), None, ""
        if reply.code in TRANSIENT_KINDS or reply.status in (408, 429) or reply.status >= 500:
            kind = TRANSIENT_KINDS.get(reply.code) or (
                "rate_limited" if reply.status == 429 else f"http_{reply.status}"
            )
            wait = retry_after(response.headers.get("Retry-After"), self.retry_cap)
            return TransientError(text, kind=kind, retry_after=wait), None, ""
        if reply.code in MISCONFIGURED or reply.status in (401, 403, 404):
            # A 404 without UNREGISTERED is a wrong project or FCM_API_BASE: never a reason to drop the device.
            return self._misconfigured(text, target), None, ""
        return PermanentError(text, kind=f"http_{reply.status}"), None, ""

    def _misconfigured(self, text: str, target: DeviceTarget | None = None) -> PermanentError:
        _note_problem(text)
        device = f" (device {token_hint(target.token)})" if target else ""
        log.warning("FCM refuses Hato's configuration%s: %s", device, text)
        return PermanentError(text, kind="misconfigured")

    def _aggregate(self, targets: list[DeviceTarget], results: list) -> Receipt:
        """One Receipt when a device took the message; else the failure that says most (module docstring)."""
        reached, names, invalid, transient, permanent = [], [], [], [], []
        for target, (outcome, failure, name) in zip(targets, results, strict=True):
            if failure is None:
                reached.append(target.token)
                names.append(name)
                continue
            if outcome.invalid:
                invalid.append(target.token)
            (transient if failure.transient else permanent).append(failure)
        done = {"invalidated": tuple(invalid), "outcomes": tuple(outcome for outcome, _, _ in results)}
        if reached:
            _problem_solved()
            return Receipt(self.name, names[0], reached=tuple(reached), **done)
        if transient:
            first = transient[0]
            waits = [e.retry_after for e in transient if e.retry_after]
            raise TransientError(str(first), kind=first.kind, retry_after=max(waits) if waits else None, **done)
        # A wrong configuration says more than the devices it happened to: the delivery log shows it first.
        worst = next((e for e in permanent if e.kind == "misconfigured"), permanent[0])
        raise PermanentError(str(worst), kind=worst.kind, **done)


register("fcm", joins="push", when="FCM_CREDENTIALS_FILE")(FcmProvider.from_config)
