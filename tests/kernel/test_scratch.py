"""The scratch tmpfs and the real scratch folder kept in step, with real workers and bwrap."""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from needs import missing
from scrollctx.kernel import (
    Kernel,
    Limits,
    SandboxPolicy,
    _scratch,
    _scratch_walk,
    render_observation,
)
from scrollctx.kernel._result import MAX_NOTES
from scrollctx.kernel._scratch import ScratchTooLarge


def user_folder(tmp_path: Path) -> Path:
    """A scratch folder that already holds a user's file."""
    scratch = tmp_path / "scratch"
    (scratch / "data").mkdir(parents=True)
    (scratch / "data" / "input.csv").write_text("a,b\n1,2\n")
    os.utime(scratch / "data" / "input.csv", ns=(1_000_000_000, 1_000_000_000))
    return scratch


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    """A strict kernel whose scratch folder already holds a user's files."""
    with Kernel(scratch=user_folder(tmp_path), timeout=5.0, grace=0.5) as started:
        assert started.start().layer("namespaces").holds
        yield started


def test_the_worker_sees_the_folder_and_the_folder_gets_what_the_cell_wrote(
    kernel: Kernel,
) -> None:
    cell = (
        "import os\nprint(open('data/input.csv').read(), os.stat('data/input.csv').st_mtime)\n"
        "os.makedirs('out/deep')\nopen('out/deep/result.txt', 'w').write('42')\n"
        "os.remove('data/input.csv')"
    )
    result = kernel.run_cell(cell)
    assert result.stdout == "a,b\n1,2\n 1.0\n", result.error
    assert (kernel.scratch / "out" / "deep" / "result.txt").read_text() == "42"
    assert not (kernel.scratch / "data" / "input.csv").exists()  # the cell deleted it


def test_a_file_the_user_adds_or_edits_while_the_kernel_runs_reaches_the_next_cell(
    kernel: Kernel,
) -> None:
    kernel.run_cell("open('notes.txt', 'w').write('from the kernel')")
    (kernel.scratch / "added.txt").write_text("from the user")
    (kernel.scratch / "data" / "input.csv").write_text("edited by the user")
    seen = kernel.run_cell("print(open('added.txt').read(), open('data/input.csv').read())")
    assert seen.stdout == "from the user edited by the user\n"
    assert (kernel.scratch / "added.txt").read_text() == "from the user"  # not removed
    assert (kernel.scratch / "notes.txt").read_text() == "from the kernel"


def test_a_file_changed_on_both_sides_during_a_cell_keeps_the_users_version(
    tmp_path: Path,
) -> None:
    scratch = user_folder(tmp_path)

    def edit(text: str) -> None:
        """Edit the user's file on the host (called mid-cell, so during the cell)."""
        (scratch / "data" / "input.csv").write_text(text)

    with Kernel(scratch=scratch, tools=[edit]) as both:
        for turn in ("1", "2"):  # each lost write is said, the same words or not
            cell = f"edit('the user\\'s edit {turn}')\nopen('data/input.csv', 'w').write('mine')"
            result = both.run_cell(cell)
            assert any("changed both in the kernel and on the host" in n for n in result.notes)
            assert (both.scratch / "data" / "input.csv").read_text() == f"the user's edit {turn}"
        again = both.run_cell("print(open('data/input.csv').read())")
        assert again.stdout == "the user's edit 2\n"


def test_files_survive_a_worker_killed_mid_cell_and_the_next_kernel(kernel: Kernel) -> None:
    # The host holds the tmpfs open, so what a killed worker wrote is still copied back.
    result = kernel.run_cell("open('partial.txt', 'w').write('saved')\nsum(range(10**12))",
                             timeout=0.3)  # fmt: skip
    assert result.namespace_lost
    assert (kernel.scratch / "partial.txt").read_text() == "saved"
    assert kernel.run_cell("print(open('partial.txt').read())").stdout == "saved\n"
    kernel.close()
    with Kernel(scratch=kernel.scratch) as later:  # scroll exec's kept folder
        assert later.run_cell("print(open('partial.txt').read())").stdout == "saved\n"


