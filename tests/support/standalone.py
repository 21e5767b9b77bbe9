"""A stand-in run on its own (`make run`, benchmarks): its common arguments, settings.json, serving until stopped.

Every stand-in takes --host, --port (0: a free one), --dir (what it keeps across restarts) and --quiet, writes
the settings that reach it to <dir>/settings.json once it serves (a supervisor that removed the old file
waits for the new one), and serves until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
from collections.abc import Mapping
from pathlib import Path

SETTINGS_FILE = "settings.json"


def parser(module: str, description: str, keeps: str) -> argparse.ArgumentParser:
    """The arguments every stand-in takes; `keeps` says what --dir holds besides settings.json."""
    found = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    found.add_argument("--host", default="127.0.0.1")
    found.add_argument("--port", type=int, default=0, help="0: a free one (settings.json names it)")
    found.add_argument("--dir", type=Path, required=True, help=f"{keeps} and settings.json")
    found.add_argument("--quiet", action="store_true", help="no line per request")
    return found


def directory(args: argparse.Namespace) -> Path:
    """--dir, made if it is not there yet."""
    found = args.dir.resolve()
    found.mkdir(parents=True, exist_ok=True)
    return found


def write_json(path: Path, data: Mapping | list) -> None:
    """Write data to path at once (a reader never sees half a file)."""
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(partial, path)


def serve(where: Path, settings: Mapping, banner: str) -> None:
    """Publish settings in where/settings.json, say banner, and block until SIGTERM or Ctrl-C."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    write_json(where / SETTINGS_FILE, {name: str(value) for name, value in settings.items()})
    print(f"{banner}; settings in {where / SETTINGS_FILE}", flush=True)
    while not stop.wait(0.5):
        pass
