"""docs/protocol.md's Python examples run, in order, against the real server."""

from __future__ import annotations

import pathlib
import re
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "protocol.md"


def python_blocks(path: pathlib.Path) -> list[str]:
    """The ```python blocks of a Markdown file, each dedented (some sit inside list items)."""
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)]


def test_protocol_examples_run(server) -> None:
    # The Auth and TLS examples need a server started with --token / --tls-cert; they are
    # exercised in test_auth_tls.py.
    blocks = [b for b in python_blocks(DOC) if "s3cret" not in b and "grpc+tls" not in b]
    assert len(blocks) >= 10
    source = "\n".join(blocks).replace("grpc://127.0.0.1:8815", server.uri)
    namespace: dict = {}
    exec(compile(source, str(DOC), "exec"), namespace)
    assert namespace["table"].num_rows == 80
    assert namespace["result"].num_rows == 2
    assert namespace["echoed"].num_rows == 150_000
    assert namespace["rows"].num_rows == 150_000


def test_readme_example_runs(server) -> None:
    (block,) = python_blocks(ROOT / "README.md")
    namespace: dict = {}
    exec(compile(block.replace("grpc://127.0.0.1:8815", server.uri), "README.md", "exec"), namespace)
    assert namespace["df"].height == 80
    assert namespace["df"]["trades"][0] == 57_029
    assert namespace["best"]["full"] == 172
