//! [`RedisStore`]: the session store in a Redis server, shared by every gateway that names it.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use ccwire_core::gateway::usage::{Tally, UsageRow, Window};
use ccwire_core::gateway::{ConversationKey, ConversationRecord};
use futures::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};

use super::{component, ConversationStore, Superseded, Swept};

mod usage;

/// The session store in a Redis server (`redis://`, `rediss://` for TLS, `redis+unix://`;
/// user, password and database as the URL gives them), shared by every gateway that names it.
///
/// Keys, under `ccwire:` and the tenant's digest in braces (one Redis Cluster slot per
/// tenant):
///
/// | key | type | what |
/// |---|---|---|
/// | `ccwire:{T}:c:<id>:t` | list | the conversation's transcript, one line per element |
/// | `ccwire:{T}:c:<id>:r` | string | its [`ConversationRecord`] (JSON) |
/// | `ccwire:{T}:c:<id>:o` | integer | its fencing token: how many times a CLI resumed it |
/// | `ccwire:{T}:h:<hash>` | string | the conversation a history continues |
/// | `ccwire:{T}:s:<id>` | string | a response stored for `previous_response_id` |
/// | `ccwire:{T}:m` | hash | the Managed Agents API's resources, `<kind>:<id>` → JSON (no expiry) |
/// | `ccwire:{T}:recent` | sorted set | its conversations by when each was last saved (the console's list) |
/// | `ccwire:{T}:u:b` | hash | the bytes of each of its transcripts, and (`*`) their sum: its usage |
/// | `ccwire:{T}:u:at` | sorted set | its transcripts by when each was last appended to (the usage's expiry) |
/// | `ccwire:tenants` | set | every tenant with a conversation kept (the admin's list) |
/// | `ccwire:pool` | string | the warm pool's settings |
/// | `ccwire:use:<day>` | hash | what each key used that day, by model (kept 400 days) |
/// | `ccwire:windows` | hash | the rate-limit windows the CLIs reported, the latest of each |
/// | `ccwire:keys` | hash | the tenant keys made over `/v1/keys` (digests, never keys), labels and quotas, by key id (no expiry) |
///
/// Every key but the pool's and the tenants' expires after the store's time-to-live, renewed on each write
/// of its conversation, so Redis forgets old conversations itself. A record and its index
/// change in one script; appending is idempotent (a batch whose last line the transcript
/// already ends with is not appended again, so a write retried after a lost answer is not
/// doubled). Durability is the server's: run it with `appendonly yes` to keep what it
/// acknowledged across its restarts.
///
/// No conversation is written by two CLIs: loading a transcript to resume it takes the
/// conversation's next fencing token, and every later write of this store carries the
/// token it holds; a write whose token is older than the conversation's (another gateway
/// has resumed it since) changes nothing and fails with [`Superseded`].
#[derive(Clone)]
pub struct RedisStore {
    redis: ConnectionManager,
    /// The URL without its password, for messages.
    shown: String,
    ttl: Duration,
    tokens: Arc<Mutex<Tokens>>,
    /// The tenants this store has named in [`TENANTS`] (once each per process).
    named: Arc<Mutex<std::collections::HashSet<String>>>,
}

/// The set of every tenant whose conversations the store keeps: the admin's list of
/// conversations reads each one's recent ones.
const TENANTS: &str = "ccwire:tenants";

/// The fencing tokens this store took (conversations it resumed), the oldest forgotten past
/// [`Tokens::CAP`]: only a live CLI's conversation needs one, and a gateway runs far fewer
/// CLIs (a write with a forgotten token is refused as [`Superseded`], and the conversation
/// resumed again).
#[derive(Default)]
struct Tokens {
    by_conversation: HashMap<String, u64>,
    order: VecDeque<String>,
}

impl Tokens {
    const CAP: usize = 65_536;

    fn get(&self, conversation: &str) -> u64 {
        self.by_conversation.get(conversation).copied().unwrap_or(0)
    }

