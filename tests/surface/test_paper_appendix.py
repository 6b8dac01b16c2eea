"""The paper's Appendix D code blocks run unmodified against ms.

Two stores:

- a *paper-shaped* store written with NewEvent: 23,716 ``conversation`` rows in 100 sessions
  (``step_index``), dated so Sessions 61-80 span 2023-04-08..2023-04-25, with the evidence the
  appendix reads planted at the exact seqs it names (8867, 16900, 16614, …). Every block runs
  to the end and its printed output is checked;
- the real BEAM 100K/1 chat, ingested by ``scrollctx.ingest``. Its seqs, dates and session
  numbers are not the paper's (the paper's 10M chats are not in the data), so blocks that index
  into an empty result with their own ``[0]`` fail there with IndexError; every ms call must
  still succeed, and exactly those blocks may fail, only that way.
"""

from __future__ import annotations

import contextlib
import io
import re
import traceback
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from paper_blocks import BLOCKS

from scrollctx.ingest import ingest_path
from scrollctx.kernel import Kernel
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import MemorySurface, open_surface

TOTAL = 23716
TASK = "beam/10M-8"
# (session, first seq): sessions between anchors are spread evenly.
ANCHORS = [(1, 1), (3, 600), (4, 700), (31, 7400), (32, 7600), (36, 8400), (37, 8700),
           (38, 8900), (61, 13611), (73, 16850), (74, 16950), (81, 18059),
           (100, 23500)]  # fmt: skip

PLANTED: dict[int, tuple[str, str]] = {
    30: ("user", "I used Roadtrippers to map out scenic stops for the coast trip."),
    620: ("user", "We took the hybrid route because it saves $15 in tolls."),
    805: (
        "user",
        "Which route would you say is better for someone who wants to avoid tolls "
        "as much as possible?",
    ),
    807: ("user", "I really want to avoid tolls on this route."),
    7496: ("user", "Pamela coordinated the vendors and saved me setup time at the fair."),
    8434: ("user", "Pamela handled every vendor, which saved setup time again."),
    8867: (
        "user",
        "Correction: that was a misunderstanding. Pamela didn't coordinate the "
        "vendors and wasn't involved in setup at all.",
    ),
    8868: ("assistant", "Thanks for the correction: Pamela was not the vendor coordinator."),
    9750: ("user", "For the sprint on 2024-11-05 I logged 14 tasks in Jira, target 85%."),
    9900: ("user", "Update on sprint 2024-11-05: I logged 17 tasks, target now 88%."),
    14810: ("user", "New goals: sleep eight hours and drink three litres of water daily."),
    15138: ("user", "This trip was real personal growth for me."),
    15489: ("user", "Lessons learned: flexibility is key."),
    16009: ("user", "The Pittsburgh delay cost us four hours."),
    16018: ("user", "Food overspend: we went 30% over the meal budget."),
    16441: ("user", "Embrace spontaneity was the growth lesson of the week."),
    16614: ("user", "Maps.me worked offline when we lost signal."),
    16678: ("user", "I learned about myself that I enjoy unplanned stops."),
    16685: ("user", "Journaling helps me keep the gains from the trip."),
    16824: ("user", "Personal growth: fewer, deeper stops from now on."),
    16900: (
        "user",
        "Pamela did call 3 vendors for quick ratings after the event, which saved "
        "me about 15 minutes.",
    ),
    16902: ("user", "Pamela's quick calls definitely saved me time."),
    17180: ("user", "I set a 3-hour driving cap per day and feel less fatigue."),
    17216: ("user", "The trip changed me: I plan looser itineraries now."),
    17712: ("user", "Four key trip lessons, growth included."),
    17932: ("user", "Buffer time is my new habit after this growth."),
    23500: ("user", "I'm planning the route for our upcoming trip."),
}
TOPICS = ["budget", "hotel", "museum", "train", "weather", "packing", "photos", "dinner",
          "hiking", "souvenir", "ferry", "market"]  # fmt: skip


def session_of(seq: int) -> int:
    """The session (step_index) holding ``seq``."""
    for (s0, q0), (s1, q1) in zip(ANCHORS, ANCHORS[1:], strict=False):
        if q0 <= seq < q1:
            return s0 + (seq - q0) * (s1 - s0) // (q1 - q0)
    return 100


