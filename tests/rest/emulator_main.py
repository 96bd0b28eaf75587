"""Run the emulator for tests: `python -m tests.rest.emulator_main --home H --url-file F [...]`.

A separate process, like `aiptrain local serve`, so a test talks to a real server over loopback
and can stop it (and everything it started) cleanly.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aiptrain.emulator.faults import FaultPlan
from aiptrain.emulator.serve import Served, serve


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", required=True, type=Path)
    parser.add_argument("--url-file", required=True, type=Path)
    parser.add_argument("--token")
    parser.add_argument("--no-auth", action="store_true")
    parser.add_argument("--faults", help="a FaultPlan as JSON")
    args = parser.parse_args()

    def ready(served: Served) -> None:
        partial = args.url_file.with_suffix(".partial")
        partial.write_text(served.url)
        partial.rename(args.url_file)

    faults = FaultPlan.from_json(args.faults) if args.faults else None
    serve("127.0.0.1", 0, allow_remote=False, token=args.token, auth=not args.no_auth, home=args.home,
          faults=faults, on_ready=ready)


if __name__ == "__main__":
    main()
