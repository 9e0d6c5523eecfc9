//! When a task's schedule fires: a cron pattern (five fields, or six with seconds first)
//! read in an IANA time zone by croner, over jiff's own copy of the time-zone database.
//! DST follows Vixie cron: a fixed time that falls in a spring-forward gap fires right
//! after it, once; in a fall-back overlap a fixed time fires once and an interval pattern
//! fires for each wall-clock match. Pure: the clock is an argument.

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

use crate::job::Invalid;

/// A fire up to this late is on time; a later one was missed (jobd was down or busy)
/// and the catch-up policy decides.
pub const ON_TIME_MS: i64 = 60_000;
/// The most missed fires `catch_up = all` makes up for (the newest ones).
pub const MAX_CATCH_UP: usize = 24;

/// What a fire does while a run of the same task has not ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// This fire is skipped.
    Skip,
    /// This fire's run waits, queued, until the earlier ones end.
    Queue,
    /// The earlier runs are cancelled, then this one starts.
    Replace,
    /// This one starts beside them.
    Allow,
}

/// What fires missed while jobd was down become.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Nothing: only fires on time run.
    None,
    /// One run, for the newest missed fire.
    Latest,
    /// One run per missed fire, the newest `MAX_CATCH_UP` of them.
    All,
}

/// A task's schedule as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub cron: String,
    pub timezone: String,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
}

/// A schedule ready to be asked when it fires.
#[derive(Debug, Clone)]
pub struct Compiled {
    cron: Cron,
    tz: TimeZone,
}

impl Schedule {
    pub fn compile(&self) -> Result<Compiled, Invalid> {
        if self.cron.len() > 256 {
            return Err(Invalid("cron", "longer than 256 bytes".into()));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(&self.cron)
            .map_err(|e| Invalid("cron", format!("{:?}: {e}", self.cron)))?;
        let name = if self.timezone.is_empty() {
            "UTC"
        } else {
            self.timezone.as_str()
        };
        let tz = TimeZone::get(name).map_err(|_| {
            Invalid(
                "timezone",
                format!("{name:?} is not an IANA time zone (like Europe/Berlin or UTC)"),
            )
        })?;
        Ok(Compiled { cron, tz })
    }
}

fn zoned(ms: i64, tz: &TimeZone) -> Option<jiff::Zoned> {
    Some(Timestamp::from_millisecond(ms).ok()?.to_zoned(tz.clone()))
}

fn ms(z: &jiff::Zoned) -> i64 {
    z.timestamp().as_millisecond()
}

/// The fires due now and what to remember.
#[derive(Debug, Clone, PartialEq)]
pub struct Due {
    /// When each run to start was due, oldest first.
    pub fires: Vec<i64>,
    /// Missed fires left out (at least this many).
    pub skipped: usize,
}

impl Compiled {
    /// The first fire after `after_ms`.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        self.cron
            .find_next_occurrence(&zoned(after_ms, &self.tz)?, false)
            .ok()
            .map(|z| ms(&z))
    }

    /// The next `n` fires after `after_ms`.
    pub fn preview(&self, after_ms: i64, n: usize) -> Vec<i64> {
        let Some(start) = zoned(after_ms, &self.tz) else {
            return Vec::new();
        };
        self.cron
            .iter_after(start)
            .take(n)
            .map(|z| ms(&z))
            .collect()
    }

    /// The fires in (`cursor_ms`, `now_ms`] that start a run under `catch_up`: those on
    /// time always; of the missed ones, none, the newest, or the newest `MAX_CATCH_UP`.
    pub fn due(&self, cursor_ms: i64, now_ms: i64, catch_up: CatchUp) -> Due {
        let Some(now) = zoned(now_ms, &self.tz) else {
            return Due {
                fires: Vec::new(),
                skipped: 0,
            };
        };
        // Newest first, at most what any policy keeps and one more (to know that more
        // were left out).
        let mut newest_first: Vec<i64> = self
            .cron
            .iter_from(now, croner::Direction::Backward)
            .map(|z| ms(&z))
            .take_while(|t| *t > cursor_ms)
            .take(MAX_CATCH_UP + 1)
            .collect();
        let more = newest_first.len() > MAX_CATCH_UP;
        newest_first.truncate(MAX_CATCH_UP);
        let (on_time, missed): (Vec<i64>, Vec<i64>) = newest_first
            .iter()
            .partition(|t| now_ms - **t <= ON_TIME_MS);
        let missed_count = missed.len() + usize::from(more);
        let (mut fires, skipped) = match catch_up {
            CatchUp::None => (on_time, missed_count),
            CatchUp::Latest if !on_time.is_empty() => (on_time, missed_count),
            CatchUp::Latest => (
                missed.first().copied().into_iter().collect(),
                missed_count.saturating_sub(1),
            ),
            CatchUp::All => (newest_first, usize::from(more)),
        };
        fires.sort_unstable();
        Due { fires, skipped }
    }
}

/// What a fire does, given how many runs of its task have not ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFire {
    Start,
    Skip,
    /// Start it queued behind the runs that have not ended.
    Queue,
    /// Cancel those runs, then start it.
    Replace,
}

