"""The client writes the bodies, descriptors and commands, and expects the result schema, that
the wire's one definition (the Rust crate sweepflight-protocol) writes into its golden file."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pyarrow as pa
import pytest

from sweepflight import _protocol
from sweepflight.client import _request as client_request
from sweepflight.client import _walk_forward


def spelled(f: pa.Field) -> list[Any]:
    """A field as the golden file spells it: [name, type], and true third if nullable."""
    return [f.name, str(f.type), *([True] if f.nullable else [])]


GOLDEN = json.loads((pathlib.Path(__file__).resolve().parents[2] / "protocol" / "golden" / "protocol.json").read_text())
#: The built-ins' parameters as a client reads them from the server's ``strategies`` reply.
BUILTINS = _protocol.builtins_of(GOLDEN["strategies"])


def _request(name: str, lengths: Any, params: Any, options: dict[str, Any]) -> Any:
    """The client's own request building (as ``sweep`` and ``Session.sweep`` do), with the
    golden ``strategies`` reply as the server's table."""
    return client_request(name, lengths, params, options, lambda: BUILTINS)


@pytest.mark.parametrize("case", GOLDEN["sweep_bodies"], ids=lambda c: c["name"])
def test_sweep_bodies(case: dict[str, Any]) -> None:
    args = dict(case["args"])
    dataset = args.pop("dataset")
    if "rows" in args:
        args["rows"] = tuple(args["rows"])
    # Through the client's own request building, as `sweep` and `Session.sweep` do.
    request = _request(dataset, args.pop("lengths", None), args.pop("params", None), args)
    assert json.loads(request.body()) == case["body"]


@pytest.mark.parametrize("target", GOLDEN["put_targets"], ids=lambda t: t["dataset"])
def test_put_descriptors(target: dict[str, Any]) -> None:
    d = _protocol.put_descriptor(target["dataset"], target["key"])
    if "path" in target["descriptor"]:
        assert [p.decode() for p in d.path] == target["descriptor"]["path"]
    else:
        assert json.loads(d.command) == target["descriptor"]["cmd"]


def test_session_commands() -> None:
    commands = GOLDEN["exchange_commands"]
    assert json.loads(_protocol.SESSION_COMMAND) == commands["session"]
    assert json.loads(_protocol.KEYED_SESSION_COMMAND) == commands["keyed_session"]
    assert json.loads(_protocol.session_command(True, "rsi_revert")) == commands["keyed_rsi_revert_session"]
    assert json.loads(_protocol.session_command(False, "sma_cross", "trades")) == commands["sma_cross_trades_session"]


def test_the_strategies_reply_names_every_built_in_schema() -> None:
    assert sorted(BUILTINS) == sorted(GOLDEN["strategy_schemas"]) == sorted(GOLDEN["walk_forward_schemas"])
    assert BUILTINS["rsi_revert"] == (("n", int), ("lower", float), ("upper", float))


@pytest.mark.parametrize("strategy", sorted(BUILTINS))
def test_strategy_schemas(strategy: str) -> None:
    want = GOLDEN["strategy_schemas"][strategy]
    schema = _protocol.result_schema(False, _protocol.param_types(BUILTINS[strategy]))
    assert [spelled(f) for f in schema] == want
    # The parameters are the columns between combo and pnl, whatever the strategy.
    assert [n for n, _ in _protocol.param_columns_of(schema)] == [n for n, _ in BUILTINS[strategy]]
    assert _protocol.check_result_schema(schema) is False


@pytest.mark.parametrize("keyed", [False, True])
def test_result_schema(keyed: bool) -> None:
    want = GOLDEN["result_schema"]["keyed" if keyed else "unkeyed"]
    schema = _protocol.result_schema(keyed)
    assert [spelled(f) for f in schema] == want
    assert _protocol.check_result_schema(schema) is keyed
    # The contract's first nine columns alone are a valid result; eight are not.
    first = 10 if keyed else 9
    assert _protocol.check_result_schema(pa.schema(list(schema)[:first])) is keyed
    with pytest.raises(ValueError, match="trades"):
        _protocol.check_result_schema(pa.schema(list(schema)[: first - 1]))


@pytest.mark.parametrize("keyed", [False, True])
def test_trades_and_equity_schemas(keyed: bool) -> None:
    which = "keyed" if keyed else "unkeyed"
    assert [spelled(f) for f in _protocol.trades_schema(keyed)] == GOLDEN["trades_schema"][which]
    assert [spelled(f) for f in _protocol.equity_schema(keyed)] == GOLDEN["equity_schema"][which]


def test_block_pnl_schema() -> None:
    schema = _protocol.sweep_schema(True, _protocol.param_types(BUILTINS["donchian"]), 8)
    assert [spelled(f) for f in schema] == GOLDEN["block_pnl_schema"]
    # The column follows the metrics: still a valid result.
    assert _protocol.check_result_schema(schema) is True


@pytest.mark.parametrize("case", GOLDEN["walk_forward_bodies"], ids=lambda c: c["name"])
def test_walk_forward_bodies(case: dict[str, Any]) -> None:
    args = dict(case["args"])
    dataset, folds, select = args.pop("dataset"), args.pop("folds"), args.pop("select", None)
    request = _request(dataset, args.pop("lengths", None), args.pop("params", None), args)
    assert json.loads(_walk_forward(request, folds, select).body()) == case["body"]


def test_job_bodies_and_tickets() -> None:
    jobs = GOLDEN["jobs"]
    assert json.loads(_protocol.job_ref("0123abcd")) == jobs["job"] == jobs["ticket"]
    sweep = _request("paper", [6, 8], None, {"compression": "zstd"})
    assert json.loads(_protocol.submit_body("sweep", sweep.body())) == jobs["submit_sweep"]
    trades = _request("eurusd", None, None, {"strategy": "sma_cross", "grid": {"fast": [5], "slow": [20]}})
    assert json.loads(_protocol.submit_body("trades", trades.body())) == jobs["submit_trades"]
    wf = _walk_forward(_request("paper", [20, 40], None, {}), {"train": 50000, "test": 25000}, "pnl")
    assert json.loads(_protocol.submit_body("walk_forward", wf.body())) == jobs["submit_walk_forward"]
    assert json.loads(_request("paper", [6], None, {"compression": "lz4"}).body()) == GOLDEN["compressed_sweep_body"]


@pytest.mark.parametrize("strategy", sorted(BUILTINS))
def test_walk_forward_schemas(strategy: str) -> None:
    schema = _protocol.walk_forward_schema(False, _protocol.param_types(BUILTINS[strategy]))
    assert [spelled(f) for f in schema] == GOLDEN["walk_forward_schemas"][strategy]
    keyed = _protocol.walk_forward_schema(True, _protocol.param_types(BUILTINS["sma_cross"]))
    assert [spelled(f) for f in keyed] == GOLDEN["walk_forward_keyed_schema"]
