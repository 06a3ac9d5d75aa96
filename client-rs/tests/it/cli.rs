//! The `sweepflight` CLI against the real server: files in, tables out, exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use sweepflight_kernel::paper;
use sweepflight_server::testing::TestServer;

/// A server in-process on a runtime of its own, while the test drives the CLI binary.
struct Served {
    server: TestServer,
    _runtime: tokio::runtime::Runtime,
}

impl Served {
    fn start() -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = runtime.block_on(TestServer::start_default());
        Self {
            server,
            _runtime: runtime,
        }
    }

    fn uri(&self) -> &str {
        self.server.uri()
    }
}

fn cli(uri: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sweepflight"))
        .arg("--uri")
        .arg(uri)
        .args(args)
        .output()
        .expect("run sweepflight")
}

/// The exit code and stderr of a run.
fn code(out: Output) -> (i32, String) {
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn paper_arrow() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel/testdata/paper-close.arrow")
}

fn bars(n: usize) -> RecordBatch {
    let close: Vec<f64> = (0..n).map(|i| 50.0 + (i as f64 * 0.05).sin()).collect();
    RecordBatch::try_from_iter([
        (
            "ts",
            Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef,
        ),
        ("px", Arc::new(Float64Array::from(close)) as ArrayRef),
        (
            "venue",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| if i % 2 == 0 { "a" } else { "b" }),
            )),
        ),
    ])
    .unwrap()
}

#[test]
fn paper_sweep_from_an_arrow_file_passes_the_gate() {
    let s = Served::start();
    let out = ok(cli(
        s.uri(),
        &["put", "paper", paper_arrow().to_str().unwrap()],
    ));
    assert!(out.contains("stored 150000 rows"), "{out}");
    let csv = ok(cli(
        s.uri(),
        &[
            "sweep",
            "paper",
            "--lengths",
            "6..200:80",
            "--output",
            "csv",
        ],
    ));
    let mut lines = csv.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("combo,half,full,sqrt,p3,p2,p,pnl,trades")
    );
    let results: Vec<_> = lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            sweepflight_kernel::ComboResult {
                pnl: c[7].parse().unwrap(),
                trades: c[8].parse().unwrap(),
                ..Default::default()
            }
        })
        .collect();
    paper::check_gate(&results).unwrap();

    let table = ok(cli(
        s.uri(),
        &["sweep", "paper", "--lengths", "6,8", "--fee", "0"],
    ));
    assert!(
        table.contains("| combo |") && table.lines().count() == 6,
        "{table}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(cli(
        s.uri(),
        &["sweep", "paper", "--lengths", "6", "--output", "json"],
    )))
    .unwrap();
    assert_eq!(json[0]["trades"], 57_029);
}

#[test]
fn csv_and_parquet_files_params_and_catalog() {
    let s = Served::start();
    let dir = tempfile::tempdir().unwrap();
    let batch = bars(3_000);
    let csv = dir.path().join("bars.csv");
    arrow_csv::Writer::new(std::fs::File::create(&csv).unwrap())
        .write(&batch)
        .unwrap();
    let pq = dir.path().join("bars.parquet");
    write_parquet(&pq, &batch);

    ok(cli(
        s.uri(),
        &[
            "put",
            "from-csv",
            csv.to_str().unwrap(),
            "--close-column",
            "px",
        ],
    ));
    ok(cli(
        s.uri(),
        &[
            "put",
            "from-pq",
            pq.to_str().unwrap(),
            "--close-column",
            "px",
        ],
    ));
    let params = dir.path().join("params.csv");
    std::fs::write(
        &params,
        "half,full,sqrt,p3,p2,p\n3,6,2,1,2,3\n5,10,3,2,2,5\n",
    )
    .unwrap();
    let a = ok(cli(
        s.uri(),
        &[
            "sweep",
            "from-csv",
            "--params",
            params.to_str().unwrap(),
            "--output",
            "csv",
        ],
    ));
    let b = ok(cli(
        s.uri(),
        &[
            "sweep",
            "from-pq",
            "--params",
            params.to_str().unwrap(),
            "--output",
            "csv",
        ],
    ));
    assert_eq!(a, b);
    assert_eq!(a.lines().count(), 3);
    let lengths = ok(cli(
        s.uri(),
        &["sweep", "from-pq", "--lengths", "6,10", "--output", "csv"],
    ));
    assert_eq!(lengths, a, "lengths 6 and 10 expand to the same two combos");

    let ls = ok(cli(s.uri(), &["ls", "--output", "csv"]));
    assert!(
        ls.contains("from-csv,3000,") && ls.contains("from-pq,3000,"),
        "{ls}"
    );
    let info = ok(cli(s.uri(), &["info", "from-pq"]));
    assert!(
        info.contains("rows     3000")
            && info.contains("close: Float64")
            && info.contains("venue: Utf8"),
        "{info}"
    );
    assert!(ok(cli(s.uri(), &["drop", "from-pq"])).contains("dropped from-pq version 1"));
}

