"""The one exception type for mistakes a user can make in a config or on the command line.

`gpurl.train` catches it and prints its message as a single line, so the message must
say what is wrong and how to fix it.
"""


class ConfigError(ValueError):
    """A user-fixable problem: bad config value, wrong env/agent pair, bad checkpoint."""
