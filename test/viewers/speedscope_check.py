#!/usr/bin/env python3
"""Opens a profile in speedscope, in headless Chromium, and checks that named frames are drawn.

Usage: speedscope_check.py PROFILE --expect NAME [--expect NAME ...] --screenshot OUT.png
                           [--view time-ordered|left-heavy] [--timeout SECONDS]
                           [--speedscope DIR] [--chromium PATH]

PROFILE is any file speedscope imports (pprof, gzipped or not; folded stacks; Chrome Trace Event
JSON; ...). speedscope (the npm package, installed by `./run.sh deps` into
test/viewers/node_modules) is served with the profile from a local HTTP server (Python's
standard library, 127.0.0.1 only), and opened as `index.html#profileURL=...`, the way its own
documentation links a profile; speedscope refuses `profileURL` on file:// pages.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
messages separated by NUL bytes on file descriptors 3 and 4), so no WebSocket client is needed.
Before speedscope's code runs, a script wraps CanvasRenderingContext2D's fillText, clearRect and
fillRect: per canvas, it keeps the strings drawn inside the canvas since its last full-size
clear or fill, i.e. the labels on the canvas now. speedscope draws frame names as such labels
(flame chart and minimap), one render per animation frame.

The check passes when every NAME is among the labels on a canvas attached to the page, and the
screenshot (a PNG of the page, written to OUT.png as evidence) is not blank: decoded by Chromium
itself, it must hold more than a handful of colours and enough pixels unlike its commonest
colour. speedscope splits some files into several profiles and shows one at a time (a Chrome
trace: one per thread, "name (1/3)" in its toolbar); while a NAME is still missing, the check
moves to the next one as a user would (key "n") and takes its screenshot too (OUT-2.png, ...):
a NAME may be drawn in any of them. It fails (exit status 1) when speedscope reports an import error (its "Unrecognized
format" alert or its error page), when a NAME is missing once the drawing has settled, when the
screenshot is blank, or when nothing settles within --timeout seconds. Exit status 77 means the
check could not run here: no Chromium or no speedscope (ctest reports the test as skipped).

Waits poll for a condition (every 0.2 s) up to one deadline, so a slow, loaded machine only
makes the check slower.
"""

import argparse
import base64
import functools
import http.server
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

SKIP = 77
HERE = Path(__file__).resolve().parent
DEFAULT_SPEEDSCOPE = HERE / "node_modules" / "speedscope" / "dist" / "release"
VIEWPORT = (1600, 900)

# Runs in the page before any of speedscope's code. `window.__tallyLabels()` returns the strings
# on every attached canvas now, each with its canvas's size.
RECORDER = r"""
(() => {
  const proto = CanvasRenderingContext2D.prototype;
  const labels = new WeakMap();   // canvas -> Map(text -> count)
  const canvases = new Set();
  const covers = (ctx, x, y, w, h) => {
    const t = ctx.getTransform();
    const a = t.transformPoint({x: x, y: y}), b = t.transformPoint({x: x + w, y: y + h});
    return Math.min(a.x, b.x) <= 0 && Math.min(a.y, b.y) <= 0 &&
           Math.max(a.x, b.x) >= ctx.canvas.width && Math.max(a.y, b.y) >= ctx.canvas.height;
  };
  const wipe = (original) => function(x, y, w, h) {
    if (covers(this, x, y, w, h)) labels.set(this.canvas, new Map());
    return original.apply(this, arguments);
  };
  proto.clearRect = wipe(proto.clearRect);
  proto.fillRect = wipe(proto.fillRect);
  const fillText = proto.fillText;
  proto.fillText = function(text, x, y) {
    const p = this.getTransform().transformPoint({x: x, y: y});
    if (p.x >= 0 && p.y >= 0 && p.x < this.canvas.width && p.y < this.canvas.height) {
      let m = labels.get(this.canvas);
      if (!m) { m = new Map(); labels.set(this.canvas, m); }
      const s = String(text);
      m.set(s, (m.get(s) || 0) + 1);
      canvases.add(this.canvas);
    }
    return fillText.apply(this, arguments);
  };
  window.__tallyLabels = () => {
    const out = [];
    for (const c of canvases) {
      if (!c.isConnected || !c.getClientRects().length) continue;
      for (const s of (labels.get(c) || new Map()).keys()) out.push(s);
    }
    return out;
  };
})();
"""