    fn set(&mut self, conversation: &str, token: u64) {
        if self
            .by_conversation
            .insert(conversation.to_owned(), token)
            .is_none()
        {
            self.order.push_back(conversation.to_owned());
            while self.order.len() > Self::CAP {
                if let Some(old) = self.order.pop_front() {
                    self.by_conversation.remove(&old);
                }
            }
        }
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.shown)
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// Lua that takes up to 64 transcripts last appended to longer than `ttl` ago out of a
/// tenant's usage (`sizes`, `appended`), and sets `now` (the server's clock, in seconds).
macro_rules! forget_expired_lua {
    () => {
        r"
local now = tonumber(redis.call('TIME')[1])
local gone = redis.call('ZRANGEBYSCORE', appended, '-inf', '(' .. (now - tonumber(ttl)), 'LIMIT', 0, 64)
for _, id in ipairs(gone) do
  redis.call('HINCRBY', sizes, '*', -tonumber(redis.call('HGET', sizes, id) or '0'))
  redis.call('HDEL', sizes, id)
  redis.call('ZREM', appended, id)
end
"
    };
}

/// Appends a batch unless the transcript already ends with its last line, and counts its
/// bytes (each line and its newline) in the tenant's usage; returns the bytes the tenant's
/// transcripts take, or -1 (and nothing written) when the conversation's fencing token is
/// newer than the writer's. The usage counts each transcript appended to within the
/// time-to-live (by the server's clock): those older leave it as they are found, a few at
/// a time. KEYS: transcript, token, the tenant's sizes (a hash: conversation → bytes, `*` →
/// their sum), their last appends (a sorted set). ARGV: ttl, the writer's token, the
/// conversation's id, the lines.
static APPEND: LazyLock<Script> = LazyLock::new(|| Script::new(APPEND_LUA));
const APPEND_LUA: &str = concat!(
    r"
if tonumber(redis.call('GET', KEYS[2]) or '0') > tonumber(ARGV[2]) then return -1 end
local added = 0
if #ARGV >= 4 and redis.call('LINDEX', KEYS[1], -1) ~= ARGV[#ARGV] then
  for i = 4, #ARGV do
    redis.call('RPUSH', KEYS[1], ARGV[i])
    added = added + #ARGV[i] + 1
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
local sizes, appended, ttl = KEYS[3], KEYS[4], ARGV[1]
",
    forget_expired_lua!(),
    r"
if added > 0 then redis.call('HINCRBY', sizes, ARGV[3], added) end
local total = redis.call('HINCRBY', sizes, '*', added)
redis.call('ZADD', appended, now, ARGV[3])
redis.call('EXPIRE', sizes, ttl)
redis.call('EXPIRE', appended, ttl)
return total
"
);

/// The bytes a tenant's transcripts take, as [`APPEND`] counts them. KEYS: the tenant's
/// sizes, their last appends. ARGV: ttl.
static USAGE: LazyLock<Script> = LazyLock::new(|| Script::new(USAGE_LUA));
const USAGE_LUA: &str = concat!(
    r"
local sizes, appended, ttl = KEYS[1], KEYS[2], ARGV[1]
",
    forget_expired_lua!(),
    r"
return tonumber(redis.call('HGET', sizes, '*') or '0')
"
);

/// Replaces a record, points its hash at it and forgets the hash it had; renews the
/// transcript's time-to-live; ranks the conversation in its tenant's recent ones (dropping
/// those older than the time-to-live); 0 (and nothing written) when the conversation's
/// fencing token is newer than the writer's. KEYS: record, index, transcript, token, recent.
/// ARGV: record, id, ttl, the index keys' prefix, the writer's token, the record's time
/// (Unix ms).
static SAVE: LazyLock<Script> = LazyLock::new(|| Script::new(SAVE_LUA));
const SAVE_LUA: &str = r"
if tonumber(redis.call('GET', KEYS[4]) or '0') > tonumber(ARGV[5]) then return 0 end
local old = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[3])
if old then
  local ok, before = pcall(cjson.decode, old)
  if ok and type(before) == 'table' and type(before['hash']) == 'string' then
    local stale = ARGV[4] .. before['hash']
    if stale ~= KEYS[2] and redis.call('GET', stale) == ARGV[2] then
      redis.call('DEL', stale)
    end
  end
end
redis.call('EXPIRE', KEYS[4], ARGV[3])
redis.call('ZADD', KEYS[5], ARGV[6], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. (tonumber(ARGV[6]) - tonumber(ARGV[3]) * 1000))
redis.call('EXPIRE', KEYS[5], ARGV[3])
return 1
";

