"""Headless Chromium driving Argo's UI, so the tests read what an operator's browser shows.

Debian's ``chromium`` and ``chromium-driver`` (installed by hack/browser.sh) through selenium, with the driver's
path given so Selenium Manager never runs (it would try to download a driver). The browser may resolve no host
but 127.0.0.1 and makes no background requests: the page under test is the only thing it talks to. Chromium's
own debugging port is on 127.0.0.1; chromedriver has no bind-address flag and listens on the loopback
addresses 127.0.0.1 and [::1] (it exits when it cannot have [::1], so that one cannot be taken from it). The UI's
first-visit pop-ups (first-time user, feedback, new version) are dismissed up front by presetting the
local-storage keys the UI itself writes when a user dismisses them, so every page is the page a returning
operator sees. Screenshots land in build/screenshots/ for a person to look at; assertions read text only
(relative times make the pixels differ between runs).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar, cast

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from tests.harness.versions import REPO_ROOT, HarnessSetupError

SCREENSHOTS = REPO_ROOT / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WINDOW = "1600,1200"
WAIT_S = 20.0
_T = TypeVar("_T")

# Node titles in Argo's graph are SVG <title> elements: "<node id> (<display name>)".
_GRAPH_TITLES = "return Array.from(document.querySelectorAll('svg title')).map(t => t.textContent);"
# The label drawn under each node: Argo's formatLabel splits it into <tspan> lines and may shorten it with "..".
_GRAPH_LABELS = (
    "return Array.from(document.querySelectorAll('svg text.node-label'))"
    ".map(t => Array.from(t.querySelectorAll('tspan')).map(s => s.textContent).join(''));"
)
# The Workflow list's rows: the path the row links to, the row's text, the name column (the link: it shows the
# title annotation, and the description under it, when there are some), the message column (the only other
# cell as wide as the name) and whether CSS cut the name off at the column width.
_LIST_ROWS = """
return Array.from(document.querySelectorAll('.workflows-list__row-container')).map(row => {
  const link = row.querySelector('a[href]');
  const message = row.querySelector('.small-11 > div.columns.small-2');
  const cells = [link, ...link.querySelectorAll('*')];
  return {
    path: new URL(link.href).pathname, text: row.innerText, name: link.innerText,
    message: message ? message.innerText : '',
    cutOff: cells.some(cell => cell.scrollWidth > cell.clientWidth + 1),
  };
});
"""
# The node side panel's summary: a grid of (title, value) cell pairs (NAME, ID, TYPE, PHASE, MESSAGE, ...).
_PANEL_ATTRIBUTES = """
const grid = document.querySelector('.workflow-details__attribute-grid');
if (!grid) { return null; }
const cells = Array.from(grid.children).map(cell => cell.innerText.trim());
const pairs = {};
for (let i = 0; i + 1 < cells.length; i += 2) { pairs[cells[i]] = cells[i + 1]; }
return pairs;
"""
# When the UI may next ask for feedback (milliseconds since the epoch; it asks once the time has passed): far
# beyond any test run.
_FEEDBACK_LATER_MS = "Date.now() + 1e12"


def require_browser() -> None:
    """Chromium and its driver are installed, or a setup error naming what installs them."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        raise HarnessSetupError(f"missing {', '.join(missing)}; `make testbin` installs chromium (hack/browser.sh)")


def _major_minor(version: str) -> str:
    """The UI's ``majorMinor`` (ui/src/modals/version.ts): everything before the last dot."""
    return version[: version.rfind(".")] if "." in version else version


@dataclass(frozen=True)
class ListRow:
    """One row of the Workflow list: the path it links to, its text, its name and message columns, and whether
    the name is cut off on screen (the text holds it whole: CSS shortens it)."""

    path: str
    text: str
    name: str
    message: str
    cut_off: bool


@dataclass(frozen=True)
class GraphNode:
    """One node of a Workflow graph as the UI draws it: Argo's node id and the label it displays."""

    node_id: str
    display_name: str


def parse_graph_title(title: str) -> GraphNode:
    """Split an SVG node title ``"id (display name)"`` (the display name may itself hold parentheses)."""
    node_id, _, rest = title.partition(" (")
    return GraphNode(node_id=node_id, display_name=rest.removesuffix(")") if rest else "")


