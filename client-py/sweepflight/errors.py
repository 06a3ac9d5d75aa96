"""The client's errors: one class per gRPC status the server answers with.

Every error carries the server's own message as ``str(e)``, the gRPC status name as ``e.code``,
and the original pyarrow exception as ``__cause__``. Only failures of Flight calls are
translated: an exception raised by your own code inside a call (a ``KeyError`` in a generator you
passed to ``put``, say) passes through unchanged.

How the status is read: pyarrow raises a distinct class for some codes (unauthenticated,
unavailable, cancelled, timed out, internal, not found, unimplemented) and ``ArrowInvalid`` for
the rest, always with Arrow's fixed prefix ``"<Flight|gRPC> returned <code> error, with message:
..."``; :func:`status_of` reads the code from that prefix, falling back on the class.
"""

from __future__ import annotations

import re
from types import TracebackType
from typing import Literal

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
    """The request breaks the contract (INVALID_ARGUMENT): a bad name, body, value or column;
    the message names it (for bad data, the column, series and first bad row). Fix the request;
    retrying it unchanged fails the same way. Also raised by the client itself before sending."""

    code = "INVALID_ARGUMENT"


class NotFound(SweepflightError, LookupError):
    """No dataset (or, in a keyed dataset, no series) by that name (NOT_FOUND). Check
    ``datasets()``; a dataset dropped or never put must be put again."""

    code = "NOT_FOUND"


class Unauthenticated(SweepflightError):
    """Missing or wrong token (UNAUTHENTICATED): connect with ``token=`` (the server's
    ``--token``)."""

    code = "UNAUTHENTICATED"


class ResourceExhausted(SweepflightError):
    """A server limit (RESOURCE_EXHAUSTED): a message, dataset or all datasets over their size
    limits, a full disk, too many combos for the sweep memory, or a busy server whose sweep
    queue is full. The message names the limit; a busy server is worth retrying later."""

    code = "RESOURCE_EXHAUSTED"


class Unimplemented(SweepflightError, NotImplementedError):
    """The server does not support the call (UNIMPLEMENTED), e.g. an older server."""

    code = "UNIMPLEMENTED"


class Unavailable(SweepflightError, ConnectionError):
    """The server cannot be reached (UNAVAILABLE): not running, wrong address, or restarting.
    Safe to retry: every call is idempotent but ``put`` under a name others also write."""

    code = "UNAVAILABLE"


class Cancelled(SweepflightError):
    """The call was cancelled (CANCELLED), by the client or because the server shut down."""

    code = "CANCELLED"


class DeadlineExceeded(Cancelled, TimeoutError):
    """The call's ``timeout=`` passed (DEADLINE_EXCEEDED); the server stopped its work."""

    code = "DEADLINE_EXCEEDED"


class FailedPrecondition(SweepflightError):
    """The call needs the server in another state: a job's result asked for before the job is
    done, or after it was cancelled. Wait for it (:meth:`sweepflight.Job.result` does)."""

    code = "FAILED_PRECONDITION"


class ServerError(SweepflightError):
    """The server failed (INTERNAL, UNKNOWN): a bug or an environment failure on its side; the
    message says what. Not your request's fault."""

    code = "INTERNAL"


class UnusableColumns(UserWarning):
    """A put was stored, but some of its bar columns (open, high, low, volume, time) break their
    rules: the warning names each and its first bad row. A sweep that needs one is refused;
    the others run."""


#: gRPC status name -> the client's error class.
_BY_CODE: dict[str, type[SweepflightError]] = {
    "INVALID_ARGUMENT": InvalidRequest,
    "OUT_OF_RANGE": ResourceExhausted,  # the transport's answer to an oversized message
    "NOT_FOUND": NotFound,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": Unauthenticated,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "UNIMPLEMENTED": Unimplemented,
    "UNAVAILABLE": Unavailable,
    "CANCELLED": Cancelled,
    "FAILED_PRECONDITION": FailedPrecondition,
    "DEADLINE_EXCEEDED": DeadlineExceeded,
    "INTERNAL": ServerError,
    "UNKNOWN": ServerError,
}

#: pyarrow's class for the codes it maps to one.
_BY_CLASS: tuple[tuple[type[BaseException], str], ...] = (
    (flight.FlightUnauthenticatedError, "UNAUTHENTICATED"),
    (flight.FlightUnauthorizedError, "PERMISSION_DENIED"),
    (flight.FlightUnavailableError, "UNAVAILABLE"),
    (flight.FlightTimedOutError, "DEADLINE_EXCEEDED"),
    (flight.FlightCancelledError, "CANCELLED"),
    (flight.FlightInternalError, "INTERNAL"),
    (pa.ArrowKeyError, "NOT_FOUND"),
    (pa.ArrowNotImplementedError, "UNIMPLEMENTED"),
    (pa.ArrowInvalid, "INVALID_ARGUMENT"),
)

#: Arrow Flight's own names for some gRPC codes, as its messages spell them.
_FLIGHT_NAMES = {
    "TIMEOUT": "DEADLINE_EXCEEDED",
    "UNAUTHORIZED": "PERMISSION_DENIED",
    "FAILED": "UNKNOWN",
    "PRECONDITION_FAILED": "FAILED_PRECONDITION",
}

_PREFIX = re.compile(
    r"(?:Flight|gRPC) returned ([a-z ]+?) error, with message: (.*?)(?:\. gRPC client debug context|$)", re.S
)


#: What the server's gRPC library (tonic) answers when a call's deadline passes on the server:
#: CANCELLED with this message. Whether the caller sees it or its own DEADLINE_EXCEEDED depends
#: on which timer fires first, so both mean the deadline.
_SERVER_DEADLINE = ("CANCELLED", "Timeout expired")


def status_of(exc: BaseException) -> tuple[str, str]:
    """The gRPC status (name, server message) a pyarrow Flight exception carries."""
    code, message = _raw_status(exc)
    # pyarrow words some of these "Flight cancelled call, with message: ...".
    if (code, message.rpartition("with message: ")[2]) == _SERVER_DEADLINE:
        return "DEADLINE_EXCEEDED", message
    return code, message


def _raw_status(exc: BaseException) -> tuple[str, str]:
    text = str(exc.args[0]) if exc.args else str(exc)
    m = _PREFIX.search(text)
    if m:
        code = m.group(1).upper().replace(" ", "_")
        return _FLIGHT_NAMES.get(code, code), m.group(2).strip()
    for cls, code in _BY_CLASS:
        if isinstance(exc, cls):
            return code, text.strip()
    return "UNKNOWN", text.strip()


def translate(exc: BaseException) -> SweepflightError:
    """The client error for a pyarrow Flight exception."""
    code, message = status_of(exc)
    return _BY_CODE.get(code, ServerError)(message, code)


class _Translated:
    """The context manager behind :func:`translated`: stateless, so one instance serves every
    call without allocating."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        # Flight failures only: pyarrow raises FlightError subclasses and, for statuses it maps
        # to Arrow ones, ArrowException subclasses (ArrowKeyError for NOT_FOUND among them).
        if isinstance(exc, (flight.FlightError, pa.ArrowException)) and not isinstance(exc, SweepflightError):
            raise translate(exc) from exc
        return False


_TRANSLATED = _Translated()


def translated() -> _Translated:
    """Re-raises Flight failures inside the ``with`` block as client errors."""
    return _TRANSLATED


def from_status(code: str, message: str) -> SweepflightError:
    """The client error for a gRPC status by name (as a failed job's status reports it)."""
    return _BY_CODE.get(code, ServerError)(message, code)
