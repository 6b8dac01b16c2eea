"""Test double for whole benchmark runs: a scripted model server driven by one function."""

from __future__ import annotations

from scripted_servers import RecordedRequest, Responder, ScriptedOpenAIServer, ScriptedReply

__all__ = ["ScriptedModelServer"]


class ScriptedModelServer(ScriptedOpenAIServer):
    """Test double: a scripted OpenAI-compatible server whose every reply comes from one
    function of the request (agent, judge and summarizer requests alike), so a whole benchmark
    run can be played without counting its calls in advance. Requests are recorded as usual.
    """

    def __init__(self) -> None:
        super().__init__()
        self.respond: Responder | None = None

    def _take(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
        if self.respond is None:
            return ScriptedReply(status=418, body={"error": {"message": "no responder set"}})
        try:
            return self.respond(request)
        except Exception as exc:  # a broken responder fails the test, never hangs the client
            error = {"type": "scripted_responder_failed", "message": f"{type(exc).__name__}: {exc}"}
            return ScriptedReply(status=418, body={"error": error})
