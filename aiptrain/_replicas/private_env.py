"""Variables that hold credentials of aiptrain itself and must never reach a trainer.

A trainer's environment ends up in its logs sooner or later (a debug dump, a crash report), and
its logs are readable by anyone who can list jobs; so the emulator's token and a client's API
token are removed from the environment every supervisor (and so every replica) inherits.
"""

from __future__ import annotations

from collections.abc import Mapping

SECRET_VARIABLES = ("AIPTRAIN_SERVE_TOKEN", "AIPTRAIN_API_TOKEN")


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name not in SECRET_VARIABLES}
