"""Stopping on a signal: what a preempted or cancelled run does.

    with StopSignals() as stop:      # gpurl.train around Trainer.train; handlers restored
        trainer.stop = stop          # after it
        trainer.train()              # reads stop.signal between iterations

SIGTERM (Slurm's preemption and `scancel`), SIGINT (Ctrl-C) and SIGUSR1 (Slurm's
`--signal=USR1@90`, sent before the time limit) ask the run to stop. The first one only
records its name: a Python attribute that the loop reads between iterations, so the hot
path has nothing added and no host read. The trainer finishes the iteration, writes a
checkpoint and summary.json (stopped: "signal", signal: its name), and gpurl.train prints
one line and exits 128 + the signal's number, as a shell reports a process the signal
ended: SIGTERM 143, SIGINT 130, SIGUSR1 138 (on Linux).

A second signal exits at once (SystemExit from the handler, same code), whatever the
run is doing: no further iteration, evaluation or checkpoint. A checkpoint it
interrupts is left unfinished (trainers/checkpoint.py removes its temporary files): the
previous complete checkpoint stays on disk with its digest, and `trainer.resume=auto`
continues from it.

Handlers can only be set in the main thread; elsewhere (a run started from a worker
thread) StopSignals sets none and the signals keep their usual effect.
"""

from __future__ import annotations

import os
import signal
import threading

STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGUSR1")


def exit_code(name: str) -> int:
    """The exit status of a run stopped by signal `name`: 128 + its number."""
    return 128 + int(signal.Signals[name])


class StopSignals:
    """The stop request a run reads between iterations: `signal` is None until one of
    STOP_SIGNALS arrives (while entered), then its name."""

    def __init__(self):
        self.signal: str | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for name in STOP_SIGNALS:
                if name in signal.Signals.__members__:  # no SIGUSR1 on Windows
                    number = signal.Signals[name]
                    self._previous[number] = signal.signal(number, self.handle)
        return self

    def __exit__(self, *exc) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def handle(self, number: int, frame=None) -> None:
        """The handler: record the first signal; exit at once on the second."""
        name = signal.Signals(number).name
        if self.signal is None:
            self.signal = name
            return
        # os.write: print() may be in the middle of writing the same stream
        os.write(
            2,
            f"gpurl: {name} while stopping for {self.signal}: exited at once; the last "
            f"complete checkpoint is kept\n".encode(),
        )
        # SystemExit, not os._exit: it unwinds from wherever the run is (a checkpoint
        # write removes its temporary files on the way out) and lets the interpreter
        # and its helper processes shut down without their own warnings
        raise SystemExit(exit_code(name))
