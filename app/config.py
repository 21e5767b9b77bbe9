"""Environment-driven configuration: every setting a deployment may change is declared and read here.

SETTINGS is the one list: each setting's variable, default, type and accepted range, and what it
does (docs/configuration.md lists the same names; tests/test_config.py keeps them in step).
Config reads them once when the app is created; check() is the start-up check that the web app,
the worker and the sweeper run (wsgi.py) before serving anything: a value of the wrong type, out of
range, a combination that cannot work, or a secret anybody knows is a refusal that names the
setting and what it accepts.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from limits import parse_many

from app.keyspace import NAMESPACE_PATTERN, derive_namespace

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}

# Secrets that are published (in this repository, tutorials, or as words nobody should use).
KNOWN_SECRETS = {
    "dev-insecure-change-me",
    "test-secret",
    "bench-secret",
    "secret",
    "changeme",
    "change-me",
    "development",
    "dev",
    "your-secret-key",
    "supersecret",
}
SECRET_MIN_BYTES = 32
# What a Google service-account key needs for FCM's token request (google-auth reads the same fields).
SERVICE_ACCOUNT_KEYS = ("project_id", "private_key", "client_email", "token_uri")


class ConfigError(Exception):
    """The settings cannot work; the message lists every problem."""


@dataclass(frozen=True)
class Setting:
    """One environment variable: its config key, default, type, accepted range and meaning."""

    name: str
    default: object
    kind: str  # str | int | float | bool | rate
    low: float | None = None
    high: float | None = None
    help: str = ""
    key: str | None = None  # the app.config key when it differs from the variable's name

    @property
    def config_key(self) -> str:
        return self.key or self.name

    def accepts(self) -> str:
        """Describe the accepted values, for error messages."""
        if self.kind == "bool":
            return "true or false (1/0, yes/no, on/off)"
        if self.kind == "rate":
            return 'a rate such as "5 per minute" or "100/hour" (several joined by ";")'
        if self.kind in ("int", "float"):
            noun = "an integer" if self.kind == "int" else "a number"
            if self.low is not None and self.high is not None:
                return f"{noun} from {_num(self.low)} to {_num(self.high)}"
            if self.low is not None:
                return f"{noun} of at least {_num(self.low)}"
            return noun
        return "text"

    def parse(self, raw: str) -> object:
        """Return raw as this setting's type (raises ValueError)."""
        if self.kind == "bool":
            word = raw.strip().lower()
            if word in TRUE_WORDS:
                return True
            if word in FALSE_WORDS:
                return False
            raise ValueError(raw)
        if self.kind == "int":
            return int(raw.strip().replace("_", ""))
        if self.kind == "float":
            value = float(raw.strip())
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(raw)
            return value
        return raw


