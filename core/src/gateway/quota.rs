//! Quotas: per key, limits on tokens and cost per day, week and month (UTC calendar periods:
//! a week starts on Monday) and on the conversations it runs at once.
//!
//! A quota is written `tokens/day=2000000,cost/month=50,conversations=4`: `tokens` are every
//! token the model read or wrote (input, cache reads and writes, output: OpenAI's
//! `total_tokens`), `cost` US dollars as [`usage`](super::usage) meters them.

use std::fmt;
use std::str::FromStr;

use super::usage::{civil, day_name, days_from_civil, Tally};

/// A calendar period (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Period {
    /// A day.
    Day,
    /// A week, from Monday.
    Week,
    /// A calendar month.
    Month,
}

impl Period {
    fn name(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
        }
    }

    /// The first day of the period `day` is in (days since 1970-01-01).
    pub fn start(self, day: u64) -> u64 {
        match self {
            Period::Day => day,
            // 1970-01-01 was a Thursday.
            Period::Week => day - (day + 3) % 7,
            Period::Month => {
                let (y, m, _) = civil(day);
                days_from_civil(y, m, 1).unwrap_or(day)
            }
        }
    }

    /// The first day of the period after the one `day` is in.
    pub fn next(self, day: u64) -> u64 {
        match self {
            Period::Day => day + 1,
            Period::Week => self.start(day) + 7,
            // A month is at most 31 days: the start of the month 31 days after its first.
            Period::Month => Period::Month.start(self.start(day) + 31),
        }
    }
}

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Measure {
    /// Tokens of every kind.
    Tokens,
    /// Cost (billionths of a US dollar).
    Cost,
}

/// One limit of a quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// What it counts.
    pub measure: Measure,
    /// Over which period.
    pub period: Period,
    /// How much: tokens, or billionths of a US dollar.
    pub amount: u64,
}

impl Limit {
    fn count(&self, tally: &Tally) -> u64 {
        match self.measure {
            Measure::Tokens => tally.tokens(),
            Measure::Cost => tally.cost_nano_usd,
        }
    }

    /// The limit's amount as written (`2000000 tokens`, `$50`).
    fn shown(&self, amount: u64) -> String {
        match self.measure {
            Measure::Tokens => format!("{amount} tokens"),
            Measure::Cost => format!("${}", amount as f64 / 1e9),
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.measure {
            Measure::Tokens => write!(f, "tokens/{}={}", self.period.name(), self.amount),
            Measure::Cost => {
                write!(
                    f,
                    "cost/{}={}",
                    self.period.name(),
                    self.amount as f64 / 1e9
                )
            }
        }
    }
}

/// A key's quota.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quota {
    /// Its limits on tokens and cost.
    pub limits: Vec<Limit>,
    /// The most conversations the key runs at once (live CLIs: past it, its conversation
    /// least recently used that waits for nothing is set aside to resume later, else a new
    /// one gets a 429).
    pub conversations: Option<usize>,
}

/// Why a quota cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quota {spec:?}: {why} (as in tokens/day=2000000,cost/month=50,conversations=4)")]
pub struct QuotaError {
    spec: String,
    why: String,
}

impl FromStr for Quota {
    type Err = QuotaError;

    fn from_str(spec: &str) -> Result<Quota, QuotaError> {
        let error = |why: String| QuotaError {
            spec: spec.to_owned(),
            why,
        };
        let mut quota = Quota::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| error(format!("{part:?} has no value")))?;
            if name == "conversations" {
                let n = value
                    .parse()
                    .map_err(|_| error(format!("conversations={value} is not a count")))?;
                quota.conversations = Some(n);
                continue;
            }
            let (measure, period) = name
                .split_once('/')
                .ok_or_else(|| error(format!("{name:?} is not tokens/PERIOD or cost/PERIOD")))?;
            let period = match period {
                "day" => Period::Day,
                "week" => Period::Week,
                "month" => Period::Month,
                other => return Err(error(format!("{other:?} is not day, week or month"))),
            };
            let (measure, amount) = match measure {
                "tokens" => (
                    Measure::Tokens,
                    value
                        .parse::<u64>()
                        .map_err(|_| error(format!("{value:?} is not a number of tokens")))?,
                ),
                "cost" => {
                    let usd = value.trim_start_matches('$').parse::<f64>().ok();
                    let usd = usd
                        .filter(|u| u.is_finite() && *u >= 0.0)
                        .ok_or_else(|| error(format!("{value:?} is not an amount of dollars")))?;
                    (Measure::Cost, (usd * 1e9).round() as u64)
                }
                other => return Err(error(format!("{other:?} is not tokens or cost"))),
            };
            quota
                .limits
                .retain(|l| (l.measure, l.period) != (measure, period));
            quota.limits.push(Limit {
                measure,
                period,
                amount,
            });
        }
        quota.limits.sort_by_key(|l| (l.measure, l.period));
        Ok(quota)
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self.limits.iter().map(Limit::to_string).collect();
        if let Some(n) = self.conversations {
            parts.push(format!("conversations={n}"));
        }
        f.write_str(&parts.join(","))
    }
}

