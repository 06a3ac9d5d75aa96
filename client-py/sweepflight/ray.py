"""A cluster of sweepflight servers on Ray: one per node, driven from Python.

Ray places and restarts the servers; the data goes over Flight, straight from the driver to each
server (a Ray actor call costs several times a Flight call). Needs ``pip install
sweepflight[ray]`` and the server binary on every node (``pip install ./flight-server`` puts
``sweepflight-server`` on PATH; ``SWEEPFLIGHT_SERVER_BIN`` names another).

    import ray, sweepflight.ray

    ray.init(address="auto")
    with sweepflight.ray.Cluster() as cluster:          # one server per node with the resource
        cluster.put("paper", sweepflight.paper.series())
        df = cluster.sweep("paper", params=grid)        # equal to one server's answer

Placement: each server is a Ray actor that asks for one unit of a custom resource
(``{"sweepflight": 1}`` by default), which nodes advertise (``ray start
--resources='{"sweepflight": 1}'``): one server per node that has it, never a hard node
affinity, so a lost node's server comes back on another node that has the resource.

Failures: an actor owns its server process (the process dies with the actor, and the actor with
the process, and Ray restarts it: ``max_restarts=-1``). When a call fails because its server is
gone, the driver waits for the actor to come back, reads its new address, puts again the data
that server held (from the Arrow tables it keeps in Ray's object store) and hands the
unfinished chunk to the queue again: the sweep completes with nothing lost or duplicated.
Errors that are the caller's (``InvalidRequest``, ``NotFound``) are raised, not retried.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from . import _protocol
from .client import (
    DEFAULT_CHUNK_COMBOS,
    Client,
    Folds,
    Params,
    PutSummary,
    SweepOptions,
    SweepRequest,
    WalkForward,
    _as_reader,
    _Calls,
    _Progress,
    _request,
    _result,
    _series_major,
    _walk_forward,
    _walk_forward_frame,
    connect,
)
from .errors import Cancelled, InvalidRequest, NotFound, ServerError, SweepflightError, Unavailable
from .server import server_binary

if TYPE_CHECKING:
    from typing_extensions import Unpack

#: The resource every server asks for one unit of, unless told otherwise.
DEFAULT_RESOURCES = {"sweepflight": 1}
#: How long a lost server may take to come back before the sweep gives up, in seconds.
RESTART_TIMEOUT = 120.0
#: Combos per chunk handed to a server: large enough that dispatch costs little, small enough
#: that a lost chunk is little work lost. The last chunks of a sweep are smaller (see
#: `chunk_bounds`), so the servers finish together.
CLUSTER_CHUNK_COMBOS = 2_000

#: How many times one chunk is tried before the sweep gives up on it.
MAX_ATTEMPTS = 5

#: Errors that mean the server (not the request) failed: retried on a server that came back.
_SERVER_GONE = (Unavailable, Cancelled, ServerError)


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise ImportError("sweepflight.ray needs Ray: pip install 'sweepflight[ray]'") from e
    return ray


def _actor_class(ray: Any) -> Any:
    """The Ray actor that owns one server process (defined lazily: Ray is optional)."""

    @ray.remote(max_restarts=-1, max_task_retries=0)
    class SweepflightServer:
        def __init__(self, binary: str, args: list[str], threads: int | None) -> None:
            import subprocess

            from sweepflight.server import die_with_parent

            cmd = [binary, "--listen", "0.0.0.0:0", "--in-memory", *args]
            if threads:
                cmd += ["--threads", str(threads)]
            self.proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                preexec_fn=die_with_parent,
                env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
            )
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"sweepflight-server exited with {self.proc.wait()}")
            port = int(line.strip().rsplit(":", 1)[1])
            self.uri = f"grpc://{ray.util.get_node_ip_address()}:{port}"
            # The watchdog: if the server dies, so does the actor, and Ray restarts both.
            threading.Thread(target=self._watch, daemon=True).start()

        def _watch(self) -> None:
            self.proc.wait()
            os._exit(1)

        def address(self) -> str:
            return self.uri

        def pid(self) -> int:
            return int(self.proc.pid)

        def node_id(self) -> str:
            return str(ray.get_runtime_context().get_node_id())

    return SweepflightServer


@dataclasses.dataclass
class _Dataset:
    """What the driver keeps to put a dataset again on a server that came back."""

    ref: Any  # the whole table, in Ray's object store
    key: str | None
    #: Series in dataset order (first appearance), for keyed datasets.
    series: list[str]
    #: Sharded: server index -> its series; None when every server holds everything.
    shards: dict[int, list[str]] | None


@dataclasses.dataclass
class _Server:
    actor: Any
    uri: str
    client: Client
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


class Cluster(_Calls):
    """sweepflight servers on a Ray cluster; see the module docs. ``sweep`` and
    ``walk_forward`` take :class:`sweepflight.Client`'s arguments (``progress`` the only
    :class:`sweepflight.client.CallOptions`); each result equals one server's.

    Args:
        servers: how many servers; by default as many as the cluster has units of the resource.
        threads_per_server: each server's ``--threads`` (default: one per CPU of its node).
        server_args: more flags for every server (``--cache-bytes``, ``--sweep-memory-bytes``...).
        resources: the Ray resources each server's actor asks for (default one ``sweepflight``).
        chunk_combos: combos per chunk handed to a server.
        timeout: deadline of each call to a server, in seconds.
        server_bin: the server binary (default: ``$SWEEPFLIGHT_SERVER_BIN`` or PATH).
    """

    _call_options = frozenset({"progress"})

    def __init__(
        self,
        servers: int | None = None,
        *,
        threads_per_server: int | None = None,
        server_args: Sequence[str] = (),
        resources: dict[str, float] | None = None,
        chunk_combos: int = CLUSTER_CHUNK_COMBOS,
        timeout: float | None = None,
        server_bin: str | None = None,
    ) -> None:
        ray = _ray()
        if not ray.is_initialized():
            ray.init()
        self._ray = ray
        self.resources = dict(DEFAULT_RESOURCES if resources is None else resources)
        if servers is None:
            total = ray.cluster_resources()
            units = min((total.get(k, 0) / v for k, v in self.resources.items() if v), default=0)
            servers = int(units)
        if servers < 1:
            raise ValueError(f"no room for a server: the cluster has no {self.resources} to give")
        self.chunk_combos = max(1, int(chunk_combos))
        self.timeout = timeout
        actor = _actor_class(ray).options(resources=self.resources, num_cpus=0)
        binary = server_binary(server_bin)
        actors = [actor.remote(binary, list(server_args), threads_per_server) for _ in range(servers)]
        uris = ray.get([a.address.remote() for a in actors], timeout=RESTART_TIMEOUT)
        self._servers = [_Server(a, u, connect(u, timeout=timeout)) for a, u in zip(actors, uris, strict=True)]
        self._data: dict[str, _Dataset] = {}
        self._table: dict[str, _protocol.Kinds] | None = None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the servers and kills their actors."""
        for s in self._servers:
            s.client.close()
            with contextlib.suppress(Exception):  # already gone
                self._ray.kill(s.actor, no_restart=True)
        self._servers = []

    def _builtins(self) -> Mapping[str, _protocol.Kinds]:
        # Every server runs the same binary: the first one's table, asked once.
        if self._table is None:
            self._table = _protocol.builtins_of(self._servers[0].client.strategies())
        return self._table

    @property
    def addresses(self) -> list[str]:
        """Each server's current address."""
        return [s.uri for s in self._servers]

    def server_pids(self) -> list[int]:
        """Each server process's pid (on its node)."""
        return [int(p) for p in self._ray.get([s.actor.pid.remote() for s in self._servers])]

    def put(self, name: str, data: Any, *, key: str | None = None, shard: bool = False) -> PutSummary:
        """Stores ``data`` as dataset ``name`` on the servers: on every one (replicated), or with
        ``shard=True`` (a keyed universe only) each series on one server, by a hash of its key.

        The driver keeps the table in Ray's object store to put it again on a server that
        comes back after a failure.
        """
        if shard and key is None:
            raise InvalidRequest("shard=True spreads a keyed universe's series: give key=")
        table = _plain(_as_reader(data, "close").read_all())
        series: list[str] = []
        if key is not None:
            if key not in table.column_names:
                raise InvalidRequest(f"no column {key!r} in the data (columns: {table.column_names})")
            series = [str(v) for v in pc.unique(table[key]).to_pylist()]
        shards: dict[int, list[str]] | None = None
        if shard:
            shards = {i: [] for i in range(len(self._servers))}
            for s in series:
                shards[zlib.crc32(s.encode()) % len(self._servers)].append(s)
        self._data[name] = _Dataset(self._ray.put(table), key, series, shards)
        summaries = self._each(lambda i, s: self._put_on(i, s, name, table))
        rows = sum(p.rows for p in summaries if p is not None) if shard else table.num_rows
        first = next(p for p in summaries if p is not None)
        return PutSummary(name, rows, first.bytes, first.version, len(series) if key else None)

    def _put_on(self, index: int, server: _Server, name: str, table: pa.Table | None = None) -> PutSummary | None:
        ds = self._data[name]
        if table is None:
            table = self._ray.get(ds.ref)
        assert table is not None
        if ds.shards is not None:
            mine = ds.shards[index]
            if not mine:
                return None
            assert ds.key is not None
            table = table.filter(pc.is_in(pc.cast(table[ds.key], pa.string()), value_set=pa.array(mine)))
        return server.client.put(name, table, key=ds.key)

    def _each(self, f: Any) -> list[Any]:
        """``f(index, server)`` for every server, in parallel threads; results in order."""
        out: list[Any] = [None] * len(self._servers)
        errors: list[BaseException] = []

        def run(i: int) -> None:
            try:
                out[i] = f(i, self._servers[i])
            except BaseException as e:
                errors.append(e)

        _per_server_threads(len(self._servers), run)
        if errors:
            raise errors[0]
        return out

    def _sweep(self, request: SweepRequest, as_arrow: bool, call: Mapping[str, Any]) -> pl.DataFrame | pa.Table:
        return self._run_sweep(request, as_arrow, call.get("progress"), None)

    def _run_sweep(
        self, request: SweepRequest, as_arrow: bool, progress: bool | None, stop: _Stop | None
    ) -> pl.DataFrame | pa.Table:
        """Runs every combo across the servers; the result equals one server's (same rows,
        same order, same columns). The grid is cut into chunks that go to whichever server is
        free (a work queue); a ``grid`` is cut into slices of its product, each built only when
        it is handed out. A ``sample`` is drawn by one server at a time and is not cut. On a
        sharded universe each server sweeps the series it holds. A chunk whose server dies is
        done again once the server is back. With ``where``, ``order_by`` or ``top``, each server
        selects within its chunk and the driver merges the chunks' rows by the same rules (the
        best K of a series are among the best K of each chunk), so the rows equal one server's,
        ties included."""
        name = request.dataset
        ds = self._dataset(name)
        if request.series is not None and ds.key is None:
            raise InvalidRequest(f"dataset `{name}` is not keyed: `series` applies to datasets put with a key")
        if ds.shards is not None and isinstance(request.strategy, Mapping) and "rank" in request.strategy:
            # A portfolio ranks every series at each rebalance: each server needs them all.
            raise InvalidRequest(
                f"dataset `{name}` is sharded (each series on one server); a portfolio ranks every series "
                "together: put it with shard=False (replicated), and the cluster splits the combos"
            )
        if request.sample is not None or request.grid_goes_whole:
            # Drawn, or numbered, by the server: one server takes the call whole.
            chunks = [(0, request)]
        else:
            bounds = chunk_bounds(request.combos, self.chunk_combos, len(self._servers))
            chunks = [(start, request.chunk(start, end)) for start, end in bounds]
        # Tasks: (server or None for any, chunk start, request). Sharded: each server its series.
        tasks: list[tuple[int | None, int, SweepRequest]] = []
        if ds.shards is None:
            tasks = [(None, start, chunk) for start, chunk in chunks]
        else:
            wanted = list(request.series) if request.series is not None else ds.series
            unknown = [s for s in wanted if s not in ds.series]
            if unknown:
                raise NotFound(f"dataset `{name}` has no series {unknown[0]!r}")
            for i, mine in ds.shards.items():
                subset = [s for s in wanted if s in mine]
                if subset:
                    tasks += [(i, start, dataclasses.replace(chunk, series=tuple(subset))) for start, chunk in chunks]
        show = progress if progress is not None else len(tasks) > 4
        bar = _Progress(sum(chunk.combos for _, _, chunk in tasks), f"sweep {name}") if show else None
        try:
            results = self._run(tasks, bar, stop=stop)
        finally:
            if bar is not None:
                bar.close()
        tables = []
        for (_, start, _), table in zip(tasks, results, strict=True):
            if start:
                i = table.schema.get_field_index("combo")
                table = table.set_column(i, table.schema.field(i), pc.add(table["combo"], start))
            tables.append(table)
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        keyed = table.schema.names[0] == _protocol.SERIES_COLUMN
        order = (list(request.series) if request.series is not None else ds.series) if keyed else None
        if request.selects:
            table = merge_selected(table, request, order)
        elif order is not None:
            table = _series_major(table, pa.table({_protocol.SERIES_COLUMN: pa.array(order)}))
        return _result(table, request, as_arrow)

    def _dataset(self, name: str) -> _Dataset:
        if name not in self._data:
            raise NotFound(f"dataset `{name}` was not put through this cluster")
        return self._data[name]

    def submit(
        self,
        name: str,
        lengths: Iterable[int] | None = None,
        params: Params | None = None,
        *,
        action: str = "sweep",
        folds: Folds | None = None,
        select: str | Mapping[str, Any] | None = None,
        **options: Unpack[SweepOptions],
    ) -> ClusterJob:
        """:meth:`sweep` (or with ``action="walk_forward"``, :meth:`walk_forward`) in the
        background: returns a :class:`ClusterJob` at once; ``job.progress``, ``job.result()``,
        ``job.cancel()``."""
        request = _request(name, lengths, params, options, self._builtins)
        if action == "walk_forward":
            wf = _walk_forward(request, folds, select)
            return ClusterJob(lambda stop: self._run_walk_forward(wf, stop), len(self._walk_tasks(wf)))
        if action != "sweep":
            raise InvalidRequest(f"a cluster job runs 'sweep' or 'walk_forward', got {action!r}")
        return ClusterJob(lambda stop: self._run_sweep(request, False, False, stop), request.combos)

    def _walk_forward(self, wf: WalkForward, as_arrow: bool, call: Mapping[str, Any]) -> pl.DataFrame | pa.Table:
        """Spread over the servers, equal to one server's answer: a universe's series (each
        server its own on a sharded one) or a single series' folds are spread over the
        servers, each part one walk-forward job on one server, and the driver joins the parts
        in series and fold order."""
        frame = self._run_walk_forward(wf, None)
        return frame.to_arrow() if as_arrow else frame

    def _walk_tasks(self, wf: WalkForward) -> list[tuple[int | None, int, WalkForward]]:
        """The parts of a walk-forward: (server or any, fold offset, the part's request)."""
        request = wf.request
        ds = self._dataset(request.dataset)
        servers = len(self._servers)
        if ds.key is not None:
            wanted = list(request.series) if request.series is not None else ds.series
            unknown = [s for s in wanted if s not in ds.series]
            if unknown:
                raise NotFound(f"dataset `{request.dataset}` has no series {unknown[0]!r}")
            if ds.shards is not None:
                return [
                    (i, 0, dataclasses.replace(wf, request=dataclasses.replace(request, series=tuple(mine))))
                    for i, shard in ds.shards.items()
                    if (mine := [s for s in wanted if s in shard])
                ]
            per = max(1, -(-len(wanted) // (2 * servers)))
            return [
                (
                    None,
                    0,
                    dataclasses.replace(wf, request=dataclasses.replace(request, series=tuple(wanted[k : k + per]))),
                )
                for k in range(0, len(wanted), per)
            ]
        if request.series is not None:
            raise InvalidRequest(
                f"dataset `{request.dataset}` is not keyed: `series` applies to datasets put with a key"
            )
        # One series: its folds, as the server would cut them, in parts.
        if isinstance(wf.folds, dict):
            rows = self._servers[0].client.info(request.dataset).rows
            train, test = int(wf.folds["train"]), int(wf.folds["test"])
            step = int(wf.folds.get("step") or test)
            anchored = bool(wf.folds.get("anchored"))
            folds = []
            k = 0
            while k * step + train + test <= rows:
                s = k * step
                folds.append((0 if anchored else s, s + train, s + train, s + train + test))
                k += 1
        else:
            folds = list(wf.folds)
        if not folds:
            # Let one server say why (no fold fits).
            return [(None, 0, wf)]
        per = max(1, -(-len(folds) // (2 * servers)))
        return [(None, k, dataclasses.replace(wf, folds=tuple(folds[k : k + per]))) for k in range(0, len(folds), per)]

    def _run_walk_forward(self, wf: WalkForward, stop: _Stop | None) -> pl.DataFrame:
        tasks = self._walk_tasks(wf)

        def call(client: Client, part: WalkForward) -> pa.Table:
            return client._job_call("walk_forward", part.body(), part, self.timeout, None)

        tables = self._run(tasks, None, call, weight=lambda _: 1, stop=stop)
        fixed = []
        for (_, offset, _), table in zip(tasks, tables, strict=True):
            if offset:
                i = table.schema.get_field_index("fold")
                table = table.set_column(i, table.schema.field(i), pc.add(table["fold"], offset))
            fixed.append(table)
        table = pa.concat_tables(fixed)
        ds = self._dataset(wf.request.dataset)
        if ds.key is not None:
            order = list(wf.request.series) if wf.request.series is not None else ds.series
            rank = pc.index_in(table[_protocol.SERIES_COLUMN], value_set=pa.array(order))
            table = table.append_column("__rank", rank).sort_by([("__rank", "ascending"), ("fold", "ascending")])
            table = table.drop_columns(["__rank"])
        return _walk_forward_frame(table, wf)

    def _run(
        self,
        tasks: Sequence[tuple[int | None, int, Any]],
        bar: Any,
        call: Callable[[Client, Any], pa.Table] | None = None,
        weight: Callable[[Any], int] = lambda chunk: int(chunk.combos),
        stop: _Stop | None = None,
    ) -> list[pa.Table]:
        """Runs the tasks on the servers: a shared queue for tasks any server can do, one per
        server for the rest; a task whose server fails goes back in its queue. A task is
        ``call(client, payload)`` (by default a sweep chunk as one DoAction: a chunk is small,
        and a job's polls would cost more than its share of the sweep); ``stop`` cancels the
        remaining tasks and counts the work done."""
        if call is None:

            def call(client: Client, chunk: Any) -> pa.Table:
                table = client.run(chunk, as_arrow=True, chunk_combos=max(1, chunk.combos), job=False)
                assert isinstance(table, pa.Table)
                return table

        shared: queue.Queue[int] = queue.Queue()
        own: list[queue.Queue[int]] = [queue.Queue() for _ in self._servers]
        for t, (server, _, _) in enumerate(tasks):
            (shared if server is None else own[server]).put(t)
        results: list[pa.Table | None] = [None] * len(tasks)
        attempts = [0] * len(tasks)
        left = [len(tasks)]
        done = threading.Condition()
        failure: list[BaseException] = []

        def take(i: int) -> int | None:
            for q in (own[i], shared):
                try:
                    return q.get_nowait()
                except queue.Empty:
                    continue
            return None

        def fail(e: BaseException) -> None:
            with done:
                failure.append(e)
                done.notify_all()

        def worker(i: int) -> None:
            while True:
                with done:
                    if stop is not None and stop.cancelled and not failure:
                        failure.append(Cancelled("the cluster job was cancelled"))
                        done.notify_all()
                    if failure or left[0] == 0:
                        return
                t = take(i)
                if t is None:
                    with done:
                        if failure or left[0] == 0:
                            return
                        done.wait(0.05)
                    continue
                server = tasks[t][0]
                try:
                    table = call(self._servers[i].client, tasks[t][2])
                except _SERVER_GONE as e:
                    attempts[t] += 1
                    if attempts[t] >= MAX_ATTEMPTS:
                        fail(e)
                        return
                    (shared if server is None else own[i]).put(t)
                    try:
                        self._recover(i)
                    except BaseException as e:
                        fail(e)
                        return
                    continue
                except BaseException as e:
                    # The caller's errors, limits (ResourceExhausted) and anything unexpected end
                    # the sweep at once: recorded, so the other workers stop instead of waiting
                    # for a chunk that will never finish.
                    fail(e)
                    return
                with done:
                    results[t] = table
                    left[0] -= 1
                    done.notify_all()
                if bar is not None:
                    bar.update(weight(tasks[t][2]))
                if stop is not None:
                    stop.done(weight(tasks[t][2]))

        try:
            _per_server_threads(len(self._servers), worker, stop)
        except KeyboardInterrupt:
            # Ctrl-C: the workers take no more tasks (each finishes the small one it runs).
            fail(Cancelled("interrupted"))
            raise
        if failure:
            raise failure[0]
        assert all(r is not None for r in results)
        return [r for r in results if r is not None]

    def _recover(self, index: int) -> None:
        """Waits for server ``index``'s actor to come back, reconnects to its new address and
        puts again every dataset it held."""
        server = self._servers[index]
        with server.lock:
            deadline = time.monotonic() + RESTART_TIMEOUT
            while True:
                try:
                    uri = self._ray.get(server.actor.address.remote(), timeout=10)
                    client = connect(uri, timeout=self.timeout)
                    client.echo(b"ping")
                    break
                except Exception as e:  # restarting: try again
                    if time.monotonic() > deadline:
                        raise ServerError(f"server {index} did not come back within {RESTART_TIMEOUT} s: {e}") from e
                    time.sleep(0.5)
            if uri != server.uri or not client.datasets():
                server.client.close()
                server.uri, server.client = uri, client
                for name in self._data:
                    self._put_on(index, server, name)


def merge_selected(table: pa.Table, request: SweepRequest, series: list[str] | None) -> pa.Table:
    """The rows one server would return for ``request``'s selection, from the concatenated
    rows each chunk's server selected (each within its chunk, ``where`` already applied): per
    series in ``series`` order (keyed), ordered by ``order_by`` (nulls last either way), ties
    and the unordered case by combo, the first ``top``."""
    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    by: list[str] = []
    descending: list[bool] = []
    if series is not None:
        rank = {s: i for i, s in enumerate(series)}
        df = df.with_columns(
            pl.col(_protocol.SERIES_COLUMN).replace_strict(rank, return_dtype=pl.Int64).alias("__rank")
        )
        by.append("__rank")
        descending.append(False)
    if request.order_by is not None:
        by.append(request.order_by)
        descending.append(request.descending is not False)
    by.append("combo")
    descending.append(False)
    df = df.sort(by, descending=descending, nulls_last=True, maintain_order=True)
    if request.top is not None:
        within = pl.int_range(pl.len())
        df = df.filter((within.over("__rank") if series is not None else within) < request.top)
    if series is not None:
        df = df.drop("__rank")
    return _plain(df.to_arrow()).cast(table.schema)


def _per_server_threads(n: int, target: Any, stop: _Stop | None = None) -> None:
    """Runs ``target(i)`` for ``i`` in ``range(n)``, one thread each, and waits for all (in
    short waits, so Ctrl-C reaches the caller while they run)."""
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        while th.is_alive():
            th.join(0.1)


class _Stop:
    """A cluster job's cancel flag and the work done (in the tasks' weights)."""

    def __init__(self) -> None:
        self.cancelled = False
        self.work_done = 0
        self._lock = threading.Lock()

    def done(self, work: int) -> None:
        with self._lock:
            self.work_done += work


class ClusterJob:
    """A :meth:`Cluster.submit` in the driver: the sweep or walk-forward runs on a thread of
    its own while the caller does other things; :attr:`progress`, :meth:`result`,
    :meth:`cancel`. It lives in this driver process (the servers' own jobs do not span a
    cluster): a driver that exits loses it."""

    def __init__(self, run: Callable[[_Stop], Any], total: int) -> None:
        self._stop, self._total = _Stop(), max(1, total)
        self._result: list[Any] = []
        self._error: list[BaseException] = []

        def target() -> None:
            try:
                self._result.append(run(self._stop))
            except BaseException as e:
                self._error.append(e)

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    @property
    def progress(self) -> float:
        """The share of the work done (by finished chunks, or folds of series)."""
        return 1.0 if self.done() and not self._error else min(1.0, self._stop.work_done / self._total)

    def done(self) -> bool:
        """True once it has ended."""
        return not self._thread.is_alive()

    def cancel(self) -> None:
        """Stops handing out work; the chunks running finish (they are small), then
        :meth:`result` raises Cancelled."""
        self._stop.cancelled = True
        self._thread.join()

    def result(self, timeout: float | None = None) -> Any:
        """Waits (up to ``timeout`` seconds, then TimeoutError) and returns what the call
        returns, or raises what it raised."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the cluster job is still running after {timeout} s")
        if self._error:
            raise self._error[0]
        return self._result[0]


def chunk_bounds(combos: int, size: int, servers: int) -> list[tuple[int, int]]:
    """The grid's chunks, in order: ``size`` combos while much work is left, then each a share
    of what remains (guided self-scheduling, as OpenMP's ``schedule(guided)``), down to a
    sixteenth of ``size``. Servers take chunks in this order from one queue, so near the end
    every server is busy with a small chunk instead of one server finishing a full chunk alone
    (with equal chunks that tail costs up to one chunk's time, about 4% of a 10-chunk sweep)."""
    floor = max(1, size // 16)
    bounds: list[tuple[int, int]] = []
    start = 0
    while start < combos:
        take = min(size, max(floor, -(-(combos - start) // (2 * max(1, servers)))))
        bounds.append((start, min(combos, start + take)))
        start += take
    return bounds or [(0, 0)]


def _plain(table: pa.Table) -> pa.Table:
    """The table with view types (polars exports strings as views) as their plain types, which
    Ray's object store serialises."""
    views: dict[pa.DataType, pa.DataType] = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    fields = [f.with_type(views.get(f.type, f.type)) for f in table.schema]
    schema = pa.schema(fields).with_metadata(table.schema.metadata or {})
    return table if schema == table.schema else table.cast(schema)


__all__ = [
    "CLUSTER_CHUNK_COMBOS",
    "DEFAULT_CHUNK_COMBOS",
    "Cluster",
    "ClusterJob",
    "SweepflightError",
    "chunk_bounds",
    "server_binary",
]