def test_symlinks_a_cell_plants_never_lead_the_host_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "out").symlink_to(outside)  # e.g. left by an older kernel, or by the user
    (scratch / "peek.txt").symlink_to(outside / "secret.txt")
    with Kernel(scratch=scratch) as kernel:
        cell = (
            "import os\nprint(sorted(os.listdir('.')))\n"
            f"os.symlink({str(outside)!r}, 'escape')\nos.symlink('/etc/passwd', 'passwd')\n"
            "os.mkdir('out')\nopen('out/planted.txt', 'w').write('x')\n"
            "os.mkfifo('pipe')"
        )
        result = kernel.run_cell(cell)
        assert result.stdout == "[]\n", result.error  # the host's symlinks were not followed in
        assert [n.split(" was not copied to ")[0] for n in result.notes] == [
            "scratch path out",
            "scratch path out/planted.txt",
        ]  # nothing about the symlinks and the FIFO the cell made: they stay in the kernel
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert sorted(p.name for p in scratch.iterdir()) == ["out", "peek.txt"]
    assert (scratch / "out").is_symlink() and (scratch / "peek.txt").is_symlink()


def test_a_file_swapped_for_a_symlink_after_the_walk_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kept scratch folder whose file becomes a symlink between the walk that found it and
    # the copy (a race another process could win): the copy's own open must not follow it, or
    # the next kernel would read the host's secret.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "notes.txt").write_text("mine")
    folder = _scratch._Cursor.folder

    def swap_then_open(
        cursor: _scratch._Cursor, rel: str, *, create: bool, itself: bool = False
    ) -> int:
        # The copy opens the file's folder, then the file: the swap lands between walk and open.
        if rel == "notes.txt" and not create and not (scratch / rel).is_symlink():
            (scratch / rel).unlink()
            (scratch / rel).symlink_to(outside / "secret.txt")
        return folder(cursor, rel, create=create, itself=itself)

    monkeypatch.setattr(_scratch._Cursor, "folder", swap_then_open)
    with Kernel(scratch=scratch) as kernel:
        result = kernel.run_cell("import os\nprint(sorted(os.listdir('.')))")
    assert result.stdout == "[]\n", result.error
    assert any(n.startswith("scratch path notes.txt was not copied to") for n in result.notes), (
        result.notes
    )
    assert (scratch / "notes.txt").is_symlink()


def test_a_folder_larger_than_the_quota_is_a_clear_error(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "big.bin").write_bytes(b"x" * 3 * 1024**2)
    policy = SandboxPolicy(limits=Limits(scratch_size=2 * 1024**2))
    kernel = Kernel(scratch=scratch, sandbox=policy)
    with pytest.raises(ScratchTooLarge, match=r"holds 3,145,728 bytes, more than the kernel's"):
        kernel.start()
    kernel.close()
    assert (scratch / "big.bin").stat().st_size == 3 * 1024**2  # nothing lost


def test_a_file_the_user_edited_is_not_deleted_by_the_cell(tmp_path: Path) -> None:
    scratch = user_folder(tmp_path)

    def edit() -> None:
        """Edit the user's file on the host (called mid-cell, so during the cell)."""
        (scratch / "data" / "input.csv").write_text("the user's edit")

    with Kernel(scratch=scratch, tools=[edit]) as kernel:
        kernel.run_cell("import os\nedit()\nos.remove('data/input.csv')")
        assert (scratch / "data" / "input.csv").read_text() == "the user's edit"


_NEARLY_FULL = """
import json, sys
from scrollctx.kernel import Kernel
with Kernel(scratch=sys.argv[1]) as kernel:
    result = kernel.run_cell("open('big.bin', 'wb').write(b'x' * 3 * 2**20)")
    print(json.dumps(list(result.notes)))
"""


