#!/usr/bin/env python3
"""The public run page in a real browser (issue 20, item 4).

Starts tandem-coordinator with a small run (quorum 1, samples on), lets one tandem-worker named
'<script>alert(1)</script>' train two work units, then opens / in Debian's headless Chromium:
the DOM must hold the loss chart (svg), the newest sample as /v1/runs/{run}/samples gives it,
the leaderboard rows, and the name as text with no script element made from it; screenshots at
desktop (1280x900) and phone (390x844) widths must be PNGs that are not blank (decoded here,
per the PNG specification). Exit 77 (SKIPPED) when chromium is missing or cannot run.

usage: test_public_page_browser.py COORDINATOR_BIN WORKER_BIN [--save-screenshots DIR]
"""

import html.parser
import json
import os
import re
import shutil
import signal
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

NAME = "<script>alert(1)</script>"
TEAM = "Team <b>&"


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def skip(message):
    print("SKIPPED: " + message, file=sys.stderr)
    sys.exit(77)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def get(url):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the self-signed test coordinator
    with urllib.request.urlopen(url, context=ctx, timeout=20) as r:
        return r.read().decode("utf-8")


def chromium(binary, profile, *args):
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--ignore-certificate-errors",
           "--no-first-run", "--user-data-dir=" + profile, "--hide-scrollbars"] + list(args)
    return subprocess.run(cmd, capture_output=True, timeout=120)


# ---- PNG, read from the specification (RFC 2083): chunks, zlib, the five row filters.

def png_pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + " is not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace != 0:
                fail("%s: expected 8-bit RGB(A), non-interlaced; found depth %d color %d" %
                     (path, depth, color))
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
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
    return width, height, channels, rows


def check_screenshot(path, want_width, want_height):
    width, height, channels, rows = png_pixels(path)
    if (width, height) != (want_width, want_height):
        fail("%s is %dx%d, expected %dx%d" % (path, width, height, want_width, want_height))
    colors, counts = set(), {}
    for row in rows[::4]:
        for x in range(0, width * channels, channels * 4):
            px = row[x:x + 3]
            colors.add(px)
            counts[px] = counts.get(px, 0) + 1
    background = max(counts.values()) / sum(counts.values())
    if len(colors) < 20 or background > 0.97:
        fail("%s looks blank: %d colours, %.1f%% one colour" % (path, len(colors), 100 * background))
    print("%s: %dx%d, %d colours, %.1f%% background" %
          (os.path.basename(path), width, height, len(colors), 100 * background))


