"""The inspector in a real browser: Debian's Chromium driven by Playwright (never downloaded).

One browser for the whole test session (a fresh profile folder); each test opens its own page and
fails on any console error or uncaught exception the page reports.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import BIG_BYTES, BIG_TAIL, HOSTILE, ServedApp, UIStore

from needs import import_or_missing, missing
from scrollctx.log import EventLog

CHROMIUM = Path("/usr/bin/chromium")
# As root, in a closed network: no sandbox, no GPU, no background connections to refuse.
FLAGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One Chromium for the test session, its profile in a fresh folder."""
    sync_api = import_or_missing("playwright.sync_api")
    if not CHROMIUM.is_file():
        missing(f"Chromium is not at {CHROMIUM} (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="scroll-ui-chromium-") as profile:
        with sync_api.sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile, executable_path=str(CHROMIUM), headless=True, args=FLAGS,
                viewport={"width": 1280, "height": 900},
            )  # fmt: skip
            yield context
            context.close()


class Tab:
    """One page of the browser that records every console error and page exception."""

    def __init__(self, browser: Any, base: str) -> None:
        self.page = browser.new_page()
        self.base = base
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def open(self, path: str) -> Any:
        response = self.page.goto(self.base + path)
        self.page.wait_for_load_state("load")
        return response

    def close(self) -> None:
        self.page.close()
        assert self.errors == [], self.errors


@pytest.fixture
def tab(browser: Any, served: ServedApp) -> Iterator[Tab]:
    opened = Tab(browser, served.url)
    yield opened
    opened.close()


def _claude_session_with_subagents(store: UIStore) -> tuple[str, int]:
    with EventLog.open_read_only(store.path / "history.db") as log:
        row = log.execute(
            "SELECT session_id, min(seq) FROM conversation_history "
            "WHERE json_extract(metadata, '$.agent_kind') = 'subagent' GROUP BY session_id"
        )[0]
    return str(row[0]), int(row[1])


def test_every_page_loads_without_console_errors(tab: Tab, ui_store: UIStore) -> None:
    run = ui_store.run_session
    claude, sub_seq = _claude_session_with_subagents(ui_store)
    pages = [
        "/", "/?kind=imported", f"/timeline?session={run}", f"/calls?session={run}",
        f"/call?session={run}&n=1", f"/call?session={run}&n=15", f"/index?session={run}",
        f"/plots?session={run}", f"/timeline?session={claude}", "/search?q=batch",
        "/bench", "/bench?file=beam.jsonl",
    ]  # fmt: skip
    for path in pages:
        assert tab.open(path).status == 200, path
    tab.open(f"/plots?session={run}")
    widths = tab.page.eval_on_selector_all("figure img", "imgs => imgs.map(i => i.naturalWidth)")
    assert len(widths) == 3 and all(w > 0 for w in widths)
    tab.open("/bench?file=beam.jsonl")
    plots = tab.page.eval_on_selector_all("figure img", "imgs => imgs.map(i => i.naturalWidth)")
    assert plots and all(w > 0 for w in plots)
    assert "Accuracy" in tab.page.inner_text("main")


def test_an_imported_transcript_nests_sub_agents_and_puts_results_beside_calls(
    tab: Tab, ui_store: UIStore
) -> None:
    claude, sub_seq = _claude_session_with_subagents(ui_store)
    tab.open(f"/timeline?session={claude}&at={sub_seq}")
    group = tab.page.locator("details.subagent").first
    assert "sub-agent" in group.locator(":scope > summary").inner_text()
    assert group.locator(".event").count() > 0
    tab.open(f"/timeline?session={claude}")
    result = tab.page.locator(".calls .result[href]").first
    target = int(result.get_attribute("href").rsplit("/", 1)[1])
    result.click()
    tab.page.wait_for_url(f"**#seq-{target}")
    answered = tab.page.locator(f"#seq-{target} .answers")
    assert answered.count() == 1 and "answers the call" in answered.inner_text()


def _shown_messages(tab: Tab) -> list[str]:
    return list(
        tab.page.eval_on_selector_all(
            ".messages .message",
            "ms => ms.map(m => Array.from(m.querySelectorAll('pre.content, pre.index-body'))"
            ".map(p => p.textContent).join(''))",
        )
    )


