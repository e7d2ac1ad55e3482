#!/usr/bin/env python3
"""Opens scaleplan's HTML reports in a headless browser and checks what a user would see.

For each page (compare against Kineto traces, compare of a scaleplan trace with itself, plan,
sweep):
  - the page loads without a console message or an uncaught error (the pages log nothing, so any
    console line is a failure), and its script ran to the end (body[data-status] == "ok");
  - the timelines, tables and charts are in the DOM with the counts the same command's --json
    output (and, for slices, the trace files themselves) imply;
  - a screenshot is not blank: its pixels have many colours, and a real share is not white.
A negative control (a page whose script throws) must be caught, or the check itself is broken.

Exit 0 on success, 1 on a failure, 77 (ctest SKIP_RETURN_CODE) when no browser is installed.
Standard library only (zlib for the PNG).
"""
import argparse
import gzip
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
MAX_RANKS = 8  # cli/html_report.h kHtmlMaxRanks
MAX_SLICES = 6000  # kHtmlMaxSlices


def find_browser():
    for name in (os.environ.get("SCALEPLAN_BROWSER"), "chromium", "chromium-browser",
                 "google-chrome", "google-chrome-stable"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


class Browser:
    def __init__(self, exe, tmp):
        self.exe = exe
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp)

    def args(self):
        return [self.exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--no-first-run", "--disable-extensions", "--user-data-dir=" + self.profile,
                "--enable-logging=stderr", "--v=0"]

    def dump_dom(self, path):
        r = run(self.args() + ["--virtual-time-budget=3000", "--dump-dom", "file://" + path])
        return r.stdout, r.stderr

    def screenshot(self, path, png):
        r = run(self.args() + ["--window-size=1280,1600", "--screenshot=" + png,
                               "file://" + path])
        return r.returncode, r.stderr


def console_problems(stderr):
    """Console messages and uncaught errors from the page (chromium logs them as CONSOLE)."""
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line or "Uncaught" in line]


class Counter(html.parser.HTMLParser):
    """Elements by (tag, class word) inside the element with a given id, and body attributes."""

    VOID = {"br", "img", "input", "meta", "link", "hr", "rect", "line", "path", "circle", "i"}

    def __init__(self):
        super().__init__()
        self.stack = []  # ids of open elements
        self.counts = {}  # (scope id or None, tag, class word) -> n
        self.ids = {}  # id -> n
        self.body = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if a.get("id"):
            self.ids[a["id"]] = self.ids.get(a["id"], 0) + 1
        scopes = [None] + [s for s in self.stack if s]
        for word in (a.get("class") or "").split() + [""]:
            for s in scopes:
                key = (s, tag, word)
                self.counts[key] = self.counts.get(key, 0) + 1
        if tag not in self.VOID:
            self.stack.append(a.get("id"))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def n(self, tag, word="", scope=None):
        if tag == "#":  # elements with the id `word`
            return self.ids.get(word, 0)
        return self.counts.get((scope, tag, word), 0)


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit PNG, unfiltered (PNG spec, section 9)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert depth == 8 and colour in (2, 6), f"PNG depth {depth} colour type {colour}"
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def check_screenshot(png, failures, what):
    width, height, bpp, rows = png_pixels(png)
    colours, non_white, total = set(), 0, 0
    for y in range(0, height, 4):
        row = rows[y]
        for x in range(0, width, 4):
            px = row[x * bpp:x * bpp + 3]
            colours.add(px)
            total += 1
            non_white += px != b"\xff\xff\xff"
    if len(colours) < 8 or non_white < total // 100:
        failures.append(f"{what}: screenshot looks blank ({len(colours)} colours, "
                        f"{non_white}/{total} sampled pixels not white)")


