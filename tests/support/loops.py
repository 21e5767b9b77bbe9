"""Running a coroutine from a test, whatever else the test's thread is running."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor


def run(coroutine: Coroutine):
    """asyncio.run() in a thread of its own: the browser tests' sync Playwright leaves an event loop running in the
    main thread of a pytest worker, and asyncio.run() refuses to start inside one."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-loop") as pool:
        return pool.submit(asyncio.run, coroutine).result()