def _num(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


PUBLIC_PUSH_SERVICES = "fcm.googleapis.com,updates.push.services.mozilla.com,web.push.apple.com,*.notify.windows.com"
DAY = 86_400.0
FCM_API = "https://fcm.googleapis.com"
# Where Slack incoming webhooks, Teams (incoming webhooks and Workflows) and Discord webhooks live.
CHAT_WEBHOOK_HOSTS = (
    "hooks.slack.com,*.webhook.office.com,*.logic.azure.com,*.powerplatform.com,discord.com,discordapp.com"
)
CHAT_PROVIDERS = ("slack", "msteams", "discord", "line")
# Hosts an http:// URL may name (a local stand-in); anything else must be https.
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
SMS_HELP_TEXT = "Notifications from Hato. Reply STOP to stop these texts, START to get them again."
SMS_HELP_TEXT_MAX = 320  # two GSM-7 parts, or five UCS-2 ones: a help text is short

SETTINGS: tuple[Setting, ...] = (
    Setting("HATO_DEV", False, "bool", help="dev mode (set by make run/test/bench): demo seed allowed, dev secrets accepted", key="DEV_MODE"),
    Setting("DATABASE_URL", "postgresql://127.0.0.1:5432/hato", "str", help="PostgreSQL, standard postgresql://… form"),
    Setting("DB_POOL_SIZE", 10, "int", 1, 1000, "SQLAlchemy pool size per process"),
    Setting("DB_MAX_OVERFLOW", 20, "int", 0, 1000, "extra connections beyond the pool"),
    Setting("DB_POOL_PRE_PING", False, "bool", help="also send a test query on each checkout"),
    Setting("DATABASE_REPLICA_URLS", "", "str", help="comma-separated postgresql:// URLs of streaming replicas the inbox, feed, counts, delivery log and analytics read from (app/replicas.py)"),
    Setting("REPLICA_MAX_LAG_SECONDS", 5.0, "float", 0.1, 3600, "a replica further behind the primary than this is skipped (reads go to the primary)"),
    Setting("DELIVERY_LEDGER_SYNCHRONOUS", False, "bool", help="commit each sent message's record synchronously (to a synchronous standby too): at most one duplicate per failover"),
    Setting("REDIS_URL", "redis://127.0.0.1:6379/0", "str", help="Redis for jobs, pub/sub and rate limits"),
    Setting("REDIS_NAMESPACE", "", "str", help="prefix of every Redis key, channel, queue and job id (default: derived from DATABASE_URL)"),
    Setting("SECRET_KEY", "", "str", help=f"signs sessions, CSRF and unsubscribe tokens; at least {SECRET_MIN_BYTES} bytes"),
    Setting("BASE_URL", "http://127.0.0.1:5000", "str", help="public origin: links, websocket Origin check, secure cookies on https"),
    Setting("WS_ALLOWED_ORIGINS", "", "str", help="extra comma-separated origins the websocket accepts"),
    Setting("WS_MAX_SOCKETS_PER_USER", 8, "int", 1, 1000, "open websockets per user across web processes (the oldest closes with 4008)"),
    Setting("WS_CONNECT_RATE_LIMIT", "120 per minute", "rate", help="websocket (/ws) handshakes per signed-in user (per client address before sign-in)"),
    Setting("PRESENCE_TTL_SECONDS", 60.0, "float", 1, 3600, "a user counts as online this long after a tab of theirs last acked (refreshed every third of it); also the registry's TTL"),
    Setting("REALTIME_COALESCE_SECONDS", 0.1, "float", 0, 10, "a web process recounts one user's badge at most once per this many seconds"),
    Setting("REALTIME_FLUSH_THREADS", 2, "int", 1, 64, "threads per web process that recount badges and write the frames"),
    Setting("REALTIME_REDIS_URL", "", "str", help="Redis for the connection registry, presence, node channels, socket caps, breakers, buckets and rate limits (default: REDIS_URL; RQ stays on REDIS_URL)"),
    Setting("REALTIME_REDIS_CLUSTER", False, "bool", help="REALTIME_REDIS_URL names nodes of a Redis Cluster: one, or several (redis://h1:7000,h2:7000/0) so that a process starting while one is down asks the next; node channels then use sharded pub/sub"),
    Setting("REALTIME_NODE_ID", "", "str", help="prefix of this host's node ids in the connection registry (default: the host name); each web process adds -<pid>-<random>"),
    Setting("REALTIME_ACK_TIMEOUT_SECONDS", 5.0, "float", 0.1, 300, "a frame the client has not acked this long is resent once; push_when_offline waits this long for an ack"),
    Setting("OTEL_EXPORTER_OTLP_ENDPOINT", "", "str", help="OpenTelemetry traces go to this OTLP/HTTP endpoint; empty: tracing off, at no cost"),
    Setting("OTEL_SERVICE_NAME", "hato", "str", help="the service name on every span"),
    Setting("WEB_MAX_SOCKETS", 1000, "int", 0, 100_000, "websockets one gunicorn worker is sized for (one thread each; 0 for API-only processes)"),
    Setting("WEB_REQUEST_THREADS", 32, "int", 1, 10_000, "gunicorn threads per worker for pages and API calls, beside the socket threads"),
    Setting("WEB_WORKERS", 2, "int", 1, 256, "gunicorn worker processes per web process"),
    Setting("WEB_WORKER_CLASS", "gthread", "str", help="gunicorn worker class (gthread: app/realtime/gunicorn_conf.py's SocketThreadWorker)"),
    Setting("WEB_GRACEFUL_TIMEOUT", 10, "int", 0, 3600, "seconds in-flight requests get after SIGTERM (sockets close with 1001 first)"),
    Setting("FEED_ALLOWED_ORIGINS", "", "str", help="comma-separated origins of the product's pages that may call /v1/feed and open its socket with a user token"),
    Setting("FEED_CONNECT_RATE_LIMIT", "600 per minute", "rate", help="feed socket handshakes per client address (before the token is read)"),
    Setting("ACTION_LINK_MAX_AGE_SECONDS", 7 * 86400, "int", 60, 90 * 86400, "how long an action button's signed link in an e-mail or push works (issue 33)"),
    Setting("USER_TOKEN_MAX_TTL", 86400, "int", 60, 7 * 86400, "longest lifetime, in seconds, of a user token from POST /v1/user-tokens"),
    Setting("BADGE_COUNTS", "unread", "str", help="what the inbox badge counts: unread, or unseen (unread and newer than the user's last visit)"),
    Setting("INBOX_DELETE_KEEPS_FOR_RETENTION", False, "bool", help="a notification the member deletes is only hidden from them and kept until the RETENTION_* rules delete it; off: it is removed once its undo time has passed"),
    Setting("INBOX_BULK_MAX_IDS", 200, "int", 1, 10_000, "most notification ids one bulk inbox or feed action takes (more: 422)"),
    Setting("INBOX_UNDO_SECONDS", 10, "int", 1, 3600, "how long the undo toast of a bulk inbox action lasts (the server accepts Undo a few seconds longer)"),
    Setting("SESSION_MAX_AGE_HOURS", 720.0, "float", 0.1, 24 * 366, "absolute session lifetime, however active"),
    Setting("TRUSTED_PROXY_HOPS", 0, "int", 0, 10, "reverse proxies whose X-Forwarded-For/-Proto are trusted"),
    Setting("API_MAX_BODY_BYTES", 256 * 1024, "int", 1024, 100 * 1024 * 1024, "largest JSON API request body"),
    Setting("TOPIC_SUBSCRIBERS_MAX_BODY_BYTES", 16 * 1024 * 1024, "int", 1024, 100 * 1024 * 1024, "largest body of POST /v1/topics/{key}/subscribers (10,000 external ids of up to 255 characters, JSON-escaped)"),
    Setting("API_RATE_LIMIT", "6000 per minute", "rate", help="JSON API rate limit per key"),
    Setting("LOGIN_RATE_LIMIT", "5 per minute", "rate", help="failed sign-ins per (account, client address)"),
    Setting("LOGIN_CLIENT_RATE_LIMIT", "25 per 5 minutes", "rate", help="failed sign-ins per client address, across accounts"),
    Setting("LOGIN_ACCOUNT_RATE_LIMIT", "50 per hour", "rate", help="failed sign-ins per account; never holds a client that has not failed"),
    Setting("RATELIMIT_ENABLED", True, "bool", help="switch all rate limits off"),
    # Console sign-in with OpenID Connect (issue 33): Okta, Entra ID, Google, Keycloak…
    Setting("OIDC_ISSUER", "", "str", help="the OpenID Connect provider's issuer URL (https; its /.well-known/openid-configuration is read); empty: no SSO"),
    Setting("OIDC_CLIENT_ID", "", "str", help="Hato's client id at the provider"),
    Setting("OIDC_CLIENT_SECRET", "", "str", help="Hato's client secret at the provider (a confidential client; PKCE S256 is used as well)"),
    Setting("OIDC_DISPLAY_NAME", "SSO", "str", help='the provider\'s name on the sign-in button ("Sign in with Okta")'),
    Setting("OIDC_SCOPES", "openid email profile", "str", help="scopes asked for (add the one that releases the role claim if the provider needs it, e.g. groups)"),
    Setting("OIDC_ROLE_CLAIM", "groups", "str", help="the ID token (or userinfo) claim whose values give the console role"),
    Setting("OIDC_OPERATOR_VALUES", "", "str", help="comma-separated values of OIDC_ROLE_CLAIM that make an operator"),
    Setting("OIDC_ADMIN_VALUES", "", "str", help="comma-separated values of OIDC_ROLE_CLAIM that make an admin (wins over operator)"),
    Setting("OIDC_ONLY_STAFF", False, "bool", help="operators and admins sign in only through OIDC (their local passwords are refused); members keep theirs"),
    Setting("OIDC_TIMEOUT", 10.0, "float", 0.5, 60, "seconds for one request to the provider (discovery, JWKS, token, userinfo)"),
    Setting("METRICS_TOKEN", "", "str", help="bearer token /metrics requires; unset: only this host, unproxied"),
    Setting("METRICS_CACHE_SECONDS", 10.0, "float", 0, 3600, "seconds a /metrics body is reused per process"),
    Setting("SMTP_URL", "smtp://127.0.0.1:8025", "str", help="primary e-mail provider"),
    Setting("SMTP_FALLBACK_URL", "", "str", help="second SMTP provider used for failover"),
    Setting("SMTP_TIMEOUT", 10.0, "float", 0.1, 600, "seconds per SMTP operation"),
    Setting("MAIL_FROM", "Hato <hato@localhost>", "str", help="sender address"),
    Setting("VAPID_PUBLIC_KEY", "", "str", help="Web Push public key"),
    Setting("VAPID_PRIVATE_KEY", "", "str", help="Web Push private key"),
    Setting("VAPID_SUBJECT", "mailto:ops@localhost", "str", help="contact sent to push services (mailto: or https:)"),
    Setting("DEFAULT_LOCALE", "en", "str", help="language for users who chose none (after Accept-Language) and template locale fallback"),
    Setting("DEFAULT_TIMEZONE", "UTC", "str", help="time zone for users without one"),
    Setting("DEFAULT_PHONE_REGION", "JP", "str", help="where a phone number written without +country code is read (ISO 3166 code, e.g. JP, US)"),
    Setting("PHONE_CODE_USER_RATE_LIMIT", "5 per hour", "rate", help="verification codes a member may ask for (preferences page)"),
    Setting("PHONE_CODE_NUMBER_RATE_LIMIT", "3 per hour", "rate", help="verification codes sent to one phone number, whoever asks"),
    Setting("RETRY_BASE_SECONDS", 2.0, "float", 0.01, DAY, "first retry delay"),
    Setting("RETRY_CAP_SECONDS", 600.0, "float", 0.1, 7 * DAY, "longest retry delay, and the longest Retry-After honoured"),
    Setting("RETRY_MAX_ATTEMPTS", 8, "int", 1, 100, "attempts before a delivery goes to the DLQ"),
    Setting("DELIVERY_BATCH_SIZE", 100, "int", 1, 10_000, "deliveries claimed per job"),
    Setting("DELIVERY_SEND_CONCURRENCY", 4, "int", 1, 32, "e-mails of a batch a worker sends at once, each on its own SMTP connection"),
    Setting("DELIVERY_DRAIN_SECONDS", 10.0, "float", 0.5, 300, "a drain of live deliveries hands the worker back after this long"),
    Setting("BACKPRESSURE_HIGH_LAG_SECONDS", 2.0, "float", 0, 3600, "while the high queue's oldest work has waited longer than this, workers take no low-priority (campaign) jobs and running ones hand their rows back; 0 turns backpressure off"),
    Setting("DELIVERY_LEASE_SECONDS", 120, "int", 1, DAY, "how long a claimed delivery stays leased to a worker"),
    Setting("LEASE_MARGIN_SECONDS", 5.0, "float", 0.5, 600, "a worker stops sending this long before its lease ends"),
    Setting("FANOUT_BATCH_SIZE", 10_000, "int", 1, 1_000_000, "users per campaign fanout statement"),
    Setting("BULK_BATCH_SIZE", 1_000, "int", 1, 100_000, "rows per DLQ replay/discard step"),
    Setting("SWEEP_INTERVAL_SECONDS", 5.0, "float", 0.1, 3600, "how often the sweeper runs"),
    Setting("SWEEP_REQUEUE_AFTER_SECONDS", 30.0, "float", 1, DAY, "a due pending delivery untouched this long is re-enqueued"),
    Setting("SWEEP_LIMIT", 5000, "int", 1, 1_000_000, "rows handled per sweep"),
    Setting("SWEEP_DUE_PASSES", 20, "int", 1, 1_000, "a backlog of due deliveries is taken this many SWEEP_LIMIT passes per sweep at most"),
    Setting("SCHEDULER_INTERVAL_SECONDS", 0.5, "float", 0.05, 3600, "how often the sweeper releases due scheduled notifications"),
    Setting("DIGEST_BATCH_SIZE", 10_000, "int", 1, 1_000_000, "e-mails waiting for a digest handled per statement"),
    Setting("SCHEDULER_BATCH_SIZE", 10_000, "int", 1, 1_000_000, "scheduled notifications released per statement"),
    Setting("RETENTION_READ_DAYS", 180, "int", 1, 36_500, "read notifications are deleted this many days after they were read"),
    Setting("RETENTION_ALL_DAYS", 730, "int", 1, 36_500, "every notification, unread and mandatory ones too, is deleted this many days after it was created"),
    Setting("RETENTION_LEDGER_DAYS", 90, "int", 1, 36_500, "sent and skipped deliveries (with their attempts and provider events) and unmatched provider events are deleted after this many days; pending, leased and DLQ rows are kept"),
    Setting("RETENTION_ANNOUNCEMENT_READS_DAYS", 30, "int", 0, 36_500, "an expired announcement's reads are deleted this many days after it expired"),
    Setting("RETENTION_BATCH_SIZE", 1000, "int", 10, 100_000, "rows the retention sweep looks at per transaction"),
    Setting("RETENTION_BATCH_PAUSE_SECONDS", 0.1, "float", 0, 10, "pause after each retention batch, so the deletion leaves the database to the inbox"),
    Setting("RETENTION_PASS_SECONDS", 2.0, "float", 0.05, 600, "time the retention step may take per sweeper pass; the walk resumes at the next pass"),
    Setting("ANALYTICS_ROLLUP_BATCH", 10_000, "int", 10, 1_000_000, "ledger changes the sweeper folds into the analytics rollups per transaction"),
    Setting("ANALYTICS_ROLLUP_PASS_SECONDS", 2.0, "float", 0.05, 600, "time the analytics rollup step may take per sweeper pass; what is left waits for the next pass"),
    Setting("RETENTION_INTERVAL_SECONDS", 3600.0, "float", 0, 30 * DAY, "rest between two complete retention walks"),
    Setting("EMAIL_PROVIDER", "smtp", "str", help="e-mail provider by registry name"),
    Setting("PUSH_PROVIDER", "webpush", "str", help="push provider by registry name"),
    Setting("WEBHOOK_PROVIDER", "webhook", "str", help="webhooks-out provider by registry name"),
    Setting("PUSH_TIMEOUT", 10.0, "float", 0.1, 300, "seconds for one push target's whole exchange"),
    Setting("PUSH_ALLOW_HTTP_ENDPOINTS", False, "bool", help="accept http:// push endpoints on any port (local testing only)"),
    Setting("PUSH_ALLOWED_HOSTS", PUBLIC_PUSH_SERVICES, "str", help="push services subscriptions may point at (comma list, *. wildcards)"),
    Setting("PUSH_ALLOW_PRIVATE_ADDRESSES", False, "bool", help="allow loopback/private push endpoint addresses (local testing only)"),
    Setting("PUSH_MAX_SUBSCRIPTIONS_PER_USER", 10, "int", 1, 1000, "push subscriptions kept per user (the oldest goes)"),
    Setting("DEVICES_MAX_PER_USER", 20, "int", 1, 1000, "phones kept per member (beyond it, refused ones go first, then the least recently seen)"),
    Setting("PUSH_SUBSCRIBE_RATE_LIMIT", "20 per hour", "rate", help="subscribe calls per user"),
    # Mobile push: APNs
    Setting("APNS_KEY_FILE", "", "str", help="path of the APNs token signing key (.p8, EC P-256) Apple gave you; empty: APNs is off"),
    Setting("APNS_KEY_ID", "", "str", help="the 10-character Key ID of APNS_KEY_FILE (the JWT's kid)"),
    Setting("APNS_TEAM_ID", "", "str", help="your 10-character Apple Team ID (the JWT's iss)"),
    Setting("APNS_TOPIC", "", "str", help="the iOS app's bundle id (apns-topic) for devices registered without their own"),
    Setting("APNS_ENDPOINT", "https://api.push.apple.com", "str", help="APNs server (the sandbox is https://api.sandbox.push.apple.com); http:// only for a loopback host"),
    Setting("APNS_CA_FILE", "", "str", help="PEM bundle of CAs to trust for APNS_ENDPOINT instead of the system's (a local stand-in in tests and staging)"),
    Setting("APNS_CONCURRENCY", 20, "int", 1, 1000, "APNs requests in flight at once for one message's devices (streams on one HTTP/2 connection)"),
    Setting("APNS_TIMEOUT", 10.0, "float", 0.1, 300, "seconds APNs may take to connect, and to answer one request"),
    Setting("APNS_BADGE_SYNC_SECONDS", 10.0, "float", 1, 3600, "after a member reads, their iPhones' app badge is updated at most once per this many seconds (coalesced)"),
    # Mobile push: FCM
    Setting("FCM_CREDENTIALS_FILE", "", "str", help="Google service-account key (JSON) of the Firebase project; empty: FCM is off"),
    Setting("FCM_API_BASE", FCM_API, "str", help="FCM HTTP v1 origin (https; http only on a loopback host)"),
    Setting("FCM_CA_FILE", "", "str", help="PEM CA bundle trusted for FCM and its token endpoint instead of the system's (tests, staging)"),
    Setting("FCM_CONCURRENCY", 20, "int", 1, 1000, "FCM requests in flight at once for one message's devices"),
    Setting("SMS_PROVIDER", "", "str", help="SMS providers in failover order by registry name (twilio, vonage); empty: no SMS"),
    Setting("SMS_TIMEOUT", 10.0, "float", 0.1, 300, "seconds for one SMS provider request (connect, send, answer)"),
    Setting("TWILIO_ACCOUNT_SID", "", "str", help="Twilio account SID (AC…); Twilio is on with it, the token and a sender"),
    Setting("TWILIO_AUTH_TOKEN", "", "str", help="Twilio auth token: authenticates sends and signs Twilio's callbacks; empty: /hooks/providers/twilio is off"),
    Setting("TWILIO_FROM", "", "str", help="the Twilio number SMS come from (E.164), when no messaging service is set"),
    Setting("TWILIO_MESSAGING_SERVICE_SID", "", "str", help="a Twilio messaging service (MG…) that picks the sender; wins over TWILIO_FROM"),
    Setting("TWILIO_API_BASE", "https://api.twilio.com", "str", help="Twilio REST origin (https; http only on a loopback host)"),
    Setting("VONAGE_APPLICATION_ID", "", "str", help="Vonage application id: sends authenticate with its JWT (with VONAGE_PRIVATE_KEY_FILE)"),
    Setting("VONAGE_PRIVATE_KEY_FILE", "", "str", help="the Vonage application's private key (PEM file)"),
    Setting("VONAGE_API_KEY", "", "str", help="Vonage API key: Basic auth when no application is set"),
    Setting("VONAGE_API_SECRET", "", "str", help="Vonage API secret, with VONAGE_API_KEY"),
    Setting("VONAGE_SIGNATURE_SECRET", "", "str", help="Vonage signature secret: checks Vonage's signed webhooks; empty: /hooks/providers/vonage is off"),
    Setting("VONAGE_FROM", "", "str", help="the number or sender id Vonage SMS come from; Vonage is on with it and credentials"),
    Setting("VONAGE_API_BASE", "https://api.nexmo.com", "str", help="Vonage Messages API origin (https; http only on a loopback host)"),
    Setting("SMS_HELP_TEXT", SMS_HELP_TEXT, "str", help="the answer to an SMS reply of HELP (at most 320 characters)"),
    # Chat (issue 29): Slack, Microsoft Teams, Discord, LINE
    Setting("CHAT_PROVIDER", "", "str", help="chat providers this installation sends through (comma list of slack, msteams, discord, line); empty: no chat"),
    Setting("CHAT_TIMEOUT", 10.0, "float", 0.1, 300, "seconds for one chat request (Slack, LINE, a Teams or Discord webhook: connect to complete answer)"),
    Setting("CHAT_ALLOWED_HOSTS", CHAT_WEBHOOK_HOSTS, "str", help="hosts a chat webhook_url may name (comma list, *. wildcards): Slack's, Teams' and Discord's by default"),
    Setting("CHAT_ALLOW_HTTP_ENDPOINTS", False, "bool", help="accept http:// chat webhook URLs on any port (local testing only)"),
    Setting("CHAT_ALLOW_PRIVATE_ADDRESSES", False, "bool", help="allow loopback/private chat webhook addresses (local testing only)"),
    Setting("CHAT_WEBHOOK_CA_FILE", "", "str", help="PEM CA bundle trusted for chat webhooks instead of the system's (a local stand-in in tests)"),
    Setting("SLACK_BOT_TOKEN", "", "str", help="Slack bot token (xoxb-…): channel data {\"channel\"} posts with chat.postMessage; empty: Slack webhooks only"),
    Setting("SLACK_API_BASE", "https://slack.com/api/", "str", help="Slack Web API base URL (https; http only on a loopback host)"),
    Setting("LINE_CHANNEL_ACCESS_TOKEN", "", "str", help="LINE Messaging API channel access token; LINE is on with it"),
    Setting("LINE_API_BASE", "https://api.line.me", "str", help="LINE Messaging API origin (https; http only on a loopback host)"),
    Setting("FCM_TIMEOUT", 10.0, "float", 0.1, 300, "seconds for each step of one FCM request (connect, send, answer), the token request too"),
    Setting("BREAKER_FAILURES", 5, "int", 1, 1_000_000, "transient failures in the window that open a provider's breaker"),
    Setting("BREAKER_WINDOW_SECONDS", 30.0, "float", 0.1, DAY, "the breaker's failure window"),
    Setting("BREAKER_COOLDOWN_SECONDS", 30.0, "float", 0.1, DAY, "wait before the half-open probe"),
    Setting("BREAKER_PROBE_TIMEOUT_SECONDS", 30.0, "float", 0.1, DAY, "a lost probe is replaced after this"),
    Setting("RATE_LIMIT_MAX_WAIT_SECONDS", 1.0, "float", 0, 60, "longest sleep for a provider token; longer waits go back to the ledger"),
    Setting("TEMPLATE_RENDER_SECONDS", 0.5, "float", 0.01, 60, "time budget to render one message in a send job"),
    Setting("TEMPLATE_PREVIEW_SECONDS", 1.0, "float", 0.01, 60, "time budget of one console preview"),
    Setting("WEBHOOK_TIMEOUT_SECONDS", 5.0, "float", 0.2, 30, "seconds one webhook POST to an operator's endpoint may take (connect to complete answer)"),
    Setting("WEBHOOK_ALLOW_HTTP_ENDPOINTS", False, "bool", help="accept http:// webhook endpoint URLs on any port (local testing only)"),
    Setting("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", False, "bool", help="allow loopback/private webhook endpoint addresses (local testing only)"),
    Setting("DELIVERY_MAX_AGE", DAY, "float", 60, 30 * DAY, "seconds a delivery may be held back by an open breaker or an empty bucket before it goes to the DLQ as expired"),
    Setting("SENDGRID_WEBHOOK_PUBLIC_KEY", "", "str", help="SendGrid's Event Webhook verification key (base64 DER or PEM, ECDSA P-256); empty: /hooks/providers/sendgrid is off"),
    Setting("MAILGUN_WEBHOOK_SIGNING_KEY", "", "str", help="Mailgun's HTTP webhook signing key; empty: /hooks/providers/mailgun is off"),
    Setting("POSTMARK_WEBHOOK_USER", "", "str", help="user name of the basic auth in Postmark's webhook URL; empty: /hooks/providers/postmark is off"),
    Setting("POSTMARK_WEBHOOK_PASSWORD", "", "str", help="password of the basic auth in Postmark's webhook URL (16+ characters)"),
    Setting("HOOK_MAX_AGE_SECONDS", 300.0, "float", 10, DAY, "a signed provider webhook whose timestamp is further than this from now is refused (replay)"),
    Setting("HOOK_MAX_BODY_BYTES", 1024 * 1024, "int", 1024, 2 * 1024 * 1024, "largest provider webhook body"),
    Setting("HOOK_RATE_LIMIT", "1200 per minute", "rate", help="provider webhook requests per provider and client address"),
)  # fmt: skip

# Token buckets per provider, by name (PROVIDER_RATE_SMTP=50): messages per second and bucket size.
DYNAMIC_PREFIXES = ("PROVIDER_RATE_", "PROVIDER_BURST_")


def default_of(name: str) -> object:
    """The declared default of a setting, by variable name (for code that runs without an app's config)."""
    return next(s.default for s in SETTINGS if s.name == name)


def sqlalchemy_url(url: str) -> str:
    """Return the standard postgresql:// URL in the form SQLAlchemy needs for psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + _hosts_in_query(url[len(prefix) :])
    return url


def _hosts_in_query(rest: str) -> str:
    """Move libpq's multi-host list (`u@h1:5432,h2:5433/db`) into host= and port= lists SQLAlchemy passes on.

    SQLAlchemy reads one host:port from the URL's authority and refuses a list; libpq takes `host=h1,h2` and
    `port=5432,5433` and tries them in order (with target_session_attrs=read-write, until one accepts writes).
    """
    authority, slash, tail = rest.partition("/")
    userinfo, at, hostlist = authority.rpartition("@")
    if "," not in hostlist:
        return rest
    hosts, ports = [], []
    for entry in hostlist.split(","):
        if entry.startswith("["):  # [IPv6]:port; libpq's list takes the bare address
            host, _, port = entry[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = entry.partition(":")
        hosts.append(host)
        ports.append(port or "5432")
    path, question, query = tail.partition("?")
    lists = f"host={','.join(hosts)}&port={','.join(ports)}"
    return f"{userinfo}{at}/{path}?{lists}{'&' + query if query else ''}"


class Config:
    """Settings read once from the environment (default: os.environ) when the app is created.

    A value that cannot be read keeps its default and is recorded in CONFIG_PROBLEMS, so that
    check() reports every problem at once instead of the first traceback.
    """

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        problems: list[str] = []
        for setting in SETTINGS:
            value = setting.default
            raw = env.get(setting.name)
            if raw is not None:
                try:
                    value = setting.parse(raw)
                except ValueError:
                    problems.append(f"{setting.name}={raw!r} is not {setting.accepts()}")
            setattr(self, setting.config_key, value)
        for name, raw in env.items():
            if name.startswith(DYNAMIC_PREFIXES):
                try:
                    setattr(self, name, float(raw))
                except ValueError:
                    problems.append(f"{name}={raw!r} is not a number")
        self.CONFIG_PROBLEMS = problems
        self._derive()

    def _derive(self) -> None:
        """Settings computed from others, and Flask's own."""
        self.BASE_URL = self.BASE_URL.rstrip("/")
        self.SQLALCHEMY_DATABASE_URI = sqlalchemy_url(self.DATABASE_URL)
        self.SQLALCHEMY_ENGINE_OPTIONS = {
            # Off by default: app/dbpool.py spots closed connections on checkout without a round trip.
            "pool_pre_ping": self.DB_POOL_PRE_PING,
            "pool_size": self.DB_POOL_SIZE,
            "max_overflow": self.DB_MAX_OVERFLOW,
            # The connection returned last goes out first: the backends in use stay few and warm (their caches and
            # prepared statements), and the rest idle long enough for a server-side idle timeout to close them.
            "pool_use_lifo": True,
        }
        # Installations sharing a Redis server never hear each other (app/keyspace.py).
        self.REDIS_NAMESPACE = self.REDIS_NAMESPACE or derive_namespace(self.DATABASE_URL)
        self.REALTIME_REDIS_URL = self.REALTIME_REDIS_URL or self.REDIS_URL
        self.WS_ALLOWED_ORIGINS = [o.strip().rstrip("/") for o in self.WS_ALLOWED_ORIGINS.split(",") if o.strip()]
        self.FEED_ALLOWED_ORIGINS = [o.strip().rstrip("/") for o in self.FEED_ALLOWED_ORIGINS.split(",") if o.strip()]
        self.DATABASE_REPLICA_URLS = [u.strip() for u in self.DATABASE_REPLICA_URLS.split(",") if u.strip()]
        secure = urlsplit(self.BASE_URL).scheme == "https"
        self.SESSION_COOKIE_SECURE = secure
        self.REMEMBER_COOKIE_SECURE = secure
        self.SESSION_COOKIE_HTTPONLY = True
        self.SESSION_COOKIE_SAMESITE = "Lax"
        self.REMEMBER_COOKIE_HTTPONLY = True
        self.REMEMBER_COOKIE_SAMESITE = "Lax"
        self.WTF_CSRF_TIME_LIMIT = None  # the token lives as long as the session
        self.MAX_CONTENT_LENGTH = 2 * 1024 * 1024
        # Flask-Limiter's own keys, written here so that app/api/ratelimit.py and app/auth/throttle.py, which
        # count beside the limiter, read the same values (its storage URI and key prefix follow REDIS_URL and
        # REDIS_NAMESPACE as finally configured, so app/extensions.py sets those two).
        self.RATELIMIT_STRATEGY = "fixed-window"
        self.RATELIMIT_HEADERS_ENABLED = True
        # IETF RateLimit header names; Flask-Limiter's reset value is an epoch, so it keeps the X- name
        # and the API adds RateLimit-Reset in seconds (app/api/views.py).
        self.RATELIMIT_HEADER_LIMIT = "RateLimit-Limit"
        self.RATELIMIT_HEADER_REMAINING = "RateLimit-Remaining"
        self.RATELIMIT_HEADER_RESET = "X-RateLimit-Reset"
        self.RATELIMIT_HEADER_RETRY_AFTER = "Retry-After"


def _url_problem(name: str, value: str, schemes: Iterable[str], *, optional: bool = False) -> str | None:
    if optional and not value:
        return None
    parts = urlsplit(value)
    if parts.scheme not in schemes or not (parts.netloc or parts.path):
        return f"{name}={value!r} is not a URL starting with {' or '.join(s + '://' for s in schemes)}"
    return None


def _secret_problems(config: Mapping) -> list[str]:
    key = config["SECRET_KEY"]
    if not key:
        return [
            "SECRET_KEY is not set: generate one with `python -c 'import secrets; print(secrets.token_urlsafe(48))'`"
        ]
    if config.get("DEV_MODE"):
        return []  # make run / make test / make bench set their own
    if key.strip().lower() in KNOWN_SECRETS:
        return ["SECRET_KEY is a published default: anyone could sign an admin session with it; generate a new one"]
    if len(key.encode()) < SECRET_MIN_BYTES:
        return [f"SECRET_KEY is {len(key.encode())} bytes; it needs at least {SECRET_MIN_BYTES} (random)"]
    return []


def _is_rate(value: object) -> bool:
    """Whether Flask-Limiter can read value (its own parser, so the check and the use never disagree)."""
    try:
        return bool(parse_many(str(value)))
    except ValueError:
        return False


def _range_problems(config: Mapping) -> list[str]:
    problems = []
    for setting in SETTINGS:
        value = config.get(setting.config_key)
        if setting.kind in ("int", "float") and isinstance(value, int | float) and not isinstance(value, bool):
            if (setting.low is not None and value < setting.low) or (setting.high is not None and value > setting.high):
                problems.append(f"{setting.name}={_num(value)} is out of range: {setting.accepts()}")
        elif setting.kind == "rate" and not _is_rate(value):
            problems.append(f"{setting.name}={value!r} is not {setting.accepts()}")
    for name, value in config.items():
        if isinstance(name, str) and name.startswith(DYNAMIC_PREFIXES) and isinstance(value, int | float) and value < 0:
            problems.append(f"{name}={_num(value)} is out of range: a number of at least 0")
    return problems


def _value_problems(config: Mapping) -> list[str]:
    problems = [
        _url_problem("DATABASE_URL", config["DATABASE_URL"], ("postgresql", "postgres")),
        _url_problem("REDIS_URL", config["REDIS_URL"], ("redis", "rediss", "unix")),
        _url_problem("REALTIME_REDIS_URL", config["REALTIME_REDIS_URL"], ("redis", "rediss", "unix")),
        _url_problem("BASE_URL", config["BASE_URL"], ("http", "https")),
        _url_problem("SMTP_URL", config["SMTP_URL"], ("smtp", "smtps")),
        _url_problem("SMTP_FALLBACK_URL", config["SMTP_FALLBACK_URL"], ("smtp", "smtps"), optional=True),
        _url_problem(
            "OTEL_EXPORTER_OTLP_ENDPOINT", config["OTEL_EXPORTER_OTLP_ENDPOINT"], ("http", "https"), optional=True
        ),
    ]
    if "," in urlsplit(config["REALTIME_REDIS_URL"]).netloc and not config["REALTIME_REDIS_CLUSTER"]:
        problems.append(
            "REALTIME_REDIS_URL names several hosts: only a Redis Cluster (REALTIME_REDIS_CLUSTER) takes more"
        )
    for origin in config["WS_ALLOWED_ORIGINS"]:
        problems.append(_url_problem("WS_ALLOWED_ORIGINS", origin, ("http", "https")))
    for origin in config["FEED_ALLOWED_ORIGINS"]:
        problems.append(_url_problem("FEED_ALLOWED_ORIGINS", origin, ("http", "https")))
    for url in config["DATABASE_REPLICA_URLS"]:
        problems.append(_url_problem("DATABASE_REPLICA_URLS", url, ("postgresql", "postgres")))
    if not NAMESPACE_PATTERN.match(config["REDIS_NAMESPACE"]):
        problems.append(f"REDIS_NAMESPACE={config['REDIS_NAMESPACE']!r} must be 1-64 letters, digits, '_', '.' or '-'")
    if not config["VAPID_SUBJECT"].startswith(("mailto:", "https://")):
        problems.append(f"VAPID_SUBJECT={config['VAPID_SUBJECT']!r} must start with mailto: or https://")
    try:
        ZoneInfo(config["DEFAULT_TIMEZONE"])
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"DEFAULT_TIMEZONE={config['DEFAULT_TIMEZONE']!r} is not an IANA time zone (e.g. Asia/Tokyo)")
    if config["DEFAULT_PHONE_REGION"] not in _phone_regions():
        problems.append(f"DEFAULT_PHONE_REGION={config['DEFAULT_PHONE_REGION']!r} is not a region phone numbers know "
                        "(an ISO 3166 code in capitals, e.g. JP or US)")  # fmt: skip
    for name in ("MAIL_FROM", "DEFAULT_LOCALE", "EMAIL_PROVIDER", "PUSH_PROVIDER"):
        if not str(config[name]).strip():
            problems.append(f"{name} is empty")
    if config["BADGE_COUNTS"] not in ("unread", "unseen"):
        problems.append(f"BADGE_COUNTS={config['BADGE_COUNTS']!r} must be unread or unseen")
    if config.get("METRICS_TOKEN") and len(config["METRICS_TOKEN"]) < 16:
        problems.append("METRICS_TOKEN is shorter than 16 characters: use a random token")
    problems += _hook_problems(config)
    problems += _apns_problems(config)
    problems += _fcm_problems(config)
    problems += _twilio_problems(config)
    problems += _vonage_problems(config)
    if not config["SMS_HELP_TEXT"].strip() or len(config["SMS_HELP_TEXT"]) > SMS_HELP_TEXT_MAX:
        problems.append(f"SMS_HELP_TEXT must be a text of 1 to {SMS_HELP_TEXT_MAX} characters (the answer to HELP)")
    problems += _chat_problems(config)
    problems += _oidc_problems(config)
    return [p for p in problems if p]


