"""Errors meant for people: their message is printed as is, without a traceback.

Guarantees: this module imports nothing from posttrain, so any module (library or CLI) can raise
these without pulling in the CLI or the config loader. The CLI prints them as `error: <message>` and
exits with code 2. Not here: errors that signal bugs or infrastructure failures.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config could not be loaded; the message is meant for people as is."""


class UsageError(ValueError):
    """A bad argument or input named in a message for people."""
