//! Calendar periods and period bars (protocol v1.4, expressions.md "Higher timeframes"), on
//! hand-computed cases: ISO week 53 across a year end, month and year ends, a series starting
//! mid-week, intraday bars across UTC midnight; each column's rule; `daily(x)` on daily bars
//! is `lag(x, 1)`; and cutting the bars after any bar changes no value seen at or before it.

use std::sync::Arc;

use sweepflight_kernel::lines::Bars;
use sweepflight_kernel::timeframe::{PeriodBars, Timeframe, days_from_civil, seen_from_next};

fn day(y: i64, m: u32, d: u32) -> i64 {
    days_from_civil(y, m, d)
}

#[test]
fn iso_week_53_spans_the_year_end_and_months_split_at_theirs() {
    // 2020-12-28 (a Monday) to 2021-01-10: ISO week 53 of 2020 holds 2020-12-28..2021-01-03.
    let days: Vec<i64> = (0..14).map(|k| day(2020, 12, 28) + k).collect();
    let close: Vec<f64> = (0..14).map(f64::from).collect();
    let weekly = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Weekly);
    assert_eq!(weekly.of_bar, [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(weekly.close, [6.0, 13.0]);
    assert_eq!(Timeframe::Weekly.key(day(2021, 1, 3)), 202_053);
    assert_eq!(Timeframe::Weekly.key(day(2021, 1, 4)), 202_101);
    let monthly = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Monthly);
    // December 2020 (4 days), January 2021 (10 days).
    assert_eq!(monthly.of_bar.iter().filter(|&&p| p == 0).count(), 4);
    assert_eq!(monthly.close, [3.0, 13.0]);
    // Seen from the next period only: NaN through the first, then the one before.
    let seen = seen_from_next(&monthly.close, &monthly.of_bar);
    assert!(seen[..4].iter().all(|v| v.is_nan()));
    assert!(seen[4..].iter().all(|&v| v == 3.0));
}

#[test]
fn each_column_gathers_by_its_rule_and_a_series_may_start_mid_week() {
    // Wednesday 2024-01-03 to Tuesday 2024-01-09, trading days only (no weekend bars).
    let days = [
        day(2024, 1, 3),
        day(2024, 1, 4),
        day(2024, 1, 5),
        day(2024, 1, 8),
        day(2024, 1, 9),
    ];
    let open = [10.0, 11.0, 12.0, 13.0, 14.0];
    let high = [12.0, 15.0, 13.0, 14.0, 16.0];
    let low = [9.0, 10.0, 8.0, 12.0, 13.0];
    let close = [11.0, 12.0, 12.5, 13.5, 15.0];
    let volume = [100.0, 200.0, 300.0, 400.0, 500.0];
    let pred: Arc<[f64]> = vec![0.1, 0.2, f64::NAN, 0.4, 0.5].into();
    let inputs = [pred];
    let bars = Bars {
        open: Some(&open),
        high: Some(&high),
        low: Some(&low),
        close: &close,
        volume: Some(&volume),
        inputs: &inputs,
        inputs_from: 0,
    };
    let w = PeriodBars::of(&bars, &days, Timeframe::Weekly);
    assert_eq!(w.of_bar, [0, 0, 0, 1, 1]);
    assert_eq!(w.open.as_deref(), Some(&[10.0, 13.0][..]));
    assert_eq!(w.high.as_deref(), Some(&[15.0, 16.0][..]));
    assert_eq!(w.low.as_deref(), Some(&[8.0, 12.0][..]));
    assert_eq!(w.close, [12.5, 15.0]);
    assert_eq!(w.volume.as_deref(), Some(&[600.0, 900.0][..]));
    // An input is its period's last value, a NaN included.
    assert!(w.inputs[0][0].is_nan());
    assert_eq!(w.inputs[0][1], 0.5);
    // The partial first week is a period of its own: seen from the next one.
    let seen = seen_from_next(&w.close, &w.of_bar);
    assert!(seen[0].is_nan() && seen[2].is_nan());
    assert_eq!(&seen[3..], [12.5, 12.5]);
    // A column the bars lack stays lacking.
    let only = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Weekly);
    assert!(only.open.is_none() && only.volume.is_none() && only.inputs.is_empty());
}

#[test]
fn intraday_bars_split_at_utc_midnight() {
    // Hourly bars from 2024-03-01 21:00 UTC to 2024-03-02 02:00 UTC: their UTC dates.
    let hours: Vec<i64> = (21..27).collect();
    let days: Vec<i64> = hours
        .iter()
        .map(|h| (day(2024, 3, 1) * 24 + h).div_euclid(24))
        .collect();
    let close: Vec<f64> = hours.iter().map(|&h| h as f64).collect();
    let d = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Daily);
    assert_eq!(d.of_bar, [0, 0, 0, 1, 1, 1]);
    assert_eq!(d.close, [23.0, 26.0]);
}

#[test]
fn daily_on_daily_bars_is_the_bar_before() {
    let days: Vec<i64> = (0..50).map(|k| day(2023, 1, 1) + k * 2).collect();
    let close: Vec<f64> = (0..50).map(|k| (f64::from(k) * 0.7).sin()).collect();
    let d = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Daily);
    let seen = seen_from_next(&d.close, &d.of_bar);
    assert!(seen[0].is_nan());
    assert_eq!(&seen[1..], &close[..49]);
}

#[test]
fn cutting_the_bars_after_any_bar_changes_no_value_seen_at_or_before_it() {
    // Irregular days (gaps, weekends, a month end), a value per period that reads its
    // period's whole run (the close) and one that reads period bars before it (a mean of
    // three closes).
    let mut days = Vec::new();
    let mut d = day(2023, 11, 20);
    let mut state = 7u64;
    for _ in 0..120 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        d += 1 + (state >> 62) as i64;
        days.push(d);
    }
    let close: Vec<f64> = (0..120)
        .map(|k| 100.0 + (f64::from(k) * 0.37).cos() * 5.0)
        .collect();
    let mean3 = |c: &[f64]| -> Vec<f64> {
        (0..c.len())
            .map(|i| {
                if i < 2 {
                    f64::NAN
                } else {
                    (c[i - 2] + c[i - 1] + c[i]) / 3.0
                }
            })
            .collect()
    };
    for tf in Timeframe::ALL {
        let full = PeriodBars::of(&Bars::closes(&close), &days, tf);
        let whole = [
            seen_from_next(&full.close, &full.of_bar),
            seen_from_next(&mean3(&full.close), &full.of_bar),
        ];
        for t in 0..close.len() {
            let cut = PeriodBars::of(&Bars::closes(&close[..=t]), &days[..=t], tf);
            let part = [
                seen_from_next(&cut.close, &cut.of_bar),
                seen_from_next(&mean3(&cut.close), &cut.of_bar),
            ];
            for (a, b) in whole.iter().zip(&part) {
                for i in 0..=t {
                    assert!(
                        a[i] == b[i] || (a[i].is_nan() && b[i].is_nan()),
                        "{} cut at {t}: bar {i} saw {} whole, {} cut",
                        tf.name(),
                        a[i],
                        b[i]
                    );
                }
            }
        }
    }
}
