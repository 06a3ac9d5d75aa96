//! `sweepflight`: the command-line client. Push files, run sweeps and walk-forwards (now or
//! as jobs), list and drop datasets.
//!
//! Exit codes: 0 success, 1 other failure, 2 bad command line, 3 not found, 4 invalid request
//! or input file, 5 unauthenticated, 6 resource exhausted, 7 server unreachable, 8 a job not
//! done (cancelled, or fetched while running).

mod grid;
mod input;
mod output;

// Uploads encode each message into fresh buffers of a few MiB: glibc's malloc maps and zeroes
// new pages for every one (an 800 MB put ran at 0.8 GB/s), mimalloc reuses them (1.07 GB/s).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use sweepflight_client::{
    Client, Compression, ConnectOptions, Error, Execution, Fill, Folds, Grid, JobBody, JobState,
    JobStatus, PutTarget, RowRange, Side, StopsOn, Strategy, SweepRequest, WalkForwardRequest,
};
use sweepflight_kernel::expr::Field;

use crate::output::Format;

/// Client of a sweepflight server: push price series, run backtest parameter sweeps.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Server address: grpc://HOST:PORT, grpc+tls://HOST:PORT or grpc+unix://PATH.
    #[arg(
        long,
        env = "SWEEPFLIGHT_URI",
        default_value = "grpc://127.0.0.1:8815",
        global = true
    )]
    uri: String,
    /// Token for servers started with --token.
    #[arg(long, env = "SWEEPFLIGHT_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// PEM file of the certificate authority to trust for grpc+tls://.
    #[arg(long, global = true)]
    tls_ca: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Upload a Parquet, CSV or Arrow IPC file as dataset NAME (replacing any of that name).
    Put {
        /// Dataset name: 1-128 characters from A-Z a-z 0-9 . _ -
        name: String,
        /// The file (.parquet, .csv, .arrow / .arrows / .ipc / .feather).
        file: PathBuf,
        /// The column holding the close price; stored as `close` (a `Close` of any case is
        /// recognised as it is, as are open, high, low, volume and a time or date column).
        #[arg(long, default_value = "close")]
        close_column: String,
        /// Store a universe: rows with the same value in this column form one series.
        #[arg(long)]
        key: Option<String>,
    },
    /// Run a parameter sweep on dataset NAME and print one row per combo.
    Sweep {
        #[command(flatten)]
        args: SweepArgs,
        /// Combos per call; larger grids go as several calls in sequence.
        #[arg(long, default_value_t = 50_000)]
        chunk: usize,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Print the booked trades (or, with --equity, the equity curves) of the combos a sweep
    /// chooses: all of them, or what --where / --order-by / --top keep.
    Trades {
        #[command(flatten)]
        args: SweepArgs,
        /// The mark-to-market equity bar by bar instead of the trades.
        #[arg(long)]
        equity: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Print the plan of a sweep as JSON, nothing run: the strategy's parameters and their
    /// kinds, its formulas as canonical text, combos, lookback, distinct arrays, columns.
    Explain {
        #[command(flatten)]
        args: SweepArgs,
    },
    /// Walk forward: per series and fold, the best combo in-sample (by --select, after
    /// --where) run on the test rows after it. One row per series and fold.
    WalkForward {
        #[command(flatten)]
        args: SweepArgs,
        #[command(flatten)]
        folds: FoldArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Start a job on the server (a sweep, or with --action trades, equity or walk-forward)
    /// and print its ID; `status`, `fetch` and `cancel` take it.
    Submit {
        #[command(flatten)]
        args: SweepArgs,
        /// What the job runs.
        #[arg(long, value_enum, default_value_t = JobAction::Sweep)]
        action: JobAction,
        #[command(flatten)]
        folds: FoldArgs,
    },
    /// Print a job's status (state, progress, combos done).
    Status {
        /// The job's ID.
        job: String,
    },
    /// Wait for a job (a progress bar on a terminal) and print its result.
    Fetch {
        /// The job's ID.
        job: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Cancel a job (or drop its result); prints its status once its memory is free.
    Cancel {
        /// The job's ID.
        job: String,
    },
    /// List the stored datasets.
    Ls {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Describe one dataset: rows, bytes, version, schema.
    Info {
        /// Dataset name.
        name: String,
    },
    /// Remove a dataset.
    Drop {
        /// Dataset name.
        name: String,
    },
}

/// What a job runs.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum JobAction {
    /// The sweep's rows.
    Sweep,
    /// The chosen combos' trades.
    Trades,
    /// The chosen combos' equity curves.
    Equity,
    /// A walk-forward (needs --train and --test, or --fold).
    WalkForward,
}

/// A walk-forward's folds and selection.
#[derive(Debug, clap::Args)]
struct FoldArgs {
    /// Rolling folds: train rows per fold.
    #[arg(long, requires = "test", conflicts_with = "fold")]
    train: Option<u64>,
    /// Rolling folds: test rows per fold (the rows after each train range).
    #[arg(long, requires = "train")]
    test: Option<u64>,
    /// Rolling folds: rows from one fold to the next (default: --test).
    #[arg(long, requires = "train")]
    step: Option<u64>,
    /// Rolling folds: every train range starts at row 0.
    #[arg(long, requires = "train")]
    anchored: bool,
    /// An explicit fold `TRAIN_START:TRAIN_END:TEST_START:TEST_END` (repeatable).
    #[arg(long, value_parser = parse_fold)]
    fold: Vec<[u64; 4]>,
    /// The result column the in-sample best is chosen by (largest first).
    #[arg(long, default_value = "pnl")]
    select: String,
    /// With --select: smallest first (a drawdown, say).
    #[arg(long)]
    select_ascending: bool,
}

impl FoldArgs {
    fn request(self, sweep: SweepRequest) -> anyhow::Result<WalkForwardRequest> {
        let folds = match (self.train, self.test) {
            (Some(train), Some(test)) => Folds::Rolling {
                train,
                test,
                step: self.step.unwrap_or(test),
                anchored: self.anchored,
            },
            _ if !self.fold.is_empty() => Folds::Explicit(self.fold),
            _ => anyhow::bail!(Error::InvalidRequest(
                "a walk-forward needs --train N --test M, or --fold A:B:C:D".into()
            )),
        };
        Ok(
            WalkForwardRequest::new(sweep, folds, &self.select, !self.select_ascending)
                .map_err(|e| Error::InvalidRequest(e.to_string()))?,
        )
    }
}

/// What chooses and runs the combos: shared by `sweep`, `trades`, `walk-forward` and `submit`.
#[derive(Debug, clap::Args)]
struct SweepArgs {
    /// Dataset name.
    name: String,
    /// The strategy: hma_sar (the paper's), sma_cross, ema_cross, donchian, rsi_revert; or
    /// your own with --long / --short / --exit-long / --exit-short.
    #[arg(long, default_value = "hma_sar", value_parser = parse_strategy)]
    strategy: Strategy,
    /// Your own strategy: the condition to go long, a formula over the bars
    /// (`"cross_above(sma(close, fast), sma(close, slow))"`; docs/protocol.md, v1.3).
    #[arg(long)]
    long: Option<String>,
    /// The condition to go short.
    #[arg(long)]
    short: Option<String>,
    /// The condition to close a long position.
    #[arg(long)]
    exit_long: Option<String>,
    /// The condition to close a short position.
    #[arg(long)]
    exit_short: Option<String>,
    /// A portfolio over a keyed universe (docs/portfolios.md): rank the series by this formula
    /// at each rebalance, higher first (`"roc(close, n)"`); with --longs / --shorts and
    /// --rebalance.
    #[arg(long, conflicts_with_all = ["long", "short", "exit_long", "exit_short"])]
    rank: Option<String>,
    /// A portfolio's eligibility condition (`"close > sma(close, 200)"`).
    #[arg(long, requires = "rank")]
    filter: Option<String>,
    /// A portfolio's weights (`"1 / std(roc(close, 1), 20)"`; equal without it).
    #[arg(long, requires = "rank")]
    weight: Option<String>,
    /// How many series a portfolio holds long: an integer or a parameter name (`k`).
    #[arg(long, requires = "rank")]
    longs: Option<String>,
    /// How many series a portfolio holds short: an integer or a parameter name.
    #[arg(long, requires = "rank")]
    shorts: Option<String>,
    /// A portfolio's buffer: a held series stays while its rank is within this.
    #[arg(long, requires = "rank")]
    keep: Option<String>,
    /// When a portfolio rebalances: every K rows (an integer or a parameter name), or daily,
    /// weekly, monthly.
    #[arg(long, requires = "rank")]
    rebalance: Option<String>,
    /// Other columns of the dataset your formulas read as series (a model's predictions, a
    /// vendor's VWAP): `--inputs pred,vwap`.
    #[arg(long, value_delimiter = ',')]
    inputs: Vec<String>,
    /// Sweep bars whose time is out of order in row order, the time read as absent (without
    /// it such a dataset is refused: sort the bars by time before the put instead).
    #[arg(long)]
    ignore_time: bool,
    /// Skip the grid's combos for which this condition on the parameters is false
    /// (`"fast < slow"`); the others keep their grid positions.
    #[arg(long)]
    constraint: Option<String>,
    /// hma_sar lengths, each expanding by the paper rule: `6,8,10`, `6..20` (every
    /// integer) or `6..200:80` (80 values spaced like numpy.linspace, truncated); parts may
    /// be mixed.
    #[arg(long, conflicts_with_all = ["params", "grid"], required_unless_present_any = ["params", "grid"])]
    lengths: Option<String>,
    /// A CSV (one column per parameter in the strategy's order, e.g. half,full,sqrt,p3,p2,p;
    /// header optional) or JSON (array of arrays) file of explicit combos.
    #[arg(long, conflicts_with = "grid")]
    params: Option<PathBuf>,
    /// The product of per-parameter values: `--grid fast=5..50 slow=20..200:5` (Rust
    /// ranges: `5..50` is 5 to 49, `:5` steps by 5, `..=` includes the end; commas list
    /// values: `lower=20,30.5`).
    #[arg(long, num_args = 1..)]
    grid: Option<Vec<String>>,
    /// Which positions: both (stop-and-reverse), long or short.
    #[arg(long, value_parser = parse_side)]
    side: Option<Side>,
    /// Close a position that moved this fraction against its entry (0.02 is 2%), or a
    /// formula giving each trade's fraction at the bar that decided it: `"m * atr(14) /
    /// close"` (its parameters go on --grid like the strategy's).
    #[arg(long, value_parser = parse_stop)]
    stop_loss: Option<Stop>,
    /// Close a position that moved this fraction in its favour (or a formula, likewise).
    #[arg(long, value_parser = parse_stop)]
    take_profit: Option<Stop>,
    /// Close a position that fell this fraction from its best price since entry (or a
    /// formula, likewise).
    #[arg(long, value_parser = parse_stop)]
    trailing_stop: Option<Stop>,
    /// Where decisions fill: close (the signal's bar) or next_open (needs an `open` column).
    #[arg(long, value_parser = parse_fill)]
    fill: Option<Fill>,
    /// What stops are checked against: close, or high_low (needs open, high and low).
    #[arg(long, value_parser = parse_stops)]
    stops: Option<StopsOn>,
    /// Slippage as a fraction of each fill price (0.001 is 0.1%), in [0, 0.5).
    #[arg(long)]
    slippage: Option<f64>,
    /// Bars before `--rows` the indicators warm up on.
    #[arg(long, conflicts_with = "warmup_auto")]
    warmup: Option<u64>,
    /// Warm up on the strategy's largest lookback over the grid (`"warmup": "auto"`).
    #[arg(long)]
    warmup_auto: bool,
    /// Keep only rows inside bounds: `--where trades>=30 --where max_drawdown<=25` (any
    /// numeric result column; `>=` and `<=`, inclusive).
    #[arg(long = "where", value_name = "COLUMN>=V|COLUMN<=V")]
    filters: Vec<String>,
    /// Order rows by this result column, largest first (ties by combo).
    #[arg(long)]
    order_by: Option<String>,
    /// With --order-by: smallest first.
    #[arg(long, requires = "order_by")]
    ascending: bool,
    /// Only the first N rows (per series on a keyed dataset).
    #[arg(long)]
    top: Option<u64>,
    /// Annualise the per-bar Sharpe and Sortino ratios with this many bars a year
    /// (252 for daily bars; `auto`: from the dataset's time column; default 1: per-bar figures).
    #[arg(long, value_parser = parse_periods)]
    periods_per_year: Option<Periods>,
    /// Round-trip fee as a fraction (server default 0.0009).
    #[arg(long)]
    fee: Option<f64>,
    /// On a keyed dataset, only these series, in this order: `AAPL,MSFT`.
    #[arg(long, value_delimiter = ',')]
    series: Option<Vec<String>>,
    /// Only rows START..END of each series (0-based, END exclusive and clipped): `0:100000`.
    #[arg(long, value_parser = parse_rows)]
    rows: Option<RowRange>,
    /// Add the `block_pnl` column: the equity's change over this many blocks of the rows
    /// (2 to 64), for overfitting diagnostics.
    #[arg(long)]
    blocks: Option<u8>,
    /// Ask the server to compress the reply: zstd or lz4 (pays on slow links).
    #[arg(long, value_parser = parse_compression)]
    compression: Option<Compression>,
}

impl SweepArgs {
    /// [`SweepArgs::request`], a parameter without values said with the closest column of
    /// the dataset where one is near (the server says the same for a body it is sent).
    async fn request_on(self, client: &mut Client) -> anyhow::Result<SweepRequest> {
        let (name, inputs) = (self.name.clone(), self.inputs.clone());
        match self.request() {
            Err(e) if e.downcast_ref::<grid::Unvalued>().is_some() => {
                let u = e.downcast::<grid::Unvalued>().expect("checked");
                let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
                let hint = match client.info(&name).await {
                    Ok(info) => sweepflight_protocol::column_hint(
                        &u.param,
                        &info.schema,
                        info.key.as_deref(),
                        &inputs,
                    ),
                    Err(_) => None,
                };
                Err(input::InputError(match hint {
                    Some(h) => format!("{}; {h}", u.message),
                    None => u.message,
                })
                .into())
            }
            other => other,
        }
    }

    /// The request these flags describe.
    fn request(self) -> anyhow::Result<SweepRequest> {
        let formulas: serde_json::Map<String, serde_json::Value> = [
            ("long", &self.long),
            ("short", &self.short),
            ("exit_long", &self.exit_long),
            ("exit_short", &self.exit_short),
        ]
        .into_iter()
        .filter_map(|(k, v)| {
            v.clone()
                .map(|t| (k.to_owned(), serde_json::Value::String(t)))
        })
        .collect();
        let mut formulas = formulas;
        let portfolio = self.rank.is_some();
        if let Some(rank) = &self.rank {
            formulas.insert("rank".into(), rank.clone().into());
            for (k, v) in [("filter", &self.filter), ("weight", &self.weight)] {
                if let Some(t) = v {
                    formulas.insert(k.into(), t.clone().into());
                }
            }
            for (k, v) in [
                ("longs", &self.longs),
                ("shorts", &self.shorts),
                ("keep", &self.keep),
                ("rebalance", &self.rebalance),
            ] {
                if let Some(t) = v {
                    formulas.insert(k.into(), count_value(t));
                }
            }
        }
        if !self.inputs.is_empty() {
            if formulas.is_empty() {
                return Err(input::InputError(
                    "--inputs names columns for your own formulas (--long, --short); a built-in \
                     strategy reads none"
                        .into(),
                )
                .into());
            }
            formulas.insert(
                "inputs".into(),
                serde_json::Value::from(self.inputs.clone()),
            );
        }
        let stops: Vec<(Field, String)> = Field::STOPS
            .into_iter()
            .zip([&self.stop_loss, &self.take_profit, &self.trailing_stop])
            .filter_map(|(f, s)| match s {
                Some(Stop::Formula(t)) => Some((f, t.clone())),
                _ => None,
            })
            .collect();
        let strategy = if !formulas.is_empty() {
            Strategy::decode_with_stops(
                Some(&serde_json::Value::Object(formulas)),
                self.constraint.as_deref(),
                &stops,
            )
        } else if self.constraint.is_some() || !stops.is_empty() {
            let name = serde_json::Value::String(self.strategy.name().to_owned());
            Strategy::decode_with_stops(Some(&name), self.constraint.as_deref(), &stops)
        } else {
            Ok(self.strategy)
        }
        .map_err(|e| Error::InvalidRequest(e.to_string()))?;
        let combos = match (self.lengths, self.params, self.grid) {
            (Some(spec), _, _) => Grid::Lengths(grid::parse_lengths(&spec)?),
            (None, Some(file), _) => grid::read_params(&file, &strategy)?,
            (None, None, Some(specs)) => grid::parse_grid(&strategy, &specs)?,
            (None, None, None) => unreachable!("clap requires one"),
        };
        let mut request =
            SweepRequest::strategy(&self.name, strategy, combos).with_execution(Execution {
                side: self.side.unwrap_or_default(),
                stop_loss: self.stop_loss.and_then(Stop::number),
                take_profit: self.take_profit.and_then(Stop::number),
                trailing_stop: self.trailing_stop.and_then(Stop::number),
                // A portfolio trades at the next open unless told (docs/portfolios.md).
                fill: self.fill.unwrap_or(if portfolio {
                    Fill::NextOpen
                } else {
                    Fill::Close
                }),
                stops: self.stops.unwrap_or_default(),
                slippage: self.slippage.unwrap_or(0.0),
                warmup: self.warmup.unwrap_or(0),
                warmup_auto: self.warmup_auto,
                periods_per_year: match self.periods_per_year {
                    Some(Periods::Given(p)) => Some(p),
                    _ => None,
                },
                periods_per_year_auto: self.periods_per_year == Some(Periods::Auto),
                blocks: self.blocks,
                ignore_time: self.ignore_time,
            });
        request.selection =
            grid::parse_selection(&self.filters, self.order_by, self.ascending, self.top)?;
        request.fee = self.fee;
        request.series = self.series;
        request.rows = self.rows;
        request.compression = self.compression;
        Ok(request)
    }
}

/// A portfolio count or period as given on the command line: a number as a JSON number (so a
/// `2.5` is refused by value, never cut), anything else as text (a parameter name or a
/// period word, which the server reads).
fn count_value(text: &str) -> serde_json::Value {
    match text.parse::<u64>() {
        Ok(n) => n.into(),
        Err(_) => match text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            Some(n) => serde_json::Value::Number(n),
            None => text.into(),
        },
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sweepflight: {e:#}");
            ExitCode::from(exit_code(&e))
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let options = ConnectOptions {
        token: cli.token.clone(),
        tls_ca_pem: cli.tls_ca.as_ref().map(std::fs::read).transpose()?,
        max_message_bytes: None,
    };
    let mut client = Client::connect_with(&cli.uri, &options).await?;
    match cli.command {
        Command::Put {
            name,
            file,
            close_column,
            key,
        } => {
            let (batches, total) = input::read(&file, &close_column)?;
            let bar = progress(total, "rows");
            let counted = {
                let bar = bar.clone();
                futures::StreamExt::inspect(batches, move |b| {
                    if let Ok(b) = b {
                        bar.inc(b.num_rows() as u64);
                    }
                })
            };
            let target = match key {
                Some(key) => PutTarget::keyed(&name, key),
                None => PutTarget::dataset(&name),
            };
            let summary = client.put_to(&target, counted).await?;
            bar.finish_and_clear();
            let series = summary
                .series
                .map_or(String::new(), |n| format!(" in {n} series"));
            println!(
                "stored {} rows{series} ({} bytes) as {} version {}; bar columns: {}",
                summary.rows,
                summary.bytes,
                summary.dataset,
                summary.version,
                summary.columns.join(", ")
            );
            // Stored, but a sweep that needs one of these is refused: say so now.
            for (column, reason) in &summary.unusable {
                eprintln!("warning: column {column} is unusable: {reason}");
            }
        }
        Command::Sweep {
            args,
            chunk,
            output,
        } => {
            let request = args.request_on(&mut client).await?;
            let bar = progress(Some(request.len() as u64), "combos");
            let result = client
                .sweep_chunked(&request, chunk, |done| bar.set_position(done as u64))
                .await?;
            bar.finish_and_clear();
            output::write(&[result.batch], output)?;
        }
        Command::Explain { args } => {
            let request = args.request_on(&mut client).await?;
            let plan = client.explain(&request).await?;
            println!("{}", serde_json::to_string_pretty(&plan)?);
        }
        Command::Trades {
            args,
            equity,
            output,
        } => {
            let request = args.request_on(&mut client).await?;
            let table = if equity {
                client.equity(&request).await?
            } else {
                client.trades(&request).await?
            };
            output::write(&[table], output)?;
        }
        Command::WalkForward {
            args,
            folds,
            output,
        } => {
            let request = folds.request(args.request_on(&mut client).await?)?;
            output::write(&[client.walk_forward(&request).await?], output)?;
        }
        Command::Submit {
            args,
            action,
            folds,
        } => {
            let request = args.request_on(&mut client).await?;
            let body = match action {
                JobAction::Sweep => JobBody::Sweep(request),
                JobAction::Trades => JobBody::Trades(request),
                JobAction::Equity => JobBody::Equity(request),
                JobAction::WalkForward => JobBody::WalkForward(folds.request(request)?),
            };
            let status = client.submit(&body).await?;
            println!("{}", status.job);
        }
        Command::Status { job } => print_status(&client.status(&job).await?),
        Command::Fetch { job, output } => {
            let bar = progress(None, "combos");
            let status = client
                .wait(&job, |s| {
                    bar.set_length(s.combos_total);
                    bar.set_position(s.combos_done);
                })
                .await?;
            bar.finish_and_clear();
            if status.state == JobState::Done {
                output::write(&[client.fetch(&job).await?], output)?;
            } else {
                // The job's own error (failed) or FAILED_PRECONDITION (cancelled).
                client.fetch(&job).await?;
            }
        }
        Command::Cancel { job } => print_status(&client.cancel(&job).await?),
        Command::Ls { output } => {
            output::write(&[output::datasets(&client.list().await?)?], output)?
        }
        Command::Info { name } => {
            let d = client.info(&name).await?;
            println!("dataset  {}", d.name);
            println!("rows     {}", d.rows);
            println!("bytes    {}", d.bytes);
            println!(
                "version  {}",
                d.version.map_or("?".into(), |v| v.to_string())
            );
            if let (Some(key), Some(series)) = (&d.key, d.series) {
                println!("key      {key} ({series} series)");
            }
            println!("schema");
            for f in d.schema.fields() {
                println!(
                    "  {}: {}{}",
                    f.name(),
                    f.data_type(),
                    if f.is_nullable() { "" } else { " not null" }
                );
            }
        }
        Command::Drop { name } => {
            let version = client.drop(&name).await?;
            println!(
                "dropped {name}{}",
                version.map_or(String::new(), |v| format!(" version {v}"))
            );
        }
    }
    Ok(())
}

fn print_status(s: &JobStatus) {
    let state = serde_json::to_value(s.state).unwrap_or_default();
    println!(
        "{} {} {} {:.1}% ({}/{} combos){}",
        s.job,
        s.action,
        state.as_str().unwrap_or("?"),
        s.progress * 100.0,
        s.combos_done,
        s.combos_total,
        s.error.as_ref().map_or(String::new(), |e| format!(": {e}"))
    );
}

fn parse_compression(text: &str) -> Result<Compression, String> {
    Compression::from_name(text).map_err(|e| e.to_string())
}

/// `A:B:C:D` as a fold.
fn parse_fold(text: &str) -> Result<[u64; 4], String> {
    let parts: Vec<u64> = text
        .split(':')
        .map(|p| p.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("{text:?}: expected TRAIN_START:TRAIN_END:TEST_START:TEST_END"))?;
    <[u64; 4]>::try_from(parts).map_err(|_| format!("{text:?}: expected four row numbers, A:B:C:D"))
}

fn parse_strategy(text: &str) -> Result<Strategy, String> {
    Strategy::from_name(text).map_err(|e| e.to_string())
}

fn parse_side(text: &str) -> Result<Side, String> {
    Side::from_name(text).map_err(|e| e.to_string())
}

/// A stop: a fraction, or a formula of one per trade.
#[derive(Debug, Clone, PartialEq)]
enum Stop {
    Number(f64),
    Formula(String),
}

impl Stop {
    fn number(self) -> Option<f64> {
        match self {
            Self::Number(v) => Some(v),
            Self::Formula(_) => None,
        }
    }
}

fn parse_stop(text: &str) -> Result<Stop, String> {
    Ok(text
        .trim()
        .parse::<f64>()
        .map_or_else(|_| Stop::Formula(text.to_owned()), Stop::Number))
}

fn parse_fill(text: &str) -> Result<Fill, String> {
    Fill::from_name(text).ok_or_else(|| format!("{text:?}: expected close or next_open"))
}

fn parse_stops(text: &str) -> Result<StopsOn, String> {
    StopsOn::from_name(text).ok_or_else(|| format!("{text:?}: expected close or high_low"))
}

/// `--periods-per-year`: a number, or `auto` (from the dataset's time column).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Periods {
    Given(f64),
    Auto,
}

fn parse_periods(text: &str) -> Result<Periods, String> {
    if text == "auto" {
        return Ok(Periods::Auto);
    }
    text.parse::<f64>()
        .map(Periods::Given)
        .map_err(|_| format!("{text:?}: expected a number (252 for daily bars) or auto"))
}

fn parse_rows(text: &str) -> Result<RowRange, String> {
    let (start, end) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: expected START:END, e.g. 0:100000"))?;
    let int = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("{text:?}: {s:?} is not a row number"))
    };
    RowRange::new(int(start)?, int(end)?).map_err(|e| e.to_string())
}

/// A bar on stderr when it is a terminal (indicatif hides itself otherwise).
fn progress(total: Option<u64>, unit: &str) -> ProgressBar {
    let bar = total.map_or_else(ProgressBar::new_spinner, ProgressBar::new);
    let template = format!(
        "{{spinner}} {{bar:40}} {{human_pos}}/{{human_len}} {unit} ({{per_sec}}, eta {{eta}})"
    );
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}

fn exit_code(e: &anyhow::Error) -> u8 {
    use tonic::Code;
    match e.downcast_ref::<Error>() {
        Some(Error::Status { code, .. }) => match code {
            Code::NotFound => 3,
            Code::InvalidArgument | Code::OutOfRange => 4,
            Code::Unauthenticated | Code::PermissionDenied => 5,
            Code::ResourceExhausted => 6,
            Code::Unavailable => 7,
            Code::FailedPrecondition | Code::Cancelled => 8,
            _ => 1,
        },
        Some(Error::Connect { .. }) => 7,
        Some(Error::BadUri { .. } | Error::InvalidRequest(_)) => 4,
        _ if e.downcast_ref::<input::InputError>().is_some() => 4,
        _ => 1,
    }
}
