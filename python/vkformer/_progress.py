"""A progress bar on stderr for long work: redrawn in place on a terminal, a plain line per
tenth otherwise (a log or CI output stays readable)."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, what: str, enabled: bool = True):
        self.total, self.what, self.enabled = total, what, enabled and total > 0
        self.done = 0
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.last_tenth = -1

    def advance(self, n: int) -> None:
        if not self.enabled:
            return
        self.done += n
        elapsed = time.monotonic() - self.start
        if self.tty:
            width = 30
            filled = width * self.done // self.total
            sys.stderr.write(f"\r{self.what} [{'#' * filled}{'.' * (width - filled)}] "
                             f"{self.done}/{self.total} {elapsed:.1f} s")
            if self.done >= self.total:
                sys.stderr.write("\n")
        else:
            tenth = 10 * self.done // self.total
            if tenth != self.last_tenth:
                self.last_tenth = tenth
                sys.stderr.write(f"{self.what}: {self.done}/{self.total} ({elapsed:.1f} s)\n")
        sys.stderr.flush()
