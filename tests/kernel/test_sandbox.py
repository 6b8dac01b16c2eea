"""Sandbox status, fail-closed refusal, logged opt-outs and the doctor, with real workers."""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from kernel_helpers import Session, open_session

from needs import missing
from scrollctx.errors import UsageError
from scrollctx.kernel import (
    LAYERS,
    Kernel,
    Limits,
    SandboxPolicy,
    _sandbox,
    doctor,
    render_observation,
)
from scrollctx.kernel._process import WorkerProcess, default_python
from scrollctx.kernel._sandbox import SandboxPlan
from scrollctx.log import Kind


def test_every_layer_holds_and_self_tests_on_this_machine(shared: Session) -> None:
    status = shared.kernel.start()
    assert status.profile == "strict" and status.holds
    assert [(s.name, s.state) for s in status.layers] == [(name, "ok") for name in LAYERS]
    assert status.layer("landlock").detail.startswith("ABI ")
    started = [e for e in shared.log.session_events("k1") if e.kind == Kind.SYSTEM][0]
    assert started.metadata["sandbox"]["layers"]["seccomp"]["state"] == "ok"


@pytest.mark.parametrize("layer", LAYERS)
def test_strict_refuses_cells_when_a_layer_is_missing(tmp_path: Path, layer: str) -> None:
    session = open_session(tmp_path, sandbox=SandboxPolicy(unavailable=frozenset({layer})))
    try:
        status = session.kernel.status
        assert status is not None and not status.holds
        assert [s.name for s in status.missing] == [layer]
        assert session.kernel.pid is None  # no unconfined worker is left running
        result = session.kernel.run_cell("open('pwned', 'w').write('x')")
        assert result.refused and not result.ok
        assert result.error is not None
        assert f"{layer} (unavailable" in result.error
        assert "sandbox='best-effort'" in result.error and "--sandbox" in result.error
        assert not (tmp_path / "scratch" / "pwned").exists()
        refusals = [
            e for e in session.log.session_events("k1") if e.metadata.get("refused") is True
        ]
        assert len(refusals) == 1 and layer in refusals[0].content
    finally:
        session.kernel.close()
        session.log.close()


def test_a_worker_revived_where_a_layer_no_longer_holds_is_refused(own: Session) -> None:
    # The worker ended between cells, and its replacement boots where a layer is gone (here:
    # the policy now treats Landlock as missing): the host refuses the cell, it never runs.
    assert own.kernel.run_cell("print(1)").stdout == "1\n"
    own.kernel.policy = SandboxPolicy(unavailable=frozenset({"landlock"}))
    pid = own.kernel.pid or 0
    exited = os.pidfd_open(pid)  # readable once the process has ended
    os.kill(pid, signal.SIGKILL)
    select.select([exited], [], [], 10)
    os.close(exited)
    result = own.kernel.run_cell("open('pwned', 'w').write('x')")
    assert result.refused and result.namespace_lost and result.error is not None
    assert "landlock (unavailable" in result.error
    assert own.kernel.pid is None and not (own.root / "scratch" / "pwned").exists()


def test_opt_out_off_is_logged_and_shown_in_every_observation(tmp_path: Path) -> None:
    session = open_session(tmp_path, sandbox="off")
    try:
        opt_outs = [e for e in session.log.session_events("k1") if e.metadata.get("opt_out")]
        assert len(opt_outs) == 1
        assert opt_outs[0].kind == Kind.SYSTEM and "'off'" in opt_outs[0].content
        for cell in ("x = 1", "print(x)"):
            text = render_observation(session.kernel.run_cell(cell))
            assert text.startswith("[sandbox] opt-out 'off': no sandbox layer is applied")
        states = {s.state for s in session.kernel.start().layers}
        assert states == {"skipped"}
    finally:
        session.kernel.close()
        session.log.close()


