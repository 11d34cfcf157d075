#!/usr/bin/env python3
"""Checks one page that headless Chromium loaded (tests/report_browser.sh): no console message,
no request the page made to the network, every expected id in the DOM, enough non-empty SVG
plots, and a screenshot of non-trivial size. Prints one line per failure; exit 1 if any."""
import argparse
import html
import json
import re
import sys


def page_requests(netlog_path):
    """URLs with a network scheme that the page asked for. Chromium's own service requests
    (update checks, account lookups) have no web initiator ("not an origin"); a page loaded from
    file:// initiates with the opaque origin "null"."""
    with open(netlog_path) as f:
        log = json.load(f)
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    out = set()
    for e in log.get("events", []):
        if types.get(e.get("type")) != "URL_REQUEST_START_JOB":
            continue
        p = e.get("params", {})
        url = p.get("url", "")
        if url.split(":", 1)[0] in ("http", "https", "ws", "wss") and p.get("initiator") != "not an origin":
            out.add(url)
    return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dom", required=True)
    ap.add_argument("--stderr", required=True)
    ap.add_argument("--netlog", required=True)
    ap.add_argument("--png", required=True)
    ap.add_argument("--ids", required=True, help="file: one expected id per line")
    ap.add_argument("--min-svgs", type=int, required=True)
    ap.add_argument("--min-png-bytes", type=int, default=20000)
    a = ap.parse_args()
    bad = []
    dom = open(a.dom, encoding="utf-8").read()
    for line in open(a.stderr, encoding="utf-8", errors="replace"):
        if "CONSOLE" in line or "Uncaught" in line:
            bad.append("console: " + line.strip()[:200])
    for url in page_requests(a.netlog):
        bad.append("network request: " + url[:200])
    ids = [l.rstrip("\n") for l in open(a.ids, encoding="utf-8") if l.strip()]
    for i in ids:
        # The serialized DOM escapes &, < and > in text: that is what an escaped page shows.
        if html.escape(i, quote=False) not in dom:
            bad.append("id not in the DOM: " + i)
    svgs = re.findall(r"<svg\b[^>]*>(.*?)</svg>", dom, re.S)
    drawn = [s for s in svgs if re.search(r"<(line|rect|circle|polyline)\b", s)]
    if len(drawn) < a.min_svgs:
        bad.append("%d non-empty SVG plots, expected at least %d" % (len(drawn), a.min_svgs))
    try:
        import os
        size = os.path.getsize(a.png)
    except OSError:
        size = 0
    if size < a.min_png_bytes:
        bad.append("screenshot %s is %d bytes (< %d)" % (a.png, size, a.min_png_bytes))
    for b in bad:
        print("  FAIL " + b)
    print("  %d ids, %d SVG plots, screenshot %d KB: %s" %
          (len(ids), len(drawn), size // 1024, "ok" if not bad else "%d failures" % len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