def date_of(session: int) -> date:
    """Sessions 61-64 on 2023-04-08..11, 65-80 spread over 2023-04-12..25."""
    start = date(2023, 4, 8)
    if session < 61:
        return start - timedelta(days=2 * (61 - session))
    if session <= 65:
        return start + timedelta(days=session - 61)
    if session <= 80:
        return date(2023, 4, 13) + timedelta(days=(session - 66) * 12 // 14)
    return date(2023, 4, 25) + timedelta(days=2 * (session - 80))


def _events() -> Iterator[NewEvent]:
    for seq in range(1, TOTAL + 1):
        session = session_of(seq)
        day = date_of(session).isoformat()
        role, text = PLANTED.get(seq, ("user" if seq % 2 else "assistant", ""))
        if not text:
            text = f"note {seq} on {TOPICS[seq % 12]} and {TOPICS[seq * 7 % 12]} for the trip."
        yield NewEvent(
            session_id=f"{TASK}:s{session}",
            task_id=TASK,
            kind="conversation",
            role=role,
            step_index=session,
            msg_index=seq - 1,
            content=f"[Session {session} | {day}] {role}: {text}",
            metadata={"date": day},
            created_at=f"{day}T00:00:00.000000Z",
        )


@pytest.fixture(scope="module")
def paper_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("paper") / "history.db"
    with EventLog.open(path) as log:
        seqs = log.append_many(_events())
    assert seqs[0] == 1 and seqs[-1] == TOTAL
    return path


@pytest.fixture(scope="module")
def paper_ms(paper_store: Path) -> Iterator[MemorySurface]:
    with open_surface(paper_store, task_id=TASK) as ms:
        yield ms


def _run(block: str, namespace: dict[str, Any]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "<paper block>", "exec"), namespace)
    return out.getvalue()


def _run_all(ms: MemorySurface) -> dict[str, str | BaseException]:
    namespace: dict[str, Any] = {"ms": ms}
    results: dict[str, str | BaseException] = {}
    for name, block in BLOCKS:
        try:
            results[name] = _run(block, namespace)
        except Exception as exc:  # noqa: BLE001 - recorded and judged by the caller
            results[name] = exc
    return results


@pytest.fixture(scope="module")
def paper_run(paper_ms: MemorySurface) -> dict[str, str]:
    results = _run_all(paper_ms)
    failed = {k: repr(v) for k, v in results.items() if isinstance(v, BaseException)}
    assert failed == {}
    return {k: str(v) for k, v in results.items()}


def _first_seqs(output: str) -> list[int]:
    # Hit lines start "seq step_index ..."; a snippet may span lines, so demand both numbers.
    return [int(m.group(1)) for m in re.finditer(r"^(\d+) \d+ ", output, re.M)]


def test_every_block_runs(paper_run: dict[str, str]) -> None:
    assert len(paper_run) == len(BLOCKS) == 32


def test_d1_knowledge_update(paper_run: dict[str, str]) -> None:
    assert set(_first_seqs(paper_run["1"])[:2]) == {9750, 9900}
    assert "seq=9900: [Session 42 | " in paper_run["4"] and "17 tasks" in paper_run["4"]


def test_d2_contradiction_resolution(paper_run: dict[str, str]) -> None:
    assert {7496, 8434, 16900}.issubset(_first_seqs(paper_run["5"]))
    assert _first_seqs(paper_run["6"])[0] == 8867
    assert "misunderstanding" in paper_run["7"]
    assert paper_run["8"].count("---") == 30
    assert "seq 16900 [user]" in paper_run["9"] and "seq 16902 [user]" in paper_run["9"]
    assert "seq 8868 [assistant]: [Session 37" in paper_run["11"]
    hits3 = _first_seqs(paper_run["13"])
    assert hits3 and all(16900 <= seq <= 23716 for seq in hits3)


def test_d3_preference_following(paper_run: dict[str, str]) -> None:
    assert 30 in _first_seqs(paper_run["14"])
    assert "Maps.me" in paper_run["15"]
    assert "30 [Session 1 | " in paper_run["18"].split("Roadtrippers ===")[1]
    assert paper_run["19"].startswith("23500 user [Session 100 | ")


