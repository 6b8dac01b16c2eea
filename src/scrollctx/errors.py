"""The one exception tree of scrollctx.

Every error the library raises on purpose derives from :class:`ScrollError`. Branches say who
must act; ``exit_code`` says how the ``scroll`` command ends when the error reaches it::

    ScrollError                      exit 1
    ├── UsageError                   exit 2   the caller passed something invalid
    │   ├── ConfigError              exit 2   configuration is missing or inconsistent
    │   ├── QueryError               exit 2   an ms query / SQL statement that cannot run
    │   ├── UnknownSession           exit 2   a session handle that names no live kernel
    │   └── FormatError              exit 2   an input file to import is unreadable or unknown
    ├── StoreError                   exit 1   the Event Log or payload store failed
    │   ├── IntegrityError           exit 3   a torn, corrupt or foreign store file
    │   ├── PayloadMissing           exit 3   an externalized payload file is gone
    │   ├── StoreUnavailable         exit 1   the database server is down or the connection died
    │   └── StoreAccessDenied        exit 2   the server refused the login or the write (role)
    ├── KernelError                  exit 1   the sandboxed worker
    │   ├── SandboxUnavailable       exit 2   a required sandbox layer does not hold here
    │   ├── CellTimeout              exit 1
    │   ├── CellFailed               exit 1   a cell raised (scroll exec; the agent observes it)
    │   ├── WorkerCrashed            exit 1
    │   ├── ProtocolError            exit 1   the worker sent a frame the host rejects
    │   └── SessionLimit             exit 1   a front door has no room for one more kernel
    ├── ContextOverflow              exit 1   the protected part of the view exceeds the window
    ├── RunIncomplete                exit 1   some questions of a bench run ended in error
    ├── ToolServerError              exit 1   an MCP server whose tools the agent calls failed
    ├── BackendError                 exit 1   an LLM provider
    │   ├── MissingCredentials       exit 2
    │   ├── RateLimited              exit 1
    │   ├── BackendUnavailable       exit 1
    │   ├── BadResponse              exit 1
    │   └── RequestRejected          exit 1   the server refused this request; resending won't help
    │       └── ContextTooLong       exit 1   the request does not fit the model's window
    └── MissingDependency            exit 2   an optional extra is not installed

Exceptions carry their data as attributes, never print or log when built, and are raised
``from`` their cause. Messages say what happened, the value involved and the next step.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BackendUnavailable",
    "BadResponse",
    "CellFailed",
    "CellTimeout",
    "ConfigError",
    "ContextOverflow",
    "ContextTooLong",
    "FormatError",
    "IntegrityError",
    "KernelError",
    "MissingCredentials",
    "MissingDependency",
    "PayloadMissing",
    "ProtocolError",
    "QueryError",
    "RateLimited",
    "RunIncomplete",
    "RequestRejected",
    "SandboxUnavailable",
    "ScrollError",
    "SessionLimit",
    "StoreAccessDenied",
    "StoreError",
    "StoreUnavailable",
    "ToolServerError",
    "UnknownSession",
    "UsageError",
    "WorkerCrashed",
]


class ScrollError(Exception):
    """Base of every error scrollctx raises on purpose."""

    exit_code = 1


class UsageError(ScrollError):
    """The caller passed something invalid."""

    exit_code = 2


class ConfigError(UsageError):
    """Configuration is missing or inconsistent."""


class QueryError(UsageError):
    """A memory-surface query or SQL statement that cannot run as written."""

    def __init__(self, message: str, *, query: str | None = None) -> None:
        super().__init__(message)
        self.query = query


class UnknownSession(UsageError):
    """A session handle names no live kernel: never issued, or its kernel has ended.

    ``reason`` says why it ended, when it did (idle, closed, the server restarted).
    """

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class FormatError(UsageError):
    """An input file to import is missing, unreadable, malformed or of an unknown format."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class StoreError(ScrollError):
    """The Event Log or the payload store failed."""