def load_p256_public_key(text: str):
    """SendGrid's verification key (base64 DER SubjectPublicKeyInfo, or PEM) as an EC P-256 key; None if not one."""
    from base64 import b64decode
    from binascii import Error as Base64Error

    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = load_pem_public_key(text.encode())
        else:
            key = load_der_public_key(b64decode("".join(text.split()), validate=True))
    except (ValueError, TypeError, Base64Error, UnsupportedAlgorithm):
        return None
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        return None
    return key


def load_p256_private_key(path: str):
    """The EC P-256 private key in the PEM file at path (an APNs .p8 key); raises ValueError saying what is wrong."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        with open(path, "rb") as file:
            data = file.read(64 * 1024)
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc.strerror or exc})") from exc
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ValueError("is not an unencrypted PEM private key (the .p8 file Apple gives you)") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError("is not an EC P-256 key (APNs signs its tokens with ES256)")
    return key


def is_loopback_host(host: str | None) -> bool:
    """Whether host names this machine (localhost, 127.0.0.0/8, ::1): where plain http:// is acceptable."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _apns_problems(config: Mapping) -> list[str]:
    """APNs: an https endpoint (http for loopback only), and with a key file, a usable key and its ids."""
    problems = []
    endpoint = config["APNS_ENDPOINT"]
    parts = urlsplit(endpoint)
    allowed = parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.hostname))
    if not (allowed and parts.hostname):
        problems.append(
            f"APNS_ENDPOINT={endpoint!r} is not an https:// URL (http:// is accepted only for a loopback host: "
            "127.0.0.1, ::1, localhost)"
        )
    if config["APNS_CA_FILE"] and not os.path.isfile(config["APNS_CA_FILE"]):
        problems.append(f"APNS_CA_FILE={config['APNS_CA_FILE']!r} is not a file (a PEM bundle of CA certificates)")
    if not config["APNS_KEY_FILE"]:
        return problems
    try:
        load_p256_private_key(config["APNS_KEY_FILE"])
    except ValueError as exc:
        problems.append(f"APNS_KEY_FILE={config['APNS_KEY_FILE']!r} {exc}")
    missing = [name for name in ("APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC") if not str(config[name]).strip()]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        problems.append(f"APNS_KEY_FILE is set but {', '.join(missing)} {verb} not: APNs needs all of them")
    return problems