#[test]
fn exit_codes() {
    let s = Served::start();
    let dir = tempfile::tempdir().unwrap();
    let (c, err) = code(cli(s.uri(), &["sweep", "nope", "--lengths", "6"]));
    assert_eq!(c, 3, "{err}");
    assert!(err.contains("`nope` not found"), "{err}");
    assert_eq!(code(cli(s.uri(), &["drop", "nope"])).0, 3);
    let (c, err) = code(cli(
        s.uri(),
        &[
            "put",
            "x",
            paper_arrow().to_str().unwrap(),
            "--close-column",
            "px",
        ],
    ));
    assert_eq!(c, 4, "{err}");
    assert!(err.contains("no column \"px\""), "{err}");
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "close\n1.0\n-2.0\n").unwrap();
    let (c, err) = code(cli(s.uri(), &["put", "x", bad.to_str().unwrap()]));
    assert_eq!(c, 4, "{err}");
    assert!(err.contains("row 1: is <= 0"), "{err}");
    assert_eq!(
        code(cli(s.uri(), &["sweep", "x", "--lengths", "a..b"])).0,
        4
    );
    assert_eq!(code(cli(s.uri(), &["put", "x", "/nonexistent.csv"])).0, 4);
    assert_eq!(code(cli("grpc+unix:///nonexistent/sf.sock", &["ls"])).0, 7);
    assert_eq!(code(cli(s.uri(), &["sweep", "x"])).0, 2, "clap usage error");
}

#[test]
fn a_keyed_universe_from_a_parquet_file_swept_by_series_and_rows() {
    let s = Served::start();
    let dir = tempfile::tempdir().unwrap();
    // Two symbols, interleaved by timestamp.
    let n = 2_000;
    let syms: Vec<&str> = (0..n)
        .map(|i| if i % 2 == 0 { "AAA" } else { "BBB" })
        .collect();
    let close: Vec<f64> = (0..n)
        .map(|i| 100.0 + (i as f64 * if i % 2 == 0 { 0.05 } else { 0.11 }).sin() * 4.0)
        .collect();
    let batch = RecordBatch::try_from_iter([
        ("symbol", Arc::new(StringArray::from(syms)) as ArrayRef),
        (
            "close",
            Arc::new(Float64Array::from(close.clone())) as ArrayRef,
        ),
    ])
    .unwrap();
    let pq = dir.path().join("universe.parquet");
    write_parquet(&pq, &batch);

    let out = ok(cli(
        s.uri(),
        &["put", "u", pq.to_str().unwrap(), "--key", "symbol"],
    ));
    assert!(out.contains("stored 2000 rows in 2 series"), "{out}");
    assert!(ok(cli(s.uri(), &["info", "u"])).contains("key      symbol (2 series)"));
    let csv = ok(cli(
        s.uri(),
        &[
            "sweep",
            "u",
            "--lengths",
            "6,10",
            "--series",
            "BBB",
            "--rows",
            "0:600",
            "--output",
            "csv",
        ],
    ));
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("series,combo,half"), "{csv}");
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(lines[1].starts_with("BBB,0,3,6,"), "{csv}");
    // The same numbers as the kernel on BBB's first 600 closes.
    let bbb: Vec<f64> = close.iter().skip(1).step_by(2).take(600).copied().collect();
    let want = sweepflight_kernel::sweep(
        &bbb,
        &[sweepflight_kernel::Combo::from_length(10).unwrap()],
        0.0009,
    )
    .unwrap();
    let trades: i64 = lines[2].split(',').nth(9).unwrap().parse().unwrap();
    assert_eq!(trades as u64, want[0].trades);
    let (c, err) = code(cli(
        s.uri(),
        &["sweep", "u", "--lengths", "6", "--series", "ZZZ"],
    ));
    assert_eq!(c, 3, "{err}");
    let (c, err) = code(cli(
        s.uri(),
        &["sweep", "u", "--lengths", "6", "--rows", "9:3"],
    ));
    assert_eq!(c, 2, "a bad --rows is a usage error: {err}");
}

