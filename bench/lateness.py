#!/usr/bin/env python3
"""bench/lateness.py: were the copies back the device waited for slow, or late?

usage: bench/lateness.py [--gbps RATE] [--min-us US] TRACE

For each iteration that the last plan ran while CUPTI was still attached (the
plan's first two), every idle gap of the device before an operation that uses
a buffer ebb copied back is listed with that copy: when the host issued it
(its B record), and when it would have run had ebb's copies to the device
gone one after another at RATE GB/s (default: the plan's h2d-gbps note),
each from its issue and from the end of the operation it follows. A copy
that by this replay lands before the operation, where the device still
waited, ran slower than RATE or started later than the replay has it (the
engine was slower over the copies before it, or the copy waited for more
than that operation); one that lands after it was issued too late for RATE. ebb's own copies have
no GPU times in the trace (ebb-trace(5), G records): the replay stands in.
Times are milliseconds from the operation's start; the last line sums the
idle time of each kind.
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gbps", type=float, help="the replay's rate (default: the h2d-gbps note)")
    ap.add_argument("--min-us", type=float, default=1000.0, help="shorter gaps are not listed")
    ap.add_argument("trace")
    a = ap.parse_args()

    off = None
    rate = a.gbps
    period, started = None, None
    gst, gen, uses, backs = {}, {}, {}, []
    with open(a.trace, errors="replace") as f:
        for line in f:
            p = line.split()
            if len(p) < 3:
                continue
            if p[0] == "Q" and len(p) >= 4:
                if p[2] == "cupti-clock" and off is None:
                    off = int(p[1]) - int(p[3])
                elif p[2] == "h2d-gbps" and a.gbps is None:
                    rate = float(p[3])
                elif p[2] == "plan-started":
                    started = int(p[3])
                elif p[2] == "plan-operations":
                    period = int(p[3])
            elif p[0] == "G":
                s = int(p[1])
                gst.setdefault(s, int(p[2]))
                gen[s] = max(gen.get(s, 0), int(p[3]))
            elif p[0] == "L" and len(p) >= 6:
                n = int(p[5])
                uses[int(p[2])] = [int(x) for x in p[6:6 + n]]
            elif p[0] == "B" and len(p) >= 6 and int(p[4]) > 0:
                backs.append((int(p[1]), int(p[2]), int(p[3]), int(p[4]), p[5]))
    if off is None or started is None or period is None or not rate:
        sys.exit("lateness.py: the trace has no plan run with CUPTI attached "
                 "(cupti-clock, plan-started, plan-operations, h2d-gbps notes)")
    bps = rate * 1e9

    # the replay: one engine, in issue order
    t_end, replay = 0, {}
    for (t, seq, bid, size, why) in sorted(backs):
        start = t
        if why == "prefetch" and seq in gen:	# it follows operation seq on the device
            start = max(start, gen[seq] + off)
        start = max(start, t_end)
        t_end = start + size / bps * 1e9
        replay.setdefault(bid, []).append((t, seq, start, t_end, size, why))

    print(f"copies back replayed at {rate:.2f} GB/s")
    totals = {"in time by the replay": 0.0,
              "late by the replay too": 0.0}
    for it in range(2):
        lo, hi = started + it * period, started + (it + 1) * period - 1
        ops = sorted(s for s in gst if lo <= s <= hi)
        if len(ops) < period // 2:
            continue
        print(f"iteration from seq {lo}:")
        prev = None
        for s in ops:
            if prev is not None and s in uses:
                gap = (gst[s] - gen[prev]) / 1e6
                if gap * 1e3 >= a.min_us:
                    at = gst[s] + off	# the operation's start, on the host's clock
                    last = None
                    for bid in uses[s]:
                        for r in replay.get(bid, []):
                            if r[0] <= at and (last is None or r[0] > last[1][0]):
                                last = (bid, r)
                    if last is not None:
                        bid, (t, seq, start, end, size, why) = last
                        kind = ("in time by the replay"
                                if end <= at else "late by the replay too")
                        totals[kind] += gap
                        print(f"  seq {s}: idle {gap:.1f} ms; buffer {bid} ({size >> 20} MiB, {why} "
                              f"after seq {seq}): issued {(t - at) / 1e6:+.1f}, replayed "
                              f"{(start - at) / 1e6:+.1f} to {(end - at) / 1e6:+.1f}")
            prev = s
    print("; ".join(f"{k}: {v / 1e3:.3f} s" for k, v in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