# Decodes the screenshot in the page and measures it: [distinct colours, share of pixels unlike
# the commonest colour].
MEASURE = r"""
(async (url) => {
  const img = new Image();
  img.src = url;
  await img.decode();
  const c = document.createElement('canvas');
  c.width = img.width; c.height = img.height;
  const ctx = c.getContext('2d');
  ctx.drawImage(img, 0, 0);
  const d = ctx.getImageData(0, 0, c.width, c.height).data;
  const counts = new Map();
  for (let i = 0; i < d.length; i += 4) {
    const k = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
    counts.set(k, (counts.get(k) || 0) + 1);
  }
  let top = 0;
  for (const v of counts.values()) top = Math.max(top, v);
  return [counts.size, 1 - top / (c.width * c.height)];
})
"""


class CheckFailed(Exception):
    pass


class ImportFailed(Exception):
    """speedscope said, in an alert, that it cannot import the profile."""


class DevTools:
    """The DevTools protocol over Chromium's pipe: commands by id, events kept in order."""

    def __init__(self, to_browser, from_browser):
        self.to_browser = to_browser
        self.from_browser = from_browser
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CheckFailed("no answer from Chromium's DevTools pipe in time")
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if ready:
                chunk = os.read(self.from_browser, 1 << 20)
                if not chunk:
                    raise CheckFailed("Chromium closed its DevTools pipe (did it crash?)")
                self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None, deadline=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.to_browser, data):]
        while True:
            reply = self._read_message(deadline or time.monotonic() + 30)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise CheckFailed("DevTools %s failed: %s" % (method, reply["error"]))
                return reply.get("result", {})
            if reply.get("method") == "Page.javascriptDialogOpening":
                # A dialog blocks the page's scripts, so no evaluation would answer: stop here.
                # speedscope's only dialog is its "Unrecognized format!" alert.
                raise ImportFailed(reply.get("params", {}).get("message", ""))
            if "method" in reply:
                self.events.append(reply)

    def take_events(self):
        events, self.events = self.events, []
        return events


def serve(dist, profile):
    """Serves speedscope's files at / and the profile at /profile/<name>; returns the server."""
    profile_url = "/profile/" + urllib.parse.quote(profile.name)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def translate_path(self, path):
            if urllib.parse.urlsplit(path).path == profile_url:
                return str(profile)
            return super().translate_path(path)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(dist)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, profile_url


def find_chromium(explicit):
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def start_chromium(chromium, profile_dir, log):
    """Starts headless Chromium with the DevTools protocol on fds 3 (in) and 4 (out), its
    stderr to the file `log`."""
    to_read, to_write = os.pipe()      # we write, Chromium reads (its fd 3)
    from_read, from_write = os.pipe()  # Chromium writes (its fd 4), we read
    flags = ["--headless=new", "--remote-debugging-pipe", "--user-data-dir=" + profile_dir,
             "--window-size=%d,%d" % VIEWPORT, "--force-device-scale-factor=1",
             "--hide-scrollbars", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--disable-sync",
             "--mute-audio", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
             "--disable-dev-shm-usage", "about:blank"]
    if os.geteuid() == 0:
        flags.insert(0, "--no-sandbox")  # Chromium's sandbox refuses to run as root
    # The shell moves the pipe ends to the descriptor numbers Chromium expects.
    script = 'exec "$0" "$@" 3<&%d 4>&%d %d<&- %d>&-' % (to_read, from_write, to_read, from_write)
    proc = subprocess.Popen(["sh", "-c", script, chromium] + flags,
                            pass_fds=(to_read, from_write), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=log)
    os.close(to_read)
    os.close(from_write)
    return proc, DevTools(to_write, from_read)