fn write_parquet(path: &std::path::Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

#[test]
fn strategies_grids_sides_and_stops_from_the_command_line() {
    use sweepflight_kernel::{Execution, Params, Side, oracle};
    let s = Served::start();
    let dir = tempfile::tempdir().unwrap();
    let n = 3_000;
    let close: Vec<f64> = (0..n)
        .map(|i| 100.0 + (i as f64 * 0.013).sin() * 5.0 + (i as f64 * 0.31).cos())
        .collect();
    let batch = RecordBatch::try_from_iter([(
        "close",
        Arc::new(Float64Array::from(close.clone())) as ArrayRef,
    )])
    .unwrap();
    let pq = dir.path().join("s.parquet");
    write_parquet(&pq, &batch);
    ok(cli(s.uri(), &["put", "s", pq.to_str().unwrap()]));
    let csv = ok(cli(
        s.uri(),
        &[
            "sweep",
            "s",
            "--strategy",
            "sma_cross",
            "--grid",
            "fast=5..8",
            "slow=20,40",
            "--side",
            "long",
            "--stop-loss",
            "0.02",
            "--rows",
            "500:3000",
            "--warmup",
            "100",
            "--output",
            "csv",
        ],
    ));
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("combo,fast,slow,pnl,trades"), "{csv}");
    assert_eq!(lines.len(), 1 + 3 * 2, "{csv}");
    let exec = Execution {
        side: Side::Long,
        stop_loss: Some(0.02),
        ..Execution::default()
    };
    for line in &lines[1..] {
        let v: Vec<&str> = line.split(',').collect();
        let (fast, slow): (u32, u32) = (v[1].parse().unwrap(), v[2].parse().unwrap());
        let want = oracle::run(
            &close,
            500..3000,
            100,
            &Params::SmaCross { fast, slow },
            &exec,
        );
        assert_eq!(v[4].parse::<u64>().unwrap(), want.trades, "{line}");
    }
    // The trades of the best combo by pnl: the oracle's, row for row; and its equity.
    let best = |extra: &[&str]| {
        let mut args = vec![
            "trades",
            "s",
            "--strategy",
            "sma_cross",
            "--grid",
            "fast=5..8",
            "slow=20,40",
            "--side",
            "long",
            "--stop-loss",
            "0.02",
            "--order-by",
            "pnl",
            "--top",
            "1",
            "--output",
            "csv",
        ];
        args.extend(extra);
        ok(cli(s.uri(), &args))
    };
    let trades = best(&[]);
    let rows: Vec<Vec<&str>> = trades
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert!(
        trades.starts_with("combo,trade,side,entry_row,exit_row,entry_price,exit_price,pnl"),
        "{trades}"
    );
    let k: usize = rows[0][0].parse().unwrap();
    let want = oracle::run_trades(
        &close,
        0..n,
        0,
        &Params::SmaCross {
            fast: 5 + (k / 2) as u32,
            slow: [20, 40][k % 2],
        },
        &exec,
    );
    assert_eq!(rows.len(), want.len(), "{trades}");
    for (r, t) in rows.iter().zip(&want) {
        assert_eq!(
            (
                r[3].parse::<usize>().unwrap(),
                r[4].parse::<usize>().unwrap()
            ),
            (t.entry_row, t.exit_row)
        );
    }
    let equity = best(&["--equity"]);
    assert!(equity.starts_with("combo,row,position,equity"), "{equity}");
    assert_eq!(equity.lines().count(), 1 + n, "one row per bar");
    // rsi_revert's bands are numbers; a params file works for any strategy.
    let file = dir.path().join("rsi.json");
    std::fs::write(&file, "[[14, 30, 70.5], [3, 20, 80]]").unwrap();
    let csv = ok(cli(
        s.uri(),
        &[
            "sweep",
            "s",
            "--strategy",
            "rsi_revert",
            "--params",
            file.to_str().unwrap(),
            "--output",
            "csv",
        ],
    ));
    assert!(
        csv.lines().nth(1).unwrap().starts_with("0,14,30.0,70.5,"),
        "{csv}"
    );
    // An unknown strategy is a usage error (2); a bad grid spec and the server's refusal of a
    // combo are bad input (4), as for --lengths.
    assert_eq!(
        code(cli(
            s.uri(),
            &["sweep", "s", "--strategy", "macd", "--grid", "n=3"]
        ))
        .0,
        2
    );
    assert_eq!(
        code(cli(
            s.uri(),
            &["sweep", "s", "--strategy", "sma_cross", "--grid", "fast=5"]
        ))
        .0,
        4
    );
    let (c, err) = code(cli(
        s.uri(),
        &[
            "sweep",
            "s",
            "--strategy",
            "rsi_revert",
            "--grid",
            "n=14",
            "lower=70",
            "upper=30",
        ],
    ));
    assert_eq!(c, 4, "{err}");
    assert!(err.contains("lower"), "{err}");
}

