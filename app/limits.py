"""How large each thing people type or send may be: one place, so the API, the console and the jobs agree.

Request sizes as a whole are settings (MAX_CONTENT_LENGTH for forms, API_MAX_BODY_BYTES for the API);
these are the sizes of the fields inside them. Messages quote them, so an error names the real limit.
"""

from __future__ import annotations

LINK_MAX = 2_000  # a link (a path on the product's site)
TITLE_MAX = 200  # a notification's, announcement's or campaign's title; a type's label; a toast
NOTIFICATION_BODY_MAX = 5_000  # a notification's body from the API
# Bodies an operator writes in the console (announcements, campaigns) may be longer than an API body.
OPERATOR_BODY_MAX = 20_000
NAME_MAX = 200  # a campaign's name, a user's display name
DESCRIPTION_MAX = 2_000  # a notification type's description
REASON_MAX = 200  # why an operator discarded a delivery
TYPE_KEY_MAX = 63
EXTERNAL_ID_MAX = 255  # the product's id for a user
DEDUPE_KEY_MAX = 255
EMAIL_MAX = 320
LOCALE_MAX = 35
ACTION_LABEL_MAX = 40  # an action button's label (fits a button at 375 px, and a push action's title)
ACTION_NAME_MAX = 40  # a named action ("approve"), a slug
ACTION_STATE_MAX = 60  # the state a product answers a named action with ("Approved")
ACTIONS_MAX = 2  # action buttons per notification (Web Push shows two on most platforms)
DEVICE_TOKEN_MAX = 4_096  # an APNs token is 64 hex characters today, an FCM token ~160; both may grow
APP_ID_MAX = 255  # an iOS bundle id or an Android package name
APP_VERSION_MAX = 64
DATA_KEY_MAX = 100  # a key of a notification's data
DATA_TEXT_MAX = 10_000  # a text value in a notification's data
DATA_MAX_BYTES = 10_000  # a campaign's data as JSON
PROPERTIES_MAX_BYTES = 4_096  # a member's properties as JSON (PUT /v1/users): workflow conditions read them
TEMPLATE_MAX = 100_000  # one part of a message template
TEMPLATE_SUBJECT_MAX = 2_000
SAMPLE_MAX = 20_000  # the template editor's sample data
RENDERED_MAX = 256 * 1024  # what one template may render to (more is a mistake or an attack)
API_KEY_NAME_MAX = 100
PASSWORD_MAX = 1_024  # what a sign-in form accepts (scrypt hashes any length; this bounds the work)
FILTER_TEXT_MAX = 100  # a free-text console filter (error kind, provider, action)
ERROR_TEXT_MAX = 2_000  # an error kept with a row (a provider's answer, a job's exception)

# An e-mail address: RFC 5322 dot-atom @ a dotted host name (ASCII). A syntax check only: intranet domains such as
# corp.local are fine for a self-hosted service, and a dead address bounces into the suppression list. (Here, with
# the sizes, so the API and the domain rules that check an address, such as a tenant's reply-to, share it.)
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
EMAIL_PATTERN = rf"^{_ATEXT}(\.{_ATEXT})*@{_LABEL}(\.{_LABEL})+$"
TENANT_KEY_MAX = 100  # a tenant's key (the product's id for its customer)
SENDER_NAME_MAX = 64  # a tenant's e-mail sender name (the From header's display name)