class Page:
    """speedscope's page in the browser, through one DevTools session."""

    def __init__(self, devtools, session, deadline, profile):
        self.devtools = devtools
        self.session = session
        self.deadline = deadline
        self.profile = profile
        self.console = []

    def call(self, method, params=None):
        return self.devtools.call(method, params, session=self.session, deadline=self.deadline)

    def evaluate(self, expression, await_promise=False):
        """The value of a script run in the page (awaited if a promise)."""
        result = self.call("Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": await_promise})
        if "exceptionDetails" in result:
            raise CheckFailed("page script failed: %s" %
                              json.dumps(result["exceptionDetails"])[:500])
        return result["result"].get("value")

    def state(self):
        """(labels on the canvases now, (profile index, profile count) from speedscope's
        toolbar or None); raises on speedscope's error page."""
        for event in self.devtools.take_events():
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(a.get("value", a.get("description", "")))
                                             for a in params.get("args", [])))
            if method == "Runtime.exceptionThrown":
                self.console.append(params.get("exceptionDetails", {}).get("text", ""))
        state = json.loads(self.evaluate("""JSON.stringify({
            labels: window.__tallyLabels ? window.__tallyLabels() : [],
            text: document.body ? document.body.innerText : ''})"""))
        if "Something went wrong" in state["text"]:
            raise CheckFailed("speedscope could not import %s (its error page; console: %s)" % (
                self.profile, " | ".join(self.console[-5:])))
        # A file speedscope splits into several profiles (a Chrome trace: one per thread)
        # shows "(i/n)" after its name in the toolbar, and one profile at a time.
        m = re.search(r"\((\d+)/(\d+)\)", state["text"])
        return set(state["labels"]), (int(m.group(1)), int(m.group(2))) if m else None

    def wait_drawn(self, want, index=None):
        """The labels on the canvases once `want` are all drawn, or once they have stopped
        changing for 2 s (so that a render in progress is not taken for a missing name), with
        speedscope showing profile `index` if given; CheckFailed at the deadline."""
        settled_since, previous = None, None
        while True:
            labels, position = self.state()
            now = time.monotonic()
            if index is None or (position and position[0] == index):
                if want <= labels:
                    return labels, position
                if labels and labels == previous:
                    settled_since = settled_since or now
                    if now - settled_since >= 2.0:
                        return labels, position
                else:
                    settled_since = None
                previous = labels
            if now >= self.deadline:
                raise CheckFailed("timed out: speedscope drew %s on its canvases%s (console: %s)"
                                  % (sorted(labels) or "nothing",
                                     "" if index is None else " waiting for profile %d" % index,
                                     " | ".join(self.console[-5:])))
            time.sleep(0.2)

    def screenshot(self, path):
        """Writes a PNG of the page to `path`; returns (colours, share of pixels unlike the
        commonest colour), measured on the PNG as Chromium decodes it."""
        # Two animation frames, so that what was drawn has been composited.
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))",
                      await_promise=True)
        png = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(png))
        return self.evaluate("%s(%s)" % (MEASURE, json.dumps("data:image/png;base64," + png)),
                             await_promise=True)

    def press(self, key):
        """A real key press (keydown with its text, so the page also gets a keypress)."""
        code = {"type": "keyDown", "key": key, "code": "Key" + key.upper(), "text": key,
                "windowsVirtualKeyCode": ord(key.upper())}
        self.call("Input.dispatchKeyEvent", code)
        self.call("Input.dispatchKeyEvent", dict(code, type="keyUp", text=""))