def test_best_effort_names_the_missing_layer_in_every_observation(tmp_path: Path) -> None:
    policy = SandboxPolicy("best-effort", unavailable=frozenset({"landlock"}))
    session = open_session(tmp_path, sandbox=policy)
    try:
        result = session.kernel.run_cell("print('ran')")
        assert result.stdout == "ran\n"
        assert render_observation(result).splitlines()[0] == (
            "[sandbox] opt-out 'best-effort': layers not holding: landlock"
        )
        assert session.kernel.start().layer("seccomp").holds
        died = render_observation(session.kernel.run_cell("import os\nos._exit(3)")).splitlines()
        assert died[0].startswith("[sandbox] opt-out 'best-effort'")
        assert died[1].startswith("[kernel] the worker was restarted")
        later = render_observation(session.kernel.run_cell("print('next')"))
        assert later.splitlines()[0].startswith("[sandbox] opt-out 'best-effort'")
    finally:
        session.kernel.close()
        session.log.close()


def test_doctor_reports_every_layer_and_the_strict_verdict() -> None:
    report = doctor()
    assert report.strict_holds
    assert [s.state for s in report.status.layers] == ["ok"] * len(LAYERS)
    assert "strict profile: all layers hold" in report.render()


def test_doctor_is_truthful_when_landlock_is_forced_off() -> None:
    report = doctor(unavailable=["landlock"])
    assert not report.strict_holds
    assert report.status.layer("landlock").state == "unavailable"
    assert report.status.layer("seccomp").holds
    assert "REFUSED here (missing: landlock)" in report.render()
    assert report.to_dict()["layers"]["landlock"]["state"] == "unavailable"


def test_unknown_layers_and_profiles_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown sandbox layer"):
        SandboxPolicy(unavailable=frozenset({"selinux"}))
    with pytest.raises(UsageError, match="unknown sandbox profile"):
        Kernel(sandbox="permissive")


def test_worker_holds_no_capabilities_and_is_filtered(shared: Session) -> None:
    # Read from the host: the worker's own view could be forged by model code.
    status = dict(
        line.split(":\t", 1)
        for line in Path(f"/proc/{shared.kernel.pid}/status").read_text().splitlines()
        if ":\t" in line
    )
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[key], 16) == 0, key
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"
    assert os.readlink(f"/proc/{shared.kernel.pid}/ns/net") != os.readlink("/proc/self/ns/net")
    if os.geteuid() == 0:
        # Root needs no user namespace for its network namespace, and is given none: a user
        # namespace of its own would make the worker its root, with every capability in it.
        assert os.readlink(f"/proc/{shared.kernel.pid}/ns/user") == os.readlink(
            "/proc/self/ns/user"
        )


# What the rlimits layer reports for the documented defaults of Limits.
_DEFAULT_RLIMITS = (
    "address space 2048 MiB, file size 256 MiB, 256 open files, no core dumps, 64 queued signals"
)


def test_the_rlimits_layer_reports_the_limits_it_set(shared: Session) -> None:
    assert Limits() == Limits(address_space=2 * 1024**3, file_size=256 * 1024**2, open_files=256)
    assert shared.kernel.start().layer("rlimits").detail.startswith(_DEFAULT_RLIMITS)


def test_the_rlimits_layer_reports_limits_other_than_the_defaults(tmp_path: Path) -> None:
    limits = Limits(address_space=3 * 1024**3, file_size=1024**3, open_files=300)
    session = open_session(tmp_path, sandbox=SandboxPolicy(limits=limits))
    try:
        detail = session.kernel.start().layer("rlimits").detail
        assert detail.startswith("address space 3072 MiB, file size 1024 MiB, 300 open files,")
    finally:
        session.kernel.close()
        session.log.close()