class IntegrityError(StoreError):
    """A store file is torn, corrupt or not a scrollctx store.

    ``path`` is the damaged file; ``seq`` the damaged event, when one row is at fault.
    """

    exit_code = 3

    def __init__(self, message: str, *, path: str | None = None, seq: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.seq = seq


class PayloadMissing(StoreError):
    """An externalized payload file referenced by the log is gone."""

    exit_code = 3

    def __init__(self, message: str, *, seq: int | None = None, sha256: str | None = None) -> None:
        super().__init__(message)
        self.seq = seq
        self.sha256 = sha256


class StoreUnavailable(StoreError):
    """The database server cannot be reached, or went away in the middle of an operation."""


class StoreAccessDenied(StoreError):
    """The database server refused the login (user, password, database) or a write (role)."""

    exit_code = 2


class KernelError(ScrollError):
    """The sandboxed worker process failed."""


class SandboxUnavailable(KernelError):
    """A sandbox layer the policy requires does not hold on this machine."""

    exit_code = 2

    def __init__(self, message: str, *, layers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.layers = layers or {}


class CellTimeout(KernelError):
    """A cell ran past its deadline."""


class CellFailed(KernelError):
    """A cell ran and raised. For the agent this is an observation; ``scroll exec`` exits 1."""


class WorkerCrashed(KernelError):
    """The worker process died."""


class ProtocolError(KernelError):
    """The worker sent a frame the host rejects."""


class SessionLimit(KernelError):
    """Every kernel a front door may keep is running a cell; none can be closed for a new one."""


class ContextOverflow(ScrollError):
    """The working view cannot fit its window: what eviction may not touch is already too big."""

    def __init__(self, message: str, *, tokens: int, budget: int) -> None:
        super().__init__(message)
        self.tokens = tokens
        self.budget = budget


class RunIncomplete(ScrollError):
    """A batch finished, but some of its items ended in error (rerunning retries them)."""

    def __init__(self, message: str, *, errors: int, total: int) -> None:
        super().__init__(message)
        self.errors = errors
        self.total = total


class ToolServerError(ScrollError):
    """An MCP server whose tools the agent calls failed to start, died, stopped answering, or
    answered a call with an error.

    ``server`` names it; ``gone`` is True when the server is no longer usable (its tools are
    withdrawn), False when only this call failed.
    """

    def __init__(self, message: str, *, server: str, gone: bool) -> None:
        super().__init__(message)
        self.server = server
        self.gone = gone


class BackendError(ScrollError):
    """An LLM provider failed.

    ``backend`` names the backend (``"openai"``), ``status_code`` is the HTTP status when there
    was one, ``retry_after`` the seconds the provider asked us to wait, when it said, and
    ``body`` the provider's answer exactly as it sent it (so a proxy can relay it).
    """

    def __init__(
        self,
        message: str,
        *,
        backend: str | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.backend = backend
        self.status_code = status_code
        self.retry_after = retry_after
        self.body = body


class MissingCredentials(BackendError):
    """No key or endpoint is configured for the chosen backend."""

    exit_code = 2


class RateLimited(BackendError):
    """The provider answered 429 after all retries."""


class BackendUnavailable(BackendError):
    """The provider could not be reached or answered 5xx after all retries."""


class BadResponse(BackendError):
    """The provider answered with something we cannot use."""


class RequestRejected(BackendError):
    """The server refused this request (a 4xx answer, or a 500 for input it could not take).

    Sending the same request again cannot succeed, so it is never retried; the message carries
    the server's own words.
    """


class ContextTooLong(RequestRejected):
    """The provider rejected the request because the input exceeds the model's context window."""


class MissingDependency(ScrollError):
    """An optional extra is not installed."""

    exit_code = 2

    def __init__(self, package: str, extra: str) -> None:
        # ``package`` may name several ("starlette, uvicorn and orjson"): say it as English would.
        are, them = ("are", "them") if " and " in package else ("is", "it")
        super().__init__(
            f"{package} {are} not installed; install {them} with: pip install 'scrollctx[{extra}]'"
        )
        self.package = package
        self.extra = extra
