"""Where a push message may go: the push-service allow-list, the URL's shape and the addresses it may reach.

Checked when a browser subscribes (app/push/service.py) and again by the transport on every connect
(app/providers/guardedhttp.py), because the allow-list may have changed and a name may resolve elsewhere
since (DNS rebinding). Everything here but resolve() is pure.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from flask_babel import gettext, lazy_gettext

DEFAULT_PORTS = {"https": 443, "http": 80}
# IPv6 forms that carry an IPv4 address a packet ends up at: NAT64's well-known prefix (RFC 6052), 6to4.
NAT64 = ipaddress.ip_network("64:ff9b::/96")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# What a URL to POST to never holds: white space, a backslash, control characters (checked on every request).
_UNSAFE = re.compile(r"[\s\\\x00-\x1f\x7f]")
# What address_refusal's reasons read as in a refusal (the reasons themselves are codes, for logs and tests).
REFUSAL_NAMES = {
    "unparsable": lazy_gettext("unparsable"),
    "unspecified": lazy_gettext("unspecified"),
    "loopback": lazy_gettext("a loopback address"),
    "link-local": lazy_gettext("a link-local address"),
    "multicast": lazy_gettext("a multicast address"),
    "reserved": lazy_gettext("a reserved address"),
    "private": lazy_gettext("a private address"),
    "non-public": lazy_gettext("a non-public address"),
}


class EndpointRefused(ValueError):
    """This server does not send to the endpoint; the message says why in words a subscriber understands.

    Worded in the language of the moment (the subscriber's request; a worker's DEFAULT_LOCALE).
    """


def normal_host(host: str) -> str:
    """host lower-cased, without a trailing dot or IPv6 brackets: the one spelling compared."""
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def parse_hosts(value: str | Iterable[str]) -> tuple[str, ...]:
    """PUSH_ALLOWED_HOSTS (a comma list, or a list) as normal host names and `*.suffix` patterns."""
    items = value.split(",") if isinstance(value, str) else value
    return tuple(normal_host(item) for item in items if item.strip())


def _ip(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])  # a zone id (fe80::1%eth0) is not part of the address
    except ValueError:
        return None


def host_allowed(host: str, patterns: Iterable[str]) -> bool:
    """Whether host is one of patterns: a name, an IP address, or `*.example.com` (any name below it, not itself)."""
    host = normal_host(host)
    address = _ip(host)
    for pattern in patterns:
        if pattern.startswith("*."):
            if address is None and host.endswith(pattern[1:]):
                return True
        elif host == pattern or (address is not None and address == _ip(pattern)):
            return True
    return False


def _reached(address: Address) -> Address:
    # The IPv4 host an IPv6 address actually delivers to, when it embeds one.
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def address_refusal(text: str) -> str | None:
    """Why address must not be connected to (loopback, private, …), or None for a public unicast address."""
    address = _ip(text)
    if address is None:
        return "unparsable"
    address = _reached(address)
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("non-public", not address.is_global),
    )
    return next((name for name, hit in checks if hit), None)


@dataclass(frozen=True)
class EndpointPolicy:
    """PUSH_ALLOWED_HOSTS, PUSH_ALLOW_HTTP_ENDPOINTS and PUSH_ALLOW_PRIVATE_ADDRESSES as one rule."""

    allowed_hosts: tuple[str, ...]
    allow_http: bool = False  # http:// and any port (a local push service in tests)
    allow_private: bool = False  # loopback and private addresses (a local push service in tests)

    @classmethod
    def from_config(cls, config: Mapping) -> EndpointPolicy:
        """The policy of an app's (or a worker's) settings."""
        return cls(
            parse_hosts(config["PUSH_ALLOWED_HOSTS"]),
            bool(config["PUSH_ALLOW_HTTP_ENDPOINTS"]),
            bool(config["PUSH_ALLOW_PRIVATE_ADDRESSES"]),
        )

    def check_url(self, endpoint: str) -> tuple[str, str, int]:
        """(scheme, host, port) of an endpoint this server may send to; EndpointRefused otherwise."""
        if _UNSAFE.search(endpoint):
            raise EndpointRefused(gettext("endpoint contains characters a push service URL never has"))
        parts = urlsplit(endpoint)
        if "@" in parts.netloc:
            raise EndpointRefused(gettext("endpoint must not carry a user name or password"))
        try:
            port = parts.port
        except ValueError as exc:
            raise EndpointRefused(gettext("endpoint has an invalid port")) from exc
        scheme = parts.scheme.lower()
        port = port or DEFAULT_PORTS.get(scheme, 0)
        self.check_host(scheme, parts.hostname or "", port)
        return scheme, normal_host(parts.hostname or ""), port

    def check_host(self, scheme: str, host: str, port: int | None) -> None:
        """Refuse a scheme, port or host this server does not send to (an IP address host is checked too)."""
        if scheme != "https" and not (scheme == "http" and self.allow_http):
            raise EndpointRefused(gettext("endpoint must be an https URL"))
        if port not in (None, DEFAULT_PORTS[scheme]) and not self.allow_http:
            raise EndpointRefused(gettext("endpoint must use the standard https port"))
        if not host or not host_allowed(host, self.allowed_hosts):
            if normal_host(host):
                message = gettext("%(host)s is not a push service this server sends to", host=normal_host(host))
            else:
                message = gettext("That host is not a push service this server sends to")
            raise EndpointRefused(message)
        if _ip(normal_host(host)) is not None:
            self.check_address(normal_host(host))

    def check_address(self, address: str) -> None:
        """Refuse an address the server must not connect to (unless PUSH_ALLOW_PRIVATE_ADDRESSES)."""
        reason = None if self.allow_private else address_refusal(address)
        if reason:
            raise EndpointRefused(
                gettext(
                    "the push service's address is %(reason)s, which this server never connects to",
                    reason=str(REFUSAL_NAMES.get(reason, reason)),
                )
            )

    def resolve(self, host: str, port: int) -> list[tuple]:
        """getaddrinfo() results for host:port, every address checked: one refused address refuses them all."""
        infos = socket.getaddrinfo(normal_host(host), port, type=socket.SOCK_STREAM)
        for info in infos:
            self.check_address(info[4][0])
        return infos
