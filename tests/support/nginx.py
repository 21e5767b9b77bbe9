"""deploy/nginx/hato.conf run by a real nginx in front of local web processes (tests/e2e/test_behind_nginx.py).

The site file is the one docs/production.md installs; only its addresses and certificate
paths are swapped for the test's, and each swap must match exactly once, so an edit to the file that
the test no longer exercises fails loudly instead of passing on a stale copy.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support.processes import ROOT

SITE = ROOT / "deploy" / "nginx" / "hato.conf"
NGINX = "/usr/sbin/nginx"
PRODUCTION_UPSTREAMS = "    server 127.0.0.1:8000;\n    server 127.0.0.1:8001;\n"
PRODUCTION_CERTIFICATE = "/etc/letsencrypt/live/notify.example.com/fullchain.pem"
PRODUCTION_KEY = "/etc/letsencrypt/live/notify.example.com/privkey.pem"


def ensure_nginx() -> str:
    """Return nginx's path, installing Debian's package when it is missing and we may (make test does too)."""
    if not Path(NGINX).exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y", "-q", "nginx"], env=env, check=False, capture_output=True)
    if not Path(NGINX).exists():
        raise RuntimeError("nginx is not installed: `sudo apt-get install -y nginx` (make test installs it as root)")
    return NGINX


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A one-day certificate for 127.0.0.1 made with openssl; return (certificate, key)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def site_for(upstream_ports: list[int], https_port: int, http_port: int, cert: Path, key: Path) -> str:
    """deploy/nginx/hato.conf with the test's upstreams, listening addresses and certificate."""
    text = SITE.read_text(encoding="utf-8")
    swaps = {
        PRODUCTION_UPSTREAMS: "".join(f"    server 127.0.0.1:{port};\n" for port in upstream_ports),
        "listen 80;": f"listen 127.0.0.1:{http_port};",
        "listen 443 ssl;": f"listen 127.0.0.1:{https_port} ssl;",
        PRODUCTION_CERTIFICATE: str(cert),
        PRODUCTION_KEY: str(key),
    }
    for production, test in swaps.items():
        if text.count(production) != 1:
            raise AssertionError(f"deploy/nginx/hato.conf no longer has exactly one {production!r}")
        text = text.replace(production, test)
    return text


class Nginx:
    """One nginx in the foreground, its own prefix directory, serving the site on 127.0.0.1 only."""

    def __init__(self, directory: Path, site: str, ports: tuple[int, ...]) -> None:
        self.directory = directory
        self.site = site
        self.ports = ports
        self.proc: subprocess.Popen | None = None

    def _main_config(self) -> str:
        d = self.directory
        temp_paths = "".join(
            f"    {kind}_temp_path {d / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        return (
            ("user root;\n" if os.geteuid() == 0 else "")  # workers must reach the test's files
            + f"worker_processes 1;\npid {d / 'nginx.pid'};\nerror_log {d / 'error.log'} warn;\n"
            + "events { worker_connections 1024; }\n"
            + "http {\n    include /etc/nginx/mime.types;\n"
            + f"    access_log {d / 'access.log'};\n{temp_paths}"
            + f"    include {d / 'hato.conf'};\n}}\n"
        )

    def start(self, timeout: float = 15) -> Nginx:
        """Write the configuration, check it with `nginx -t`, start nginx and wait until it listens."""
        (self.directory / "hato.conf").write_text(self.site, encoding="utf-8")
        config = self.directory / "nginx.conf"
        config.write_text(self._main_config(), encoding="utf-8")
        command = [
            ensure_nginx(),
            "-p",
            str(self.directory),
            "-c",
            str(config),
            "-e",
            str(self.directory / "error.log"),
        ]
        subprocess.run([*command, "-t", "-q"], check=True, capture_output=True)
        log = open(self.directory / "nginx.out", "ab")
        self.proc = subprocess.Popen(
            [*command, "-g", "daemon off;"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        for port in self.ports:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"nginx exited: {(self.directory / 'error.log').read_text()}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        return self

    def stop(self) -> None:
        """Stop nginx and its worker (SIGQUIT: graceful; SIGKILL if it lingers)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
