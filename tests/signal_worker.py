"""`python tests/signal_worker.py ARGS`: gpurl.train's command line, whose stop checkpoint
sends the process a second SIGTERM half way through (tests/test_signals.py): after the
checkpoint's temporary file is written, before its digest and the renames."""

import os
import signal
import sys

from gpurl.train import cli
from gpurl.trainers import base, checkpoint

real_save, real_write = base.Trainer.save, checkpoint._write_synced
stopping = []


def save(self):
    if self.stopped_by is not None:  # the checkpoint a signal asked for
        stopping.append(True)
    return real_save(self)


def write_synced(path, text):
    if stopping:  # last.pt.tmp is on disk: the second signal lands in the middle
        os.kill(os.getpid(), signal.SIGTERM)
    return real_write(path, text)


base.Trainer.save = save
checkpoint._write_synced = write_synced

if __name__ == "__main__":
    cli(sys.argv[1:])