def test_the_host_checks_free_disk_before_copying_back(tmp_path: Path) -> None:
    # A real nearly-full disk: the host runs in its own mount namespace with a 4 MiB tmpfs as
    # the scratch folder; it keeps half of what was free and so refuses the 3 MiB file.
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        missing("needs root and unshare(1) to mount a small file system for the host")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    mount = f'mount -t tmpfs -o size=4m tmpfs {scratch} && exec "$0" -c "$1" {scratch}'
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount,
         sys.executable, _NEARLY_FULL],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes = json.loads(done.stdout)
    assert len(notes) == 1 and notes[0].startswith("scratch file big.bin (3,145,728 bytes) was")
    assert "bytes are free there" in notes[0]


def test_a_file_whose_name_is_as_long_as_the_system_allows_is_copied_back(
    kernel: Kernel,
) -> None:
    names = ["N" * 243, "N" * 255]  # the old temporary name was 13 characters longer
    cell = f"for name in {names!r}:\n    open(name, 'w').write(str(len(name)))"
    result = kernel.run_cell(cell)
    assert result.notes == (), result.notes
    assert [(kernel.scratch / n).read_text() for n in names] == ["243", "255"]
    assert sorted(p.name for p in kernel.scratch.iterdir()) == ["N" * 243, "N" * 255, "data"]