def test_d4_summarization_paging(paper_run: dict[str, str], paper_ms: MemorySurface) -> None:
    assert paper_run["20"].startswith("1000\n")  # capped, as in the paper's first page
    assert paper_run["21"].startswith(f"1000 13611 14610 {date_of(session_of(14610))}\n")
    pages = [int(paper_run[name].split("\n", 1)[0]) for name in
             ("22", "22+1000", "22+2000", "22+3000")]  # fmt: skip
    in_range = sum(1 for s in range(13611, 18059) if date_of(session_of(s)) >= date(2023, 4, 13))
    assert pages == [1000, 1000, 1000, in_range - 3000]
    merged = paper_run["23"].split("\n", 1)[0].split()
    assert merged[:2] == [str(1000 + in_range), "13611"] and merged[3] == "18058"
    assert "=== Session 66 (2023-04-13)" in paper_run["24"]
    assert "########## SESSION 61 (2023-04-08) ##########" in paper_run["25"]
    assert paper_run["25"].count("\n--- seq ") == 7 * 6
    growth = {int(seq) for seq in re.findall(r"^(\d+) \[Session", paper_run["26"], re.M)}
    assert {15138, 15489, 16678, 16824}.issubset(growth)
    assert paper_run["27"].count("=== seq ") == 8
    assert "HIT 16009" in paper_run["28"] and "HIT 16018" in paper_run["28"]
    assert "Journaling" in paper_run["29"]


def test_the_uncapped_page_notes_reach_the_kernel(paper_ms: MemorySurface) -> None:
    paper_ms.drain_notes()
    _run_all(paper_ms)
    notes = paper_ms.drain_notes()
    assert any("hit the 1000-row cap" in note for note in notes)  # Block 20 has no LIMIT


# -- the real BEAM chat ---------------------------------------------------------------------------

# Blocks that subscript an empty result themselves on this data: 21 (rows_all[0]: no 2023
# dates), 22 and its reruns (rows2[-1]), 23 (merged[0]), 25 (ut[0]), 29 (seq 16685 absent).
EMPTY_DATA_BLOCKS = {"21", "22", "22+1000", "22+2000", "22+3000", "23", "25", "29"}


@pytest.fixture(scope="module")
def beam_ms(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Iterator[MemorySurface]:
    path = tmp_path_factory.mktemp("beam") / "history.db"
    with EventLog.open(path) as log:
        report = ingest_path(log, shared_data / "beam" / "chats" / "100K" / "1" / "chat.json")
    assert report.events_added == 188
    with open_surface(path, task_id="beam/100K/1") as ms:
        yield ms


def test_blocks_run_on_ingested_beam_data(beam_ms: MemorySurface) -> None:
    results = _run_all(beam_ms)
    failed = {name for name, value in results.items() if isinstance(value, BaseException)}
    assert failed == EMPTY_DATA_BLOCKS
    for name in failed:
        exc = results[name]
        assert isinstance(exc, IndexError)
        frames = traceback.extract_tb(exc.__traceback__)
        assert frames[-1].filename == "<paper block>", f"block {name} failed inside {frames[-1]}"


def test_searches_on_beam_data_return_hits(beam_ms: MemorySurface) -> None:
    results = _run_all(beam_ms)
    assert _first_seqs(str(results["1"]))  # "sprint 2024-11-05": broadened hits
    assert results["2"] == ""  # BEAM 100K/1 has 3 sessions, not 42
    hits = beam_ms.search("sprint 2024-11-05", scope="task", k=20)
    assert len(hits) == 20 and all(h["kind"] == "conversation" for h in hits)


def test_every_block_runs_unchanged_through_the_kernel(
    paper_store: Path, paper_run: dict[str, str], tmp_path: Path
) -> None:
    # The same blocks as cells: ms is the kernel's, answered by its memory reader.
    with (
        EventLog.open(paper_store),
        Kernel(paper_store, task_id=TASK, scratch=tmp_path / "scratch", stdout_cap=10**6) as kernel,
    ):
        for name, block in BLOCKS:
            result = kernel.run_cell(block)
            assert result.ok, f"block {name}: {result.error}"
            assert result.stdout == paper_run[name], f"block {name} printed something else"
