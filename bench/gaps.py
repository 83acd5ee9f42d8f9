#!/usr/bin/env python3
"""bench/gaps.py: where the GPU sat idle in the iterations a plan ran.

usage: bench/gaps.py [--top N] [--min-us US] [--json FILE [--label L]] TRACE

For each iteration that the last plan ran while CUPTI was still attached
(ebb keeps it for the plan's first two iterations), the GPU time of the job's
operations (G records) gives the device's busy time and its idle gaps. Each
gap is put down to one of two causes by comparing the host's issue time of
the operation after it (its L, C, M or N record, put on CUPTI's clock with
the cupti-clock note) with the start of the gap:
  host    the operation was issued after the device had gone idle: the host
          was behind (a wait at a restore gate, for room, or launch work)
  device  it had been issued in time and still waited: a stream wait on a
          restore's copy, or another stream's work
The largest gaps are listed with the operation after each and the plan's
records (O plan, B prefetch, J) the host wrote between that operation and
the one before, with the host's waits there (H records: for room, at a
restore's gate, for an offload to land). With the plan's waits in the trace
(plan-wait notes), each iteration also gets their total beside the idle time
before the operations they precede, and a listed gap the wait planned there.
The idle time elsewhere is split by what came before each gap: the job's own
copy (C: queued behind ebb's on a copy engine), a host wait for frees, a host
wait for room or at a gate, the device waiting (a copy back landing late),
the host behind otherwise, and gaps under --min-us (the job's own spacing).
Prints a table; --json appends one object per iteration.
"""
import argparse
import bisect
import json
import sys

