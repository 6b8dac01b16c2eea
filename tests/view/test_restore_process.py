"""Restore after a real process restart: a separate Python process rebuilds the view from the file.

The writing process keeps its view; a child process (``sys.executable``, nothing shared but the
SQLite file) restores the session and prints what it would send. Both must agree byte for byte,
reasoning_content and signed thinking blocks included, after evictions, roll-ups and folds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from view_session import Session

from scrollctx.log import EventLog
from scrollctx.view import WorkingView

_CHILD = """
import json, sys
from scrollctx.log import EventLog
from scrollctx.view import WorkingView
path, session, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
with EventLog.open(path) as log:
    view = WorkingView.restore(log, session, "system", budget_tokens=budget)
    view.set_digest("x: int = 1")
    print(json.dumps({
        "openai": view.render("openai"),
        "anthropic": view.render("anthropic"),
        "index_text": view.index_text(),
        "index": view.index_data(),
        "tokens": view.tokens,
        "evictions": view.metrics.evictions,
        "folds": view.metrics.folds,
    }, ensure_ascii=False))
"""

THINKING = {
    "type": "thinking",
    "thinking": "Plan:\n  search first, then expand.  ✓",
    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYeH3jG8+Zbpe5R4iMKc9Vb3==",
}


def _restore_in_child(path: Path, session_id: str, budget: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), session_id, str(budget)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def test_a_separate_process_restores_the_same_view(fast_dir: Path) -> None:
    path = fast_dir / "history.db"
    budget = 3000
    with EventLog.open(path) as log:
        view = WorkingView(log, "s", "system", budget_tokens=budget, k=3)
        session = Session(view, provider="anthropic")
        for step in range(40):
            session.user(8)
            view.append(
                {
                    "role": "assistant",
                    "content": [
                        THINKING,
                        {"type": "text", "text": f"Thinking done for step {step}."},
                    ],
                },
                provider="anthropic",
            )
            session.tools([220])
            view.append(
                {
                    "role": "assistant",
                    "content": f"Step {step} done.\n⟦ step {step} | ok | next | done ⟧",
                    "reasoning_content": f"reasoned about step {step}\n  exactly",
                }
            )
            session.persist()
            view.ensure_budget(digest="x: int = 1")
        assert view.metrics.evictions > 5 and view.metrics.rollups > 0 and view.metrics.folds > 0
        child = _restore_in_child(path, "s", budget)
        assert _dump(child["openai"]) == _dump(view.render("openai"))
        assert _dump(child["anthropic"]) == _dump(view.render("anthropic"))
        assert child["index_text"] == view.index_text()
        assert child["index"] == view.index_data()
        assert (child["tokens"], child["evictions"], child["folds"]) == (
            view.tokens,
            view.metrics.evictions,
            view.metrics.folds,
        )
    # The reasoning survived the round trip in both formats, exactly.
    thinking = [
        block
        for message in child["anthropic"]
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "thinking"
    ]
    assert thinking and all(block == THINKING for block in thinking)
    reasoning = [m["reasoning_content"] for m in child["openai"] if "reasoning_content" in m]
    assert any(r.startswith("reasoned about step") and r.endswith("\n  exactly") for r in reasoning)
    assert THINKING["thinking"] in reasoning