#[test]
fn jobs_and_walk_forward_from_the_command_line() {
    let s = Served::start();
    ok(cli(
        s.uri(),
        &["put", "paper", paper_arrow().to_str().unwrap()],
    ));
    let sweep = [
        "sweep",
        "paper",
        "--lengths",
        "6..200:40",
        "--output",
        "csv",
    ];
    let direct = ok(cli(s.uri(), &sweep));
    // The same sweep as a job: submit prints the ID, fetch waits and prints the rows.
    let id = ok(cli(
        s.uri(),
        &[
            "submit",
            "paper",
            "--lengths",
            "6..200:40",
            "--compression",
            "zstd",
        ],
    ));
    let id = id.trim();
    assert!(!id.is_empty() && !id.contains(' '), "{id}");
    let fetched = ok(cli(s.uri(), &["fetch", id, "--output", "csv"]));
    assert_eq!(fetched, direct);
    let status = ok(cli(s.uri(), &["status", id]));
    assert!(
        status.contains(" sweep done 100.0% (40/40 combos)"),
        "{status}"
    );
    // Walk-forward, now and as a job: the same rows.
    let wf = [
        "paper",
        "--strategy",
        "sma_cross",
        "--grid",
        "fast=5,10",
        "slow=50,100",
        "--train",
        "40000",
        "--test",
        "20000",
        "--select",
        "sharpe",
    ];
    let now = ok(cli(
        s.uri(),
        &[&["walk-forward"][..], &wf, &["--output", "csv"]].concat(),
    ));
    let lines: Vec<&str> = now.lines().collect();
    assert!(
        lines[0].starts_with(
            "fold,train_start,train_end,test_start,test_end,combo,fast,slow,train_score,pnl"
        ),
        "{now}"
    );
    assert_eq!(lines.len(), 1 + 5, "{now}");
    let id = ok(cli(
        s.uri(),
        &[&["submit"][..], &wf, &["--action", "walk-forward"]].concat(),
    ));
    assert_eq!(
        ok(cli(s.uri(), &["fetch", id.trim(), "--output", "csv"])),
        now
    );
    // A long job cancelled: status says so, fetch fails with its own exit code.
    let id = ok(cli(
        s.uri(),
        &[
            "submit",
            "paper",
            "--strategy",
            "sma_cross",
            "--grid",
            "fast=1..200",
            "slow=2..300",
        ],
    ));
    let cancelled = ok(cli(s.uri(), &["cancel", id.trim()]));
    assert!(cancelled.contains(" cancelled "), "{cancelled}");
    let (exit, err) = code(cli(s.uri(), &["fetch", id.trim()]));
    assert_eq!(exit, 8, "{err}");
    assert!(err.contains("cancelled"), "{err}");
    let (exit, err) = code(cli(s.uri(), &["status", "nope"]));
    assert_eq!(exit, 3, "{err}");
    let (exit, err) = code(cli(s.uri(), &["walk-forward", "paper", "--lengths", "6"]));
    assert_eq!(exit, 4, "{err}");
}

