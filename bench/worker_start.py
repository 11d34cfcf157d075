#!/usr/bin/env python3
"""Worker start-up, `kernelgate worker` against `kg_worker`, interleaved in one run.

  python3 bench/worker_start.py BUILD/suite [RUNS] [--concurrent]

For each binary, RUNS times (alternating, so drift hits both alike):
  ready  -- spawn to the first answer of `worker --serve` (the worker pool's handshake: the process
            starts, opens its CUDA session, says "ready", reads a manifest path, answers). The manifest does not
            exist, so no candidate is run and nothing is written; on a machine without a GPU the
            session fails at once and the answer is "5 recycle".
  exit   -- spawn to exit of `worker MISSING.json` (exec, static initialisation, main, exit; no
            CUDA call).
Prints the median, min and max of each in milliseconds.

With --concurrent (on the GPU machine), `kg_worker` only: RUNS rounds of 1, 4 and 8 workers
started at once, each worker's spawn-to-answer time, first with no other CUDA process, then with
one idle worker holding a context for the whole round (does an open context elsewhere make a
new one cheaper, and how do starts queue behind each other?).
"""
import os
import statistics
import subprocess
import sys
import threading
import time


def serve_once(argv):
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    t0 = time.perf_counter()
    p = subprocess.Popen(argv + ["worker", "--serve", str(req_r), str(rep_w)],
                         pass_fds=(req_r, rep_w), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(req_r)
    os.close(rep_w)
    os.write(req_w, b"/nonexistent/kg-bench-manifest.json\n")
    data = b""
    reply = b""
    while True:  # the answer: the first line that is not the worker's "ready"
        lines = [l for l in data.split(b"\n")[:-1] if l != b"ready"]
        if lines:
            reply = lines[0]
            break
        chunk = os.read(rep_r, 64)
        if not chunk:
            break
        data += chunk
    ready = time.perf_counter() - t0
    os.close(req_w)
    os.close(rep_r)
    p.wait()
    return ready, reply.decode().strip()


def exit_once(argv):
    t0 = time.perf_counter()
    subprocess.run(argv + ["worker", "/nonexistent/kg-bench-manifest.json"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return time.perf_counter() - t0


def held_context(argv):
    """An idle worker with its context up (it waits for a manifest path): returns its pipes."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    p = subprocess.Popen(argv + ["worker", "--serve", str(req_r), str(rep_w)],
                         pass_fds=(req_r, rep_w), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(req_r)
    os.close(rep_w)
    os.read(rep_r, 6)  # "ready\n"
    return p, req_w, rep_r


def concurrent(folder, runs):
    argv = [os.path.join(folder, "kg_worker")]
    serve_once(argv)
    print(f"kg_worker, {runs} rounds per row; spawn to answer, milliseconds: median (min..max)")
    for holder in (False, True):
        for k in (1, 4, 8):
            times = []
            for _ in range(runs):
                held = held_context(argv) if holder else None
                out = [None] * k
                threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, serve_once(argv)))
                           for i in range(k)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                times += [1000 * s for s, _ in out]
                if held:
                    p, req_w, rep_r = held
                    os.close(req_w)
                    os.close(rep_r)
                    p.wait()
            label = "one other context held" if holder else "no other context"
            print(f"{k} at once, {label:24} {statistics.median(times):8.1f} "
                  f"({min(times):.1f}..{max(times):.1f})")


def main():
    if "--concurrent" in sys.argv:
        sys.argv.remove("--concurrent")
        folder = sys.argv[1] if len(sys.argv) > 1 else "build/suite"
        concurrent(folder, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
        return
    folder = sys.argv[1] if len(sys.argv) > 1 else "build/suite"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    binaries = {"kernelgate worker": [os.path.join(folder, "kernelgate")],
                "kg_worker": [os.path.join(folder, "kg_worker")]}
    ready = {k: [] for k in binaries}
    exits = {k: [] for k in binaries}
    replies = {k: set() for k in binaries}
    for name, argv in binaries.items():  # one untimed start each: the page cache
        serve_once(argv)
    for _ in range(runs):
        for name, argv in binaries.items():
            s, reply = serve_once(argv)
            ready[name].append(s)
            replies[name].add(reply)
            exits[name].append(exit_once(argv))
    print(f"{runs} runs each, interleaved; milliseconds: median (min..max)")
    for name in binaries:
        r = [1000 * x for x in ready[name]]
        e = [1000 * x for x in exits[name]]
        print(f"{name:18} ready {statistics.median(r):7.1f} ({min(r):.1f}..{max(r):.1f})"
              f"   exit {statistics.median(e):7.1f} ({min(e):.1f}..{max(e):.1f})"
              f"   reply {sorted(replies[name])}")


if __name__ == "__main__":
    main()