def _hook_problems(config: Mapping) -> list[str]:
    """The provider webhook keys: a SendGrid key that is an ECDSA P-256 public key, Postmark's pair complete."""
    problems = []
    if config.get("SENDGRID_WEBHOOK_PUBLIC_KEY"):
        if load_p256_public_key(config["SENDGRID_WEBHOOK_PUBLIC_KEY"]) is None:
            problems.append(
                "SENDGRID_WEBHOOK_PUBLIC_KEY is not an ECDSA P-256 public key (paste the verification key "
                "SendGrid shows: base64 DER, or PEM)"
            )
    user, password = config["POSTMARK_WEBHOOK_USER"], config["POSTMARK_WEBHOOK_PASSWORD"]
    if bool(user) != bool(password):
        problems.append("POSTMARK_WEBHOOK_USER and POSTMARK_WEBHOOK_PASSWORD go together: set both or neither")
    elif password and len(password) < 16:
        problems.append("POSTMARK_WEBHOOK_PASSWORD is shorter than 16 characters: use a random password")
    if config.get("MAILGUN_WEBHOOK_SIGNING_KEY") and len(config["MAILGUN_WEBHOOK_SIGNING_KEY"]) < 16:
        problems.append("MAILGUN_WEBHOOK_SIGNING_KEY is shorter than 16 characters: paste the whole signing key")
    return problems


