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

/// Every action type with its description, in ListActions order.
pub const ACTIONS: [(&str, &str); 7] = [
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
];