def test_a_boot_frame_without_limits_gets_the_documented_defaults(tmp_path: Path) -> None:
    # The host always sends its limits; a boot frame without them (a hand-made host) must still
    # get the defaults of Limits, not looser ones. Read back from inside the worker.
    worker = WorkerProcess(default_python(), tmp_path, None)
    try:
        deadline = time.monotonic() + 30
        policy = SandboxPolicy("best-effort", unavailable=frozenset({"namespaces"})).to_wire()
        del policy["limits"]
        boot = {"op": "boot", "id": 0, "scratch": str(tmp_path), "db_path": None}
        worker.send({**boot, "policy": policy, "tools": []}, deadline)
        ready = worker.reader.read(deadline)
        assert ready is not None
        assert ready["layers"]["rlimits"] == {"state": "ok", "detail": _DEFAULT_RLIMITS}
        names = ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")
        code = f"import resource as r\nprint([r.getrlimit(getattr(r, n)) for n in {names}])"
        worker.send({"op": "cell", "id": 1, "code": code}, deadline)
        reply = worker.reader.read(deadline)
        assert reply is not None, "the worker gave no reply"
        limits = Limits()
        wanted = [limits.address_space, limits.file_size, limits.open_files, 0]
        assert reply["stdout"] == f"{[(n, n) for n in wanted]}\n", reply
    finally:
        worker.kill()


# -- each defence on its own, the others bypassed -------------------------------------------


def _plan(scratch: Path) -> SandboxPlan:
    return SandboxPlan(apply=(), unavailable=(), limits={}, scratch=str(scratch), db_path=None)


def test_a_layer_whose_self_test_finds_it_open_is_reported_failed(tmp_path: Path) -> None:
    # The probes run here, in the unconfined test process, for layers claimed "ok": each finds
    # its layer open, and the layer must end "failed" (strict then refuses every cell).
    plan = _plan(tmp_path)
    plan.mark("landlock", "ok", "claimed, not applied")
    plan.mark("seccomp", "ok", "claimed, not applied")
    _sandbox._self_test(plan)
    assert plan.report["landlock"]["state"] == "failed"
    assert plan.report["landlock"]["detail"] == "self-test: could open /dev/zero for writing"
    assert plan.report["seccomp"] == {
        "state": "failed",
        "detail": "self-test: prctl(GET_SECCOMP) is not 2 (filter mode)",
    }
    # A layer that is not "ok" is not probed, and does not stop the later ones being probed.
    plan = _plan(tmp_path)
    plan.mark("landlock", "unavailable", "not on this machine")
    plan.mark("seccomp", "ok", "claimed, not applied")
    _sandbox._self_test(plan)
    assert plan.report["landlock"] == {"state": "unavailable", "detail": "not on this machine"}
    assert plan.report["seccomp"]["state"] == "failed"


def test_a_network_namespace_that_still_shows_other_interfaces_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if unshare had returned success without isolating anything: the "only lo" check must
    # catch it. Run in the test process, whose namespace has the machine's interfaces.
    interfaces = [name for _, name in socket.if_nameindex()]
    if interfaces == ["lo"]:
        missing("this machine's own network namespace has only lo")
    monkeypatch.setattr(_sandbox, "_unshare_network", lambda: None)
    with pytest.raises(_sandbox._SelfTestFailed, match="interfaces after unshare are"):
        _sandbox._apply_netns(_plan(tmp_path))


def test_an_rlimit_that_does_not_take_leaves_the_layer_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if setrlimit had returned success and changed nothing: the read-back must catch it.
    # Run in the test process, whose own limits the patched setrlimit leaves alone.
    monkeypatch.setattr(_sandbox.resource, "setrlimit", lambda limit, value: None)
    before = signal.getsignal(signal.SIGXFSZ)
    try:
        with pytest.raises(OSError, match="did not take"):
            _sandbox._apply_rlimits(_plan(tmp_path))
    finally:
        signal.signal(signal.SIGXFSZ, before)