def _https_problem(name: str, value: str) -> str | None:
    parts = urlsplit(value)
    if parts.hostname and (parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)):
        return None
    return f"{name}={value!r} is not an https:// URL (http:// only on 127.0.0.1, ::1 or localhost)"


def _twilio_problems(config: Mapping) -> list[str]:
    """Twilio: an https origin, and the SID, the token and a sender together."""
    if not (config["TWILIO_ACCOUNT_SID"] or config["TWILIO_AUTH_TOKEN"]):
        return []
    problems = [_https_problem("TWILIO_API_BASE", config["TWILIO_API_BASE"])]
    if not (config["TWILIO_ACCOUNT_SID"] and config["TWILIO_AUTH_TOKEN"]):
        problems.append("TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN go together: set both or neither")
    elif not (config["TWILIO_FROM"] or config["TWILIO_MESSAGING_SERVICE_SID"]):
        problems.append("Twilio needs a sender: TWILIO_FROM (a number of the account) or TWILIO_MESSAGING_SERVICE_SID")
    return problems


def _vonage_problems(config: Mapping) -> list[str]:
    """Vonage: an https origin, and the application's key file readable (or an API key with its secret)."""
    if not config["VONAGE_FROM"]:
        return []
    problems = [_https_problem("VONAGE_API_BASE", config["VONAGE_API_BASE"])]
    if bool(config["VONAGE_APPLICATION_ID"]) != bool(config["VONAGE_PRIVATE_KEY_FILE"]):
        problems.append("VONAGE_APPLICATION_ID and VONAGE_PRIVATE_KEY_FILE go together: set both or neither")
    elif config["VONAGE_PRIVATE_KEY_FILE"] and not os.path.isfile(config["VONAGE_PRIVATE_KEY_FILE"]):
        problems.append(f"VONAGE_PRIVATE_KEY_FILE={config['VONAGE_PRIVATE_KEY_FILE']!r} is not a file")
    if bool(config["VONAGE_API_KEY"]) != bool(config["VONAGE_API_SECRET"]):
        problems.append("VONAGE_API_KEY and VONAGE_API_SECRET go together: set both or neither")
    return problems