/// A strategy of your own from the shell: `--long` / `--short` / `--exit-*` formulas and a
/// `--constraint`, swept and explained; a built-in's formula form prints the built-in's rows.
#[test]
fn formulas_constraint_and_explain() {
    let s = Served::start();
    ok(cli(
        s.uri(),
        &["put", "paper", paper_arrow().to_str().unwrap()],
    ));
    let grid = ["--grid", "fast=5,10,20", "slow=10,20"];
    let builtin = ok(cli(
        s.uri(),
        &[
            &[
                "sweep",
                "paper",
                "--strategy",
                "sma_cross",
                "--output",
                "csv",
            ][..],
            &grid,
        ]
        .concat(),
    ));
    let forms = ok(cli(
        s.uri(),
        &[
            &[
                "sweep",
                "paper",
                "--long",
                "cross_above(sma(close, fast), sma(close, slow))",
                "--short",
                "cross_below(sma(close, fast), sma(close, slow))",
                "--output",
                "csv",
            ][..],
            &grid,
        ]
        .concat(),
    ));
    assert_eq!(builtin, forms);
    // The constraint skips (10, 10), (20, 10) and (20, 20): combos 0, 1 and 3 remain.
    let constrained = ok(cli(
        s.uri(),
        &[
            &[
                "sweep",
                "paper",
                "--strategy",
                "sma_cross",
                "--constraint",
                "fast < slow",
                "--output",
                "csv",
            ][..],
            &grid,
        ]
        .concat(),
    ));
    let combos: Vec<&str> = constrained
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(combos, ["0", "1", "3"], "{constrained}");
    let plan = ok(cli(
        s.uri(),
        &[
            "explain",
            "paper",
            "--long",
            "close < sma(close,n) - k*std(close,n)",
            "--exit-long",
            "close > sma(close, n)",
            "--grid",
            "n=10,20",
            "k=1.5,2",
        ],
    ));
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    assert_eq!(plan["combos"], 4);
    assert_eq!(
        plan["formulas"]["long"],
        "close < sma(close, n) - k * std(close, n)"
    );
    assert_eq!(
        plan["params"][0],
        serde_json::json!({"name": "n", "kind": "int"})
    );
    let (c, err) = code(cli(
        s.uri(),
        &["sweep", "paper", "--long", "close >", "--grid", "n=1"],
    ));
    assert_eq!(c, 4, "{err}");
    assert!(err.contains("long: expected a number"), "{err}");
}

