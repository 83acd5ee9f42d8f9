#!/usr/bin/env python3
"""bench/churn.py: how many physical handles a mover makes an iteration, from
a trace's allocations, under a limit, by which idle memory it releases first.

usage: bench/churn.py TRACE LIMIT_GIB [--from-iteration N] [--slack F]

A model, not the mover: every allocation of 2 MiB or more (A records),
rounded to 2 MiB, takes a freed block of its size where one is idle (any
freed one, at once: the device's lag is left out), else a new handle; where
that would pass LIMIT_GIB, idle blocks of other sizes are released first:
  oldest  the one freed longest ago (the mover's choice, mover.c)
  belady  the one whose size the trace allocates again furthest ahead (a
          plan knows the iteration's allocations; an upper bound of what
          choosing by the iteration ahead can save)
With --classes K, every size is rounded up to one of K classes a power of
two (2^k times 1, 1 + 1/K, ...; a size class as allocators have): fewer
sizes, for the memory the rounding wastes (printed). With --slack F, an idle block up to F times larger than the allocation
(the smallest such) serves it, holding its own size until freed: the
handles a size class of that width would save, for the memory it wastes.
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


def size_class(r, k):
    """r rounded up to one of k classes a power of two, in GRAN units."""
    if k <= 0 or r <= GRAN:
        return r
    p = 1 << (r.bit_length() - 1)
    step = max(GRAN, p // k)
    return (r + step - 1) // step * step


def events(path, classes=0):
    """The trace's big allocations and frees (kind, size, buffer) and
    iteration starts ('I', 0, None), in order."""
    ev, live = [], {}
    with open(path, errors="replace") as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "A" and len(p) >= 5 and int(p[4]) >= GRAN:
                r = size_class((int(p[4]) + GRAN - 1) // GRAN * GRAN, classes)
                live[p[2]] = r
                ev.append(("A", r, p[2]))
            elif p[0] == "F" and len(p) >= 3 and p[2] in live:
                ev.append(("F", live.pop(p[2]), p[2]))
            elif p[0] == "I":
                ev.append(("I", 0, None))
    return ev


def simulate(ev, limit, policy, first, slack=0.0):
    """New handles an iteration, the mean from iteration first on, and the
    most bytes held."""
    need = collections.defaultdict(list)
    for i, (k, r, _) in enumerate(ev):
        if k == "A":
            need[r].append(i)

    def next_need(r, i):
        v = need[r]
        j = bisect.bisect_right(v, i)
        return v[j] if j < len(v) else 1 << 62

    held, idle, n, it, top = 0, collections.OrderedDict(), 0, 0, 0
    made = collections.Counter()
    block = {}
    for i, (k, r, b) in enumerate(ev):
        if k == "I":
            it += 1
        elif k == "F":
            n += 1
            idle[n] = block.pop(b, r)
        else:
            fits = [(s, key) for key, s in idle.items() if r <= s <= r * (1 + slack)]
            if fits:
                s, hit = min(fits)
                del idle[hit]
                block[b] = s
                continue
            while held + r > limit and idle:
                key = next(iter(idle)) if policy == "oldest" else \
                    max(idle, key=lambda x: next_need(idle[x], i))
                held -= idle.pop(key)
            held += r
            top = max(top, held)
            block[b] = r
            made[it] += 1
    steady = [made[x] for x in range(first, it)]
    return (sum(steady) / len(steady) if steady else float("nan")), top


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("limit_gib", type=float)
    ap.add_argument("--from-iteration", type=int, default=8)
    ap.add_argument("--slack", type=float, default=0.0)
    ap.add_argument("--classes", type=int, default=0)
    a = ap.parse_args()
    ev = events(a.trace, a.classes)
    if a.classes:
        exact = events(a.trace)
        big = sum(r for k, r, _ in exact if k == "A")
        print(f"classes: {len({r for k, r, _ in ev if k == 'A'})} sizes (of "
              f"{len({r for k, r, _ in exact if k == 'A'})}), "
              f"{100 * (sum(r for k, r, _ in ev if k == 'A') / big - 1):.1f}% more bytes allocated")
    if not any(k == "I" for k, _, _ in ev):
        sys.exit(f"{a.trace}: no I records (no iteration found)")
    for policy in ("oldest", "belady"):
        made, _ = simulate(ev, a.limit_gib * 2**30, policy, a.from_iteration, a.slack)
        print(f"{policy}: {made:.1f} new handles an iteration")


if __name__ == "__main__":
    main()