def _chat_problems(config: Mapping) -> list[str]:
    """Chat: known provider names, https origins, LINE's token when LINE is on, a readable CA file."""
    names = [name.strip() for name in str(config["CHAT_PROVIDER"]).split(",") if name.strip()]
    problems = [f"CHAT_PROVIDER={config['CHAT_PROVIDER']!r}: no chat provider called {name} (known: "
                f"{', '.join(CHAT_PROVIDERS)})" for name in names if name not in CHAT_PROVIDERS]  # fmt: skip
    if not names:
        return problems
    problems.append(_https_problem("SLACK_API_BASE", config["SLACK_API_BASE"]))
    problems.append(_https_problem("LINE_API_BASE", config["LINE_API_BASE"]))
    if "line" in names and not config["LINE_CHANNEL_ACCESS_TOKEN"]:
        problems.append("CHAT_PROVIDER names line but LINE_CHANNEL_ACCESS_TOKEN is empty (LINE Developers console → "
                        "the channel → Messaging API → Channel access token)")  # fmt: skip
    if config["SLACK_BOT_TOKEN"] and not config["SLACK_BOT_TOKEN"].startswith("xoxb-"):
        problems.append("SLACK_BOT_TOKEN is not a bot token (xoxb-…): OAuth & Permissions → Bot User OAuth Token")
    if config["CHAT_WEBHOOK_CA_FILE"] and not os.path.isfile(config["CHAT_WEBHOOK_CA_FILE"]):
        problems.append(f"CHAT_WEBHOOK_CA_FILE={config['CHAT_WEBHOOK_CA_FILE']!r} is not a file")
    if not [host for host in str(config["CHAT_ALLOWED_HOSTS"]).split(",") if host.strip()]:
        problems.append("CHAT_ALLOWED_HOSTS is empty: no webhook_url could be set")
    return problems


