"""Problem documents in the caller's language (Accept-Language), machine-readable members unchanged."""

from __future__ import annotations

from flask_babel import force_locale

from app.web.errors import MESSAGES
from tests.api.conftest import send_body

JA = {"Accept-Language": "ja"}


def _title(status: int, language: str) -> str:
    with force_locale(language):
        return str(MESSAGES[status])


def test_invalid_fields_in_japanese_keep_type_status_and_field_names(api, comment_type, recipient):
    body = send_body(recipient.external_id, title="", link="https://evil.example/", extra="x")
    english = api.post("/v1/notifications", json=body).get_json()
    japanese = api.post("/v1/notifications", json=body, headers=JA).get_json()

    assert english["detail"] == "Some fields are missing or invalid."
    assert japanese["detail"] == "不足している項目か、正しくない項目があります。"
    assert (japanese["type"], japanese["status"]) == (english["type"], english["status"]) == ("about:blank", 422)
    assert japanese["title"] == _title(422, "ja") and english["title"] == "The request could not be processed."
    assert japanese["title"] != english["title"]
    # the same fields, in the same order; only the sentences change
    assert [e["field"] for e in japanese["errors"]] == [e["field"] for e in english["errors"]]
    messages = {e["field"]: e["message"] for e in japanese["errors"]}
    assert messages["title"] == "1文字以上にしてください"
    assert messages["link"] == "/orders/42 のような、このサイト内の相対パスにしてください"
    assert messages["extra"] == "この項目は受け付けていません"
    english_messages = {e["field"]: e["message"] for e in english["errors"]}
    assert english_messages["title"] == "String should have at least 1 character"  # pydantic's own words
    assert english_messages["extra"] == "Extra inputs are not permitted"


def test_unknown_type_and_recipients_in_japanese(api, comment_type, recipient):
    response = api.post("/v1/notifications", json=send_body(recipient.external_id, type="nope"), headers=JA)
    problem = response.get_json()
    assert response.status_code == 422 and problem["type"] == "about:blank"
    assert problem["detail"] == "何も送信していません。通知の種類 'nope' が不明です。"
    assert problem["errors"] == [{"field": "type", "message": "通知の種類 'nope' はありません"}]

    both = api.post("/v1/notifications", json=send_body("nobody-1", "nobody-2", type="nope"), headers=JA).get_json()
    assert both["detail"] == "何も送信していません。通知の種類 'nope' が不明で、受信者2人が不明です。"
    assert [e["field"] for e in both["errors"]] == ["type", "recipients"]

    response = api.post("/v1/notifications", json=send_body(recipient.external_id, "nobody-1"), headers=JA)
    problem = response.get_json()
    assert problem["detail"] == "何も送信していません。受信者1人が不明です。"
    assert problem["unknown_recipients"] == ["nobody-1"] and problem["errors"][0]["field"] == "recipients"

    english = api.post("/v1/notifications", json=send_body(recipient.external_id, "nobody-1", "nobody-2")).get_json()
    assert english["detail"] == "Nothing was sent: 2 unknown recipients."


def test_missing_key_in_japanese_keeps_the_challenge(client):
    response = client.get("/v1/notifications/1", headers={"Accept-Language": "fr, ja;q=0.8, en;q=0.5"})
    problem = response.get_json()
    assert response.status_code == 401 and response.mimetype == "application/problem+json"
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="hato"'
    assert problem["detail"] == "有効な APIキーを `Authorization: Bearer hato_…` の形で送ってください。"
    assert problem["title"] == _title(401, "ja")


def test_insufficient_scope_in_japanese_keeps_type_and_scope(client):
    from app.api_keys.service import create_api_key

    key = create_api_key(None, "read only", ["notifications:read"])
    response = client.put("/v1/users/u-1", json={"display_name": "x"}, headers={"Authorization": f"Bearer {key}", **JA})
    problem = response.get_json()
    assert response.status_code == 403
    assert problem["type"] == "urn:hato:problem:insufficient_scope" and problem["scope"] == "users:write"
    assert problem["title"] == "スコープが足りません"
    assert "'users:write'" in problem["detail"] and "管理コンソール" in problem["detail"]


def test_unknown_user_in_japanese_and_english(api):
    assert api.get("/v1/users/nobody/counts", headers=JA).get_json()["detail"] == "この外部 ID のユーザーはいません。"
    assert api.get("/v1/users/nobody/counts").get_json()["detail"] == "There is no user with this external id."


def test_openapi_document_stays_english(client):
    english = client.get("/v1/openapi.json").get_json()
    japanese = client.get("/v1/openapi.json", headers=JA).get_json()
    assert japanese == english
    responses = japanese["paths"]["/v1/notifications"]["post"]["responses"]
    assert responses["422"]["description"] == "The request could not be processed."
