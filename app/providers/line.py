"""LINE: a push message to the member's LINE user id through line-bot-sdk's Messaging API client.

`POST {LINE_API_BASE}/v2/bot/message/push` with the channel access token (LINE_CHANNEL_ACCESS_TOKEN) as the
bearer: a text message, or the operator's Flex message with the plain text as its altText. Every push carries
`X-Line-Retry-Key`, a UUID derived from the delivery id and the recipient (uuid5), so a retry of the same row
to the same member is the same request to LINE: LINE delivers it once and answers a repeat with 409, which is
the message having gone out, not an error. The client does not retry by itself (the engine does).

Answers (developers.line.biz/en/reference/messaging-api/#send-push-message, its error responses):

- 200, or 409 for a retry key LINE already accepted: sent; the first sent message's id is the message id.
- 400 naming `to` (not a user id of this channel's friends): the account is gone (account_invalid).
- any other 400: permanent (the message itself was refused).
- 401 (the token is wrong or expired) and 403 (the channel may not use the API): misconfigured, on the dashboard
  until a push works again.
- 429 (rate or monthly limit), 5xx, timeouts and connection errors: transient, with Retry-After when given.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping

import urllib3
from linebot.v3.messaging import ApiClient, ApiException, Configuration, MessagingApi, PushMessageRequest

from app.providers import problems
from app.providers.base import Message, PermanentError, TransientError, register
from app.providers.chat_content import ChatContent, ChatTarget
from app.providers.chatfanout import ACCOUNT_INVALID, ChatPart
from app.providers.webpush import retry_after

log = logging.getLogger(__name__)

# The namespace of the retry keys: uuid5(it, "<delivery id>:<LINE user id>").
RETRY_KEY_NAMESPACE = uuid.UUID("0b0e9d62-5a36-4a8e-9d0e-6c1f2a3b4c5d")
TEXT_MAX = 5000  # UTF-16 code units
ALT_TEXT_MAX = 1500

_noted = problems.Noted("line")


def retry_key(delivery_id: int, user_id: str) -> str:
    """The X-Line-Retry-Key of one row's push to one member: the same on every try."""
    return str(uuid.uuid5(RETRY_KEY_NAMESPACE, f"{delivery_id}:{user_id}"))


def _cut(text: str, units: int) -> str:
    """text cut to at most units UTF-16 code units (what LINE counts), with an ellipsis when cut."""
    if len(text.encode("utf-16-le")) // 2 <= units:
        return text
    cut = text.encode("utf-16-le")[: (units - 1) * 2].decode("utf-16-le", "ignore")
    return cut + "…"


def messages(content: ChatContent) -> list[dict]:
    """The push's messages: the operator's Flex message (the text as its altText), or the text."""
    text = content.text.strip() or content.title or "…"
    if content.line_flex:
        return [{"type": "flex", "altText": _cut(text, ALT_TEXT_MAX), "contents": content.line_flex}]
    return [{"type": "text", "text": _cut(text, TEXT_MAX)}]


class LineProvider(ChatPart):
    """Pushes each message to the member's LINE user id; see the module docstring."""

    name = "line"
    # LINE's limit is per channel, i.e. for the whole installation: PROVIDER_RATE_LINE paces this part.
    scope_limit = None

    def __init__(self, config: Mapping) -> None:
        super().__init__(config)
        configuration = Configuration(host=config["LINE_API_BASE"].rstrip("/"),
                                      access_token=config["LINE_CHANNEL_ACCESS_TOKEN"])  # fmt: skip
        configuration.retries = False  # one request per try: the engine retries, with the same retry key
        self.client = ApiClient(configuration)
        self.api = MessagingApi(self.client)

    @classmethod
    def from_config(cls, config: Mapping) -> LineProvider | None:
        """LINE is on with LINE_CHANNEL_ACCESS_TOKEN."""
        return cls(config) if config["LINE_CHANNEL_ACCESS_TOKEN"] else None

    def __exit__(self, *exc_info) -> None:
        self.client.rest_client.pool_manager.clear()  # the batch's kept-alive connections to LINE

    def post(self, target: ChatTarget, message: Message) -> str:
        """Push to the target's LINE user id with the row's retry key."""
        content = message.chat or ChatContent(message.subject, message.text, text=message.text)
        user_id = str(target.data.get("user_id") or "")
        try:
            request = PushMessageRequest.from_dict({"to": user_id, "messages": messages(content)})
        except (ValueError, TypeError) as exc:  # a Flex message the SDK's models refuse
            raise PermanentError(f"LINE: the message is not valid: {exc}"[:300], kind="render") from None
        try:
            answer = self.api.push_message(request, x_line_retry_key=retry_key(message.delivery_id, user_id),
                                           _request_timeout=self.timeout)  # fmt: skip
        except ApiException as exc:
            if exc.status == 409:  # this retry key was accepted before: the message went out then
                _noted.solved()
                return _first_id(_body(exc))
            raise self._failure(user_id, exc) from None
        except urllib3.exceptions.TimeoutError as exc:
            raise TransientError(f"LINE did not answer in time ({type(exc).__name__})", kind="timeout") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransientError(f"LINE connection: {type(exc).__name__}: {exc}"[:300], kind="connection") from None
        _noted.solved()
        return str(answer.sent_messages[0].id) if answer.sent_messages else ""

    def _failure(self, user_id: str, exc: ApiException):
        status, body = int(exc.status or 0), _body(exc)
        detail = str(body.get("message") or exc.reason or "")[:300]
        text = (
            f"LINE {status}: {detail}".replace(user_id, f"…{user_id[-6:]}") if user_id else f"LINE {status}: {detail}"
        )
        if status == 429 or status >= 500 or status == 0:
            wait = retry_after(_header(exc, "retry-after"), self.retry_cap)
            return TransientError(text, kind="rate_limited" if status == 429 else f"http_{status}", retry_after=wait,
                                  response_code=status or None)  # fmt: skip
        if status in (401, 403):
            log.warning("LINE refuses Hato's channel access token: %s", detail)
            _noted.note(f"LINE refuses LINE_CHANNEL_ACCESS_TOKEN: {status} {detail}")
            return PermanentError(text, kind="misconfigured", response_code=status)
        if status == 400 and "'to'" in detail:
            return PermanentError(text, kind=ACCOUNT_INVALID, response_code=status)
        return PermanentError(text, kind="rejected", response_code=status)


def _body(exc: ApiException) -> dict:
    try:
        body = json.loads(exc.body or b"{}")
    except (ValueError, TypeError):
        return {}
    return body if isinstance(body, dict) else {}


def _header(exc: ApiException, name: str) -> str | None:
    headers = exc.headers or {}
    return next((value for key, value in headers.items() if key.lower() == name), None)


def _first_id(body: dict) -> str:
    sent = body.get("sentMessages")
    return str(sent[0].get("id") or "") if isinstance(sent, list) and sent and isinstance(sent[0], dict) else ""


register("line")(LineProvider.from_config)