def _oidc_problems(config: Mapping) -> list[str]:
    """OIDC: an https issuer (http on loopback only) with its client id and secret; only-staff needs an issuer."""
    issuer = config["OIDC_ISSUER"]
    if not issuer:
        if config["OIDC_ONLY_STAFF"]:
            return ["OIDC_ONLY_STAFF is on but OIDC_ISSUER is empty: staff could not sign in at all"]
        return []
    problems = [_https_problem("OIDC_ISSUER", issuer)]
    if not (config["OIDC_CLIENT_ID"] and config["OIDC_CLIENT_SECRET"]):
        problems.append("OIDC_ISSUER is set but OIDC_CLIENT_ID or OIDC_CLIENT_SECRET is not: the provider gives both "
                        "when Hato is registered as a web application")  # fmt: skip
    if "openid" not in str(config["OIDC_SCOPES"]).split():
        problems.append(f"OIDC_SCOPES={config['OIDC_SCOPES']!r} must include openid")
    if not str(config["OIDC_ROLE_CLAIM"]).strip():
        problems.append("OIDC_ROLE_CLAIM is empty: name the claim that carries the groups or roles (e.g. groups)")
    return problems


def _fcm_problems(config: Mapping) -> list[str]:
    """FCM: an https origin, and a readable service-account key with what the token request needs."""
    problems = [_https_problem("FCM_API_BASE", config["FCM_API_BASE"])]
    path = config["FCM_CREDENTIALS_FILE"]
    if not path:
        return problems
    if config["FCM_CA_FILE"] and not os.path.isfile(config["FCM_CA_FILE"]):
        problems.append(f"FCM_CA_FILE={config['FCM_CA_FILE']!r} is not a file")
    try:
        with open(path, encoding="utf-8") as file:
            info = json.load(file)
    except OSError as exc:
        return [*problems, f"FCM_CREDENTIALS_FILE={path!r} cannot be read: {exc.strerror or exc}"]
    except ValueError:
        return [*problems, f"FCM_CREDENTIALS_FILE={path!r} is not JSON: download the key again"]
    if not isinstance(info, dict) or info.get("type") != "service_account":
        return [*problems, f"FCM_CREDENTIALS_FILE={path!r} is not a service-account key (type service_account): "
                           "Firebase console → Project settings → Service accounts → Generate new private key"]  # fmt: skip
    missing = [key for key in SERVICE_ACCOUNT_KEYS if not isinstance(info.get(key), str) or not info[key].strip()]
    if missing:
        return [*problems, f"FCM_CREDENTIALS_FILE={path!r} has no {', '.join(missing)}: download the key again"]
    if not _is_private_key(info["private_key"]):
        problems.append(f"FCM_CREDENTIALS_FILE={path!r}: its private_key is not a PEM private key")
    problems.append(_https_problem(f"token_uri in FCM_CREDENTIALS_FILE={path!r}", info["token_uri"]))
    lease, margin = config["DELIVERY_LEASE_SECONDS"], config["LEASE_MARGIN_SECONDS"]
    # A batch starts no push that could outlast its lease, so it needs more than one FCM request's time.
    if margin < lease <= margin + config["FCM_TIMEOUT"]:  # at or below the margin: reported on its own
        problems.append(
            f"DELIVERY_LEASE_SECONDS={_num(lease)} leaves {_num(lease - margin)} s per batch after LEASE_MARGIN_SECONDS, "
            f"less than one FCM request may take (FCM_TIMEOUT={_num(config['FCM_TIMEOUT'])}): a row could be sent twice"
        )
    return problems