class Browser:
    """One headless Chromium session against one Argo server; stop it with :meth:`stop` (or ``with``)."""

    def __init__(self, *, base_url: str, server_version: str, screenshot_prefix: str) -> None:
        self.base_url = base_url
        self.server_version = server_version
        self.screenshot_prefix = screenshot_prefix
        self._profile = Path(tempfile.mkdtemp(prefix="nvcre-chromium-"))
        self._driver: webdriver.Chrome | None = None

    @property
    def driver(self) -> webdriver.Chrome:
        if self._driver is None:
            raise RuntimeError("the browser is not started")
        return self._driver

    def start(self) -> Self:
        require_browser()
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for argument in (
            "--headless=new",
            "--no-sandbox",  # the tests run as root, where Chromium's sandbox refuses to start
            "--disable-dev-shm-usage",
            f"--window-size={WINDOW}",
            f"--user-data-dir={self._profile}",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-default-apps",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--metrics-recording-only",
        ):
            options.add_argument(argument)
        service = Service(executable_path=str(CHROMEDRIVER), log_output=str(self._profile / "chromedriver.log"))
        try:
            self._driver = webdriver.Chrome(service=service, options=options)
            self._dismiss_first_visit_popups()
        except BaseException:
            self.stop()  # a with-block's __exit__ does not run when __enter__ fails
            raise
        return self

    def stop(self) -> None:
        """Quit the browser and its driver and remove the profile; idempotent."""
        try:
            if self._driver is not None:
                self._driver.quit()
        finally:
            self._driver = None
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _dismiss_first_visit_popups(self) -> None:
        """Local storage belongs to the origin: load one page of it, then set the keys every later page reads."""
        self.driver.get(self.base_url + "/userinfo")
        self.driver.execute_script(
            "localStorage.setItem('modal/ftu', JSON.stringify('dismissed'));"
            f"localStorage.setItem('modal/feedback', JSON.stringify({_FEEDBACK_LATER_MS}));"
            f"localStorage.setItem('modal/version', {json.dumps(json.dumps(_major_minor(self.server_version)))});"
        )

    # ------------------------------------------------------------------------------------------ reading

    def open(self, path: str, *, until_text: str) -> None:
        """Load ``path`` and wait until the page shows ``until_text`` (the UI renders after its API calls)."""
        self.driver.get(self.base_url + path)
        self.wait_for(f"{until_text!r} on {path}", lambda: until_text in self.page_text())

    def wait_for(self, what: str, check: Callable[[], _T | None]) -> _T:
        """Poll ``check`` until it returns something truthy, failing with the page's text after WAIT_S."""
        try:
            value = WebDriverWait(self.driver, WAIT_S, poll_frequency=0.2).until(lambda _: check())
        except TimeoutException:
            raise AssertionError(f"timed out waiting for {what}; the page shows:\n{self.page_text()}") from None
        return cast(_T, value)  # until() returns only a truthy value, never None

    def page_text(self) -> str:
        """What a person reads on the page (rendered text, not markup)."""
        return str(self.driver.find_element(By.TAG_NAME, "body").text)

    def graph_nodes(self) -> list[GraphNode]:
        """Every node of the Workflow graph on the page, from the SVG titles."""
        titles: list[str] = self.driver.execute_script(_GRAPH_TITLES)
        return [parse_graph_title(title) for title in titles]

    def click_graph_node(self, display_name_part: str) -> None:
        """Click the graph node whose display name contains ``display_name_part``, as a person would (selecting
        it, or expanding it when it stands for collapsed siblings: Argo shows at most three parallel nodes and
        folds the others into one "N hidden nodes" node)."""
        xpath = (
            f"//*[local-name()='title' and contains(., {json.dumps(display_name_part)})]"
            "/following-sibling::*[local-name()='g'][1]"
        )
        self.driver.find_element(By.XPATH, xpath).click()

    def graph_labels(self) -> list[str]:
        """The labels drawn under the graph's nodes, as shown (possibly shortened with "..")."""
        labels: list[str] = self.driver.execute_script(_GRAPH_LABELS)
        return labels

    def list_rows(self) -> list[ListRow]:
        """The rows of the Workflow list page."""
        rows: list[dict[str, Any]] = self.driver.execute_script(_LIST_ROWS)
        return [
            ListRow(path=r["path"], text=r["text"], name=r["name"], message=r["message"], cut_off=bool(r["cutOff"]))
            for r in rows
        ]

    def panel_attributes(self) -> dict[str, str]:
        """The open node side panel's summary, title to value ({} when no panel is open)."""
        found: dict[str, str] | None = self.driver.execute_script(_PANEL_ATTRIBUTES)
        return found or {}

    def link_targets(self, prefix: str) -> list[str]:
        """The paths of the links on the page that start with ``prefix`` (list rows link to their Workflow)."""
        hrefs: list[str] = self.driver.execute_script(
            "return Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'));"
        )
        return [href for href in hrefs if href.startswith(prefix)]

    def screenshot(self, name: str) -> Path:
        """Save the viewport under build/screenshots/<prefix>-<name>.png, after a moment for animations."""
        time.sleep(0.5)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{self.screenshot_prefix}-{name}.png"
        self.driver.save_screenshot(str(path))
        return path
