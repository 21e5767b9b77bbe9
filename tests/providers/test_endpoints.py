"""The push endpoint policy on its own: the allow-list's patterns, the address ranges, the URL's shape."""

from __future__ import annotations

import pytest

from app.providers.endpoints import EndpointPolicy, EndpointRefused, address_refusal, host_allowed, parse_hosts

DEFAULT = parse_hosts("fcm.googleapis.com, updates.push.services.mozilla.com,web.push.apple.com,*.notify.windows.com,")


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("fcm.googleapis.com", True),
        ("FCM.GoogleAPIs.com.", True),  # case and a trailing dot are one name
        ("db5p.notify.windows.com", True),
        ("a.b.notify.windows.com", True),
        ("notify.windows.com", False),  # `*.` means below, not the name itself
        ("evilnotify.windows.com", False),
        ("fcm.googleapis.com.evil.example", False),
        ("googleapis.com", False),
        ("", False),
    ],
)
def test_allow_list_patterns(host, allowed):
    assert host_allowed(host, DEFAULT) is allowed


def test_ip_entries_match_every_spelling_of_the_address():
    assert host_allowed("[::ffff:7f00:1]", parse_hosts("::ffff:127.0.0.1"))
    assert not host_allowed("127.0.0.2", parse_hosts("127.0.0.1"))
    assert not host_allowed("127.0.0.1", parse_hosts("*.0.0.1"))  # a wildcard never matches an address


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("2002:c0a8:101::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("10.0.0.1", "private"),
        ("fd12::1", "private"),
        ("224.0.1.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 - an address under test, not a bind
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-public"),
        ("not an address", "unparsable"),
    ],
)
def test_address_ranges(address, reason):
    assert address_refusal(address) == reason


def test_test_settings_open_http_ports_and_private_addresses_only_when_asked():
    strict = EndpointPolicy(parse_hosts("localhost,127.0.0.1"))
    local = EndpointPolicy(parse_hosts("localhost,127.0.0.1"), allow_http=True, allow_private=True)
    for endpoint in ("http://127.0.0.1:8080/push/1", "https://127.0.0.1/push/1", "https://localhost:8443/x"):
        with pytest.raises(EndpointRefused):
            strict.check_url(endpoint)
        assert local.check_url(endpoint)[1] in ("127.0.0.1", "localhost")
    assert EndpointPolicy(DEFAULT).check_url("https://fcm.googleapis.com/fcm/send/x") == (
        "https",
        "fcm.googleapis.com",
        443,
    )
