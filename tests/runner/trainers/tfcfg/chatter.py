"""Writes lines of every kind the log capture classifies, then timestamped ticks."""

from __future__ import annotations

import json
import sys
import time
import traceback

from tfcfg._common import flag


def main() -> None:
    print("plain stdout line")
    print("plain stderr line", file=sys.stderr, flush=True)
    print(json.dumps({"severity": "WARNING", "message": "structured warning"}))
    print(json.dumps({"severity": "debug", "message": "structured debug", "extra": 1}))
    try:
        raise ValueError("caught on purpose")
    except ValueError:
        traceback.print_exc(file=sys.stdout)
    print("after the traceback")
    for index in range(int(flag("ticks", "0") or "0")):
        print(f"TICK {index} {time.time():.6f}")
        time.sleep(0.2)
    print("chatter done")


if __name__ == "__main__":
    main()
