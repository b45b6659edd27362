"""A headless Chromium driven over the Chrome DevTools Protocol, for the site's browser test.

Small on purpose: start Debian's `chromium` with a private profile, attach to one page
(flattened session on the browser's websocket), open file:// pages, record console errors,
uncaught exceptions and failed loads, evaluate JavaScript and take full-page screenshots.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
INSTALL_HINT = "install Debian's chromium (apt-get install -y chromium) for the browser test"


def find_chromium() -> str | None:
    """$DLPERF_CHROMIUM, else the first Chromium on PATH."""
    given = os.environ.get("DLPERF_CHROMIUM")
    if given:
        return given
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


class Browser:
    """One headless Chromium and one page in it. Use as a context manager."""

    def __init__(self, binary: str, profile: Path, width: int = 1280, height: int = 900):
        self.binary, self.profile = binary, profile
        self.width, self.height = width, height
        self.errors: list[str] = []  # console errors, exceptions, failed loads, as text
        self._events: list[dict[str, Any]] = []
        self._next_id = 0

    def __enter__(self) -> Browser:
        import websocket  # websocket-client (the test extra)

        self.profile.mkdir(parents=True, exist_ok=True)
        self.log = (self.profile.parent / "chromium.log").open("wb")
        argv = [
            self.binary,
            "--headless=new",
            "--no-sandbox",  # root in a container has no user namespaces for the sandbox
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--remote-debugging-port=0",
            f"--user-data-dir={self.profile}",
            f"--window-size={self.width},{self.height}",
            "about:blank",
        ]
        # Its own session: the browser's helper processes are ended with it, as one group.
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or len(port_file.read_text().split()) < 2:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"chromium did not start: see {self.log.name}")
            time.sleep(0.1)
        port, path = port_file.read_text().split()[:2]
        self.ws = websocket.create_connection(
            f"ws://127.0.0.1:{port}{path}", timeout=60, suppress_origin=True
        )
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()

    # ------------------------------------------------------------ protocol

    def call(self, method: str, params: dict | None = None, session: bool = False) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _event(self, event: dict) -> None:
        self._events.append(event)
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.errors.append(f"console.{params['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"exception: {text}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".rstrip())

    def _wait_event(self, method: str, timeout: float) -> None:
        self.ws.settimeout(timeout)
        try:
            while not any(e.get("method") == method for e in self._events):
                self._event(json.loads(self.ws.recv()))
        finally:
            self.ws.settimeout(60)

    # ------------------------------------------------------------ page

    def open(self, path: Path, timeout: float = 60) -> None:
        """Navigate to a file and wait for its load event."""
        self._events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        self._wait_event("Page.loadEventFired", timeout)

    def evaluate(self, expression: str) -> Any:
        reply = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression!r} threw: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """Evaluate until it gives a truthy value (or the timeout); returns the last value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.2)

    def screenshot(self, path: Path) -> Path:
        """The whole page, as PNG."""
        size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.call(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
            session=True,
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
