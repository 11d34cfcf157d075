#!/usr/bin/env python3
"""Where an audit's time went, from its phase log and verdicts.jsonl (either may be missing).

  python3 scripts/audit_seconds.py PHASES_LOG VERDICTS_JSONL

Prints each phase's count, sum and largest (timing/phase_log.h: "pid name seconds" lines), the
largest sums first, then per task the candidates judged with their seconds (all, in worker runs,
in judging), calls sent, crashes and hangs (audit checker's verdicts.jsonl fields)."""
import collections
import json
import os
import sys

phases_log, verdicts = sys.argv[1], sys.argv[2]
if os.path.exists(phases_log):
    n, total, top = collections.Counter(), collections.Counter(), {}
    for line in open(phases_log):
        parts = line.split()
        if len(parts) < 3:
            continue
        name, s = parts[1], float(parts[2])
        n[name] += 1
        total[name] += s
        top[name] = max(top.get(name, 0.0), s)
    for name, s in sorted(total.items(), key=lambda kv: -kv[1])[:25]:
        print("phase %-28s %7d %9.1f s  max %7.2f s" % (name, n[name], s, top[name]))
if os.path.exists(verdicts):
    tasks = collections.OrderedDict()
    for line in open(verdicts):
        v = json.loads(line)
        a = tasks.setdefault(v["task"], [0, 0.0, 0.0, 0.0, 0, 0, 0])
        a[0] += 1
        a[1] += v.get("seconds", 0)
        a[2] += v.get("run_seconds", 0)
        a[3] += v.get("judge_seconds", 0)
        a[4] += v.get("trials_sent", 0)
        a[5] += v.get("crashes", 0)
        a[6] += v.get("hangs", 0)
    for task, a in tasks.items():
        print("task %-34s %4d cand %7.1f s (run %7.1f judge %6.1f) %6d calls %4d crashes %3d hangs"
              % (task, *a))
