"""Where `aiptrain local serve` may listen: loopback unless remote hosts are asked for, and never
beyond loopback without a token."""

from __future__ import annotations

import pytest

from aiptrain._emulator.serve import base_url, check_bind, serve
from aiptrain.errors import UsageError


def test_serve_refuses_remote_hosts_without_opt_in_and_token() -> None:
    check_bind("127.0.0.1", allow_remote=False, token=None)
    check_bind("::1", allow_remote=False, token=None)
    with pytest.raises(UsageError, match="loopback"):
        check_bind("0.0.0.0", allow_remote=False, token="t")
    with pytest.raises(UsageError, match="token"):
        check_bind("192.168.1.5", allow_remote=True, token=None)
    check_bind("0.0.0.0", allow_remote=True, token="t")
    with pytest.raises(UsageError):
        serve("0.0.0.0", 0, allow_remote=False, token=None, home=None)
    assert base_url("::1", 80) == "http://[::1]:80/"
