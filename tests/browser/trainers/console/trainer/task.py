"""The browser suite's trainer: each flag is one behaviour, done in this order.

  --delay S            sleep S seconds first (so a follower is attached)
  --say TEXT           print TEXT to stdout (repeatable)
  --lines N            print N lines "line I of N at T" (T: epoch ms) ...
  --over S             ... spread evenly over S seconds (default 0: at once)
  --rate R             with --over: R lines per second instead of N in all
                       (the log benchmark: "bench I t=EPOCH_MS" lines)
  --hold PATH          wait (at most 120 s) until the file PATH exists: the
                       job runs until the test has seen what it wants to see
  --warn TEXT          print TEXT to stderr (repeatable)
  --sleep S            sleep S seconds
  --fail N             print "trainer failed with status N" to stderr, exit N
then (without --fail) print "done" and exit 0. Unknown flags (e.g. --job-dir) are ignored.
Imports nothing heavy, so a replica starts in milliseconds.
"""

import os
import sys
import time


def out(text, err=False):
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


def parse(argv):
    opts = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--") and "=" in arg:
            key, value = arg[2:].split("=", 1)
            opts.setdefault(key, []).append(value)
        elif arg.startswith("--") and i + 1 < len(argv):
            opts.setdefault(arg[2:], []).append(argv[i + 1])
            i += 1
        i += 1
    return opts


def paced(count, seconds, line):
    """Prints line(i) for i in 0..count-1, the i-th at start + i * seconds / count."""
    start = time.monotonic()
    step = seconds / count if count else 0
    for i in range(count):
        delay = start + i * step - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        out(line(i))


def main(argv):
    opts = parse(argv)
    for s in opts.get("delay", []):
        time.sleep(float(s))
    for text in opts.get("say", []):
        out(text)
    over = float(opts.get("over", ["0"])[-1])
    if "rate" in opts:
        rate = int(opts["rate"][-1])
        paced(int(rate * over), over, lambda i: f"bench {i} t={time.time() * 1000:.1f}")
    for n in opts.get("lines", []):
        count = int(n)
        paced(count, over, lambda i: f"line {i + 1} of {count} at {time.time() * 1000:.0f}")
    for path in opts.get("hold", []):
        deadline = time.monotonic() + 120
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                out(f"{path} did not appear within 120 s", err=True)
                return 3
            time.sleep(0.05)
    for text in opts.get("warn", []):
        out(text, err=True)
    for s in opts.get("sleep", []):
        time.sleep(float(s))
    for n in opts.get("fail", []):
        out(f"trainer failed with status {n}", err=True)
        return int(n)
    out("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
