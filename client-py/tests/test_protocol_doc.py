"""docs/protocol.md's Python examples run, in order, against the real server."""

from __future__ import annotations

import pathlib
import re
import textwrap

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_protocol_examples_run(server) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 10
    # Blocks inside list items are indented; each block is dedented on its own.
    source = "\n".join(textwrap.dedent(b) for b in blocks).replace("grpc://127.0.0.1:8815", server.uri)
    namespace: dict = {}
    exec(compile(source, str(DOC), "exec"), namespace)
    assert namespace["table"].num_rows == 80
    assert namespace["result"].num_rows == 2
    assert namespace["echoed"].num_rows == 150_000
    assert namespace["rows"].num_rows == 150_000
