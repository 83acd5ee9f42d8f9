#!/usr/bin/env python3
"""bench/churn.py: how many physical handles a mover makes an iteration, from
a trace's allocations, under a limit, by which idle memory it releases first.

usage: bench/churn.py TRACE LIMIT_GIB [--from-iteration N]

A model, not the mover: every allocation of 2 MiB or more (A records),
rounded to 2 MiB, takes a freed block of its size where one is idle (any
freed one, at once: the device's lag is left out), else a new handle; where
that would pass LIMIT_GIB, idle blocks of other sizes are released first:
  oldest  the one freed longest ago (the mover's choice, mover.c)
  belady  the one whose size the trace allocates again furthest ahead (a
          plan knows the iteration's allocations; an upper bound of what
          choosing by the iteration ahead can save)
Nothing moves, nothing is in the arena, small buffers are left out. Prints
the mean of new handles an iteration (I records) from --from-iteration on
(8), for each choice. On ResNet-50's trace at 5.8 GiB (2026-12-07, H200) the
model gives 147 and 125; the mover made about 142 (bench/RESULTS.md).
"""
import argparse
import bisect
import collections
import sys

GRAN = 2 << 20


def events(path):
    """The trace's big allocations and frees (kind, size) and iteration
    starts ('I', 0), in order."""
    ev, live = [], {}
    with open(path, errors="replace") as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "A" and len(p) >= 5 and int(p[4]) >= GRAN:
                r = (int(p[4]) + GRAN - 1) // GRAN * GRAN
                live[p[2]] = r
                ev.append(("A", r))
            elif p[0] == "F" and len(p) >= 3 and p[2] in live:
                ev.append(("F", live.pop(p[2])))
            elif p[0] == "I":
                ev.append(("I", 0))
    return ev


def simulate(ev, limit, policy, first):
    """New handles an iteration, the mean from iteration first on."""
    need = collections.defaultdict(list)
    for i, (k, r) in enumerate(ev):
        if k == "A":
            need[r].append(i)

    def next_need(r, i):
        v = need[r]
        j = bisect.bisect_right(v, i)
        return v[j] if j < len(v) else 1 << 62

    held, idle, n, it = 0, collections.OrderedDict(), 0, 0
    made = collections.Counter()
    for i, (k, r) in enumerate(ev):
        if k == "I":
            it += 1
        elif k == "F":
            n += 1
            idle[n] = r
        else:
            hit = next((key for key, s in idle.items() if s == r), None)
            if hit is not None:
                del idle[hit]
                continue
            while held + r > limit and idle:
                key = next(iter(idle)) if policy == "oldest" else \
                    max(idle, key=lambda x: next_need(idle[x], i))
                held -= idle.pop(key)
            held += r
            made[it] += 1
    steady = [made[x] for x in range(first, it)]
    return sum(steady) / len(steady) if steady else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("limit_gib", type=float)
    ap.add_argument("--from-iteration", type=int, default=8)
    a = ap.parse_args()
    ev = events(a.trace)
    if not any(k == "I" for k, _ in ev):
        sys.exit(f"{a.trace}: no I records (no iteration found)")
    for policy in ("oldest", "belady"):
        print(f"{policy}: {simulate(ev, a.limit_gib * 2**30, policy, a.from_iteration):.1f} "
              "new handles an iteration")


if __name__ == "__main__":
    main()
