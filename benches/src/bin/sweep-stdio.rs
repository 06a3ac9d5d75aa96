//! `sweep-stdio`: the spawn-per-sweep architecture of the IPC-tax study. Reads one Arrow IPC
//! stream on stdin (a `close` column; the sweep request as JSON in the schema metadata key
//! `sweepflight.sweep`, e.g. `{"lengths": [6, 8]}`), runs the sweep, writes the result table as
//! an Arrow IPC stream on stdout, and exits.

use std::io::{Read, Write};

use anyhow::Context;
use sweepflight_protocol::ExchangeCommand;
use sweepflight_server::compute::{Job, Keep, Runs, execution, params};
use sweepflight_server::results::to_batch;

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
    anyhow::ensure!(
        spec.execution.blocks.is_none(),
        "sweep-stdio does not compute `blocks`"
    );
    let job = Job {
        inputs: Vec::new(),
        names: None,
        strategy: spec.strategy,
        params: params(spec.strategy, &spec.grid)?,
        exec: execution(spec.fee(), &spec.execution),
        periods_per_year: spec.execution.periods_per_year.unwrap_or(1.0),
        keep: Keep::NOTHING,
        progress: None,
    };
    let close = sweepflight_benches::closes(reader)?;
    let control = sweepflight_kernel::SweepControl::default();
    let results = sweepflight_kernel::sweep_params(&close, &job.params, &job.exec, &control)?;
    let runs = Runs {
        results: vec![results],
        records: Vec::new(),
    };
    let out = to_batch(&job, &runs)?;
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(Vec::new(), out.schema_ref())?;
    writer.write(&out)?;
    writer.finish()?;
    std::io::stdout().lock().write_all(&writer.into_inner()?)?;
    Ok(())
}