/// An OHLCV CSV as a data vendor exports it (Date, Open, High, Low, Close, Volume) is put as
/// it is, its date column keeping its name; the execution options of v1.3 from the command
/// line, trades with their exit reasons and dates; an unusable column is a warning on put and
/// a refusal with its reason where a sweep needs it.
#[test]
fn ohlcv_csv_and_execution_options_from_the_command_line() {
    let s = Served::start();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("goog.csv");
    let mut text = String::from("Date,Open,High,Low,Close,Volume\n");
    let mut c = 100.0f64;
    for i in 0..600u32 {
        let open = c + ((i * 7) % 5) as f64 * 0.1 - 0.2;
        c = open + ((i * 13) % 9) as f64 * 0.25 - 1.0;
        let (hi, lo) = (open.max(c) + 0.5, open.min(c) - 0.5);
        let day = chrono_day(i);
        text.push_str(&format!("{day},{open},{hi},{lo},{c},{}\n", 1000 + i));
    }
    std::fs::write(&csv, &text).unwrap();
    let put = ok(cli(s.uri(), &["put", "goog", csv.to_str().unwrap()]));
    assert!(
        put.contains("bar columns: open, high, low, close, volume, time"),
        "{put}"
    );
    let trades = ok(cli(
        s.uri(),
        &[
            "trades",
            "goog",
            "--strategy",
            "sma_cross",
            "--grid",
            "fast=5",
            "slow=20",
            "--fill",
            "next_open",
            "--stops",
            "high_low",
            "--stop-loss",
            "0.01",
            "--trailing-stop",
            "0.02",
            "--slippage",
            "0.001",
            "--output",
            "csv",
        ],
    ));
    let header = trades.lines().next().unwrap();
    assert!(
        header.ends_with("pnl,exit_reason,entry_time,exit_time"),
        "{header}"
    );
    assert!(trades.contains(",stop_loss,") || trades.contains(",trailing_stop,"));
    assert!(trades.contains("2020-0"), "dates as the file had them");
    let auto = ok(cli(
        s.uri(),
        &[
            "sweep",
            "goog",
            "--strategy",
            "sma_cross",
            "--grid",
            "fast=5",
            "slow=20",
            "--periods-per-year",
            "auto",
            "--output",
            "csv",
        ],
    ));
    assert_eq!(auto.lines().count(), 2);
    // A stop formula: its parameter swept on --grid after the strategy's.
    let formula = ok(cli(
        s.uri(),
        &[
            "sweep",
            "goog",
            "--strategy",
            "sma_cross",
            "--grid",
            "fast=5",
            "slow=20",
            "m=1,2,3",
            "--stop-loss",
            "m * atr(14) / close",
            "--stops",
            "high_low",
            "--output",
            "csv",
        ],
    ));
    assert!(formula.starts_with("combo,fast,slow,m,pnl"), "{formula}");
    assert_eq!(formula.lines().count(), 4);
    // A weekly trend filter (protocol v1.4): windows inside count weeks; a call inside
    // another is refused with the fix.
    let weekly = [
        "sweep",
        "goog",
        "--long",
        "cross_above(sma(close, 5), sma(close, 20)) and close > weekly(sma(close, w))",
        "--short",
        "cross_below(sma(close, 5), sma(close, 20))",
        "--grid",
        "w=2,4,8",
        "--output",
        "csv",
    ];
    let framed = ok(cli(s.uri(), &weekly));
    assert!(framed.starts_with("combo,w,pnl,trades"), "{framed}");
    assert_eq!(framed.lines().count(), 4);
    let ranged = ok(cli(
        s.uri(),
        &[&weekly[..], &["--rows", "300:600", "--warmup", "60"]].concat(),
    ));
    assert_eq!(ranged.lines().count(), 4);
    let (c, err) = code(cli(s.uri(), &[&weekly[..], &["--warmup-auto"]].concat()));
    assert_ne!(c, 0);
    assert!(err.contains("give `warmup` as a number of bars"), "{err}");
    let mut nested = weekly;
    nested[3] = "close > weekly(daily(close))";
    let (c, err) = code(cli(s.uri(), &nested));
    assert_ne!(c, 0);
    assert!(err.contains("do not nest"), "{err}");
    // A bad High: stored with a warning, refused where the stops read it.
    let bad = dir.path().join("bad.csv");
    let mut rows: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut cells: Vec<String> = rows[9].split(',').map(str::to_owned).collect();
    cells[2] = "1.0".into();
    rows[9] = cells.join(",");
    std::fs::write(&bad, rows.join("\n")).unwrap();
    let out = cli(s.uri(), &["put", "bad", bad.to_str().unwrap()]);
    assert!(out.status.success());
    let warned = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        warned.contains("column high is unusable: row 8 (2020-01-09): high 1"),
        "{warned}"
    );
    let (code, err) = code(cli(
        s.uri(),
        &[
            "sweep",
            "bad",
            "--strategy",
            "sma_cross",
            "--grid",
            "fast=5",
            "slow=20",
            "--stops",
            "high_low",
        ],
    ));
    assert_ne!(code, 0);
    assert!(err.contains("row 8"), "{err}");
}

/// Day `i` after 2020-01-01 as YYYY-MM-DD (30-day months are enough for a test's dates, and
/// every date must be a real one: days 1 to 28).
fn chrono_day(i: u32) -> String {
    let (month, day) = (1 + (i / 28) % 12, 1 + i % 28);
    let year = 2020 + i / (28 * 12);
    format!("{year}-{month:02}-{day:02}")
}

