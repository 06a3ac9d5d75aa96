"""A private server for this process: :func:`local` starts ``sweepflight-server`` (the binary
of the ``sweepflight-server`` wheel, or a build in this checkout) in memory on a free loopback
port and stops it when the client closes or the interpreter exits, so a notebook needs no second
terminal.

    import sweepflight
    sf = sweepflight.local()           # or sweepflight.connect() with no address
    sf.put("paper", sweepflight.paper.series())
"""

from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import sysconfig
import weakref

from .client import Client

#: Where a build of this checkout puts the binary (release first), when the package runs from
#: the repository (an editable install).
_CHECKOUT = pathlib.Path(__file__).resolve().parents[2]


def server_binary(explicit: str | None = None) -> str:
    """The server binary: ``explicit``, ``$SWEEPFLIGHT_SERVER_BIN``, ``sweepflight-server`` on
    PATH, beside this Python's scripts (where ``pip install sweepflight-server`` puts it, whether
    or not the environment is activated), or a build of the checkout this package runs from."""
    beside = os.path.join(sysconfig.get_path("scripts"), "sweepflight-server")
    in_checkout = (_CHECKOUT / "Cargo.toml").exists()
    built = [_CHECKOUT / "target" / p / "sweepflight-server" for p in ("release", "debug") if in_checkout]
    checkout = next((str(b) for b in built if b.exists()), None)
    found = (
        explicit
        or os.environ.get("SWEEPFLIGHT_SERVER_BIN")
        or shutil.which("sweepflight-server")
        or (beside if os.path.exists(beside) else None)
        or checkout
    )
    if found and not (os.path.isfile(found) or shutil.which(found)):
        raise FileNotFoundError(f"no sweepflight-server binary at {found!r} (given, or $SWEEPFLIGHT_SERVER_BIN)")
    if not found:
        raise FileNotFoundError(
            "no sweepflight-server binary: pip install ./flight-server (the server as a wheel), "
            "or cargo build --release -p sweepflight-server and set SWEEPFLIGHT_SERVER_BIN; or "
            "connect to a running server with sweepflight.connect('grpc://HOST:PORT')"
        )
    return found


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Asks Linux to kill the server when the process that started it dies, however it dies."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class LocalServer:
    """A ``sweepflight-server`` process on ``127.0.0.1`` with ``--in-memory``; ``uri`` is the
    address it printed when it was ready."""

    def __init__(self, binary: str | None = None, threads: int | None = None, args: tuple[str, ...] = ()) -> None:
        cmd = [server_binary(binary), "--listen", "127.0.0.1:0", "--in-memory", *args]
        if threads:
            cmd += ["--threads", str(threads)]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip():
            raise RuntimeError(f"sweepflight-server ({cmd[0]}) exited with {self.proc.wait()} before it listened")
        self.uri = line.split()[-1]
        # Stopped at exit even if nobody closes the client.
        self._finalizer = weakref.finalize(self, _stop, self.proc)
        atexit.register(self._finalizer)

    def stop(self) -> None:
        """Stops the server (its in-memory datasets are gone)."""
        self._finalizer()


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a server that ignores SIGTERM
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def local(
    *, threads: int | None = None, binary: str | None = None, args: tuple[str, ...] = (), timeout: float | None = None
) -> Client:
    """A :class:`Client` of a private in-memory server started for it (see the module docs):
    ``threads`` its compute threads (default: one per core), ``binary`` the server binary
    (default: :func:`server_binary`), ``args`` more server flags (``--cache-bytes``...). Closing
    the client stops the server."""
    server = LocalServer(binary, threads, args)
    client = Client(server.uri, timeout=timeout)
    client._local = server
    return client