class Dom(html.parser.HTMLParser):
    """Elements by tag, text by id of the enclosing element, and the donor cells."""

    def __init__(self):
        super().__init__()
        self.tags, self.stack, self.text_in = [], [], {}
        self.donor_rows, self.cells, self.row = [], [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        self.stack.append(a.get("id"))
        if tag == "tr" and a.get("class") == "donor":
            self.row = []
        if tag == "td" and self.row is not None:
            self.row.append("")

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()
        if tag == "tr" and self.row is not None:
            self.donor_rows.append(self.row)
            self.row = None

    def handle_data(self, data):
        for i in self.stack:
            if i:
                self.text_in[i] = self.text_in.get(i, "") + data
        if self.row is not None and self.row:
            self.row[-1] += data


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    coordinator_bin, worker_bin = sys.argv[1], sys.argv[2]
    save_dir = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--save-screenshots" else None
    browser = find_chromium()
    if not browser:
        skip("no chromium here (scripts/setup installs Debian's chromium)")
    tmp = tempfile.mkdtemp(prefix="tandem-browser-")
    probe = chromium(browser, os.path.join(tmp, "probe"), "--dump-dom", "data:text/html,<p>ok</p>")
    if probe.returncode != 0 or b"<p>ok</p>" not in probe.stdout:
        skip("chromium does not run here: " + probe.stderr.decode(errors="replace")[-300:])

    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home"]
        x = 7
        for _ in range(40000):
            x = (x * 1103515245 + 12345) % (1 << 31)
            f.write(words[x % 12] + (" " if x % 9 else ".\n"))
    coord_log = open(os.path.join(tmp, "coordinator.log"), "w")
    coord = subprocess.Popen(
        [coordinator_bin, "--listen", "127.0.0.1:0", "--state-dir", os.path.join(tmp, "state"),
         "--corpus", corpus, "--model", "L=1,NH=2,C=32,T=32", "--inner-steps", "8",
         "--batch", "2", "--quorum", "1", "--sample-prompt", "The cat", "--sample-tokens", "24"],
        stdout=subprocess.PIPE, stderr=coord_log, text=True)
    worker = None
    try:
        out, port, pin = "", 0, ""
        deadline = time.time() + 60
        while time.time() < deadline and not (port and pin):
            line = coord.stdout.readline()
            if not line:
                fail("the coordinator ended: " + open(coord_log.name).read()[-2000:])
            out += line
            m = re.search(r"listening on port (\d+)", out)
            p = re.search(r"pin (sha256//\S+)", out)
            port, pin = (int(m.group(1)) if m else 0), (p.group(1) if p else "")
        base = "https://127.0.0.1:%d" % port
        worker = subprocess.run(
            [worker_bin, "--coordinator", base, "--pin", pin, "--data-dir",
             os.path.join(tmp, "worker"), "--device", "cpu", "--threads", "1",
             "--max-work-units", "2", "--name", "  " + NAME + " ", "--team", TEAM],
            capture_output=True, text=True, timeout=300)
        if worker.returncode != 0:
            fail("the worker failed (%d): %s" % (worker.returncode, worker.stderr[-2000:]))
        # Both rounds' validation loss and the sample of the newest version (status "round") are
        # in: the page shows that sample, whatever the machine's load (a fixed wait was not
        # enough under -j2 load).
        deadline = time.time() + 120
        while time.time() < deadline:
            status = json.loads(get(base + "/v1/status"))
            losses = [h for h in status["history"] if h.get("val_loss") is not None]
            newest = status.get("latest_sample") or {}
            if len(losses) >= 2 and newest.get("version") == status["round"]:
                break
            time.sleep(0.5)
        else:
            fail("no validation loss and sample of the newest version after two rounds: " +
                 json.dumps(status))
        sample = json.loads(get(base + "/v1/runs/1/samples?limit=1"))["samples"][0]
        board = json.loads(get(base + "/v1/runs/1/leaderboard"))
        if [d["display_name"] for d in board["donors"]] != [NAME]:
            fail("the leaderboard JSON lists %s, expected the worker's name" % board["donors"])

        dump = chromium(browser, os.path.join(tmp, "p1"), "--dump-dom", base + "/")
        dom_text = dump.stdout.decode("utf-8")
        if dump.returncode != 0 or "<html" not in dom_text:
            fail("chromium --dump-dom failed: " + dump.stderr.decode(errors="replace")[-1000:])
        dom = Dom()
        dom.feed(dom_text)
        tags = [t for t, _ in dom.tags]
        if "script" in tags:
            fail("the page's DOM has a script element: the name was not escaped")
        svgs = [a for t, a in dom.tags if t == "svg" and a.get("id") == "loss-chart"]
        if not svgs or "polyline" not in tags:
            fail("no loss chart (svg#loss-chart with a polyline) in the DOM")
        sample_text = " ".join(dom.text_in.get("sample", "").split())
        want = " ".join((sample["prompt"] + sample["text"]).split())
        if want not in sample_text:
            fail("the sample section says %r, expected %r" % (sample_text[:200], want[:200]))
        if len(dom.donor_rows) != 1:
            fail("expected 1 leaderboard row, found %d" % len(dom.donor_rows))
        row = dom.donor_rows[0]
        if row[0].strip() != "1" or row[1] != NAME or row[2] != TEAM:
            fail("the leaderboard row is %r, expected rank 1, %r, %r" % (row, NAME, TEAM))
        for private in (pin, "127.0.0.1", os.uname().nodename):
            if private and private in dom_text:
                fail("the page shows %r" % private)
        print("DOM: svg chart, sample, 1 leaderboard row, the name as text, no script element")

        shots = {}
        for label, (w, h) in (("desktop", (1280, 900)), ("phone", (390, 844))):
            path = os.path.join(tmp, "public-page-%s.png" % label)
            shot = chromium(browser, os.path.join(tmp, "p-" + label), "--screenshot=" + path,
                            "--window-size=%d,%d" % (w, h), base + "/")
            if shot.returncode != 0 or not os.path.exists(path):
                fail("chromium --screenshot failed: " + shot.stderr.decode(errors="replace")[-1000:])
            check_screenshot(path, w, h)
            shots[label] = path
        if save_dir:
            os.makedirs(save_dir, exist_ok=True)
            for label, path in shots.items():
                shutil.copy(path, os.path.join(save_dir, os.path.basename(path)))
            print("screenshots saved to " + save_dir)
    finally:
        coord.send_signal(signal.SIGTERM)
        try:
            coord.wait(timeout=30)
        except subprocess.TimeoutExpired:
            coord.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
