"""The exception types a user sees as one line, never as a stack trace.

`gpurl.train` catches them and prints the message as a single line, so each message
must say what is wrong and how to fix it:

    ConfigError   a mistake in a config or on the command line, found before training
                  starts; the run directory is left holding the error alone
    RunFault      a fault that stops a run while it trains (a NaN loss, a full disk, an
                  out-of-range action); the run directory and its last good checkpoint
                  are kept, so the run can resume from it once the cause is fixed
"""


class ConfigError(ValueError):
    """A user-fixable problem: bad config value, wrong env/agent pair, bad checkpoint."""


class RunFault(RuntimeError):
    """A fault met while training; the message names the step and the last good checkpoint."""


class NonFiniteError(RunFault):
    """A NaN or inf in a loss, another update metric or a parameter."""


class CheckpointWriteError(RunFault):
    """A checkpoint could not be written (disk full, I/O error); earlier ones are intact."""


class ActionOutOfRangeError(RunFault, ValueError):
    """An action outside the env's action spec, seen with env.validate_actions=true."""