/// A limit a key has reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// The limit.
    pub limit: Limit,
    /// What the key used in the limit's period.
    pub used: u64,
    /// The first day of the next period, when the limit lifts (days since 1970-01-01).
    pub resets_day: u64,
}

impl Exceeded {
    /// What to tell the client.
    pub fn message(&self) -> String {
        format!(
            "this key has used {} of its quota of {} per {}; it resets at {}T00:00:00Z",
            self.limit.shown(self.used),
            self.limit.shown(self.limit.amount),
            self.limit.period.name(),
            day_name(self.resets_day)
        )
    }
}

impl Quota {
    /// The first day whose usage the quota's limits look at on `today`.
    pub fn since(&self, today: u64) -> u64 {
        (self.limits.iter())
            .map(|l| l.period.start(today))
            .min()
            .unwrap_or(today)
    }

    /// The first limit that `used` (figures by day, days since 1970-01-01) reaches on
    /// `today`, if any.
    pub fn exceeded(&self, used: &[(u64, Tally)], today: u64) -> Option<Exceeded> {
        self.limits.iter().find_map(|limit| {
            let start = limit.period.start(today);
            let used: u64 = (used.iter())
                .filter(|(day, _)| (start..=today).contains(day))
                .map(|(_, tally)| limit.count(tally))
                .sum();
            (used >= limit.amount).then(|| Exceeded {
                limit: *limit,
                used,
                resets_day: limit.period.next(today),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::usage::day_number;

    #[test]
    fn a_quota_reads_and_writes_its_limits() {
        let quota: Quota = "tokens/day=2000000, cost/month=$50,conversations=4"
            .parse()
            .unwrap();
        assert_eq!(quota.conversations, Some(4));
        assert_eq!(quota.limits.len(), 2);
        assert_eq!(
            quota.to_string(),
            "tokens/day=2000000,cost/month=50,conversations=4"
        );
        for (bad, why) in [
            ("tokens/year=1", "is not day, week or month"),
            ("cost/day=-1", "is not an amount of dollars"),
            ("tokens=5", "is not tokens/PERIOD"),
            ("conversations", "has no value"),
        ] {
            let error = bad.parse::<Quota>().unwrap_err().to_string();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn periods_are_utc_calendar_days_weeks_from_monday_and_months() {
        let day = |d: &str| day_number(d).unwrap();
        // 2026-11-28 is a Saturday.
        assert_eq!(Period::Week.start(day("2026-11-28")), day("2026-11-23"));
        assert_eq!(Period::Week.next(day("2026-11-28")), day("2026-11-30"));
        assert_eq!(Period::Week.start(day("2026-11-23")), day("2026-11-23"));
        assert_eq!(Period::Month.start(day("2026-11-28")), day("2026-11-01"));
        assert_eq!(Period::Month.next(day("2026-12-31")), day("2027-01-01"));
        assert_eq!(Period::Month.next(day("2028-02-29")), day("2028-03-01"));
        assert_eq!(Period::Day.next(day("2026-11-28")), day("2026-11-29"));
    }

    #[test]
    fn a_limit_is_reached_by_what_its_period_used() {
        let day = |d: &str| day_number(d).unwrap();
        let quota: Quota = "tokens/day=100,cost/week=1".parse().unwrap();
        let used = |input, cost| Tally {
            input_tokens: input,
            cost_nano_usd: cost,
            ..Tally::default()
        };
        let today = day("2026-11-28");
        // Yesterday's tokens do not count today; this week's cost does.
        let rows = [(today - 1, used(500, 600_000_000)), (today, used(60, 0))];
        assert_eq!(quota.exceeded(&rows, today), None);
        let rows = [
            (today - 1, used(0, 600_000_000)),
            (today, used(100, 400_000_000)),
        ];
        let over = quota.exceeded(&rows, today).unwrap();
        assert_eq!(over.limit.measure, Measure::Tokens);
        assert_eq!(
            over.message(),
            "this key has used 100 tokens of its quota of 100 tokens per day; it resets at \
             2026-11-29T00:00:00Z"
        );
        let rows = [(day("2026-11-23"), used(0, 1_000_000_000))];
        let over = quota.exceeded(&rows, today).unwrap();
        assert_eq!(over.resets_day, day("2026-11-30"));
        assert!(
            over.message().contains("$1 of its quota of $1 per week"),
            "{}",
            over.message()
        );
        assert_eq!(quota.since(today), day("2026-11-23"));
    }
}
