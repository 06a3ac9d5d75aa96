//! `sweep-stdio`: the spawn-per-sweep architecture of the IPC-tax study. Reads one Arrow IPC
//! stream on stdin (a `close` column; the sweep request as JSON in the schema metadata key
//! `sweepflight.sweep`, e.g. `{"lengths": [6, 8]}`), runs the sweep, writes the result table as
//! an Arrow IPC stream on stdout, and exits.
//!
//! The sweep is the server's own use case ([`Engine`]): the series stored in memory as a put
//! would store it, then swept as the `sweep` action would; what this process adds is its
//! start, the pipes and the exit.

use std::io::{Read, Write};

use anyhow::Context;
use sweepflight_protocol::{ExchangeCommand, SweepRequest};
use sweepflight_server::{Engine, ServerConfig};

fn main() -> anyhow::Result<()> {
    let mut input = Vec::new();
    std::io::stdin().lock().read_to_end(&mut input)?;
    let reader = arrow_ipc::reader::StreamReader::try_new(input.as_slice(), None)?;
    let schema = reader.schema();
    let body = schema
        .metadata()
        .get("sweepflight.sweep")
        .context("schema metadata `sweepflight.sweep` missing")?;
    // Same request rules as the server's stateless sweep.
    let mut cmd: serde_json::Value = serde_json::from_str(body)?;
    cmd["op"] = "sweep".into();
    let ExchangeCommand::Sweep(spec) = ExchangeCommand::decode(cmd.to_string().as_bytes())? else {
        anyhow::bail!("not a sweep");
    };
    let batches = reader.collect::<Result<Vec<_>, _>>()?;
    let request = SweepRequest {
        strategy: spec.strategy,
        execution: spec.execution,
        fee: spec.fee,
        rows: spec.rows,
        selection: spec.selection,
        ..SweepRequest::new("stdin", spec.grid)
    };
    let engine = Engine::in_memory(ServerConfig {
        cache_bytes: 0,
        ..ServerConfig::default()
    })?;
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let out = rt.block_on(async {
        engine.put("stdin", &schema, batches, None).await?;
        engine.sweep(&request).await
    })?;
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(Vec::new(), out.schema_ref())?;
    writer.write(&out)?;
    writer.finish()?;
    std::io::stdout().lock().write_all(&writer.into_inner()?)?;
    Ok(())
}