_NOT_ROOT_NETNS = """
import errno, os, sys
from scrollctx.kernel import _sandbox
from scrollctx.kernel._sandbox import SandboxPlan
os.setgid(65534)
os.setuid(65534)  # after the imports: the interpreter's files need not be readable to nobody
plan = SandboxPlan(apply=(), unavailable=(), limits={}, scratch=sys.argv[1], db_path=None)
try:
    print(_sandbox._apply_netns(plan))
except OSError as exc:
    print("unavailable" if exc.errno in (errno.EPERM, errno.ENOSPC) else exc)
"""


def test_a_worker_that_is_not_root_still_gets_a_private_network(tmp_path: Path) -> None:
    # Without uid 0 a network namespace needs a user namespace made with it. Run in a child of
    # the test process that gave up root, whose namespace has the machine's interfaces.
    if os.geteuid() != 0:
        missing("the test gives up root, and runs as a user without it")
    if [name for _, name in socket.if_nameindex()] == ["lo"]:
        missing("this machine's own network namespace has only lo")
    done = subprocess.run(
        [sys.executable, "-c", _NOT_ROOT_NETNS, str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if done.stdout == "unavailable\n":
        missing("unprivileged user namespaces are disabled on this machine")
    assert done.stdout == "private network namespace (only lo, down)\n", done.stderr


_FILTER_WITH_A_HOLE = """
import sys
from scrollctx.kernel import _sandbox, _seccomp
from scrollctx.kernel._sandbox import SandboxPlan
hole, scratch = sys.argv[1:]
if hole == "prctl":
    _seccomp._DENIED_PRCTLS = (4,)  # PR_SET_DUMPABLE only
elif hole == "fcntl":
    _seccomp._DENIED_FCNTLS = tuple(c for c in _seccomp._DENIED_FCNTLS if c != 8)  # F_SETOWN
else:
    _seccomp._DENIED = {name: nr for name, nr in _seccomp._DENIED.items() if name != hole}
_seccomp.install_filter()
plan = SandboxPlan(apply=(), unavailable=(), limits={}, scratch=scratch, db_path=None)
print(_sandbox._probe_seccomp(plan))
"""


@pytest.mark.parametrize(
    ("hole", "found"),
    [
        ("socket", "socket(AF_INET) was allowed"),
        ("fork", "fork was allowed"),
        ("prctl", "prctl(PR_SET_PDEATHSIG) was allowed"),
        ("fcntl", "fcntl(F_SETOWN) was allowed"),
    ],
)
def test_the_seccomp_self_test_finds_a_filter_with_one_hole(
    tmp_path: Path, hole: str, found: str
) -> None:
    # The real filter with one entry left out, installed in a child of the test process: the
    # probe must name that hole (and, with the full filter, nothing: test_every_layer_holds).
    done = subprocess.run(
        [sys.executable, "-c", _FILTER_WITH_A_HOLE, hole, str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.stdout == f"{found}\n", done.stderr


_REFUSED_BY_THE_FILTER = """
import sys
from scrollctx.kernel import _sandbox, _seccomp
_seccomp.install_filter()  # refuses prctl(PR_SET_PDEATHSIG) and unshare
try:
    getattr(_sandbox, sys.argv[1])()
except OSError as exc:
    print(exc.errno, exc.strerror)
"""


@pytest.mark.parametrize(
    ("call", "what"),
    [("die_with_host", "prctl(PR_SET_PDEATHSIG)"), ("_unshare_network", "unshare(CLONE_NEWNET)")],
)
def test_a_refused_death_signal_or_network_namespace_is_an_error_that_says_why(
    call: str, what: str
) -> None:
    # A worker that cannot arrange to die with its host must not start, nor claim a network
    # namespace it did not get; the error names the kernel's reason (errno), read right after
    # the failing call. Here seccomp refuses it, as a hardened host might; each call runs in a
    # fresh process, so no earlier failure's errno is left to be read instead.
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_BY_THE_FILTER, call],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    reason = os.strerror(errno.EPERM)
    assert done.stdout == f"{errno.EPERM} {what} failed: {reason}\n", done.stderr


def test_the_worker_refuses_cells_itself_when_a_strict_layer_does_not_hold(
    tmp_path: Path,
) -> None:
    # The host refuses first; here it is bypassed: the boot frame asks for strict with Landlock
    # missing, and a cell frame is sent anyway. The worker's own lock must hold.
    worker = WorkerProcess(default_python(), tmp_path, None)
    try:
        deadline = time.monotonic() + 30
        policy = SandboxPolicy(unavailable=frozenset({"landlock"})).to_wire()
        boot = {"op": "boot", "id": 0, "scratch": str(tmp_path), "db_path": None}
        worker.send({**boot, "policy": policy, "tools": []}, deadline)
        ready = worker.reader.read(deadline)
        assert ready is not None and ready["layers"]["landlock"]["state"] == "unavailable"
        worker.send({"op": "cell", "id": 1, "code": "open('pwned', 'w').write('x')"}, deadline)
        reply = worker.reader.read(deadline)
        assert reply is not None and "refused by the worker" in reply["error"]
        assert "landlock" in reply["error"]
        assert not (tmp_path / "pwned").exists()
    finally:
        worker.kill()


@pytest.mark.parametrize(("abi", "truncated"), [(2, True), (3, False)])
def test_the_landlock_abi_cap_really_weakens_landlock(
    tmp_path: Path, abi: int, truncated: bool
) -> None:
    # The test-only knob is real: at ABI 2 (Debian 12's kernels) Landlock does not control
    # truncation, so with Landlock alone (the namespaces layer and seccomp's truncate entry
    # off) a readable file outside scratch can be emptied; from ABI 3 it cannot.
    alone = frozenset({"namespaces", "seccomp"})
    policy = SandboxPolicy("best-effort", unavailable=alone, landlock_abi=abi)
    session = open_session(tmp_path, sandbox=policy)
    try:
        victim = session.log.path.parent / "payloads" / "victim.bin"
        victim.write_bytes(b"keep")
        detail = session.kernel.start().layer("landlock").detail
        assert detail.startswith(f"ABI {abi} (capped from ") and "for testing" in detail
        assert ("truncate not controlled" in detail) is truncated
        result = session.kernel.run_cell(f"import os\nos.truncate({str(victim)!r}, 0)")
        assert (victim.read_bytes() == b"") is truncated, result.error
    finally:
        session.kernel.close()
        session.log.close()


@pytest.mark.parametrize("access", [os.O_RDONLY, os.O_ACCMODE], ids=["O_RDONLY", "mode 3"])
def test_seccomp_refuses_a_truncating_open_that_does_not_write_below_landlock_abi_3(
    tmp_path: Path, access: int
) -> None:
    # Below ABI 3, Landlock lets a file it grants for reading be opened O_RDONLY | O_TRUNC, which
    # empties it, and any file it can name with the access mode 3 (neither read nor write: no
    # right is checked): without the namespaces layer (best-effort where bwrap is missing) the
    # interpreter's own files and the store were open to this. seccomp refuses both (EPERM).
    policy = SandboxPolicy("best-effort", unavailable=frozenset({"namespaces"}), landlock_abi=2)
    victim = Path(sysconfig.get_paths()["purelib"]) / f"scrollctx-test-victim-{os.getpid()}.txt"
    victim.write_bytes(b"keep")
    try:
        with Kernel(scratch=tmp_path / "scratch", sandbox=policy) as kernel:
            cell = (
                f"import os\ntry:\n    os.open({str(victim)!r}, {access} | os.O_TRUNC)\n"
                "except OSError as exc:\n    print(exc.errno)\n"
                f"print(open({str(victim)!r}).read())"
            )
            result = kernel.run_cell(cell)
        assert result.stdout == f"{errno.EPERM}\nkeep\n", result.error
        assert victim.read_bytes() == b"keep"
    finally:
        victim.unlink()
