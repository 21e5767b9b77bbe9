"""`flask vapid generate`: a usable P-256 pair, printed and written to a private file."""

from __future__ import annotations

from click.testing import CliRunner
from py_vapid import Vapid

from app.cli.vapid import generate_command


def test_vapid_generate_prints_and_writes_a_usable_pair(app, tmp_path):
    out = tmp_path / "vapid.env"
    result = CliRunner().invoke(generate_command, ["--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert set(lines) == {"VAPID_PUBLIC_KEY", "VAPID_PRIVATE_KEY"}
    assert out.read_text() == result.stdout and oct(out.stat().st_mode & 0o777) == "0o600"
    signed = Vapid.from_string(lines["VAPID_PRIVATE_KEY"]).sign({"sub": "mailto:a@b.c", "aud": "https://p.test"})
    assert f"k={lines['VAPID_PUBLIC_KEY']}" in signed["Authorization"]
    again = CliRunner().invoke(generate_command, ["--out", str(out)])
    assert again.exit_code != 0 and "refusing" in again.output