def check(args, devtools, url):
    deadline = time.monotonic() + args.timeout
    target = devtools.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)
    session = devtools.call("Target.attachToTarget",
                            {"targetId": target["targetId"], "flatten": True},
                            deadline=deadline)["sessionId"]
    page = Page(devtools, session, deadline, args.profile)
    page.call("Page.enable")
    page.call("Runtime.enable")
    page.call("Emulation.setDeviceMetricsOverride", {
        "width": VIEWPORT[0], "height": VIEWPORT[1], "deviceScaleFactor": 1, "mobile": False})
    page.call("Page.addScriptToEvaluateOnNewDocument", {"source": RECORDER})
    page.call("Page.navigate", {"url": url})

    # The first profile, then (key "n") the next ones while a NAME is still missing: each is
    # screenshotted, the second to OUT-2.png and so on.
    expected = set(args.expect)
    found, drawn, shots = set(), [], []
    labels, position = page.wait_drawn(expected)
    while True:
        index = position[0] if position else 1
        shot = args.screenshot if index == 1 else args.screenshot.with_name(
            "%s-%d%s" % (args.screenshot.stem, index, args.screenshot.suffix))
        colours, busy = page.screenshot(shot)
        if colours < 8 or busy < 0.02:
            raise CheckFailed("the screenshot is blank: %d colours, %.1f%% of pixels unlike the "
                              "commonest (%s)" % (colours, 100 * busy, shot))
        found |= labels & expected
        drawn.append(sorted(labels))
        shots.append("%s (%d colours, %.1f%% of pixels unlike the background)" % (
            shot, colours, 100 * busy))
        if (found == expected and not args.all_profiles) or not position or \
                position[0] >= position[1]:
            break
        page.press("n")
        labels, position = page.wait_drawn(
            expected if args.all_profiles else expected - found, index=index + 1)

    missing = sorted(expected - found)
    if missing:
        raise CheckFailed("not drawn: %s (speedscope drew %s; screenshots %s)" % (
            ", ".join(missing), " then ".join(str(d) for d in drawn), ", ".join(shots)))
    print("ok: speedscope drew %s from %s%s; screenshots %s" % (
        ", ".join(sorted(expected)), args.profile,
        " (over %d of its %d profiles)" % (len(shots), position[1]) if position else "",
        ", ".join(shots)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--expect", action="append", required=True, metavar="NAME",
                        help="a frame name that must be drawn (repeatable)")
    parser.add_argument("--screenshot", type=Path, required=True, help="where the PNG goes")
    parser.add_argument("--view", choices=("time-ordered", "left-heavy"),
                        help="speedscope's view (default: its own, time-ordered)")
    parser.add_argument("--all-profiles", action="store_true",
                        help="screenshot every profile of the file (a trace: every track), not "
                             "only until every NAME was drawn")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds for the whole check (default 120)")
    parser.add_argument("--speedscope", type=Path, default=DEFAULT_SPEEDSCOPE,
                        help="speedscope's dist/release folder")
    parser.add_argument("--chromium", help="the Chromium executable (default: from PATH)")
    args = parser.parse_args()

    if not args.profile.is_file():
        print("%s: error: no such file" % args.profile, file=sys.stderr)
        return 2
    chromium = find_chromium(args.chromium)
    if not chromium:
        print("skipped: no Chromium (Debian package chromium; ./run.sh deps installs it)")
        return SKIP
    if not (args.speedscope / "index.html").is_file():
        print("skipped: no speedscope in %s (./run.sh deps installs it with npm)" %
              args.speedscope)
        return SKIP

    server, profile_path = serve(args.speedscope, args.profile.resolve())
    fragment = "profileURL=" + urllib.parse.quote(profile_path, safe="")
    fragment += "&title=" + urllib.parse.quote(args.profile.name, safe="")
    if args.view:
        fragment += "&view=" + args.view
    url = "http://127.0.0.1:%d/index.html#%s" % (server.server_address[1], fragment)
    with tempfile.TemporaryDirectory(prefix="tally-chromium-") as user_dir, \
            tempfile.TemporaryFile() as log:
        proc, devtools = start_chromium(chromium, user_dir, log)
        try:
            check(args, devtools, url)
            status = 0
        except ImportFailed as e:
            print("FAIL: speedscope could not import %s: %s" % (args.profile, e))
            status = 1
        except CheckFailed as e:
            print("FAIL: %s" % e)
            status = 1
        finally:
            try:
                devtools.call("Browser.close", deadline=time.monotonic() + 10)
            except (CheckFailed, OSError):
                pass
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            server.shutdown()
        if status:
            log.seek(0)
            # Without a D-Bus (containers, CI) Chromium complains about it at length: not news.
            err = "\n".join(line for line in log.read().decode(errors="replace").splitlines()
                            if "dbus" not in line and line.strip())
            if err:
                print("chromium's stderr (last lines):\n" + "\n".join(err.splitlines()[-10:]))
    return status


if __name__ == "__main__":
    sys.exit(main())
