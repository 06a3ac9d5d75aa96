//! Entry points for the fuzz targets in `flight-server/fuzz` (feature `testing`), shared with
//! the regression test that replays every input the fuzzer ever crashed on.
//!
//! Each takes arbitrary bytes and must return without panicking, whatever they hold.

use arrow_flight::{FlightData, FlightDescriptor};
use bytes::Bytes;

use sweepflight_protocol::{
    ExchangeCommand, PutTarget, SweepRequest, Ticket, dataset_path, validate_name,
};

use crate::datasets::InMemory;
use crate::datasets::ingest::{UploadLimits, read_upload};
use crate::service::check_ipc_bounds;

/// Everything that decodes a small request: `sweep` bodies, DoExchange commands, DoPut
/// descriptors, tickets, dataset names and PATH descriptors. A `sweep` body that decodes runs
/// (its first combos) on a few OHLC bars with its execution options: the v1.3 loop and stop
/// formulas see whatever options the decoder lets through.
pub fn requests(data: &[u8]) {
    if let Ok(r) = SweepRequest::decode(data)
        && r.check_combos(10_000).is_ok()
    {
        run_on_bars(&r);
    }
    let _ = Ticket::decode(data);
    let _ = ExchangeCommand::decode(data);
    let _ = PutTarget::from_descriptor(&FlightDescriptor::new_cmd(data.to_vec()));
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = validate_name(text);
        let path = text.split('/').map(str::to_owned).collect();
        let _ = dataset_path(&FlightDescriptor::new_path(path));
    }
}

/// `request`'s first (at most 16) combos on 64 OHLC bars with its execution options; errors
/// are answers, only a panic is a finding.
fn run_on_bars(request: &SweepRequest) {
    let n: usize = 64;
    let close: Vec<f64> = (0..n)
        .map(|i| 100.0 + (i as f64 * 0.7).sin() * 4.0)
        .collect();
    let open: Vec<f64> = (0..n).map(|i| close[i.saturating_sub(1)] + 0.3).collect();
    let high: Vec<f64> = (0..n).map(|i| open[i].max(close[i]) + 0.5).collect();
    let low: Vec<f64> = (0..n).map(|i| open[i].min(close[i]) - 0.5).collect();
    let bars = sweepflight_kernel::lines::Bars {
        open: Some(&open),
        high: Some(&high),
        low: Some(&low),
        close: &close,
        volume: Some(&close),
        ..Default::default()
    };
    let combos = request.grid.len().min(16);
    let Ok((combos, _)) = crate::compute::params_in(&request.strategy, &request.grid, 0..combos)
    else {
        return;
    };
    let exec = crate::compute::execution(
        request.fee.unwrap_or(sweepflight_kernel::DEFAULT_FEE),
        &request.execution,
    );
    let control = sweepflight_kernel::SweepControl::default();
    let _ = sweepflight_kernel::sweep_combos(&bars, &combos, &exec, &control);
}

/// A formula (protocol v1.3): parsed and checked as a strategy's `long`, and as a constraint;
/// accepted ones bound for a few combos into a plan, and their canonical text parsed again to
/// the same text. Also decoded inside a sweep body and an `explain` of it.
///
/// # Panics
/// If the canonical text of an accepted formula does not parse back to itself (a finding).
pub fn formulas(data: &[u8]) {
    use sweepflight_kernel::expr::{Field, Program};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for field in [Field::Long, Field::Constraint] {
        let fields: &[(Field, &str)] = if field == Field::Long {
            &[(Field::Long, text)]
        } else {
            &[(Field::Long, "close > 0"), (Field::Constraint, text)]
        };
        let Ok(program) = Program::new(fields) else {
            continue;
        };
        let mut plan = sweepflight_kernel::plan::Plan::new();
        for v in [1.0, 2.0, 7.0] {
            plan.bind(&program, &vec![v; program.params.len()]);
        }
        for (f, canonical) in program.canonical() {
            let again = sweepflight_kernel::expr::parse::parse(&canonical).unwrap_or_else(|e| {
                panic!("canonical {canonical:?} of {text:?} does not parse: {e:?}")
            });
            let twice = sweepflight_kernel::expr::canon::text(&again);
            assert_eq!(twice, canonical, "{f:?} of {text:?}");
        }
    }
    let body = serde_json::json!({"dataset": "d", "strategy": {"long": text}, "params": [[5]]});
    let _ = crate::sweep::explain::explain(body.to_string().as_bytes(), 1_000, 1 << 30, &|_| None);
}

/// An upload: `data` is cut into Flight messages (see [`frame`]) that go through the same
/// bounds check, IPC decoder and dataset validation as a DoPut, unkeyed and keyed (by the
/// first column, whatever it is).
pub fn put_stream(data: &[u8]) {
    let limits = UploadLimits {
        max_bytes: 16 << 20,
    };
    for key in [None, Some("t")] {
        let messages = unframe(data)
            .into_iter()
            .map(|m| check_ipc_bounds(&m).map(|()| m));
        let mut sink = InMemory;
        let upload = read_upload(futures::stream::iter(messages), limits, key, &mut sink);
        let _ = futures::executor::block_on(upload);
    }
}

/// Serialises messages as the fuzz input of [`put_stream`]: for each, the header length (u16
/// LE), the body length (u32 LE), the header, the body.
pub fn frame(messages: &[FlightData]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        out.extend_from_slice(&(m.data_header.len() as u16).to_le_bytes());
        out.extend_from_slice(&(m.data_body.len() as u32).to_le_bytes());
        out.extend_from_slice(&m.data_header);
        out.extend_from_slice(&m.data_body);
    }
    out
}

/// The inverse of [`frame`]; lengths past the end take what is left.
fn unframe(mut data: &[u8]) -> Vec<FlightData> {
    let mut out = Vec::new();
    while data.len() >= 6 {
        let header = u16::from_le_bytes([data[0], data[1]]) as usize;
        let body = u32::from_le_bytes([data[2], data[3], data[4], data[5]]) as usize;
        data = &data[6..];
        let (h, rest) = data.split_at(header.min(data.len()));
        let (b, rest) = rest.split_at(body.min(rest.len()));
        out.push(FlightData {
            data_header: Bytes::copy_from_slice(h),
            data_body: Bytes::copy_from_slice(b),
            ..FlightData::default()
        });
        data = rest;
    }
    out
}
