"""The user's-mistake exception, in a module that imports nothing: a command checks its arguments and fails with
it before any heavy package (torch, SQLAlchemy, the harness) is imported."""


class UsageError(ValueError):
    """A mistake in what the user asked for: one line and exit status 2, never a traceback."""
