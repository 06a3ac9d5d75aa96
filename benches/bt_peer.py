"""backtesting.py's README example, run in its own environment (scripts/setup-backtesting.sh):
SmaCross(10, 20) on the package's GOOG daily bars, market orders filled at the next bar's
open, exclusive orders (a signal closes the open trade and opens the other side), no
commission; the trade still open at the end closed by ``finalize_trades``. Writes the bars to
the CSV path given (Date, Open, High, Low, Close, Volume, as the package has them) and prints
JSON: every trade as [side, entry_bar, exit_bar, entry_price, exit_price], and the seconds of
the run."""

from __future__ import annotations

import json
import sys
import time

from backtesting import Backtest, Strategy
from backtesting.lib import crossover
from backtesting.test import GOOG, SMA


class SmaCross(Strategy):
    n1 = 10
    n2 = 20

    def init(self) -> None:
        close = self.data.Close
        self.sma1 = self.I(SMA, close, self.n1)
        self.sma2 = self.I(SMA, close, self.n2)

    def next(self) -> None:
        if crossover(self.sma1, self.sma2):
            self.buy()
        elif crossover(self.sma2, self.sma1):
            self.sell()


def main() -> None:
    GOOG.rename_axis("Date").to_csv(sys.argv[1])
    bt = Backtest(GOOG, SmaCross, cash=1_000_000, commission=0, exclusive_orders=True, finalize_trades=True)
    t0 = time.perf_counter()
    stats = bt.run()
    seconds = time.perf_counter() - t0
    trades = [
        [1 if row.Size > 0 else -1, int(row.EntryBar), int(row.ExitBar), float(row.EntryPrice), float(row.ExitPrice)]
        for row in stats._trades.itertuples()
    ]
    print(json.dumps({"bars": len(GOOG), "trades": trades, "seconds": seconds}))


if __name__ == "__main__":
    main()
