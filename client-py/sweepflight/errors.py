"""Errors of the sweepflight client: pyarrow's Flight exceptions mapped to a small hierarchy.

Every exception carries the server's own message (without gRPC's debug context) as ``str(e)``,
the gRPC status name as ``e.code``, and the original pyarrow exception as ``__cause__``.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.flight as flight


class SweepflightError(Exception):
    """Base class of every error the client raises."""

    code: str = "UNKNOWN"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code:
            self.code = code


class InvalidRequest(SweepflightError, ValueError):
    """The server refused the request as malformed (INVALID_ARGUMENT), or the client did first."""

    code = "INVALID_ARGUMENT"


class NotFound(SweepflightError, KeyError):
    """No dataset by that name (NOT_FOUND)."""

    code = "NOT_FOUND"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Unauthenticated(SweepflightError):
    """Missing or wrong token (UNAUTHENTICATED)."""

    code = "UNAUTHENTICATED"


class ResourceExhausted(SweepflightError):
    """A server limit was hit: message size, dataset size (RESOURCE_EXHAUSTED)."""

    code = "RESOURCE_EXHAUSTED"


class Unimplemented(SweepflightError, NotImplementedError):
    """The server does not support the call (UNIMPLEMENTED)."""

    code = "UNIMPLEMENTED"


class Unavailable(SweepflightError, ConnectionError):
    """The server cannot be reached (UNAVAILABLE)."""

    code = "UNAVAILABLE"


class Cancelled(SweepflightError):
    """The call was cancelled or timed out (CANCELLED, DEADLINE_EXCEEDED)."""

    code = "CANCELLED"


class ServerError(SweepflightError):
    """Anything else the server reported (INTERNAL, ...)."""

    code = "INTERNAL"


_BY_CODE: dict[str, type[SweepflightError]] = {
    "invalid argument": InvalidRequest,
    "not found": NotFound,
    "unauthenticated": Unauthenticated,
    "resource exhausted": ResourceExhausted,
    "out of range": ResourceExhausted,  # the transport's answer to an oversized request body
    "unimplemented": Unimplemented,
    "unavailable": Unavailable,
    "cancelled": Cancelled,
    "deadline exceeded": Cancelled,
    "timed out": Cancelled,
}

_BY_TYPE: list[tuple[type[BaseException], type[SweepflightError]]] = [
    (flight.FlightUnauthenticatedError, Unauthenticated),
    (flight.FlightUnavailableError, Unavailable),
    (flight.FlightCancelledError, Cancelled),
    (flight.FlightTimedOutError, Cancelled),
    (KeyError, NotFound),
    (NotImplementedError, Unimplemented),
    (pa.ArrowInvalid, InvalidRequest),
]

_MESSAGE = re.compile(r"returned ([a-z -]+?) error, with message: (.*?)(?:\. gRPC client debug context|$)", re.S)


def translate(exc: BaseException) -> SweepflightError:
    """The client error for a pyarrow exception."""
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    m = _MESSAGE.search(text)
    message = m.group(2).strip() if m else text.strip()
    if m and m.group(1) in _BY_CODE:
        cls = _BY_CODE[m.group(1)]
        return cls(message, m.group(1).upper().replace(" ", "_"))
    for pa_type, cls in _BY_TYPE:
        if isinstance(exc, pa_type):
            return cls(message)
    return ServerError(message)


class _Translated:
    """The context manager behind :func:`translated`.

    A class rather than a ``contextlib.contextmanager`` generator: it wraps every call,
    including the params-only sweeps whose whole round trip is ~100 us, and it is stateless,
    so one instance serves every ``with`` without allocating.
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if exc is None or isinstance(exc, SweepflightError):
            return False
        if isinstance(exc, (flight.FlightError, pa.ArrowException, KeyError)):
            raise translate(exc) from exc
        return False


_TRANSLATED = _Translated()


def translated() -> _Translated:
    """Re-raises pyarrow Flight failures inside the ``with`` block as client errors."""
    return _TRANSLATED
