"""One loopback rule for the emulator's bind check, its Host guard and the REST clients."""

from __future__ import annotations

import pytest

from aiptrain._loopback import is_loopback_host, is_loopback_url

HOSTS = [
    ("localhost", True),
    ("LOCALHOST", True),
    ("localhost.", True),  # the fully qualified spelling of the same name
    ("127.0.0.1", True),
    ("127.0.0.2", True),  # all of 127.0.0.0/8
    ("127.255.255.254", True),
    ("::1", True),
    ("[::1]", True),
    ("::ffff:127.0.0.1", True),  # IPv4 loopback mapped into IPv6
    ("0:0:0:0:0:0:0:1", True),
    ("0.0.0.0", False),  # every interface
    ("::", False),
    ("[::]", False),
    ("10.0.0.1", False),
    ("192.168.1.5", False),
    ("::ffff:10.0.0.1", False),
    ("app.localhost", False),  # a resolver decides where it goes
    ("localhost.example.com", False),
    ("127.0.0.1.example.com", False),
    ("evil.example", False),
    ("localhost:8080", False),  # a host, not a host and port
    ("[::1", False),
    ("", False),
]


@pytest.mark.parametrize(("host", "loopback"), HOSTS)
def test_a_host_is_loopback_only_without_a_resolver(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


URLS = [
    ("http://127.0.0.1:8080/", True),
    ("http://127.5.6.7/", True),
    ("http://localhost:1/", True),
    ("http://LOCALHOST.:8080/v1/", True),
    ("http://[::1]:9/", True),
    ("https://[::1]/", True),
    ("https://ml.googleapis.com/", False),
    ("http://10.0.0.1/", False),
    ("http://0.0.0.0:8080/", False),
    ("http://127.0.0.1.example.com/", False),
    ("http://app.localhost:8080/", False),
    ("http://[::1/", False),  # malformed: not loopback, not an error
    ("127.0.0.1:8080", False),  # no scheme: no host either
    ("", False),
]


@pytest.mark.parametrize(("url", "loopback"), URLS)
def test_an_endpoint_is_loopback_when_its_host_is(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback
