"""Headless Chromium for the site's browser tests, driven by Playwright for Python.

Playwright launches Debian's `chromium` (found on PATH, or $DLPERF_CHROMIUM) through
`executable_path`: no browser is downloaded (`playwright install` is never needed). A page
records console errors, uncaught exceptions, failed loads, and every request that leaves
file:// (a site that works offline makes none).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
INSTALL_HINT = (
    "the browser test needs Debian's chromium and Playwright for Python: "
    "apt-get install -y chromium && pip install playwright (no `playwright install`)"
)
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


def find_chromium() -> str | None:
    """$DLPERF_CHROMIUM, else the first Chromium on PATH."""
    given = os.environ.get("DLPERF_CHROMIUM")
    if given:
        return given
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def skip_reason() -> str | None:
    """Why the browser test cannot run here (None: it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"no playwright: {INSTALL_HINT}"
    if find_chromium() is None:
        return f"no chromium: {INSTALL_HINT}"
    return None


class Browser:
    """One headless Chromium and one page in it, `width` x `height` CSS pixels. Use as a
    context manager; `errors` and `outside` (requests that left file://) collect over every
    page it opens."""

    def __init__(self, binary: str, width: int = 1400, height: int = 900) -> None:
        self.binary, self.width, self.height = binary, width, height
        self.errors: list[str] = []
        self.outside: list[str] = []

    def __enter__(self) -> Browser:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            # --no-sandbox: root in a container has no user namespaces for the sandbox.
            self._browser = self._playwright.chromium.launch(
                executable_path=self.binary, args=["--no-sandbox", "--disable-gpu"]
            )
        except BaseException:
            self._playwright.stop()
            raise
        self.page = self._browser.new_page(viewport={"width": self.width, "height": self.height})
        self.page.set_default_timeout(60_000)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"exception: {exc}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"failed load: {r.url}"))
        self.page.on("request", self._request)
        return self

    def __exit__(self, *exc: object) -> None:
        self._browser.close()
        self._playwright.stop()

    def _console(self, message: Any) -> None:
        if message.type in ("error", "assert"):
            self.errors.append(f"console.{message.type}: {message.text}")

    def _request(self, request: Any) -> None:
        if not request.url.startswith(LOCAL_SCHEMES):
            self.outside.append(request.url)

    def resize(self, width: int) -> None:
        """The viewport `width` CSS pixels wide (the height kept); pages opened after it are
        laid out at that width."""
        self.width = width
        self.page.set_viewport_size({"width": width, "height": self.height})

    def open(self, path: Path) -> None:
        """Open a file and wait for its load event."""
        self.page.goto(path.resolve().as_uri(), wait_until="load")

    def evaluate(self, expression: str, arg: Any = None) -> Any:
        return self.page.evaluate(expression, arg)

    def wait_for(self, expression: str) -> Any:
        """Wait until the expression is truthy (Playwright's timeout: 60 s)."""
        return self.page.wait_for_function(expression).json_value()

    def screenshot(self, path: Path) -> Path:
        """The whole page, as PNG."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True)
        return path
