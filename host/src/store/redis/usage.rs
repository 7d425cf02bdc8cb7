//! What [`RedisStore`] keeps of usage: `ccwire:use:<day>`, a hash per day (UTC) whose fields
//! are `[tenant, model, count]` (JSON) and values the counts, added with `HINCRBY` so that
//! every gateway on the server adds into the same rows, kept [`USAGE_DAYS`]; and
//! `ccwire:windows`, a hash of the rate-limit windows by `[credential, kind]` (JSON), each
//! replaced only by an observation made later; and `ccwire:keys`, the tenant keys' records by
//! id.

use std::collections::BTreeMap;
use std::io;

use ccwire_core::gateway::usage::{day_name, day_number, day_range, Tally, UsageRow, Window};
use redis::Script;

use super::RedisStore;

/// How long a day's usage is kept (days).
const USAGE_DAYS: i64 = 400;

/// Keeps a window (`ARGV[2]`, JSON, observed at `ARGV[3]`) under its field (`ARGV[1]`) unless
/// the window kept there was observed later.
static KEEP_WINDOW: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| {
    Script::new(
        r"
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  local seen = cjson.decode(old)['observed_ms']
  if seen and tonumber(seen) > tonumber(ARGV[3]) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
",
    )
});

fn day_key(day: &str) -> io::Result<String> {
    let days = day_number(day).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{day:?} is not a day"))
    })?;
    Ok(format!("ccwire:use:{}", day_name(days)))
}

impl RedisStore {
    pub(super) async fn add_usage_async(
        &self,
        day: &str,
        tenant: &str,
        model: &str,
        tally: Tally,
    ) -> io::Result<()> {
        let key = day_key(day)?;
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (field, n) in tally.fields().into_iter().filter(|(_, n)| *n > 0) {
            let name = serde_json::json!([tenant, model, field]).to_string();
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            pipe.hincr(&key, name, n).ignore();
        }
        pipe.expire(&key, USAGE_DAYS * 86_400).ignore();
        let mut redis = self.redis.clone();
        let () = pipe
            .query_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    pub(super) async fn read_usage_async(
        &self,
        from: &str,
        to: &str,
        tenant: Option<&str>,
    ) -> io::Result<Vec<UsageRow>> {
        let days = day_range(from, to)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a day"))?;
        let mut pipe = redis::pipe();
        for day in days.clone() {
            pipe.hgetall(format!("ccwire:use:{}", day_name(day)));
        }
        let mut redis = self.redis.clone();
        let kept: Vec<Vec<(String, u64)>> = pipe
            .query_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        let mut rows: BTreeMap<(String, String, String), Tally> = BTreeMap::new();
        for (day, fields) in days.zip(kept) {
            for (name, n) in fields {
                // A field this version does not read is left alone.
                let Ok((key, model, field)) =
                    serde_json::from_str::<(String, String, String)>(&name)
                else {
                    continue;
                };
                if tenant.is_none_or(|t| t == key) {
                    let row = rows.entry((day_name(day), key, model)).or_default();
                    row.add_field(&field, n);
                }
            }
        }
        Ok(rows
            .into_iter()
            .map(|((day, key, model), tally)| UsageRow {
                key,
                day,
                model,
                tally,
            })
            .collect())
    }

    pub(super) async fn keep_window_async(&self, window: &Window) -> io::Result<()> {
        let field = serde_json::json!([window.credential, window.kind]).to_string();
        let json = serde_json::to_string(window).map_err(io::Error::other)?;
        let mut redis = self.redis.clone();
        let _kept: i64 = KEEP_WINDOW
            .key("ccwire:windows")
            .arg(field)
            .arg(json)
            .arg(window.observed_ms)
            .invoke_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    pub(super) async fn windows_async(&self) -> io::Result<Vec<Window>> {
        let mut redis = self.redis.clone();
        let kept: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg("ccwire:windows")
            .query_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        Ok(kept
            .into_iter()
            .filter_map(|(_, json)| serde_json::from_str(&json).ok())
            .collect())
    }

    pub(super) async fn save_key_async(&self, id: &str, json: Option<String>) -> io::Result<()> {
        let mut redis = self.redis.clone();
        let command = match json {
            Some(json) => {
                let mut c = redis::cmd("HSET");
                c.arg("ccwire:keys").arg(id).arg(json);
                c
            }
            None => {
                let mut c = redis::cmd("HDEL");
                c.arg("ccwire:keys").arg(id);
                c
            }
        };
        let _changed: i64 = (command.query_async(&mut redis).await).map_err(|e| self.failed(e))?;
        Ok(())
    }

    pub(super) async fn load_keys_async(&self) -> io::Result<Vec<String>> {
        let mut redis = self.redis.clone();
        redis::cmd("HVALS")
            .arg("ccwire:keys")
            .query_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))
    }
}
