"""The exceptions the tae library raises: one named class per thing that can go wrong, each with
a one-line message that says what and where (never a raw HTTP or JSON traceback)."""


class TaeError(Exception):
    """Every error the library raises is one of these."""


class NotFound(TaeError, LookupError):
    """No such experiment, run or metric (the message names what there is)."""


class Unavailable(TaeError, ConnectionError):
    """taed is not running or cannot be reached at the address the library found or was given."""


class ConnectionLost(Unavailable):
    """taed went away in the middle of an answer (a restart, a dropped tunnel)."""


class Unauthorized(TaeError, PermissionError):
    """The token is not this taed's (or no token was found)."""


class VersionMismatch(TaeError):
    """taed and this library are different versions; the message names both."""


class BadRequest(TaeError, ValueError):
    """taed refused the arguments (a bad metric name, an unknown view, ...)."""


class ServerError(TaeError):
    """taed failed inside while answering (its log, taed.log, says why)."""


class BundleError(TaeError, OSError):
    """An offline bundle is missing a file or holds one that is damaged."""