/// The record a history's hash names, in one round trip: the conversation's id and its
/// record, or nothing. KEYS: the hash's index key. ARGV: the tenant's conversation keys'
/// prefix (the record's key is the prefix, the id and `:r`, in the same slot).
static FIND: LazyLock<Script> = LazyLock::new(|| Script::new(FIND_LUA));
const FIND_LUA: &str = r"
local id = redis.call('GET', KEYS[1])
if not id then return false end
local record = redis.call('GET', ARGV[1] .. id .. ':r')
if not record then return false end
return {id, record}
";

/// A transcript, with the conversation's next fencing token taken when there is one.
/// KEYS: transcript, token. ARGV: ttl. Returns `{token, lines}` (`{0, {}}`: no transcript).
static LOAD: LazyLock<Script> = LazyLock::new(|| Script::new(LOAD_LUA));
const LOAD_LUA: &str = r"
local lines = redis.call('LRANGE', KEYS[1], 0, -1)
if #lines == 0 then return {0, lines} end
local token = redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return {token, lines}
";

/// A Redis error as the store's I/O error, naming the server (without its password).
fn failed(shown: &str, error: redis::RedisError) -> io::Error {
    io::Error::other(format!("the Redis session store at {shown}: {error}"))
}

/// `url` without the password it may carry: in its user information, or (`redis+unix://`) in
/// its query, whose values are hidden but for `db` and `protocol`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // Whatever comes before the last `@` may hold a password, even one that would have needed
    // escaping; only a user name plainly before it is shown.
    let plain = |user: &str| !user.is_empty() && !user.contains(['/', '?', '#', '&', '=']);
    let (credentials, place) = match rest.rsplit_once('@') {
        Some((credentials, place)) => match credentials.split_once(':') {
            Some((user, _)) if plain(user) => (format!("{user}:***@"), place),
            None if plain(credentials) => (format!("{credentials}@"), place),
            _ => ("***@".to_owned(), place),
        },
        None => (String::new(), rest),
    };
    let place = match place.split_once('?') {
        Some((path, query)) => {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name @ ("db" | "protocol"), value)) => format!("{name}={value}"),
                    Some((name, _)) => format!("{name}=***"),
                    None => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", pairs.join("&"))
        }
        None => place.to_owned(),
    };
    format!("{scheme}://{credentials}{place}")
}