def test_each_model_call_shows_exactly_what_the_server_received(
    tab: Tab, ui_store: UIStore
) -> None:
    run = ui_store.run_session
    for number, body in enumerate(ui_store.requests, start=1):
        tab.open(f"/call?session={run}&n={number}")
        sent = body["messages"]
        assert _shown_messages(tab) == [m["content"] for m in sent], number
        data = tab.page.request.get(f"{tab.base}/call.json?session={run}&n={number}").json()
        assert json.dumps(data["messages"]) == json.dumps(sent), number


def test_clicking_an_index_line_lands_on_its_span(tab: Tab, ui_store: UIStore) -> None:
    last = len(ui_store.requests)
    tab.open(f"/call?session={ui_store.run_session}&n={last}")
    line = tab.page.locator("a.index-line").first
    lo, hi = int(line.get_attribute("data-lo")), int(line.get_attribute("data-hi"))
    line.click()
    tab.page.wait_for_url(f"**#seq-{lo}")
    landed = tab.page.locator(f"#seq-{lo}")
    assert landed.is_visible() and "in-span" in landed.get_attribute("class")
    marked = tab.page.eval_on_selector_all(
        ".event.in-span", "es => es.map(e => Number(e.id.slice(4)))"
    )
    assert marked and marked[0] == lo and all(lo <= seq <= hi for seq in marked)
    in_viewport = (
        "e => { const r = e.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight }"
    )
    assert landed.evaluate(in_viewport)  # scrolled to it


def test_search_finds_highlights_and_links_to_the_timeline(tab: Tab, ui_store: UIStore) -> None:
    tab.open("/search")
    tab.page.fill("input[name=q]", "batch 7")
    tab.page.click("form.filters button")
    tab.page.wait_for_url("**/search?q=batch+7**")
    marks = tab.page.locator(".hits mark").all_inner_texts()
    assert {m.lower() for m in marks} >= {"batch", "7"}
    first = tab.page.locator("a.hit-link").first
    seq = int(first.inner_text().split()[1])
    first.click()
    tab.page.wait_for_url(f"**#seq-{seq}")
    assert "in-span" in tab.page.locator(f"#seq-{seq}").get_attribute("class")


def test_logged_script_and_terminal_escapes_render_as_text(tab: Tab, ui_store: UIStore) -> None:
    tab.open(f"/timeline?session={HOSTILE}")
    assert tab.page.title() != "pwned"
    assert tab.page.evaluate("window.pwned") is None
    script = tab.page.locator(f"#seq-{ui_store.script_seq} pre.text").inner_text()
    assert "<script>document.title='pwned'" in script
    shown = tab.page.locator(f"#seq-{ui_store.escapes_seq} pre.text")
    escapes = shown.locator(".esc").all_inner_texts()
    assert escapes == ["\\x1b", "\\x07", "\\x1b", "\\x1b", "\\u202e", "\\u200b"]
    text = tab.page.inner_text("main")
    assert not any(c in text for c in "\x1b\x07\u202e\u200b")


def test_a_ten_megabyte_payload_loads_in_chunks(tab: Tab, ui_store: UIStore) -> None:
    response = tab.open(f"/timeline?session={HOSTILE}")
    assert len(response.body()) < 200_000  # the page holds a preview, not the payload
    row = tab.page.locator(f"#seq-{ui_store.big_seq}")
    size = int(row.locator(".size").inner_text().split()[0].replace(",", ""))
    assert BIG_BYTES - 100 < size <= BIG_BYTES
    row.locator("summary").click()
    chunks = row.locator(".chunk")
    chunks.first.wait_for()
    row.locator("a.more").click()
    chunks.nth(1).wait_for()  # (the page's policy forbids wait_for_function's eval)
    shown = "".join(chunks.all_text_contents())
    assert len(shown) == 40_000 and BIG_TAIL not in shown


def test_a_bad_url_is_a_404_page(tab: Tab, ui_store: UIStore) -> None:
    for path in ("/timeline?session=nobody", f"/call?session={ui_store.run_session}&n=999"):
        response = tab.page.goto(tab.base + path)
        assert response.status == 404
        assert tab.page.locator("h1.error").inner_text() == "Not found"
        assert "Traceback" not in tab.page.content()
    tab.errors.clear()  # Chromium reports the 404 status itself as a console error
