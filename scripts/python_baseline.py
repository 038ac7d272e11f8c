#!/usr/bin/env python3
"""Python reference points for the README's performance table.

Replays the same arrivals as scenarios/bench-100m.toml (its first second:
10^6 Poisson requests, the same seed and stream) through a fixed window of
500,000 per second in three ways, and compares with burstsim's own figure:

  - the `limits` library (FixedWindowRateLimiter, MemoryStorage), its clock
    replaced by the simulated one, in a Python loop;
  - a plain-Python fixed window in a loop;
  - numpy, vectorised (if numpy is installed).

    pip install limits numpy
    python3 scripts/python_baseline.py
"""

import csv
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THRESHOLD = 500_000
WINDOW_NS = 1_000_000_000


def burstsim(*args):
    binary = os.path.join(ROOT, "target", "release", "burstsim")
    if not os.path.exists(binary):
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    return subprocess.run([binary, *args], cwd=ROOT, check=True, capture_output=True, text=True)


def arrivals(tmp):
    """The first second of bench-100m's workload, from burstsim's decisions file."""
    with open(os.path.join(ROOT, "scenarios", "bench-100m.toml")) as f:
        scenario = f.read().replace('duration = "100s"', 'duration = "1s"')
    path = os.path.join(tmp, "bench-1m.toml")
    with open(path, "w") as f:
        f.write(scenario)
    out = os.path.join(tmp, "out")
    burstsim("run", path, "--decisions", "--no-charts", "--quiet", "--out", out)
    with open(os.path.join(out, "decisions", "poisson-1m", "fixed-window.csv")) as f:
        rows = csv.DictReader(f)
        times, admitted = [], 0
        for row in rows:
            times.append(int(row["time_ns"]))
            admitted += row["admitted"] == "true"
    return times, admitted


def with_limits(times):
    import limits
    import limits.storage.memory as memory

    class Clock:
        now = 0.0

        def time(self):
            return Clock.now

    memory.time = Clock()
    storage = limits.storage.MemoryStorage()
    limiter = limits.strategies.FixedWindowRateLimiter(storage)
    item = limits.RateLimitItemPerSecond(THRESHOLD)
    start = time.perf_counter()
    admitted = 0
    for t in times:
        Clock.now = t / 1e9
        admitted += limiter.hit(item, "key")
    return time.perf_counter() - start, admitted


def plain_python(times):
    start = time.perf_counter()
    window, count, admitted = -1, 0, 0
    for t in times:
        w = t // WINDOW_NS
        if w != window:
            window, count = w, 0
        if count < THRESHOLD:
            count += 1
            admitted += 1
    return time.perf_counter() - start, admitted


def numpy_vectorised(times):
    import numpy as np

    start = time.perf_counter()
    t = np.asarray(times, dtype=np.int64)
    windows = t // WINDOW_NS
    first = np.r_[True, windows[1:] != windows[:-1]]
    starts = np.flatnonzero(first)
    rank = np.arange(len(t)) - np.repeat(starts, np.diff(np.r_[starts, len(t)]))
    admitted = int((rank < THRESHOLD).sum())
    return time.perf_counter() - start, admitted


def main():
    with tempfile.TemporaryDirectory() as tmp:
        times, expected = arrivals(tmp)
    n = len(times)
    stats = burstsim("run", "scenarios/bench-100m.toml", "--no-charts", "--quiet", "--stats", "--out", os.path.join(tempfile.gettempdir(), "burstsim-bench")).stderr
    rate = float(re.search(r"([\d.]+) M requests/s", stats).group(1))
    ours = 1e3 / rate
    print(f"{n} arrivals; burstsim admits {expected} of them")
    print(f"{'implementation':<34} {'ns/request':>11} {'vs burstsim':>12}")
    print(f"{'burstsim (bench-100m, end to end)':<34} {ours:>11.1f} {1:>11.0f}×")
    for name, run in [("limits FixedWindowRateLimiter", with_limits), ("plain Python fixed window", plain_python), ("numpy, vectorised", numpy_vectorised)]:
        try:
            seconds, admitted = run(times)
        except ImportError as err:
            print(f"{name:<34} {'skipped':>11}  ({err})")
            continue
        ns = seconds * 1e9 / n
        note = "" if admitted == expected else f"  (admits {admitted}: its windows start at the first request)"
        print(f"{name:<34} {ns:>11.1f} {ns / ours:>11.0f}×{note}")


if __name__ == "__main__":
    sys.exit(main())