def kineto_first_step_slices(path):
    """GPU events launched during the trace's first ProfilerStep (the page draws that one)."""
    ev = json.load(gzip.open(path))["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    launch = {e["args"]["correlation"]: e["ts"] for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    first = None
    counts = {}
    for e in ev:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        at = launch.get(e.get("args", {}).get("correlation"), e["ts"])
        for i, (a, b) in enumerate(steps):
            if a <= at < b:
                counts[i] = counts.get(i, 0) + 1
    return counts[min(counts)] if counts else 0


def check_page(browser, page, expect, failures, what, tmp):
    dom, stderr = browser.dump_dom(page)
    for line in console_problems(stderr):
        failures.append(f"{what}: console: {line.strip()}")
    c = Counter()
    c.feed(dom)
    if c.body.get("data-status") != "ok":
        failures.append(f"{what}: the page's script did not finish "
                        f"(body data-status={c.body.get('data-status')!r})")
    for (tag, word, scope), want in expect.items():
        got = c.n(tag, word, scope)
        if got != want:
            name = f"#{word}" if tag == "#" else f"{tag}.{word or '*'} in #{scope or 'page'}"
            failures.append(f"{what}: {name}: {got}, expected {want}")
    png = os.path.join(tmp, os.path.basename(page) + ".png")
    rc, err = browser.screenshot(page, png)
    if rc != 0 or not os.path.exists(png):
        failures.append(f"{what}: no screenshot (exit {rc}): {err[-500:]}")
    else:
        check_screenshot(png, failures, what)


def scaleplan(bin_, *args):
    r = run([bin_, *args])
    if r.returncode != 0:
        raise SystemExit(f"scaleplan {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def compare_expectations(j, predicted_slices, measured_slices):
    classes = len(j["classes"])
    e = {
        ("svg", "timeline", None): min(j["predicted"]["ranks"], MAX_RANKS) +
        min(j["measured"]["ranks"], MAX_RANKS),
        ("rect", "op", None): sum(min(n, MAX_SLICES) for n in predicted_slices) +
        sum(min(n, MAX_SLICES) for n in measured_slices),
        ("tr", "data-row", "summary"): 4,
        ("tr", "data-row", "classes"): classes,
        ("tr", "data-row", "exposed"): len(j["exposed_comm"]),
        ("tr", "data-row", "streams"): len(j["streams"]),
        ("rect", "bar", "class-chart"): 2 * classes,
        ("#", "class-chart", None): 1,
        ("#", "ops", None): 0,
        ("tr", "data-row", "memory"): max(len(j["predicted"]["peak_memory"]),
                                          len(j["measured"]["peak_memory"])),
    }
    if j["op_for_op"].get("by_structure"):
        s = j["op_for_op"]["structured"]
        e[("tr", "data-row", "ops")] = len(s["largest_errors"])
        e[("#", "ops", None)] = 1
        e[("tr", "data-row", "op-classes")] = len(s["by_class"])
        e[("tr", "data-row", "op-kinds")] = len(s["by_kind"])
        e[("tr", "data-row", "op-layers")] = len(s["per_layer"])
        e[("tr", "data-row", "op-microbatches")] = len(s["per_microbatch"])
        e[("tr", "data-row", "op-reasons")] = len(s["unmatched_by_reason"])
    elif j["op_for_op"]["possible"]:
        e[("tr", "data-row", "ops")] = len(j["op_for_op"]["largest_errors"])
        e[("#", "ops", None)] = 1
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scaleplan", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    o = ap.parse_args()
    exe = find_browser()
    if exe is None:
        print("SKIP: no chromium or chrome on PATH (scripts/setup.sh installs Debian's chromium; "
              "SCALEPLAN_BROWSER names another)")
        return SKIP
    os.makedirs(o.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="pages-", dir=o.out)
    browser = Browser(exe, tmp)
    failures = []

    # The negative control: a script error must be seen.
    bad = os.path.join(tmp, "control.html")
    with open(bad, "w") as f:
        f.write("<!DOCTYPE html><html><body data-status=\"loading\"><script>"
                "undefinedFunction();document.body.dataset.status='ok';</script></body></html>")
    dom, stderr = browser.dump_dom(bad)
    c = Counter()
    c.feed(dom)
    if not console_problems(stderr) or c.body.get("data-status") == "ok":
        failures.append("negative control: a page that throws was not caught "
                        f"(console lines {console_problems(stderr)}, status "
                        f"{c.body.get('data-status')!r})")

    kineto = os.path.join(o.source, "tests", "data", "kineto", "hta_sampled")
    job = ["--model", "llama-tiny", "--cluster", "dgx-h100", "--seq", "1024", "--layout",
           "tp=2,pp=2,dp=2,gbs=16"]
    pred = os.path.join(tmp, "predicted.json")
    scaleplan(o.scaleplan, "simulate", *job, "--trace", pred)
    trace = json.load(open(pred))
    per_rank = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            per_rank[e["pid"]] = per_rank.get(e["pid"], 0) + 1
    predicted_slices = [per_rank[p] for p in sorted(per_rank)][:MAX_RANKS]

    page = os.path.join(tmp, "compare_kineto.html")
    j = json.loads(scaleplan(o.scaleplan, "compare", "--predicted", pred, "--measured", kineto,
                             "--json", "--html", page))
    measured = [kineto_first_step_slices(os.path.join(kineto, f))
                for f in sorted(os.listdir(kineto))][:MAX_RANKS]
    check_page(browser, page, compare_expectations(j, predicted_slices, measured), failures,
               "compare (Kineto)", tmp)

    page = os.path.join(tmp, "compare_self.html")
    j = json.loads(scaleplan(o.scaleplan, "compare", "--predicted", pred, "--measured", pred,
                             "--json", "--html", page))
    check_page(browser, page, compare_expectations(j, predicted_slices, predicted_slices),
               failures, "compare (op for op)", tmp)

    page = os.path.join(tmp, "plan.html")
    j = json.loads(scaleplan(o.scaleplan, "plan", "--model", "llama-tiny", "--cluster",
                             "dgx-h100", "--gpus", "8", "--seq", "1024", "--gbs", "32", "--top",
                             "4", "--json", "--html", page))
    n = len(j["plans"])
    expect = {
        ("tr", "data-row", "plans"): n,
        ("rect", "bar", "throughput"): n,
        ("g", "stack", "breakdown"): n,
        ("rect", "bar", "memory"): n,
        ("line", "capacity", "memory"): 1,
        ("#", "how-sure", None): 1,
        ("tr", "data-row", "how-sure"): len(j["robustness"]["perturbations"]),
    }
    if n == 0:
        failures.append("plan: no layout to draw")
    check_page(browser, page, expect, failures, "plan", tmp)

    page = os.path.join(tmp, "sweep.html")
    j = json.loads(scaleplan(o.scaleplan, "sweep", "--model", "llama-tiny", "--cluster",
                             "dgx-h100", "--gpus", "8:32", "--seq", "1024", "--gbs", "64",
                             "--train-tokens", "1e9", "--gpu-hour-cost", "2", "-q", "--json",
                             "--html", page))
    fitted = sum(1 for p in j["points"] if p["layout"] is not None)
    changes = sum(1 for p in j["points"] if p["layout_change"])
    expect = {
        ("tr", "data-row", "points"): len(j["points"]),
        ("circle", "point", "throughput"): fitted,
        ("circle", "point", "mfu"): fitted,
        ("line", "change", "throughput"): changes,
        ("line", "change", "mfu"): changes,
    }
    if fitted == 0:
        failures.append("sweep: no point to draw")
    check_page(browser, page, expect, failures, "sweep", tmp)

    for f in failures:
        print("FAIL:", f)
    print(f"checked 4 pages and a negative control in {os.path.basename(exe)}: "
          f"{len(failures)} failure(s); pages and screenshots in {tmp}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
