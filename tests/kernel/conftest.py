"""Fixtures for kernel tests: real Event Log files and real sandboxed worker processes.

Starting a worker takes about a tenth of a second, so tests that leave the namespace usable share
a module-scoped kernel; tests that kill, restart or reconfigure the worker start their own.

``sandbox_variant`` runs a test under every sandbox the hostile suite must hold under: the strict
profile with the Landlock ABI capped at each version 1 … 7 (what the doctor calls strict on
Ubuntu 22.04, Debian 12 and newer kernels), and best-effort with no Landlock at all (what the
other layers still stop). ``hostile`` and ``hostile_own`` are sessions under that variant; any
test module may use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_helpers import SandboxVariant, Session, open_session

from needs import missing
from scrollctx.kernel._landlock import abi_version

MAX_ABI = 7


VARIANTS = [SandboxVariant(f"abi{n}", n) for n in range(1, MAX_ABI + 1)]
VARIANTS.append(SandboxVariant("no-landlock", None))


@pytest.fixture(scope="module", params=VARIANTS, ids=[v.name for v in VARIANTS])
def sandbox_variant(request: pytest.FixtureRequest) -> SandboxVariant:
    """Each sandbox variant in turn (ABIs this kernel lacks are skipped, with the reason)."""
    variant: SandboxVariant = request.param
    if variant.landlock_abi is not None and variant.landlock_abi > abi_version():
        missing(f"this kernel's Landlock ABI is {abi_version()}, below {variant.landlock_abi}")
    return variant


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """One kernel for tests that leave it usable (short timeouts)."""
    session = open_session(tmp_path_factory.mktemp("shared"), timeout=5.0, grace=1.0)
    yield session
    session.kernel.close()
    session.log.close()


@pytest.fixture
def own(tmp_path: Path) -> Iterator[Session]:
    """A kernel for one test (short timeout and grace, for timeouts and crashes)."""
    session = open_session(tmp_path, timeout=1.0, grace=0.5)
    yield session
    session.kernel.close()
    session.log.close()


@pytest.fixture(scope="module")
def hostile(
    tmp_path_factory: pytest.TempPathFactory, sandbox_variant: SandboxVariant
) -> Iterator[Session]:
    """One kernel per sandbox variant, shared by the tests that leave it usable."""
    root = tmp_path_factory.mktemp(f"hostile-{sandbox_variant.name}")
    session = open_session(root, sandbox=sandbox_variant.policy(), timeout=5.0, grace=1.0)
    yield session
    session.kernel.close()
    session.log.close()


@pytest.fixture
def hostile_own(tmp_path: Path, sandbox_variant: SandboxVariant) -> Iterator[Session]:
    """A kernel for one test under the sandbox variant (short timeout and grace)."""
    session = open_session(tmp_path, sandbox=sandbox_variant.policy(), timeout=1.0, grace=0.5)
    yield session
    session.kernel.close()
    session.log.close()