impl RedisStore {
    /// Connects to the server at `url` and checks that it answers; the store forgets
    /// conversations left alone for `ttl`. Once connected, a lost connection is made again
    /// by itself; meanwhile calls fail within seconds.
    ///
    /// # Errors
    /// A URL that is no Redis URL, or a server that does not answer a `PING`.
    pub async fn connect(url: &str, ttl: Duration) -> io::Result<RedisStore> {
        let shown = redact(url);
        let client = redis::Client::open(url).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a Redis URL: {shown}: {e}"),
            )
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(3)))
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let redis = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| failed(&shown, e))?;
        let store = RedisStore {
            redis,
            shown,
            ttl: ttl.max(Duration::from_secs(1)),
            tokens: Arc::default(),
            named: Arc::default(),
        };
        let mut redis = store.redis.clone();
        let _: String = redis::cmd("PING")
            .query_async(&mut redis)
            .await
            .map_err(|e| store.failed(e))?;
        Ok(store)
    }

    /// The server's URL without its password.
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// `url` as logs and errors show it: without the password it may carry.
    pub fn redact(url: &str) -> String {
        redact(url)
    }

    fn failed(&self, error: redis::RedisError) -> io::Error {
        failed(&self.shown, error)
    }

    /// A connection to the server (for the cluster registry, [`crate::cluster`]).
    pub(crate) fn connection(&self) -> ConnectionManager {
        self.redis.clone()
    }

    /// The time-to-live of what the store keeps.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The fencing token this store holds for a conversation (0: it never resumed it).
    fn token(&self, base: &str) -> u64 {
        self.tokens.lock().expect("tokens lock").get(base)
    }

    /// The error of a write refused by the fencing token.
    fn superseded(key: &ConversationKey) -> io::Error {
        io::Error::other(Superseded {
            conversation: key.id.clone(),
        })
    }

    fn ttl_secs(&self) -> u64 {
        self.ttl.as_secs().max(1)
    }

    fn conversation(key: &ConversationKey) -> io::Result<String> {
        Ok(format!(
            "ccwire:{{{}}}:c:{}",
            component(&key.tenant)?,
            component(&key.id)?
        ))
    }

    fn index_prefix(tenant: &str) -> io::Result<String> {
        Ok(format!("ccwire:{{{}}}:h:", component(tenant)?))
    }

    /// A tenant's conversations by when each was last saved (a sorted set).
    fn recent(tenant: &str) -> io::Result<String> {
        Ok(format!("ccwire:{{{}}}:recent", component(tenant)?))
    }

    async fn peek_async(&self, key: &ConversationKey) -> io::Result<Option<Vec<String>>> {
        let mut redis = self.redis.clone();
        let lines: Vec<String> = redis
            .lrange(format!("{}:t", Self::conversation(key)?), 0, -1)
            .await
            .map_err(|e| self.failed(e))?;
        Ok((!lines.is_empty()).then_some(lines))
    }

    async fn list_async(
        &self,
        tenant: Option<&str>,
        limit: usize,
    ) -> io::Result<Vec<ConversationRecord>> {
        let mut redis = self.redis.clone();
        let tenants: Vec<String> = match tenant {
            Some(tenant) => vec![tenant.to_owned()],
            None => redis.smembers(TENANTS).await.map_err(|e| self.failed(e))?,
        };
        let Some(last) = limit.checked_sub(1) else {
            return Ok(Vec::new());
        };
        // The newest of each tenant's (in one round trip), then the newest of those.
        let tenants: Vec<&String> = tenants.iter().filter(|t| component(t).is_ok()).collect();
        if tenants.is_empty() {
            return Ok(Vec::new());
        }
        let mut newest = redis::pipe();
        for tenant in &tenants {
            newest.zrevrange_withscores(Self::recent(tenant)?, 0, last as isize);
        }
        let newest: Vec<Vec<(String, f64)>> = newest
            .query_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        let mut ranked: Vec<(f64, &String, String)> = Vec::new();
        for (tenant, theirs) in tenants.iter().zip(newest) {
            ranked.extend(theirs.into_iter().map(|(id, at)| (at, *tenant, id)));
        }
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        ranked.truncate(limit);
        let mut keys = Vec::with_capacity(ranked.len());
        for (_, tenant, id) in &ranked {
            let key = ConversationKey {
                tenant: (*tenant).to_owned(),
                id: id.clone(),
            };
            keys.push(format!("{}:r", Self::conversation(&key)?));
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut reads = redis::pipe();
        for key in &keys {
            reads.get(key);
        }
        let jsons: Vec<Option<String>> = reads
            .query_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        // (A record gone since it was ranked has expired: left out.)
        Ok(jsons
            .into_iter()
            .flatten()
            .filter_map(|json| serde_json::from_str(&json).ok())
            .collect())
    }

    fn response(tenant: &str, id: &str) -> io::Result<String> {
        Ok(format!(
            "ccwire:{{{}}}:s:{}",
            component(tenant)?,
            component(id)?
        ))
    }

    async fn append_async(&self, key: &ConversationKey, lines: Vec<String>) -> io::Result<u64> {
        let base = Self::conversation(key)?;
        let (sizes, appended) = Self::usage_keys(&key.tenant)?;
        let mut call = APPEND.key(format!("{base}:t"));
        call.key(format!("{base}:o"))
            .key(sizes)
            .key(appended)
            .arg(self.ttl_secs())
            .arg(self.token(&base))
            .arg(&key.id);
        for line in &lines {
            call.arg(line);
        }
        let mut redis = self.redis.clone();
        let total: i64 = call
            .invoke_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        u64::try_from(total).map_err(|_| Self::superseded(key))
    }

    /// The keys of a tenant's usage: its transcripts' sizes, and when each was last appended to.
    fn usage_keys(tenant: &str) -> io::Result<(String, String)> {
        let base = format!("ccwire:{{{}}}:u", component(tenant)?);
        Ok((format!("{base}:b"), format!("{base}:at")))
    }

    async fn usage_async(&self, tenant: &str) -> io::Result<u64> {
        let (sizes, appended) = Self::usage_keys(tenant)?;
        let mut redis = self.redis.clone();
        let total: i64 = USAGE
            .key(sizes)
            .key(appended)
            .arg(self.ttl_secs())
            .invoke_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        Ok(total.max(0).unsigned_abs())
    }

    async fn save_async(&self, record: &ConversationRecord) -> io::Result<()> {
        let base = Self::conversation(&record.key)?;
        let prefix = Self::index_prefix(&record.key.tenant)?;
        let index = format!("{prefix}{}", component(&record.hash)?);
        let json = serde_json::to_string(record).map_err(io::Error::other)?;
        let mut redis = self.redis.clone();
        let written: i64 = SAVE
            .key(format!("{base}:r"))
            .key(index)
            .key(format!("{base}:t"))
            .key(format!("{base}:o"))
            .key(Self::recent(&record.key.tenant)?)
            .arg(json)
            .arg(&record.key.id)
            .arg(self.ttl_secs())
            .arg(prefix)
            .arg(self.token(&base))
            .arg(record.saved_ms)
            .invoke_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        if written == 0 {
            return Err(Self::superseded(&record.key));
        }
        let tenant = &record.key.tenant;
        if !self.named.lock().expect("named lock").contains(tenant) {
            let _: i64 = redis
                .sadd(TENANTS, tenant)
                .await
                .map_err(|e| self.failed(e))?;
            self.named
                .lock()
                .expect("named lock")
                .insert(tenant.clone());
        }
        Ok(())
    }

    async fn find_async(&self, tenant: &str, hash: &str) -> io::Result<Option<ConversationRecord>> {
        let index = format!("{}{}", Self::index_prefix(tenant)?, component(hash)?);
        let prefix = format!("ccwire:{{{}}}:c:", component(tenant)?);
        let mut redis = self.redis.clone();
        let found: Option<(String, String)> = FIND
            .key(index)
            .arg(prefix)
            .invoke_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        let Some((id, json)) = found else {
            return Ok(None);
        };
        let key = ConversationKey {
            tenant: tenant.to_owned(),
            id,
        };
        let record: ConversationRecord = serde_json::from_str(&json)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok((record.hash == hash && record.key == key).then_some(record))
    }

    async fn load_async(&self, key: &ConversationKey) -> io::Result<Option<Vec<String>>> {
        let base = Self::conversation(key)?;
        let mut redis = self.redis.clone();
        let (token, lines): (u64, Vec<String>) = LOAD
            .key(format!("{base}:t"))
            .key(format!("{base}:o"))
            .arg(self.ttl_secs())
            .invoke_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        if lines.is_empty() {
            return Ok(None);
        }
        self.tokens.lock().expect("tokens lock").set(&base, token);
        Ok(Some(lines))
    }
}

