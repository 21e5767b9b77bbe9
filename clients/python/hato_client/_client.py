"""Hato (sync) and AsyncHato (async): every /v1 operation (generated in _operations.py) over one httpx client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from hato_client import errors
from hato_client._base import Base, Retry, decode, new_idempotency_key, raise_for_problem
from hato_client._operations import AsyncOperations, SyncOperations

__all__ = ["AsyncHato", "Hato", "Retry"]


class Hato(Base, SyncOperations):
    """The sync client: `Hato(base_url, api_key)` for /v1, `Hato(base_url, user_token=…)` for /v1/feed."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        user_token: str | None = None,
        retry: Retry | None = None,
        timeout: float = 10.0,
        accept_language: str | None = None,
        headers: dict[str, str] | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        """Pass api_key or user_token; `http` is your own httpx client (then closing it is yours too)."""
        super().__init__(base_url, api_key, user_token=user_token, retry=retry, timeout=timeout,
                         accept_language=accept_language, headers=headers)  # fmt: skip
        self._http = http or httpx.Client(timeout=self.timeout)
        self._own_http = http is None

    def _call(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
              idempotency_key: str | None = None, idempotent: bool = False) -> Any:  # fmt: skip
        """Send one logical call: the same Idempotency-Key on every attempt; raise the typed refusal."""
        key = (idempotency_key or new_idempotency_key()) if idempotent else None
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(
                    method, self.base_url + path, params=self._keep(query), json=body,
                    headers=self._request_headers(key),
                )  # fmt: skip
            except httpx.TransportError as exc:
                wait = self._wait(attempt, None)
                if wait is None:
                    raise errors.APIConnectionError(f"{method} {path}: {exc!r}") from exc
                self._sleep(wait)
                continue
            wait = self._wait(attempt, response) if response.status_code >= 400 else None
            if wait is None:
                raise_for_problem(response)
                return decode(response)
            self._sleep(wait)

    def _pages(self, method: str, path: str, query: dict[str, Any], key: str) -> Iterator[Any]:
        cursor = None
        while True:
            page = self._call(method, path, query={**query, "cursor": cursor})
            yield from page[key]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Hato:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncHato(Base, AsyncOperations):
    """The async client: the same methods as Hato, awaited; iterators are async iterators."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        user_token: str | None = None,
        retry: Retry | None = None,
        timeout: float = 10.0,
        accept_language: str | None = None,
        headers: dict[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        """Pass api_key or user_token; `http` is your own httpx client (then closing it is yours too)."""
        super().__init__(base_url, api_key, user_token=user_token, retry=retry, timeout=timeout,
                         accept_language=accept_language, headers=headers)  # fmt: skip
        self._http = http or httpx.AsyncClient(timeout=self.timeout)
        self._own_http = http is None

    async def _call(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
                    idempotency_key: str | None = None, idempotent: bool = False) -> Any:  # fmt: skip
        """As Hato._call, waiting with asyncio.sleep."""
        key = (idempotency_key or new_idempotency_key()) if idempotent else None
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(
                    method, self.base_url + path, params=self._keep(query), json=body,
                    headers=self._request_headers(key),
                )  # fmt: skip
            except httpx.TransportError as exc:
                wait = self._wait(attempt, None)
                if wait is None:
                    raise errors.APIConnectionError(f"{method} {path}: {exc!r}") from exc
                await self._async_sleep(wait)
                continue
            wait = self._wait(attempt, response) if response.status_code >= 400 else None
            if wait is None:
                raise_for_problem(response)
                return decode(response)
            await self._async_sleep(wait)

    async def _pages(self, method: str, path: str, query: dict[str, Any], key: str) -> AsyncIterator[Any]:
        cursor = None
        while True:
            page = await self._call(method, path, query={**query, "cursor": cursor})
            for item in page[key]:
                yield item
            cursor = page.get("next_cursor")
            if not cursor:
                return

    @staticmethod
    async def _async_sleep(seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncHato:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