OPS = "LCMNRY"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--min-us", type=float, default=20.0, help="gaps shorter than this are not listed")
    ap.add_argument("--json")
    ap.add_argument("--label", help="a label for the --json objects")
    ap.add_argument("trace")
    a = ap.parse_args()

    issue = {}      # seq -> (host t, type, kernel id)
    kname = {}
    gtimes = {}     # seq -> [(start, end)]
    moves = []      # (host t, record) of the plan's O/B/J records
    iters = []      # (iteration, seq)
    started = departed = None
    pending, waits = [], {}     # the plan's waits: (position, ns) as noted; of the plan running
    offset = None   # CUPTI clock - host clock
    with open(a.trace, errors="replace") as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            t = p[0]
            if t in OPS and len(p) >= 3:
                issue[int(p[2])] = (int(p[1]), t, int(p[4]) if t == "L" else 0)
            elif t == "G" and len(p) == 4:
                gtimes.setdefault(int(p[1]), []).append((int(p[2]), int(p[3])))
            elif t == "K" and len(p) >= 5:
                kname[int(p[1])] = p[4]
            elif t in "OBJ" and len(p) >= 6 and int(p[2]) != 0:
                moves.append((int(p[1]), t + " " + p[5], 0))
            elif t == "H" and len(p) >= 5:
                moves.append((int(p[1]), "H " + p[4], int(p[3])))
            elif t == "I" and len(p) >= 4:
                iters.append((int(p[2]), int(p[3])))
            elif t == "Q" and len(p) >= 4:
                if p[2] == "cupti-clock":
                    offset = int(p[3]) - int(p[1])
                elif p[2] == "plan-operations":
                    pending = []    # a new plan's notes
                elif p[2] == "plan-wait":
                    pos, ns = p[3].split(":")
                    pending.append((int(pos), int(ns)))
                elif p[2] == "plan-started":
                    started, departed = int(p[3]), None
                    waits = dict(pending)
                elif p[2] == "plan-departed":
                    departed = int(p[3].split(":")[0].split("=")[1])
    if started is None or offset is None:
        print("gaps.py: no plan started, or no CUPTI clock note, in %s" % a.trace)
        return 0
    moves.sort()
    move_t = [m[0] for m in moves]

    def host_between(t0, t1):
        """The plan's records the host wrote in [t0, t1], and its waits there."""
        between, waited = {}, {}
        for mt, what, ns in moves[bisect.bisect_left(move_t, t0):bisect.bisect_right(move_t, t1)]:
            between[what] = between.get(what, 0) + 1
            if ns:
                waited[what[2:]] = waited.get(what[2:], 0) + ns
        return between, waited

    def previous_issue(s, s0):
        prev = max((q for q in range(s - 1, max(s0, s - 64) - 1, -1) if q in issue), default=None)
        return issue[prev][0] if prev is not None else issue.get(s, (0,))[0]

    bounds = [s for _, s in iters if s >= started]
    out = []
    for s0, s1 in zip(bounds, bounds[1:]):
        if departed is not None and s1 > departed:
            break
        acts = sorted((b, e, s) for s in range(s0, s1) for b, e in gtimes.get(s, []))
        if len(acts) < (s1 - s0) // 2:
            continue    # CUPTI was detached
        busy, gaps = 0, []
        cur_b, cur_e = acts[0][0], acts[0][1]
        for b, e, s in acts[1:]:
            if b > cur_e:
                busy += cur_e - cur_b
                gaps.append((b - cur_e, cur_e, s))
                cur_b = b
            cur_e = max(cur_e, e)
        busy += cur_e - cur_b
        span = cur_e - acts[0][0]
        host_idle = dev_idle = 0
        rows = []
        gap_at = {}
        for g, gstart, s in gaps:
            gap_at[s] = g
            t_issue = issue[s][0] + offset if s in issue else None
            cause = "host" if t_issue is not None and t_issue > gstart else "device"
            if cause == "host":
                host_idle += g
            else:
                dev_idle += g
            rows.append((g, s, cause))
        rows.sort(reverse=True)
        # the idle time not before the operations the plan waits at, by what
        # came before each gap
        elsewhere = {"job_copy": 0, "after_frees": 0, "after_room_or_gate": 0, "device": 0,
                     "host": 0, "under_min": 0}
        for g, s, cause in rows:
            if s - s0 in waits:
                continue
            tp = issue.get(s, (0, "?", 0))
            if g < a.min_us * 1e3:
                kind = "under_min"
            elif tp[1] == "C":
                kind = "job_copy"
            else:
                _, waited = host_between(previous_issue(s, s0), tp[0])
                if "frees" in waited:
                    kind = "after_frees"
                elif waited:
                    kind = "after_room_or_gate"
                else:
                    kind = cause
            elsewhere[kind] += g
        top = []
        for g, s, cause in rows[:a.top]:
            if g < a.min_us * 1e3:
                break
            tp = issue.get(s, (0, "?", 0))
            t_prev = previous_issue(s, s0)
            between, waited = host_between(t_prev, tp[0])
            top.append({"gap_us": round(g / 1e3, 1), "seq": s, "cause": cause,
                        "op": tp[1] + (" " + kname.get(tp[2], "?")[:60] if tp[1] == "L" else ""),
                        "host_since_previous_op_us": round((tp[0] - t_prev) / 1e3, 1),
                        "plan_records_between": between,
                        "host_waited_us": {k: round(v / 1e3, 1) for k, v in waited.items()}})
        for x in top:
            w = waits.get(x["seq"] - s0)
            if w:
                x["planned_wait_us"] = round(w / 1e3, 1)
        planned = sum(waits.values())
        idle_at = sum(gap_at.get(s0 + pos, 0) for pos in waits)
        r = {"label": a.label, "first_seq": s0, "ops": s1 - s0, "gpu_span_s": span / 1e9, "gpu_busy_s": busy / 1e9,
             "idle_host_s": host_idle / 1e9, "idle_device_s": dev_idle / 1e9,
             "gaps": len(gaps), "planned_waits_s": planned / 1e9, "planned_waits": len(waits),
             "idle_at_planned_waits_s": idle_at / 1e9,
             "idle_elsewhere_s": {k: v / 1e9 for k, v in elsewhere.items()}, "top": top}
        out.append(r)
        print("iteration from seq %d (%d ops): GPU span %.3f s, busy %.3f s; idle %.3f s with the host "
              "behind, %.3f s waiting on the device (%d gaps)" % (s0, s1 - s0, span / 1e9, busy / 1e9,
                                                                  host_idle / 1e9, dev_idle / 1e9, len(gaps)))
        if waits:
            print("  the plan's waits: %.3f s at %d operations; idle before those operations %.3f s" % (
                planned / 1e9, len(waits), idle_at / 1e9))
        print("  idle elsewhere %.3f s: before the job's copies %.3f, after waits for frees %.3f, after "
              "waits for room or a gate %.3f, waiting on the device %.3f, the host behind %.3f, gaps "
              "under %g us %.3f" % (sum(elsewhere.values()) / 1e9, elsewhere["job_copy"] / 1e9,
                                    elsewhere["after_frees"] / 1e9, elsewhere["after_room_or_gate"] / 1e9,
                                    elsewhere["device"] / 1e9, elsewhere["host"] / 1e9, a.min_us,
                                    elsewhere["under_min"] / 1e9))
        for x in top:
            print("  %9.1f us before seq %d (%s), %s; host spent %.1f us since the op before%s; %s%s" % (
                x["gap_us"], x["seq"], x["op"], x["cause"], x["host_since_previous_op_us"],
                "".join(", %.1f us waiting (%s)" % (v, k) for k, v in sorted(x["host_waited_us"].items())),
                ", ".join("%d %s" % (n, w) for w, n in sorted(x["plan_records_between"].items())) or "-",
                "; the plan waits %.1f us here" % x["planned_wait_us"] if "planned_wait_us" in x else ""))
    if not out:
        print("gaps.py: no planned iteration with CUPTI times in %s" % a.trace)
    if a.json:
        with open(a.json, "a") as f:
            for r in out:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
