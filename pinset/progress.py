"""Progress of a long step (download, build, test run, fetch): the one place that decides how it shows.

On a terminal a rich bar (or a spinner for a step without counts) updates in place. Without one (CI,
a log file) a bar would write thousands of lines, so a plain line is printed every PLAIN_EVERY_S
while the step runs (from a timer, so a step whose program prints nothing still shows it is alive)
and one at the end; a step shorter than that prints nothing unless it announces its start.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress

PLAIN_EVERY_S = 15

BYTES, COUNT, SPINNER = "bytes", "count", "spinner"


class Progress:
    """`with Progress("build X", kind=COUNT, unit="steps") as p: p.update(done, total, note)`."""

    def __init__(self, what: str, *, kind: str = COUNT, unit: str = "", total: float | None = None,
                 done: float = 0, enabled: bool = True, console=None, clock=time.monotonic,
                 every: float | None = None, ticker: bool = True, done_as: str | None = None,
                 announce: bool = False):
        if console is None:
            from pinset import output

            console = output.err_console
        self.what, self.kind, self.unit = what, kind, unit
        self.done_as = done_as or what  # the end line's name ("downloaded X" after "downloading X")
        self.total, self.done, self.start_done, self.note = total, done, done, ""
        self.console, self.clock, self.every = console, clock, every or PLAIN_EVERY_S
        self.enabled = enabled
        # a bar updates in place on a real terminal only (FORCE_COLOR makes a CI log "a terminal" to rich)
        self.live = enabled and getattr(console, "on_a_tty", console.is_terminal) and console.is_terminal
        self.plain = enabled and not self.live
        self.started = self.last = clock()
        self._ticker = ticker and self.plain
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.bar: RichProgress | None = None
        self.announce, self.said = announce, False

    # -- the step reports -------------------------------------------------------------------------
    def update(self, done: float | None = None, total: float | None = None, note: str | None = None) -> None:
        with self._lock:
            if done is not None:
                self.done = done
            if total is not None:
                self.total = total
            if note is not None:
                self.note = note
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, total=self.total, note=self.note)
        else:
            self.tick()

    def advance(self, n: float = 1) -> None:
        self.update(done=self.done + n)

    def tick(self) -> None:
        """Print the plain line when PLAIN_EVERY_S have passed since the last one (no-op on a terminal)."""
        if self.plain and self.clock() - self.last >= self.every:
            self._say(f"{self.what}: {self.status()}")

    # -- what the plain lines say -----------------------------------------------------------------
    def elapsed(self) -> float:
        return self.clock() - self.started

    def status(self) -> str:
        """'12.3/45.6 MB at 3.1 MB/s', '40/120 cases (MUL_MAT) 35 s', '40 s'."""
        seconds = f"{self.elapsed():.0f} s"
        if self.kind == BYTES:
            of = f"/{self.total / 1e6:.1f}" if self.total else ""
            return f"{self.done / 1e6:.1f}{of} MB at {self._rate():.1f} MB/s"
        if self.kind == COUNT:
            of = f"/{self.total:g}" if self.total else ""
            unit = f" {self.unit}" if self.unit else ""
            note = f" ({self.note})" if self.note else ""
            return f"{self.done:g}{of}{unit}{note}, {seconds}"
        return f"{self.note + ', ' if self.note else ''}{seconds}"

    def _rate(self) -> float:
        return (self.done - self.start_done) / 1e6 / max(self.elapsed(), 1e-3)

    def _say(self, text: str) -> None:
        self.last, self.said = self.clock(), True
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    # -- start and end ----------------------------------------------------------------------------
    def __enter__(self):
        if self.live:
            from rich.errors import LiveError

            self.bar = bar = _rich_bar(self.kind, self.console)
            self.task = bar.add_task(self.what, total=self.total, completed=self.done, note=self.note)
            try:
                bar.start()
            except LiveError:  # inside another step's display (rich shows one at a time): that one speaks
                self.bar, self.live = None, False
        elif self.plain:
            if self.announce and self.kind == BYTES:
                size = f" ({self.total / 1e6:.1f} MB)" if self.total else ""
                resumed = f", resuming at {self.done / 1e6:.1f} MB" if self.done else ""
                self._say(f"{self.what}{size}{resumed}")
            elif self.announce:
                self._say(f"{self.what}…")
            if self._ticker:
                threading.Thread(target=self._tick_loop, daemon=True).start()
        return self

    def _tick_loop(self) -> None:
        while not self._stop.wait(min(self.every, 1.0)):
            self.tick()

    def __exit__(self, *exc):
        self._stop.set()
        if self.bar is not None:
            self.bar.stop()
        elif self.plain and self.said and exc[0] is None:
            if self.kind == BYTES:
                self._say(f"{self.done_as}: {self.done / 1e6:.1f} MB in {self.elapsed():.0f} s ({self._rate():.1f} MB/s)")
            else:
                self._say(f"{self.done_as}: done, {self.status()}")


def _rich_bar(kind: str, console):
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress as RichProgress,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    name = TextColumn("[bold]{task.description}")
    note = TextColumn("[dim]{task.fields[note]}")
    columns: tuple[ProgressColumn, ...]
    if kind == BYTES:
        columns = (name, BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    elif kind == COUNT:
        columns = (name, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), note)
    else:
        columns = (SpinnerColumn(), name, TimeElapsedColumn(), note)
    return RichProgress(*columns, console=console, transient=False)
