"""The APNs and FCM stand-ins run on their own as `make run` runs them: settings.json, pushes, SIGTERM, kept keys."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.providers.apns import ApnsProvider, close_connections
from app.providers.base import Message
from app.providers.fcm import FcmProvider
from app.providers.fcm_transport import FcmSettings, close_transports
from app.providers.mobile import DeviceTarget, MobileAlert, MobilePush
from tests.support.apns_server import device_token
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PUSH = MobilePush(alerts={"": MobileAlert("Reservation #331 was approved", "Open it to see the details.")})


def _serve(module: str, directory: Path, *args: str) -> tuple[subprocess.Popen, dict]:
    """Start the stand-in on a free port; return it and the settings it wrote once it listens."""
    settings_file = directory / "settings.json"
    settings_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", module, "--port", "0", "--dir", str(directory), *args]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: settings_file.exists() or proc.poll() is not None, 30, f"{module} to write settings.json")
    assert proc.poll() is None, proc.stdout.read()
    return proc, json.loads(settings_file.read_text())


def _stop(proc: subprocess.Popen) -> str:
    """SIGTERM it; it exits 0 at once. Its output."""
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0, output
    return output


def _message(target: DeviceTarget) -> Message:
    return Message(delivery_id=1, channel="push", to="user:1", subject="", text="", targets=(target,), mobile=PUSH)


@pytest.fixture
def _closed_clients():
    yield
    close_connections()
    close_transports()


@pytest.mark.usefixtures("_closed_clients")
def test_apns_stand_in_serves_until_sigterm_and_keeps_its_key_and_ca(tmp_path):
    directory, token = tmp_path / "apns", device_token()
    proc, settings = _serve("tests.support.apns_server", directory, "--topic", "org.example.demo")
    try:
        assert settings["APNS_TOPIC"] == "org.example.demo" and settings["APNS_ENDPOINT"].startswith("https://")
        assert Path(settings["APNS_KEY_FILE"]).stat().st_mode & 0o077 == 0  # the .p8 key is the owner's only
        names = ("APNS_KEY_FILE", "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC", "APNS_ENDPOINT", "APNS_CA_FILE")
        receipt = ApnsProvider(*(settings[name] for name in names)).send(_message(DeviceTarget(1, "ios", token)))
        assert receipt.reached == (token,)
    finally:
        output = _stop(proc)
    assert f"200 alert push to …{token[-8:]} (org.example.demo): 'Reservation #331 was approved'" in output
    assert token not in output  # a phone's token is never printed whole
    kept = {name: Path(settings[name]).read_bytes() for name in ("APNS_KEY_FILE", "APNS_CA_FILE")}

    close_connections()
    proc, again = _serve("tests.support.apns_server", directory, "--topic", "org.example.demo")
    try:
        assert {name: Path(again[name]).read_bytes() for name in kept} == kept
        receipt = ApnsProvider(*(again[name] for name in names)).send(_message(DeviceTarget(1, "ios", token)))
        assert receipt.reached == (token,)
    finally:
        _stop(proc)


@pytest.mark.usefixtures("_closed_clients")
def test_fcm_stand_in_serves_until_sigterm_and_keeps_its_key_and_ca(tmp_path):
    directory, token = tmp_path / "fcm", "phone-1:APA91b" + "x" * 40

    def send(settings: dict) -> tuple:
        fcm = FcmSettings(credentials_file=settings["FCM_CREDENTIALS_FILE"], api_base=settings["FCM_API_BASE"],
                          ca_file=settings["FCM_CA_FILE"], concurrency=2, timeout=5.0)  # fmt: skip
        with FcmProvider(fcm, retry_cap=600.0) as provider:
            return provider.send(_message(DeviceTarget(2, "android", token))).reached

    proc, settings = _serve("tests.support.fcm_server", directory, "--project", "hato-demo")
    try:
        key = json.loads(Path(settings["FCM_CREDENTIALS_FILE"]).read_text())
        assert key["project_id"] == "hato-demo" and key["token_uri"] == settings["FCM_API_BASE"] + "/token"
        assert send(settings) == (token,)
    finally:
        output = _stop(proc)
    assert f"200 send to …{token[-8:]}: 'Reservation #331 was approved'" in output and token not in output
    kept = {name: Path(settings[name]).read_bytes() for name in ("FCM_CA_FILE",)}

    close_transports()
    proc, again = _serve("tests.support.fcm_server", directory)  # a new port: the kept key's token_uri follows it
    try:
        assert {name: Path(again[name]).read_bytes() for name in kept} == kept
        moved = json.loads(Path(again["FCM_CREDENTIALS_FILE"]).read_text())
        assert (
            moved["private_key_id"] == key["private_key_id"] and moved["token_uri"] == again["FCM_API_BASE"] + "/token"
        )
        assert send(again) == (token,)
    finally:
        _stop(proc)
