"""Lazy package exports: the public names resolve, and nothing is imported before it is used.

Each start-up test runs a fresh interpreter (the test process has long imported everything) and
lists the scrollctx modules it loaded: an eager import put back in a package ``__init__`` fails
one of them.
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from scrollctx._lazy import lazy_exports
from scrollctx.log import EventLog, Kind, NewEvent


def _loaded_after(code: str, prefix: str = "scrollctx") -> set[str]:
    report = f"import sys; print(' '.join(m for m in sys.modules if m.startswith({prefix!r})))"
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


def test_importing_the_package_loads_none_of_its_modules() -> None:
    assert _loaded_after("import scrollctx") == {"scrollctx", "scrollctx._lazy"}


def test_the_kernel_worker_starts_without_config_log_or_surface() -> None:
    loaded = _loaded_after("import scrollctx.kernel._worker")
    assert "scrollctx.kernel._worker" in loaded
    assert not {"scrollctx.config", "scrollctx.log", "scrollctx.surface"} & loaded


def test_scroll_search_loads_no_writer_kernel_or_agent(tmp_path: Path) -> None:
    with EventLog.open(tmp_path / "history.db") as log:
        log.append(NewEvent(session_id="s", kind=Kind.CONVERSATION, role="user", content="hello"))
    loaded = _loaded_after(
        "from scrollctx.cli import run\n"
        "try:\n"
        f"    run(['search', '--store', {str(tmp_path)!r}, 'hello'])\n"
        "except SystemExit:\n"
        "    pass",
        prefix="",
    )
    assert "scrollctx.surface._search" in loaded
    assert not {"scrollctx.log._store", "scrollctx.kernel", "scrollctx.agent"} & loaded
    assert "difflib" not in loaded  # only an SQL error's "did you mean" needs it


def _package() -> types.ModuleType:
    package = types.ModuleType("scrollctx_lazy_probe")
    sys.modules[package.__name__] = package
    package.__getattr__, package.__dir__ = lazy_exports(  # type: ignore[method-assign]
        package.__name__, {"dedent": "textwrap"}
    )
    return package


def test_a_name_is_imported_on_first_use_and_bound_on_the_package() -> None:
    import textwrap

    package = _package()
    try:
        assert "dedent" not in vars(package)
        assert package.dedent is textwrap.dedent
        assert vars(package)["dedent"] is textwrap.dedent
        assert "dedent" in dir(package)
    finally:
        del sys.modules[package.__name__]


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    package = _package()
    try:
        with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
            _ = package.nothing
        assert not hasattr(package, "nothing")
    finally:
        del sys.modules[package.__name__]
