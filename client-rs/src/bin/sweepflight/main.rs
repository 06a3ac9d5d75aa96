//! `sweepflight`: the command-line client. Push files, run sweeps, list and drop datasets.
//!
//! Exit codes: 0 success, 1 other failure, 2 bad command line, 3 not found, 4 invalid request
//! or input file, 5 unauthenticated, 6 resource exhausted, 7 server unreachable.

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
    Client, ConnectOptions, Error, Execution, Grid, PutTarget, RowRange, Side, Strategy,
    SweepRequest,
};

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
        /// The column holding the close price; stored as `close`.
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

/// What chooses and runs the combos: shared by `sweep` and `trades`.
#[derive(Debug, clap::Args)]
struct SweepArgs {
    /// Dataset name.
    name: String,
    /// The strategy: hma_sar (the paper's), sma_cross, ema_cross, donchian, rsi_revert.
    #[arg(long, default_value = "hma_sar", value_parser = parse_strategy)]
    strategy: Strategy,
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
    /// Close a position that moved this fraction against its entry (0.02 is 2%).
    #[arg(long)]
    stop_loss: Option<f64>,
    /// Close a position that moved this fraction in its favour.
    #[arg(long)]
    take_profit: Option<f64>,
    /// Bars before `--rows` the indicators warm up on.
    #[arg(long, default_value_t = 0)]
    warmup: u64,
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
    /// (252 for daily bars; default 1: per-bar figures).
    #[arg(long)]
    periods_per_year: Option<f64>,
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
}

impl SweepArgs {
    /// The request these flags describe.
    fn request(self) -> anyhow::Result<SweepRequest> {
        let strategy = self.strategy;
        let combos = match (self.lengths, self.params, self.grid) {
            (Some(spec), _, _) => Grid::Lengths(grid::parse_lengths(&spec)?),
            (None, Some(file), _) => grid::read_params(&file, strategy)?,
            (None, None, Some(specs)) => grid::parse_grid(strategy, &specs)?,
            (None, None, None) => unreachable!("clap requires one"),
        };
        let mut request =
            SweepRequest::strategy(&self.name, strategy, combos).with_execution(Execution {
                side: self.side.unwrap_or_default(),
                stop_loss: self.stop_loss,
                take_profit: self.take_profit,
                warmup: self.warmup,
                periods_per_year: self.periods_per_year,
                blocks: self.blocks,
            });
        request.selection =
            grid::parse_selection(&self.filters, self.order_by, self.ascending, self.top)?;
        request.fee = self.fee;
        request.series = self.series;
        request.rows = self.rows;
        Ok(request)
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
                "stored {} rows{series} ({} bytes) as {} version {}",
                summary.rows, summary.bytes, summary.dataset, summary.version
            );
        }
        Command::Sweep {
            args,
            chunk,
            output,
        } => {
            let request = args.request()?;
            let bar = progress(Some(request.len() as u64), "combos");
            let result = client
                .sweep_chunked(&request, chunk, |done| bar.set_position(done as u64))
                .await?;
            bar.finish_and_clear();
            output::write(&[result.batch], output)?;
        }
        Command::Trades {
            args,
            equity,
            output,
        } => {
            let request = args.request()?;
            let table = if equity {
                client.equity(&request).await?
            } else {
                client.trades(&request).await?
            };
            output::write(&[table], output)?;
        }
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

/// `START:END` as a row range.
fn parse_strategy(text: &str) -> Result<Strategy, String> {
    Strategy::from_name(text).map_err(|e| e.to_string())
}

fn parse_side(text: &str) -> Result<Side, String> {
    Side::from_name(text).map_err(|e| e.to_string())
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
            _ => 1,
        },
        Some(Error::Connect { .. }) => 7,
        Some(Error::BadUri { .. } | Error::InvalidRequest(_)) => 4,
        _ if e.downcast_ref::<input::InputError>().is_some() => 4,
        _ => 1,
    }
}
