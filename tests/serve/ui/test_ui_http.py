"""The inspector over real HTTP (the stdlib client against uvicorn on loopback): read-only,
token, host check, 404 pages, the console script."""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
from ui_helpers import HOSTILE, ServedApp, UIStore

from scrollctx.cli import run
from scrollctx.serve._network import check_bind, is_loopback

SCROLL = Path(sys.executable).parent / "scroll"
TOKEN = "ui-token-of-the-tests-7c1f"


class Client:
    """A few HTTP requests to one loopback server, keeping the cookies it sets."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            connection.request(method, path, body=body or None, headers=sent)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
            got = {k.lower(): v for k, v in response.getheaders()}
        finally:
            connection.close()
        if "set-cookie" in got:
            name, _, rest = got["set-cookie"].partition("=")
            self.cookies[name] = rest.split(";")[0]
        return response.status, got, text

    def get(
        self, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], str]:
        return self.request("GET", path, headers)


def _digests(folder: Path) -> dict[str, str]:
    """Every file of a store but the -shm (SQLite's shared-memory index, not data)."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.endswith("-shm")
    }


def _leave_a_wal(store: Path) -> None:
    """End a writer the way a killed agent does: commits in the -wal, never checkpointed.

    A read-write connection that closes last checkpoints them into the database file; only a
    read-only one leaves both files as they are.
    """
    code = (
        "import os, sys; from scrollctx.log import EventLog, NewEvent;"
        "log = EventLog.open(sys.argv[1]); log._conn.execute('PRAGMA wal_autocheckpoint=0');"
        "log.append(NewEvent(session_id='late', kind='user_message', role='user',"
        " content='written just before the crash')); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code, str(store / "history.db")], check=True)
    assert (store / "history.db-wal").stat().st_size > 0


def _crawl(client: Client, store: UIStore) -> None:
    run_session = store.run_session
    pages = [
        "/",
        "/?kind=imported&q=claude",
        f"/timeline?session={run_session}",
        f"/timeline?session={HOSTILE}",
        f"/calls?session={run_session}",
        f"/call?session={run_session}&n=15",
        f"/call.json?session={run_session}&n=3",
        f"/index?session={run_session}",
        f"/plots?session={run_session}",
        f"/plots/tokens.svg?session={run_session}",
        f"/events/{store.big_seq}/text?offset=20000",
        f"/events/{store.big_seq}",
        "/search?q=batch",
        "/bench",
        "/bench?file=beam.jsonl",
        "/timeline?session=late",
    ]
    for page in pages:
        status, _, text = client.get(page)
        assert status in (200, 303), (page, text[:300])


def test_the_inspector_never_writes_the_store(ui_store: UIStore, tmp_path: Path) -> None:
    from scrollctx.serve.ui._app import create_app

    store = tmp_path / "store"
    shutil.copytree(ui_store.path, store)
    _leave_a_wal(store)
    before = _digests(store)
    served = ServedApp(create_app(store / "history.db", results_dir=ui_store.results))
    try:
        client = Client(served.port)
        _crawl(client, ui_store)
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            status, headers, _ = client.request(method, "/", body=b"x")
            assert status == 405 and headers["allow"] == "GET, HEAD"
    finally:
        served.stop()
    assert _digests(store) == before


def test_off_loopback_needs_a_token(capsys: pytest.CaptureFixture[str], ui_store: UIStore) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    check_bind("0.0.0.0", TOKEN)  # with a token: allowed
    code = run(["ui", "--store", str(ui_store.path), "--host", "0.0.0.0", "--port", "1"])
    assert code == 2
    assert "refusing to serve 0.0.0.0 without a token" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_a_token_too_short_to_be_one_is_refused(
    capsys: pytest.CaptureFixture[str], ui_store: UIStore, host: str
) -> None:
    # The rule of every HTTP door: the inspector once took any token, "t" included.
    code = run(["ui", "--store", str(ui_store.path), "--host", host, "--token", "t"])
    assert code == 2
    assert "the token has 1 characters; use at least 16" in capsys.readouterr().err


def test_a_token_is_checked_on_every_request(ui_store: UIStore) -> None:
    from scrollctx.serve.ui._app import TOKEN_COOKIE, create_app

    served = ServedApp(create_app(ui_store.path / "history.db", token=TOKEN))
    try:
        client = Client(served.port)
        assert client.get("/")[0] == 401
        assert client.get("/?token=wrong")[0] == 401
        assert client.get("/static/ui.css")[0] == 401
        assert client.get("/", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
        status, headers, _ = client.get(f"/timeline?session={HOSTILE}&token={TOKEN}")
        assert status == 303
        assert headers["location"].endswith(f"/timeline?session={HOSTILE}")
        assert "HttpOnly" in headers["set-cookie"] and "SameSite=strict" in headers["set-cookie"]
        assert client.cookies == {TOKEN_COOKIE: TOKEN}
        assert client.get(f"/timeline?session={HOSTILE}")[0] == 200
    finally:
        served.stop()


def test_without_a_token_only_loopback_host_names_are_answered(served: ServedApp) -> None:
    client = Client(served.port)
    assert client.get("/")[0] == 200
    assert client.get("/", {"Host": f"localhost:{served.port}"})[0] == 200
    assert client.get("/", {"Host": "attacker.example"})[0] == 421


def test_a_page_of_another_site_is_refused(served: ServedApp) -> None:
    client = Client(served.port)
    assert client.get("/", {"Origin": "http://attacker.example"})[0] == 403
    assert client.get("/", {"Origin": "null"})[0] == 403
    assert client.get("/", {"Origin": f"http://127.0.0.1:{served.port}"})[0] == 200


@pytest.mark.parametrize(
    "url",
    [
        "/timeline?session=no-such-session",
        "/timeline",
        "/call?session={run}&n=999",
        "/call?session={run}&n=zero",
        "/call.json?session={run}&n=0",
        "/events/987654321",
        "/events/987654321/text",
        "/index?session={run}&at=1",
        "/plots/nothing.svg?session={run}",
        "/bench?file=../../etc/passwd",
        "/bench/plot?file=beam.jsonl&image=../history.db",
        "/no/such/page",
        "/timeline?session={run}&at=99999999999999999999",
        "/events/99999999999999999999",
        "/events/99999999999999999999/text",
        "/index?session={run}&at=-99999999999999999999",
    ],
)
def test_a_bad_url_is_a_404_page(served: ServedApp, ui_store: UIStore, url: str) -> None:
    status, headers, text = Client(served.port).get(url.format(run=ui_store.run_session))
    assert status == 404, text[:300]
    assert headers["content-type"].startswith("text/html")
    assert '<h1 class="error">Not found</h1>' in text
    assert "Traceback" not in text


@pytest.mark.parametrize("url", ["/timeline?session={run}&span=\u00b2", "/search?q=batch&k=\u00b2"])
def test_a_number_that_is_no_number_is_ignored(
    served: ServedApp, ui_store: UIStore, url: str
) -> None:
    path = urllib.parse.quote(url.format(run=ui_store.run_session), safe="/?=&")
    assert Client(served.port).get(path)[0] == 200


def test_a_session_id_is_plotted_as_text_never_as_math_markup() -> None:
    from scrollctx.serve.ui._plots import SessionCalls, plot_svg

    svg = plot_svg("tokens", SessionCalls([], [], []), "cost $\\frac{a$ and $^$").decode()
    assert "cost $\\frac{a$ and $^$: view tokens" in svg


def test_a_search_that_cannot_run_says_why_on_the_page(served: ServedApp) -> None:
    status, _, text = Client(served.port).get("/search?q=batch&from=yesterday")
    assert status == 400
    assert "created_from takes an ISO date" in text and "Traceback" not in text


def test_every_page_forbids_inline_script_and_other_origins(served: ServedApp) -> None:
    _, headers, _ = Client(served.port).get("/")
    policy = headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert headers["x-content-type-options"] == "nosniff"


def test_scroll_ui_serves_until_terminated(ui_store: UIStore) -> None:
    process = subprocess.Popen(
        [str(SCROLL), "ui", "--store", str(ui_store.path), "--port", "0", "--token", TOKEN],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SCROLL_UI_TOKEN": ""},
    )
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        found = re.search(rf"http://127\.0\.0\.1:(\d+)/\?token={TOKEN} ", banner)
        assert found, banner  # the port the OS picked, not 0
        port = int(found.group(1))
        deadline = time.monotonic() + 30
        while True:  # poll until the socket answers
            try:
                status, _, text = Client(port).get("/", {"Authorization": f"Bearer {TOKEN}"})
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline and process.poll() is None, "no answer"
                time.sleep(0.05)
        assert status == 200 and "Sessions" in text
    finally:
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=30)
    # uvicorn shuts down (lifespan included), then re-raises the signal for the exit status.
    assert process.returncode == -signal.SIGTERM
    assert "Traceback" not in rest


def test_a_port_in_use_is_a_usage_error_before_any_address_is_shown(
    ui_store: UIStore, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert run(["ui", "--store", str(ui_store.path), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use; choose another" in err
    assert run(["ui", "--store", str(ui_store.path), "--host", "no.such.host.invalid",
                "--token", TOKEN, "--port", "0"]) == 2  # fmt: skip
    err += capsys.readouterr().err
    assert "cannot listen on no.such.host.invalid:0: " in err
    assert "http://" not in err


def test_without_the_ui_extra_scroll_ui_says_what_to_install(ui_store: UIStore) -> None:
    code = (
        "import sys; sys.modules['uvicorn'] = None; from scrollctx.cli import run;"
        f"sys.exit(run(['ui', '--store', {str(ui_store.path)!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert "pip install 'scrollctx[ui]'" in done.stderr