def _phone_regions() -> frozenset[str]:
    import phonenumbers

    return frozenset(phonenumbers.SUPPORTED_REGIONS)


def _is_private_key(pem: str) -> bool:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        return False
    return True


def _combination_problems(config: Mapping) -> list[str]:
    problems = []
    lease, margin = config["DELIVERY_LEASE_SECONDS"], config["LEASE_MARGIN_SECONDS"]
    if lease <= margin:
        problems.append(
            f"DELIVERY_LEASE_SECONDS={_num(lease)} must be more than LEASE_MARGIN_SECONDS={_num(margin)}: a worker "
            "stops sending that long before its lease ends, so every batch would release all its rows unsent"
        )
    else:
        # One send must fit in what the lease leaves, or the sweeper may hand a row still being sent to
        # another worker. Push counts only when it is configured.
        timeouts = {"SMTP_TIMEOUT": config["SMTP_TIMEOUT"]}
        if config["VAPID_PRIVATE_KEY"]:
            timeouts["PUSH_TIMEOUT"] = config["PUSH_TIMEOUT"]
        if config["APNS_KEY_FILE"]:
            timeouts["APNS_TIMEOUT"] = config["APNS_TIMEOUT"]
        if config["CHAT_PROVIDER"]:
            timeouts["CHAT_TIMEOUT"] = config["CHAT_TIMEOUT"]
        name, slowest = max(timeouts.items(), key=lambda item: item[1])
        # A push batch starts no row that could outlast the lease: it needs more than the slowest push's time.
        if lease - margin < slowest or (name != "SMTP_TIMEOUT" and lease - margin <= slowest):
            problems.append(
                f"DELIVERY_LEASE_SECONDS={_num(lease)} leaves {_num(lease - margin)} s per batch after "
                f"LEASE_MARGIN_SECONDS, less than one send may take ({name}={_num(slowest)}): a row could be sent twice"
            )
    if config["RETRY_BASE_SECONDS"] > config["RETRY_CAP_SECONDS"]:
        problems.append("RETRY_BASE_SECONDS is larger than RETRY_CAP_SECONDS: the first retry would wait past the cap")
    if bool(config["VAPID_PUBLIC_KEY"]) != bool(config["VAPID_PRIVATE_KEY"]):
        problems.append("VAPID_PUBLIC_KEY and VAPID_PRIVATE_KEY go together: set both or neither")
    if config["SMTP_FALLBACK_URL"] and config["SMTP_FALLBACK_URL"] == config["SMTP_URL"]:
        problems.append("SMTP_FALLBACK_URL is the same server as SMTP_URL: failover would go nowhere")
    return problems


def check(config: Mapping, providers: Iterable[str] = ()) -> list[str]:
    """Return every reason these settings cannot run (empty when they can).

    providers: the registered provider names to check EMAIL_PROVIDER / PUSH_PROVIDER against; the
    caller passes them because config sits below the providers layer.
    """
    problems = list(config["CONFIG_PROBLEMS"])
    problems += _secret_problems(config)
    problems += _range_problems(config)
    problems += _value_problems(config)
    problems += _combination_problems(config)
    known = sorted(providers)
    for key in ("EMAIL_PROVIDER", "PUSH_PROVIDER", "SMS_PROVIDER"):
        unknown = [n.strip() for n in str(config[key]).split(",") if n.strip() and n.strip() not in known]
        if known and unknown:
            problems.append(
                f"{key}={config[key]!r}: no provider called {', '.join(unknown)}; known: {', '.join(known)}"
            )
    return problems


def refuse_to_start(problems: list[str], write: Callable[[str], object]) -> None:
    """Write the refusal, one problem per line."""
    write("Hato is refusing to start: it cannot work as it is set up.\n")
    for problem in problems:
        write(f"  - {problem}\n")
    write("Fix these (docs/configuration.md, docs/production.md) and start it again.\n")
