"""Run a command on a real pseudo-terminal and read what a person would see, as it appears.

A test starts the command with :func:`start` (stdin, stdout and stderr all on the terminal, so
the program's ``isatty()`` checks see a terminal) and waits for text with
:meth:`Terminal.wait_for`, which reads until the text has appeared or a deadline passes: the test
synchronises on the program's real output, never on a sleep.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


@dataclass
class Terminal:
    """A process on a pseudo-terminal and everything it has written so far."""

    process: subprocess.Popen[bytes]
    master: int
    raw: bytearray = field(default_factory=bytearray)

    @property
    def screen(self) -> str:
        """What was written, with cursor movements and colours removed."""
        return _ANSI.sub("", self.raw.decode("utf-8", errors="replace"))

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """Read until ``pattern`` (a regex) matches the screen; fail after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.screen)
            if found:
                return found
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"{pattern!r} never appeared; the screen:\n{self.screen}")

    def type(self, text: str) -> None:
        """Type ``text`` (use ``\\n`` for Enter, ``\\x03`` for Ctrl-C)."""
        os.write(self.master, text.encode("utf-8"))

    def finish(self, timeout: float = 60.0) -> int:
        """Read until the process exits; return its exit code."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(min(0.5, max(0.0, deadline - time.monotonic())))
        while self._read(0.1):
            pass
        if self.process.poll() is None:
            self.process.kill()
            raise AssertionError(f"the command did not exit; the screen:\n{self.screen}")
        os.close(self.master)
        return self.process.returncode

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the other side closed: the process is gone
            return False
        self.raw += chunk
        return bool(chunk)


def start(args: Sequence[str], env: Mapping[str, str], columns: int = 160) -> Terminal:
    """Start ``args`` on a new pseudo-terminal ``columns`` wide."""
    master, slave = pty.openpty()
    os.set_blocking(master, True)
    environ = {**env, "COLUMNS": str(columns), "LINES": "40", "TERM": "xterm-256color"}
    process = subprocess.Popen(
        list(args), stdin=slave, stdout=slave, stderr=slave, env=environ, start_new_session=True
    )
    os.close(slave)
    return Terminal(process, master)