/// v1.4's trust rules from the shell: a window that is not a whole number is refused (never
/// cut), a pandas CSV's unnamed index keeps its dates, bars out of order are refused unless
/// `--ignore-time`, a typo names the column, `--inputs` reads a column of one's own, and the
/// table is rounded for a terminal while CSV keeps every digit.
#[test]
fn trust_rules_from_the_command_line() {
    let s = Served::start();
    let dir = tempfile::tempdir().unwrap();
    // What pandas' `to_csv` writes for a frame with a DatetimeIndex: an empty first header.
    let rows: Vec<(String, f64, f64)> = (0..300u32)
        .map(|i| {
            let c = 100.0 + (f64::from(i) * 0.2).sin() * 4.0 + f64::from(i) * 0.013;
            (chrono_day(i), c, (f64::from(i + 3) * 0.2).sin())
        })
        .collect();
    let write = |name: &str, order: &[usize]| {
        let mut text = String::from(",Close,pred\n");
        for &i in order {
            let (d, c, p) = &rows[i];
            text.push_str(&format!("{d},{c},{p}\n"));
        }
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let sorted: Vec<usize> = (0..rows.len()).collect();
    let csv = write("pandas.csv", &sorted);
    let out = cli(s.uri(), &["put", "pd", csv.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let put = ok(out);
    assert!(put.contains("bar columns: close, time"), "{put}");
    assert!(stderr.contains("its dates go as `time`"), "{stderr}");

    let sweep = |args: &[&str]| {
        let mut all = vec!["sweep", "pd"];
        all.extend_from_slice(args);
        cli(s.uri(), &all)
    };
    for (args, said) in [
        (
            vec!["--long", "close > sma(close, n)", "--grid", "n=5.9,7.5,10"],
            "`n` must be an integer in 1..=67108864, got 5.9",
        ),
        (
            vec!["--long", "close > sma(close, n)", "--grid", "n=-3"],
            "got -3",
        ),
        (
            vec!["--strategy", "sma_cross", "--grid", "fast=5.5", "slow=20"],
            "`fast` must be an integer in 1..=2147483647, got 5.5",
        ),
        (vec!["--long", "clsoe > 100", "--grid", "clsoe=1"], ""),
    ] {
        let (c, err) = code(sweep(&args));
        if said.is_empty() {
            // Given values, a name far from none of the columns but not listed is a parameter:
            // it runs (the hint is for one without values, below).
            assert_eq!(c, 0, "{args:?}: {err}");
            continue;
        }
        assert_eq!(c, 4, "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
    // A name without values that looks like a column says which, from --grid or --params.
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "[[]]").unwrap();
    let (c, err) = code(sweep(&[
        "--long",
        "close > perd",
        "--params",
        empty.to_str().unwrap(),
    ]));
    assert_eq!(c, 4, "{err}");
    assert!(
        err.contains("did you mean the column pred? list it in the strategy's \"inputs\""),
        "{err}"
    );
    let (c, err) = code(sweep(&["--long", "clsoe > sma(close, n)", "--grid", "n=5"]));
    assert_eq!(c, 4, "{err}");
    assert!(
        err.contains("--grid needs values for `clsoe`; did you mean the column close?"),
        "{err}"
    );
    // --inputs reads the column; the table is rounded, CSV is not.
    let table = ok(sweep(&[
        "--long",
        "pred > k",
        "--short",
        "pred < 0 - k",
        "--inputs",
        "pred",
        "--grid",
        "k=0,0.5",
    ]));
    assert!(table.contains("| k "), "{table}");
    let long_decimals = table
        .split(|c: char| c.is_whitespace() || c == '|')
        .filter(|w| w.contains('.') && !w.contains('e'))
        .any(|w| w.split('.').nth(1).is_some_and(|d| d.len() > 4));
    assert!(!long_decimals, "{table}");
    let csv_out = ok(sweep(&[
        "--long",
        "pred > k",
        "--short",
        "pred < 0 - k",
        "--inputs",
        "pred",
        "--grid",
        "k=0,0.5",
        "--output",
        "csv",
    ]));
    assert!(
        csv_out.lines().skip(1).any(|l| l
            .split(',')
            .any(|v| v.split('.').nth(1).is_some_and(|d| d.len() > 6))),
        "{csv_out}"
    );
    let (c, err) = code(sweep(&[
        "--strategy",
        "sma_cross",
        "--grid",
        "fast=5",
        "slow=20",
        "--inputs",
        "pred",
    ]));
    assert_eq!(c, 4, "{err}");
    assert!(
        err.contains("--inputs names columns for your own formulas"),
        "{err}"
    );

    // Bars out of order: refused (exit 8, FAILED_PRECONDITION) naming the row, run with
    // --ignore-time.
    let mut shuffled = sorted.clone();
    shuffled.swap(100, 101);
    let csv = write("shuffled.csv", &shuffled);
    ok(cli(s.uri(), &["put", "sh", csv.to_str().unwrap()]));
    let args = [
        "sweep",
        "sh",
        "--strategy",
        "sma_cross",
        "--grid",
        "fast=5",
        "slow=20",
    ];
    let (c, err) = code(cli(s.uri(), &args));
    assert_eq!(c, 8, "{err}");
    assert!(
        err.contains("row 101") && err.contains("sort the bars by time"),
        "{err}"
    );
    let mut ignoring = args.to_vec();
    ignoring.push("--ignore-time");
    ok(cli(s.uri(), &ignoring));
}

/// A portfolio from the shell (protocol v1.4): a keyed CSV universe with dates, swept with
/// `--rank` / `--longs` / `--rebalance` and a grid, one row per combo; its trades by series; a
/// count that is not an integer refused by value, and a stop beside a portfolio refused.
#[test]
fn a_portfolio_from_the_command_line() {
    let s = Served::start();
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("symbol,Date,Open,Close\n");
    for (k, sym) in ["AAA", "BBB", "CCC"].iter().enumerate() {
        for i in 0..200u32 {
            if k == 2 && i % 7 == 3 {
                continue;
            }
            let x = f64::from(i);
            let c = 100.0 + (x * (0.05 + 0.02 * k as f64)).sin() * 5.0 + x * 0.01 * k as f64;
            text.push_str(&format!("{sym},{},{},{c}\n", chrono_day(i), c * 0.998));
        }
    }
    let path = dir.path().join("u.csv");
    std::fs::write(&path, text).unwrap();
    ok(cli(
        s.uri(),
        &["put", "u", path.to_str().unwrap(), "--key", "symbol"],
    ));
    let base = [
        "sweep",
        "u",
        "--rank",
        "roc(close, n)",
        "--filter",
        "close > sma(close, 20)",
        "--longs",
        "k",
        "--rebalance",
        "weekly",
    ];
    let mut args = base.to_vec();
    args.extend(["--grid", "n=5,10", "k=1,2", "--output", "csv"]);
    let out = ok(cli(s.uri(), &args));
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("combo,n,k,total_return,annual_return") && header.contains("turnover"),
        "{header}"
    );
    assert_eq!(lines.count(), 4, "{out}");
    let mut trades = vec!["trades"];
    trades.extend_from_slice(&base[1..]);
    trades.extend(["--grid", "n=10", "k=2", "--output", "csv"]);
    let t = ok(cli(s.uri(), &trades));
    assert!(
        t.lines()
            .next()
            .unwrap()
            .starts_with("combo,row,time,series,shares,price,value,fee"),
        "{t}"
    );
    assert!(
        t.contains(",AAA,") || t.contains(",BBB,") || t.contains(",CCC,"),
        "{t}"
    );
    // One combo of no parameters.
    let empty = dir.path().join("one.json");
    std::fs::write(&empty, "[[]]").unwrap();
    for (extra, said) in [
        (
            vec!["--longs", "2.5"],
            "`strategy.longs` must be an integer in 0..=100000 or a parameter name, got 2.5",
        ),
        (
            vec!["--stop-loss", "0.05"],
            "`stop_loss` does not apply to a portfolio strategy",
        ),
        (
            vec!["--stop-loss", "2 * atr(14) / close"],
            "`stop_loss` does not apply to a portfolio strategy",
        ),
    ] {
        let mut args: Vec<&str> = vec!["sweep", "u", "--rank", "roc(close, 5)", "--rebalance", "5"];
        if extra[0] != "--longs" {
            args.extend(["--longs", "1"]);
        }
        args.extend(extra.iter().copied());
        args.extend(["--params", empty.to_str().unwrap()]);
        let (c, err) = code(cli(s.uri(), &args));
        assert_ne!(c, 0, "{extra:?}");
        assert!(err.contains(said), "{extra:?}: {err}");
    }
}
