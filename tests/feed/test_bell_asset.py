"""static/embed/hato-bell.js: small enough to embed, served by Hato, no build step and no global names."""

from __future__ import annotations

from pathlib import Path

BELL = Path(__file__).resolve().parents[2] / "static" / "embed" / "hato-bell.js"


def test_the_bell_is_under_25_kb_even_before_minification():
    # Unminified, comments included (terser -c -m: about 13 KB; gzipped about 5.5 KB).
    assert BELL.stat().st_size < 25_000


def test_it_is_one_function_scope_that_defines_the_element_once():
    text = BELL.read_text()
    body = text[text.index("(() => {") :]
    assert body.rstrip().endswith("})();")
    assert 'customElements.define("hato-bell"' in text and "customElements.get(" in text
    assert "attachShadow" in text and "innerHTML = `<style>" in text  # styles live in the shadow root only


def test_it_never_puts_the_token_in_a_url():
    text = BELL.read_text()
    assert "?token" not in text and "&token" not in text
    assert 'JSON.stringify({ type: "auth", token' in text


def test_hato_serves_it_as_javascript(client):
    response = client.get("/static/embed/hato-bell.js")
    assert response.status_code == 200
    assert response.mimetype in ("text/javascript", "application/javascript")
