//! Action types and their one-line descriptions, as ListActions reports them.

/// Run a parameter sweep on a stored dataset.
pub const SWEEP: &str = "sweep";
/// Reply with the request body.
pub const ECHO: &str = "echo";
/// Remove a dataset.
pub const DROP: &str = "drop";
/// Server state as JSON (extension).
pub const STATS: &str = "stats";
/// The strategies and their parameters as JSON (v1.2).
pub const STRATEGIES: &str = "strategies";

/// The booked trades of chosen combos as Arrow (v1.2).
pub const TRADES: &str = "trades";
/// The mark-to-market equity of chosen combos, bar by bar, as Arrow (v1.2).
pub const EQUITY: &str = "equity";

/// Walk-forward in one call: in-sample choice per fold, out-of-sample run (v1.2).
pub const WALK_FORWARD: &str = "walk_forward";
/// Start a job in the background (v1.2).
pub const SUBMIT: &str = "submit";
/// A job's state and progress (v1.2).
pub const STATUS: &str = "status";
/// Stop a job and free what it holds (v1.2).
pub const CANCEL: &str = "cancel";
/// Flight's standard cancel of a PollFlightInfo query (body and reply in protobuf).
pub const CANCEL_FLIGHT_INFO: &str = "CancelFlightInfo";
/// `explain`: the plan of a sweep body, nothing run (protocol v1.3).
pub const EXPLAIN: &str = "explain";

/// Every action type with its description, in ListActions order.
pub const ACTIONS: [(&str, &str); 13] = [
    (
        SWEEP,
        "Run a parameter sweep on a stored dataset. Body: JSON {\"dataset\", \"strategy\"?, \"lengths\" | \"params\" | \"grid\" | \"sample\", \"fee\"?, \"side\"?, \"stop_loss\"?, \"take_profit\"?, \"warmup\"?, \"series\"?, \"rows\"?}; reply: one Arrow IPC stream split over the Result bodies.",
    ),
    (
        ECHO,
        "Reply with one Result whose body is the request body, unchanged.",
    ),
    (DROP, "Remove a dataset. Body: the dataset name."),
    (
        STATS,
        "Server state as JSON: datasets, bytes, cache, sweeps running / queued / completed / cancelled / refused, reserved sweep memory.",
    ),
    (
        STRATEGIES,
        "The strategies this server runs, as JSON: [{\"name\", \"params\": [{\"name\", \"type\": \"int\" | \"number\"}], \"summary\"}].",
    ),
    (
        TRADES,
        "The booked trades of chosen combos. Body: a sweep body (its where / order_by / top choose the combos, at most --max-trade-combos x series); reply: one Arrow IPC stream of [series], combo, trade, side, entry_row, exit_row, entry_price, exit_price, pnl.",
    ),
    (
        EQUITY,
        "The mark-to-market equity of chosen combos, one row per evaluated bar. Body: as trades; reply: one Arrow IPC stream of [series], combo, row, position, equity.",
    ),
    (
        WALK_FORWARD,
        "Walk-forward in one call. Body: a sweep body without rows/order_by/top/blocks, plus \"folds\" ({\"train\", \"test\", \"step\"?, \"anchored\"?} or [[train_start, train_end, test_start, test_end], ...]) and \"select\"? ({\"by\": COLUMN, \"descending\"?}); reply: one Arrow IPC stream, a row per series and fold: the in-sample best combo and its out-of-sample metrics.",
    ),
    (
        SUBMIT,
        "Start a job. Body: the body of sweep, walk_forward, trades or equity plus \"action\"? (default sweep); reply: JSON {\"job\": ID} at once.",
    ),
    (
        STATUS,
        "A job's state. Body: {\"job\": ID}; reply: JSON {job, action, state (queued|running|done|failed|cancelled), progress, combos_done, combos_total, error?}.",
    ),
    (
        CANCEL,
        "Stop a job and free its memory and result. Body: {\"job\": ID}; reply: its status JSON.",
    ),
    (
        CANCEL_FLIGHT_INFO,
        "Flight's CancelFlightInfo for a job started by PollFlightInfo. Body: CancelFlightInfoRequest (protobuf); reply: CancelFlightInfoResult.",
    ),
    (
        EXPLAIN,
        "The plan of a sweep body, nothing run (protocol v1.3). Body: a sweep body whose \"strategy\" is a built-in name or an object of formulas ({\"long\", \"short\", \"exit_long\", \"exit_short\"}), with \"params\" or \"grid\" and \"constraint\"?; reply: JSON {\"params\": [{\"name\", \"kind\"}], \"formulas\", \"combos\", \"lookback\", \"arrays\", \"columns\"}.",
    ),
];
