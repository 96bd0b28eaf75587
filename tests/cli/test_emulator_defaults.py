"""The emulator's address and the local project have one value each, which every option shows."""

from __future__ import annotations

import click

from aiptrain._backends import BACKENDS, DEFAULT_LOCAL_PROJECT
from aiptrain._cli.local import console, serve
from aiptrain._emulator.defaults import DEFAULT_HOST, DEFAULT_PORT


def defaults(command: click.Command) -> dict[str, object]:
    return {param.name: param.default for param in command.params if param.name}


def test_serve_and_console_default_to_the_same_address() -> None:
    for command in (serve, console):
        found = defaults(command)
        assert (found["host"], found["port"]) == (DEFAULT_HOST, DEFAULT_PORT), command.name


def test_serve_configures_gcloud_for_the_local_backends_project() -> None:
    assert defaults(serve)["project"] == DEFAULT_LOCAL_PROJECT
    assert BACKENDS["local"].default_project == DEFAULT_LOCAL_PROJECT