impl ConversationStore for RedisStore {
    fn append<'a>(
        &'a self,
        key: &'a ConversationKey,
        lines: Vec<String>,
    ) -> BoxFuture<'a, io::Result<u64>> {
        Box::pin(self.append_async(key, lines))
    }

    fn usage<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, io::Result<u64>> {
        Box::pin(self.usage_async(tenant))
    }

    fn save<'a>(&'a self, record: &'a ConversationRecord) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(self.save_async(record))
    }

    fn peek<'a>(
        &'a self,
        key: &'a ConversationKey,
    ) -> BoxFuture<'a, io::Result<Option<Vec<String>>>> {
        Box::pin(self.peek_async(key))
    }

    fn list<'a>(
        &'a self,
        tenant: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, io::Result<Vec<ConversationRecord>>> {
        Box::pin(self.list_async(tenant, limit))
    }

    fn find<'a>(
        &'a self,
        tenant: &'a str,
        hash: &'a str,
    ) -> BoxFuture<'a, io::Result<Option<ConversationRecord>>> {
        Box::pin(self.find_async(tenant, hash))
    }

    fn load<'a>(
        &'a self,
        key: &'a ConversationKey,
    ) -> BoxFuture<'a, io::Result<Option<Vec<String>>>> {
        Box::pin(self.load_async(key))
    }

    fn save_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        response: String,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let key = Self::response(tenant, id)?;
            let mut redis = self.redis.clone();
            let () = redis
                .set_ex(key, response, self.ttl_secs())
                .await
                .map_err(|e| self.failed(e))?;
            Ok(())
        })
    }

    fn load_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, io::Result<Option<String>>> {
        Box::pin(async move {
            let key = Self::response(tenant, id)?;
            let mut redis = self.redis.clone();
            redis.get(key).await.map_err(|e| self.failed(e))
        })
    }

    fn save_managed<'a>(
        &'a self,
        tenant: &'a str,
        kind: &'a str,
        id: &'a str,
        json: Option<String>,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let key = format!("ccwire:{{{}}}:m", component(tenant)?);
            let field = format!("{}:{}", component(kind)?, component(id)?);
            let mut redis = self.redis.clone();
            let () = match json {
                Some(json) => redis.hset(key, field, json).await,
                None => redis.hdel(key, field).await,
            }
            .map_err(|e| self.failed(e))?;
            Ok(())
        })
    }

    fn load_managed<'a>(
        &'a self,
        tenant: &'a str,
    ) -> BoxFuture<'a, io::Result<Vec<(String, String)>>> {
        Box::pin(async move {
            let key = format!("ccwire:{{{}}}:m", component(tenant)?);
            let mut redis = self.redis.clone();
            let all: Vec<(String, String)> =
                redis.hgetall(key).await.map_err(|e| self.failed(e))?;
            Ok(all
                .into_iter()
                .filter_map(|(field, json)| {
                    field
                        .split_once(':')
                        .map(|(kind, _)| (kind.to_owned(), json))
                })
                .collect())
        })
    }

    fn add_usage<'a>(
        &'a self,
        day: &'a str,
        tenant: &'a str,
        model: &'a str,
        tally: Tally,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(self.add_usage_async(day, tenant, model, tally))
    }

    fn read_usage<'a>(
        &'a self,
        from: &'a str,
        to: &'a str,
        tenant: Option<&'a str>,
    ) -> BoxFuture<'a, io::Result<Vec<UsageRow>>> {
        Box::pin(self.read_usage_async(from, to, tenant))
    }

    fn keep_window<'a>(&'a self, window: &'a Window) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(self.keep_window_async(window))
    }

    fn windows(&self) -> BoxFuture<'_, io::Result<Vec<Window>>> {
        Box::pin(self.windows_async())
    }

    fn save_key<'a>(&'a self, id: &'a str, json: Option<String>) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(self.save_key_async(id, json))
    }

    fn load_keys(&self) -> BoxFuture<'_, io::Result<Vec<String>>> {
        Box::pin(self.load_keys_async())
    }

    fn save_pool(&self, settings: String) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            let mut redis = self.redis.clone();
            let () = redis
                .set("ccwire:pool", settings)
                .await
                .map_err(|e| self.failed(e))?;
            Ok(())
        })
    }

    fn load_pool(&self) -> BoxFuture<'_, io::Result<Option<String>>> {
        Box::pin(async move {
            let mut redis = self.redis.clone();
            redis.get("ccwire:pool").await.map_err(|e| self.failed(e))
        })
    }

    fn sweep(&self, _budget: usize) -> BoxFuture<'_, io::Result<Swept>> {
        // Redis expires the keys itself.
        Box::pin(async {
            Ok(Swept {
                forgotten: 0,
                done: true,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_password_in_the_url_is_never_shown() {
        assert_eq!(
            redact("redis://user:secret@host:6379/2"),
            "redis://user:***@host:6379/2"
        );
        assert_eq!(redact("rediss://:secret@host"), "rediss://***@host");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact("redis://user@host"), "redis://user@host");
        assert_eq!(
            redact("redis://:p@ss:w@rd@host/0"),
            "redis://***@host/0",
            "an unescaped @ in the password"
        );
        assert_eq!(
            redact("redis+unix:///run/redis.sock?db=2&user=gw&pass=secret"),
            "redis+unix:///run/redis.sock?db=2&user=***&pass=***"
        );
        assert_eq!(
            redact("redis+unix:///run/redis.sock?%70ass=secret"),
            "redis+unix:///run/redis.sock?%70ass=***",
            "an escaped name"
        );
        assert_eq!(
            redact("redis+unix:///run/redis.sock?pass=a@b"),
            "redis+unix://***@b"
        );
    }
}
