//! What [`DirStore`](super::DirStore) keeps of usage: `<root>/usage/<day>.json`, the rows of
//! one day (UTC), and `<root>/usage/windows.json`, the rate-limit windows. Each file is
//! replaced whole (written beside, synced, renamed), under one lock, so a reader sees one
//! write or the next. Kept until removed by hand: a file a day.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ccwire_core::gateway::usage::{day_name, day_number, day_range, Tally, UsageRow, Window};

use super::super::{private_dir, write_atomically};

/// The usage files under a store's root.
#[derive(Debug)]
pub(super) struct UsageFiles {
    dir: PathBuf,
    /// Held while a file is read and replaced.
    lock: Mutex<()>,
}

impl UsageFiles {
    pub(super) fn new(root: &Path) -> UsageFiles {
        UsageFiles {
            dir: root.join("usage"),
            lock: Mutex::new(()),
        }
    }

    fn day_file(&self, day: &str) -> io::Result<PathBuf> {
        let days = day_number(day).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{day:?} is not a day"))
        })?;
        Ok(self.dir.join(format!("{}.json", day_name(days))))
    }

    fn read<T: serde::de::DeserializeOwned + Default>(file: &Path) -> io::Result<T> {
        match std::fs::read(file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(io::Error::other),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(T::default()),
            Err(e) => Err(e),
        }
    }

    fn write<T: serde::Serialize>(&self, file: &Path, value: &T) -> io::Result<()> {
        private_dir(&self.dir)?;
        let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
        write_atomically(file, &bytes)
    }

    /// Adds `tally` to the row of `tenant` and `model` on `day`.
    pub(super) fn add(&self, day: &str, tenant: &str, model: &str, tally: Tally) -> io::Result<()> {
        let file = self.day_file(day)?;
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<UsageRow> = Self::read(&file)?;
        match (rows.iter_mut()).find(|r| r.key == tenant && r.model == model) {
            Some(row) => row.tally.add(&tally),
            None => rows.push(UsageRow {
                key: tenant.to_owned(),
                day: day.to_owned(),
                model: model.to_owned(),
                tally,
            }),
        }
        self.write(&file, &rows)
    }

    /// The rows of the days from `from` to `to` of `tenant` (`None`: every tenant's).
    pub(super) fn rows(
        &self,
        from: &str,
        to: &str,
        tenant: Option<&str>,
    ) -> io::Result<Vec<UsageRow>> {
        let days = day_range(from, to)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a day"))?;
        let mut out = Vec::new();
        for day in days {
            let rows: Vec<UsageRow> = Self::read(&self.day_file(&day_name(day))?)?;
            out.extend(
                rows.into_iter()
                    .filter(|r| tenant.is_none_or(|t| r.key == t)),
            );
        }
        Ok(out)
    }

    /// Keeps `window` unless one of its credential and kind observed later is kept.
    pub(super) fn keep_window(&self, window: &Window) -> io::Result<()> {
        let file = self.dir.join("windows.json");
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut windows: Vec<Window> = Self::read(&file)?;
        let same = |w: &Window| w.credential == window.credential && w.kind == window.kind;
        if windows
            .iter()
            .any(|w| same(w) && w.observed_ms > window.observed_ms)
        {
            return Ok(());
        }
        windows.retain(|w| !same(w));
        windows.push(window.clone());
        self.write(&file, &windows)
    }

    /// Every window kept.
    pub(super) fn windows(&self) -> io::Result<Vec<Window>> {
        Self::read(&self.dir.join("windows.json"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(input: u64) -> Tally {
        Tally {
            turns: 1,
            input_tokens: input,
            cost_nano_usd: input * 3_000,
            ..Tally::default()
        }
    }

    #[test]
    fn rows_sum_per_key_model_and_day_and_survive_a_new_store() {
        let root = tempfile::tempdir().unwrap();
        let files = UsageFiles::new(root.path());
        files.add("2026-11-28", "ka", "m1", turn(10)).unwrap();
        files.add("2026-11-28", "ka", "m1", turn(5)).unwrap();
        files.add("2026-11-28", "kb", "m1", turn(1)).unwrap();
        files.add("2026-11-29", "ka", "m2", turn(7)).unwrap();
        let again = UsageFiles::new(root.path());
        let rows = again.rows("2026-11-28", "2026-11-29", Some("ka")).unwrap();
        let got: Vec<_> = (rows.iter())
            .map(|r| {
                (
                    r.day.as_str(),
                    r.model.as_str(),
                    r.tally.turns,
                    r.tally.input_tokens,
                )
            })
            .collect();
        assert_eq!(
            got,
            [("2026-11-28", "m1", 2, 15), ("2026-11-29", "m2", 1, 7)]
        );
        assert_eq!(
            again.rows("2026-11-28", "2026-11-28", None).unwrap().len(),
            2
        );
        // Days are checked before any path is made of them.
        assert!(files.add("../x", "ka", "m1", turn(1)).is_err());
    }

    #[test]
    fn a_window_is_replaced_only_by_a_later_observation() {
        let root = tempfile::tempdir().unwrap();
        let files = UsageFiles::new(root.path());
        let window = |utilization, observed_ms| Window {
            credential: "login".into(),
            kind: "seven_day".into(),
            status: None,
            utilization: Some(utilization),
            resets_at: None,
            surpassed_threshold: None,
            claim: None,
            disabled_reason: None,
            observed_ms,
        };
        files.keep_window(&window(0.5, 20)).unwrap();
        files.keep_window(&window(0.4, 10)).unwrap();
        assert_eq!(files.windows().unwrap(), [window(0.5, 20)]);
        files.keep_window(&window(0.6, 30)).unwrap();
        assert_eq!(files.windows().unwrap(), [window(0.6, 30)]);
    }
}