pub fn on_fire(overlap: Overlap, active_runs: usize) -> OnFire {
    match (active_runs, overlap) {
        (0, _) | (_, Overlap::Allow) => OnFire::Start,
        (_, Overlap::Skip) => OnFire::Skip,
        (_, Overlap::Queue) => OnFire::Queue,
        (_, Overlap::Replace) => OnFire::Replace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().as_millisecond()
    }

    fn sched(cron: &str, tz: &str) -> Compiled {
        Schedule {
            cron: cron.into(),
            timezone: tz.into(),
            overlap: Overlap::Skip,
            catch_up: CatchUp::None,
        }
        .compile()
        .unwrap()
    }

    #[test]
    fn patterns_and_zones_are_checked_naming_the_field() {
        let bad = |cron: &str, tz: &str| {
            Schedule {
                cron: cron.into(),
                timezone: tz.into(),
                overlap: Overlap::Allow,
                catch_up: CatchUp::All,
            }
            .compile()
            .unwrap_err()
            .0
        };
        assert_eq!(bad("61 * * * *", "UTC"), "cron");
        assert_eq!(bad("* * *", "UTC"), "cron");
        assert_eq!(bad("0 3 * * *", "Mars/Olympus"), "timezone");
        sched("*/5 * * * * *", "");
        sched("0 3 * * mon-fri", "America/New_York");
    }

    #[test]
    fn a_fixed_time_in_a_spring_forward_gap_fires_once_right_after_it() {
        // Berlin, 2026-03-29: 02:00 → 03:00 local (01:00 UTC).
        let c = sched("30 2 * * *", "Europe/Berlin");
        let next = c.next_after(at("2026-03-27T12:00:00Z")).unwrap();
        assert_eq!(
            next,
            at("2026-03-28T01:30:00Z"),
            "the day before: 02:30 CET"
        );
        let next = c.next_after(next).unwrap();
        assert_eq!(
            next,
            at("2026-03-29T01:00:00Z"),
            "in the gap: at 03:00 CEST, once"
        );
        let after = c.next_after(next).unwrap();
        assert_eq!(after, at("2026-03-30T00:30:00Z"), "then 02:30 CEST");
    }

    #[test]
    fn in_a_fall_back_overlap_a_fixed_time_fires_once_and_an_interval_twice() {
        // Berlin, 2026-10-25: 03:00 CEST → 02:00 CET (01:00 UTC); 02:xx happens twice.
        let fixed = sched("30 2 * * *", "Europe/Berlin");
        let fires = fixed.preview(at("2026-10-24T12:00:00Z"), 2);
        assert_eq!(
            fires,
            [at("2026-10-25T00:30:00Z"), at("2026-10-26T01:30:00Z")],
            "once on the 25th, at its first 02:30"
        );
        let every = sched("0,30 2 * * *", "Europe/Berlin");
        let fires = every.preview(at("2026-10-24T23:00:00Z"), 4);
        assert_eq!(
            fires,
            [
                at("2026-10-25T00:00:00Z"),
                at("2026-10-25T00:30:00Z"),
                at("2026-10-25T01:00:00Z"),
                at("2026-10-25T01:30:00Z"),
            ]
        );
    }

    #[test]
    fn catch_up_none_latest_and_all_after_an_outage() {
        // Every 10 minutes; jobd was down from 10:05 to 11:00:20.
        let c = sched("*/10 * * * *", "UTC");
        let cursor = at("2026-06-01T10:05:00Z");
        let now = at("2026-06-01T11:00:20Z");
        let missed: Vec<i64> = ["10:10", "10:20", "10:30", "10:40", "10:50"]
            .iter()
            .map(|t| at(&format!("2026-06-01T{t}:00Z")))
            .collect();
        let on_time = at("2026-06-01T11:00:00Z");
        let none = c.due(cursor, now, CatchUp::None);
        assert_eq!((none.fires, none.skipped), (vec![on_time], 5));
        // Latest: the on-time fire is the newest; nothing else.
        let latest = c.due(cursor, now, CatchUp::Latest);
        assert_eq!((latest.fires, latest.skipped), (vec![on_time], 5));
        let all = c.due(cursor, now, CatchUp::All);
        let mut want = missed.clone();
        want.push(on_time);
        assert_eq!((all.fires, all.skipped), (want, 0));
        // Back at 10:55: nothing on time; latest makes up for 10:50 alone.
        let now = at("2026-06-01T10:55:00Z");
        let latest = c.due(cursor, now, CatchUp::Latest);
        assert_eq!((latest.fires, latest.skipped), (vec![missed[4]], 4));
        assert!(c.due(cursor, now, CatchUp::None).fires.is_empty());
        // Nothing twice: from the last fire handled, nothing is due again.
        assert!(
            c.due(on_time, on_time + 1000, CatchUp::All)
                .fires
                .is_empty()
        );
    }

    #[test]
    fn catch_up_all_is_bounded_to_the_newest() {
        let c = sched("* * * * * *", "UTC");
        let now = at("2026-06-01T12:00:00Z");
        let d = c.due(now - 3_600_000, now, CatchUp::All);
        assert_eq!(d.fires.len(), MAX_CATCH_UP);
        assert_eq!(*d.fires.last().unwrap(), now);
        assert_eq!(d.skipped, 1, "at least one more was left out");
    }

    #[test]
    fn overlap_decides_only_while_a_run_is_active() {
        for o in [
            Overlap::Skip,
            Overlap::Queue,
            Overlap::Replace,
            Overlap::Allow,
        ] {
            assert_eq!(on_fire(o, 0), OnFire::Start);
        }
        assert_eq!(on_fire(Overlap::Skip, 1), OnFire::Skip);
        assert_eq!(on_fire(Overlap::Queue, 2), OnFire::Queue);
        assert_eq!(on_fire(Overlap::Replace, 1), OnFire::Replace);
        assert_eq!(on_fire(Overlap::Allow, 3), OnFire::Start);
    }
}
