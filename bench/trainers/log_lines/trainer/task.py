"""`python -m trainer.task [--lines N] [--min-gap S] [--max-gap S] [--start-delay S]`.

Prints `BENCHLINE <index> <unix time with microseconds>` N times, flushing each line, with
random gaps in [min-gap, max-gap] (a fixed seed, so every run has the same rhythm). The
follower subtracts the printed time from the time it sees the line. The start delay lets the
follower attach before the first line. Unknown arguments (the engine's --job-dir) are ignored.
"""

import argparse
import random
import time

parser = argparse.ArgumentParser()
parser.add_argument("--lines", type=int, default=200)
parser.add_argument("--min-gap", type=float, default=0.02)
parser.add_argument("--max-gap", type=float, default=0.05)
parser.add_argument("--start-delay", type=float, default=1.0)
parser.add_argument("--seed", type=int, default=7)
args, _unknown = parser.parse_known_args()

rhythm = random.Random(args.seed)
time.sleep(args.start_delay)
for index in range(args.lines):
    print(f"BENCHLINE {index} {time.time():.6f}", flush=True)
    time.sleep(rhythm.uniform(args.min_gap, args.max_gap))
