"""Who may read `aiptrain jobs tensorboard`: a real TensorBoard behind its guard, asked by another
user of the machine (`nobody`, through `setpriv`), by a DNS-rebound page, by another site, and by
the user's own browser with the URL the command printed.

Before the guard, TensorBoard answered them all: another user read a 0700 home's tags, and
`Host: rebind.attacker.example` got 200.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from aiptrain._api.tensorboard import Board, running_tensorboard
from tests.fixtures.other_user import SYSTEM_PYTHON, as_nobody
from tests.fixtures.tensorboard import SUMMARY_TRAINER

pytestmark = pytest.mark.slow  # each module starts a TensorBoard: seconds on a busy machine

# Stdlib only: it runs as `nobody`, under the system interpreter.
CLIENT = r'''
import http.client, json, sys
port = int(sys.argv[1])
answers = {}
for name, path in (("runs", "/data/runs"), ("tags", "/data/plugin/scalars/tags"), ("page", "/")):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path)
    response = connection.getresponse()
    answers[name] = [response.status, response.read().decode("utf-8", "replace")[:200]]
print(json.dumps(answers))
'''


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    logdir = tmp_path_factory.mktemp("tensorboard-logdir")
    subprocess.run([sys.executable, "-c", SUMMARY_TRAINER, "--job-dir", str(logdir)], check=True, timeout=120,
                   capture_output=True)
    with running_tensorboard(sys.executable, str(logdir)) as served:
        yield served


def _base(board: Board) -> str:
    return board.url.partition("?")[0]


def _port(board: Board) -> int:
    return int(_base(board).rstrip("/").rsplit(":", 1)[1])


def test_the_url_carries_a_token_and_nothing_answers_without_it(board: Board) -> None:
    assert board.url.startswith("http://127.0.0.1:") and f"?token={board.token}" in board.url
    answer = httpx.get(_base(board) + "data/runs", timeout=30)
    assert answer.status_code == 401 and "aiptrain jobs tensorboard" in answer.text
    assert "loss" not in answer.text
    bearer = httpx.get(_base(board) + "data/runs", headers={"Authorization": f"Bearer {board.token}"}, timeout=30)
    assert bearer.status_code == 200 and bearer.json() == ["."]


@pytest.mark.parametrize("host", ["rebind.attacker.example", "rebind.attacker.example:6006", "10.0.0.1", ""])
def test_a_rebound_host_name_is_refused_even_with_the_token(board: Board, host: str) -> None:
    answer = httpx.get(_base(board) + "data/plugin/scalars/tags", timeout=30,
                       headers={"Host": host, "Authorization": f"Bearer {board.token}"})
    assert answer.status_code == 400 and "loss" not in answer.text


def test_another_site_is_refused(board: Board) -> None:
    answer = httpx.get(_base(board) + "data/runs", timeout=30,
                       headers={"Origin": "http://evil.example", "Authorization": f"Bearer {board.token}"})
    assert answer.status_code == 403


def test_the_browser_exchanges_the_token_for_a_cookie_of_this_port(board: Board) -> None:
    signed_in = httpx.get(board.url, timeout=30)
    assert signed_in.status_code == 200 and 'http-equiv="refresh"' in signed_in.text
    assert "samesite=strict" in signed_in.headers["set-cookie"].lower()
    name = f"aiptrain-tensorboard-{_port(board)}"
    cookie = signed_in.cookies[name]
    assert board.token not in cookie
    tags = httpx.get(_base(board) + "data/plugin/scalars/tags", headers={"Cookie": f"{name}={cookie}"}, timeout=30)
    assert tags.status_code == 200 and "loss" in tags.text
    # One planted by a service on another port of 127.0.0.1 does not hide it.
    planted = httpx.get(_base(board) + "data/runs", headers={"Cookie": f"{name}=planted; {name}={cookie}"},
                        timeout=30)
    assert planted.status_code == 200
    # Of another port's name, or forged, it opens nothing.
    for wrong in (f"aiptrain-tensorboard-{_port(board) + 1}={cookie}", f"{name}={cookie[:-1]}0"):
        assert httpx.get(_base(board) + "data/runs", headers={"Cookie": wrong}, timeout=30).status_code == 401



def test_another_user_of_the_machine_reads_nothing(board: Board) -> None:
    done = subprocess.run([*as_nobody(), SYSTEM_PYTHON, "-c", CLIENT, str(_port(board))], capture_output=True,
                          text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    answers: dict[str, Any] = json.loads(done.stdout)
    assert {name: status for name, (status, _) in answers.items()} == {"runs": 401, "tags": 401, "page": 401}
    assert not any("loss" in text for _, text in answers.values())