def test_the_copy_backs_notes_share_the_observations_cap(tmp_path: Path) -> None:
    # Every file under a folder the host cannot make (a host symlink holds its name) fails to
    # copy back with a note naming it: 300 of them must stay within the observation's bound.
    outside = tmp_path / "outside"
    outside.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "out").symlink_to(outside)
    with Kernel(scratch=scratch, stdout_cap=1000, stderr_cap=1000) as kernel:
        cell = (
            "import os\nos.mkdir('out')\nfor i in range(300): open(f'out/{i:05d}' + 'N' * 200, 'w')"
        )
        result = kernel.run_cell(cell)
        observation = render_observation(result)
        assert len(observation) <= 1000 + 1000 + 8000 + 200, len(observation)
        assert len(result.notes) <= MAX_NOTES + 1
        assert result.notes[-1].endswith("more notes not shown"), result.notes[-1]
        assert kernel.run_cell("pass").notes == ()  # the failures repeat, their notes do not
    assert list(outside.iterdir()) == []


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_sibling_folders_cost_the_host_a_few_descriptors(kernel: Kernel) -> None:
    # The walk once held a descriptor for every folder not yet visited: 300 siblings against a
    # soft limit of 64 spare descriptors made run_cell, and then close, raise EMFILE.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = _open_descriptors()
    resource.setrlimit(resource.RLIMIT_NOFILE, (before + 64, hard))
    try:
        result = kernel.run_cell("import os\nfor i in range(300): os.mkdir(f'd{i}')")
        assert result.ok and result.notes == (), (result.error, result.notes)
        assert _open_descriptors() == before
        assert len(list(kernel.scratch.glob("d[0-9]*"))) == 300
        kernel.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_folder_that_vanishes_during_the_copy_back_is_a_note(
    kernel: Kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A thread the cell left running removes a folder between the walk's listing and its visit
    # (done here, at that moment, through the worker's root, so the race is always won).
    gone = f"/proc/{kernel.pid}/root{kernel.scratch}/gone"
    removed: list[str] = []
    signature = _scratch_walk.signature

    def vanish(st: os.stat_result) -> _scratch_walk.Signature:
        if not removed and stat.S_ISDIR(st.st_mode) and os.path.isdir(gone):
            if os.stat(gone).st_ino == st.st_ino:
                os.rmdir(gone)
                removed.append(gone)
        return signature(st)

    monkeypatch.setattr(_scratch_walk, "signature", vanish)
    cell = "import os\nos.mkdir('gone')\nos.mkdir('kept')\nopen('kept/f', 'w').write('x')"
    result = kernel.run_cell(cell)
    assert removed
    assert any("could not open gone (No such file or directory)" in n for n in result.notes), (
        result.notes
    )
    assert (kernel.scratch / "kept" / "f").read_text() == "x"
    after = kernel.run_cell("import os\nprint(sorted(os.listdir('.')))")
    assert after.stdout == "['data', 'kept']\n", (after.error, after.notes)
    assert not (kernel.scratch / "gone").exists()  # the next sync copied the deletion


def _chain_depth(top: Path, name: str) -> int:
    # How deep a chain of folders all called ``name`` goes (through descriptors: its path may
    # be longer than the system takes).
    fd, depth = os.open(top, os.O_RDONLY | os.O_DIRECTORY), 0
    try:
        while True:
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return depth
            os.close(fd)
            fd, depth = child, depth + 1
    finally:
        os.close(fd)


def test_paths_past_the_depth_and_length_bounds_are_not_copied_and_one_note_says_so(
    kernel: Kernel,
) -> None:
    # A deep chain once cost the host memory and time quadratic in its depth.
    cell = """
import os
for name, depth in (("d", 67), ("x" * 255, 20)):
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
"""
    result = kernel.run_cell(cell)
    assert result.ok, result.error
    assert [n for n in result.notes if "they were not synced" in n] == [
        "the kernel's scratch holds 2 entries (files or folders, with all they hold) "
        "deeper than 64 folders or with paths longer than 4,096 bytes; they were not synced"
    ], result.notes
    later = kernel.run_cell("pass")  # its sync leaves them out again, and says so no more
    assert later.ok and later.notes == (), later.notes
    assert _chain_depth(kernel.scratch, "d") == 64  # MAX_DEPTH
    assert _chain_depth(kernel.scratch, "x" * 255) == 16  # 16 * 256 - 1 = 4,095 bytes


def _files_bytes(folder: Path) -> tuple[int, int]:
    # What the files beneath ``folder`` take: their apparent sizes and their blocks on disk.
    files = [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    return sum(p.stat().st_size for p in files), sum(p.stat().st_blocks * 512 for p in files)


def test_the_copy_back_never_puts_more_than_the_quota_in_the_real_folder(tmp_path: Path) -> None:
    # Sparse files and hard links cost the tmpfs (almost) nothing, but their copies are dense
    # and each link its own file: 64 MiB of holes and nine names of one 1 MiB file once took
    # 73 MiB on the host's disk against a 4 MiB scratch, and the next kernel could not start.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "mine.txt").write_bytes(b"u" * 1024**2)  # the user's, within the quota
    policy = SandboxPolicy(limits=Limits(scratch_size=4 * 1024**2))
    cell = (
        "import os\nfd = os.open('sparse', os.O_WRONLY | os.O_CREAT, 0o644)\n"
        "os.ftruncate(fd, 64 * 2**20)\nos.close(fd)\n"
        "open('one', 'wb').write(b'x' * 2**20)\nfor i in range(8): os.link('one', f'link{i}')"
    )
    with Kernel(scratch=scratch, sandbox=policy) as kernel:
        result = kernel.run_cell(cell)
        assert result.ok, result.error
        budget_notes = [n for n in result.notes if "would then hold more than" in n]
        assert budget_notes == [
            "7 scratch files (73,400,320 bytes in all) were not copied to "
            f"{scratch}: it would then hold more than the kernel's 4,194,304-byte scratch "
            "(each file counts at its full size: the copy fills holes and copies each hard "
            "link on its own)"
        ], result.notes
        assert kernel.run_cell("pass").notes == ()  # still not copied; said once
        result = kernel.run_cell("open('two', 'wb').write(b'y' * 2**20)")
        assert [n for n in result.notes if "would then hold more than" in n] == [
            budget_notes[0].replace("7 scratch files (73,400,320", "8 scratch files (74,448,896")
        ], result.notes  # what the note says changed: said again
    size, on_disk = _files_bytes(scratch)
    assert size <= 4 * 1024**2 and on_disk <= 4 * 1024**2, (size, on_disk)
    assert sorted(p.name for p in scratch.iterdir()) == ["link0", "link1", "link2", "mine.txt"]
    with Kernel(scratch=scratch, sandbox=policy) as later:  # the folder still seeds a kernel
        assert later.run_cell("import os\nprint(len(os.listdir('.')))").stdout == "4\n"
