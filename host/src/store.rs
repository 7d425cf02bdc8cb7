//! Session stores: where `ccwire serve` keeps conversations so they outlive their CLIs — each
//! CLI's session transcript as it grows, and each conversation's
//! [`ConversationRecord`] (the hash of the history that continues it, the calls it waits
//! for, whether a CLI runs it). A conversation with no live CLI (hibernated, expired, after a
//! restart) is resumed from here by a new CLI that reads its transcript (`--resume`), so the
//! model sees the same messages it would have seen from the first CLI.
//!
//! [`ConversationStore`] is the interface (asynchronous, keyed by tenant and conversation, with a
//! time-to-live); [`DirStore`] the embedded one, a directory on the gateway's machine;
//! [`RedisStore`] one in a Redis server, which several gateways can share.

use std::fmt::Debug;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ccwire_core::gateway::{ConversationKey, ConversationRecord};
use futures::future::BoxFuture;

mod redis;
pub use self::redis::RedisStore;

/// A write refused because another gateway has resumed the conversation since this one
/// began driving it (a shared store's fencing, [`RedisStore`]): the writer's CLI is stale
/// and must stop. Carried inside the [`io::Error`] a store call fails with
/// ([`is_superseded`]).
#[derive(Debug, thiserror::Error)]
#[error("conversation {conversation} has been resumed by another gateway; this one's writes to it are refused")]
pub struct Superseded {
    /// The conversation's id.
    pub conversation: String,
}

/// Whether a store call failed with [`Superseded`].
pub fn is_superseded(error: &io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.is::<Superseded>())
}

/// Where conversations are kept. Every call for one conversation comes after the calls made
/// before it have finished (the gateway runs them in order), so an implementation need not
/// order them itself. Keys and hashes are made of ASCII letters, digits and `-`.
pub trait ConversationStore: Debug + Send + Sync + 'static {
    /// Appends lines to a conversation's transcript (each a JSON object).
    fn append<'a>(
        &'a self,
        key: &'a ConversationKey,
        lines: Vec<String>,
    ) -> BoxFuture<'a, io::Result<()>>;

    /// Saves a conversation's record, replacing the one saved before, so that
    /// [`find`](Self::find) finds it by its hash (and no longer by the hash it had), once the
    /// transcript's lines appended before it are kept as durably as the record.
    fn save<'a>(&'a self, record: &'a ConversationRecord) -> BoxFuture<'a, io::Result<()>>;

    /// The record of `tenant`'s conversation whose history hashes to `hash`, if any.
    fn find<'a>(
        &'a self,
        tenant: &'a str,
        hash: &'a str,
    ) -> BoxFuture<'a, io::Result<Option<ConversationRecord>>>;

    /// A conversation's transcript, its lines in order (`None`: nothing was kept).
    fn load<'a>(
        &'a self,
        key: &'a ConversationKey,
    ) -> BoxFuture<'a, io::Result<Option<Vec<String>>>>;

    /// A conversation's transcript, read without taking the conversation over (the console
    /// shows it; [`load`](Self::load) is for a gateway that resumes it).
    fn peek<'a>(
        &'a self,
        key: &'a ConversationKey,
    ) -> BoxFuture<'a, io::Result<Option<Vec<String>>>>;

    /// The records of `tenant`'s conversations (`None`: every tenant's), saved most recently
    /// first, at most `limit`.
    fn list<'a>(
        &'a self,
        tenant: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, io::Result<Vec<ConversationRecord>>>;

    /// Keeps a response stored for `previous_response_id` (opaque JSON) under `tenant` and its
    /// id.
    fn save_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        response: String,
    ) -> BoxFuture<'a, io::Result<()>>;

    /// A response [`save_response`](Self::save_response) kept, if any.
    fn load_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, io::Result<Option<String>>>;

    /// Keeps a Managed Agents resource of `tenant` (opaque JSON) under its `kind` and `id`,
    /// replacing what was kept there; `None` forgets it. Kept until forgotten (no
    /// time-to-live).
    fn save_managed<'a>(
        &'a self,
        tenant: &'a str,
        kind: &'a str,
        id: &'a str,
        json: Option<String>,
    ) -> BoxFuture<'a, io::Result<()>>;

    /// Every Managed Agents resource [`save_managed`](Self::save_managed) kept for `tenant`:
    /// its kind and JSON.
    fn load_managed<'a>(
        &'a self,
        tenant: &'a str,
    ) -> BoxFuture<'a, io::Result<Vec<(String, String)>>>;

    /// Keeps the warm pool's settings (opaque JSON), replacing those kept before.
    fn save_pool(&self, settings: String) -> BoxFuture<'_, io::Result<()>>;

    /// The warm pool's settings kept last, if any.
    fn load_pool(&self) -> BoxFuture<'_, io::Result<Option<String>>>;

    /// Forgets the conversations not saved or appended to for longer than the store's
    /// time-to-live; returns how many. (A store whose backend expires keys itself does
    /// nothing.)
    fn sweep(&self) -> BoxFuture<'_, io::Result<usize>>;
}

/// The embedded session store: one directory per conversation under
/// `<root>/<tenant>/<conversation>/` (`transcript.jsonl`, appended; `record.json`, replaced
/// atomically), `<root>/<tenant>/index/<hash>` naming the conversation a history continues,
/// `<root>/<tenant>/responses/<id>.json` the responses stored for `previous_response_id`,
/// `<root>/<tenant>/managed/<kind>.<id>.json` the Managed Agents API's resources, and
/// `<root>/pool.json`, the warm pool's settings.
/// Crash-safe: a record is written to a temporary file, synced, then renamed over the old
/// one, after the transcript it points at is synced; a transcript's last line cut short by a
/// crash is dropped when it is read. Private to its owner (mode 0700 directories, 0600
/// files).
#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
    ttl: Duration,
}

/// A key, tenant or hash that is safe as one path component.
fn component(name: &str) -> io::Result<&str> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(name)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a store key: {name:?}"),
        ))
    }
}

impl DirStore {
    /// A store in `root` (made when first written to) that forgets conversations left alone
    /// for `ttl`.
    pub fn new(root: impl Into<PathBuf>, ttl: Duration) -> DirStore {
        DirStore {
            root: root.into(),
            ttl,
        }
    }

    /// Its directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn conversation_dir(&self, key: &ConversationKey) -> io::Result<PathBuf> {
        Ok(self
            .root
            .join(component(&key.tenant)?)
            .join(component(&key.id)?))
    }

    fn index_file(&self, tenant: &str, hash: &str) -> io::Result<PathBuf> {
        Ok(self
            .root
            .join(component(tenant)?)
            .join("index")
            .join(component(hash)?))
    }

    fn response_file(&self, tenant: &str, id: &str) -> io::Result<PathBuf> {
        Ok(self
            .root
            .join(component(tenant)?)
            .join("responses")
            .join(format!("{}.json", component(id)?)))
    }

    fn append_sync(&self, key: &ConversationKey, lines: &[String]) -> io::Result<()> {
        let dir = self.conversation_dir(key)?;
        private_dir(&dir)?;
        let mut text = String::new();
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        let path = dir.join("transcript.jsonl");
        // A line a crash cut short stays alone on its line: what follows starts on a new one.
        if !ends_with_newline(&path)? {
            text.insert(0, '\n');
        }
        let mut file = open_private(&path, true)?;
        file.write_all(text.as_bytes())
    }

    /// Sets a conversation's record aside (`record.json.broken`, its index entry removed) and
    /// says why, once: the conversation is then as if it were not stored, and its next request
    /// is served from the history it carries.
    fn set_aside(&self, dir: &Path, index: &Path, why: &str) {
        let _ = std::fs::remove_file(index);
        match std::fs::rename(dir.join("record.json"), dir.join("record.json.broken")) {
            Ok(()) => tracing::warn!(
                conversation = %dir.display(),
                "a stored conversation cannot be resumed ({why}): its record is set aside as \
                 record.json.broken, and its next request is served from the history it carries"
            ),
            Err(error) => tracing::warn!(
                conversation = %dir.display(),
                %error,
                "a stored conversation cannot be resumed ({why}), nor its record set aside"
            ),
        }
    }

    fn save_sync(&self, record: &ConversationRecord) -> io::Result<()> {
        let dir = self.conversation_dir(&record.key)?;
        private_dir(&dir)?;
        let transcript = dir.join("transcript.jsonl");
        if transcript.exists() {
            std::fs::File::open(&transcript)?.sync_data()?;
        }
        let record_file = dir.join("record.json");
        let before: Option<ConversationRecord> = std::fs::read(&record_file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        let json = serde_json::to_vec(record).map_err(io::Error::other)?;
        write_atomically(&record_file, &json)?;
        let index = self.index_file(&record.key.tenant, &record.hash)?;
        if let Some(parent) = index.parent() {
            private_dir(parent)?;
        }
        write_atomically(&index, record.key.id.as_bytes())?;
        if let Some(before) = before.filter(|b| b.hash != record.hash) {
            let _ = std::fs::remove_file(self.index_file(&before.key.tenant, &before.hash)?);
        }
        Ok(())
    }

    fn find_sync(&self, tenant: &str, hash: &str) -> io::Result<Option<ConversationRecord>> {
        let id = match std::fs::read_to_string(self.index_file(tenant, hash)?) {
            Ok(id) => id,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let key = ConversationKey {
            tenant: tenant.to_owned(),
            id: id.trim().to_owned(),
        };
        let dir = self.conversation_dir(&key)?;
        let bytes = match std::fs::read(dir.join("record.json")) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let index = self.index_file(tenant, hash)?;
        let record: ConversationRecord = match serde_json::from_slice(&bytes) {
            Ok(record) => record,
            Err(e) => {
                self.set_aside(&dir, &index, &format!("its record does not read: {e}"));
                return Ok(None);
            }
        };
        if record.hash != hash || record.key != key {
            return Ok(None);
        }
        // A record is worth its transcript: without a whole line of it, nothing resumes.
        if !has_a_line(&dir.join("transcript.jsonl"))? {
            self.set_aside(&dir, &index, "its transcript is missing");
            return Ok(None);
        }
        Ok(Some(record))
    }

    fn load_sync(&self, key: &ConversationKey) -> io::Result<Option<Vec<String>>> {
        let text =
            match std::fs::read_to_string(self.conversation_dir(key)?.join("transcript.jsonl")) {
                Ok(text) => text,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
        // Only whole lines: one a crash cut short has no newline.
        let whole = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        // A line cut short mid-file (a crash before the line after it) is left out.
        let lines: Vec<String> = whole
            .split('\n')
            .filter(|l| serde_json::from_str::<serde::de::IgnoredAny>(l).is_ok())
            .map(str::to_owned)
            .collect();
        Ok((!lines.is_empty()).then_some(lines))
    }

    fn list_sync(&self, tenant: Option<&str>, limit: usize) -> io::Result<Vec<ConversationRecord>> {
        let tenants: Vec<PathBuf> = match tenant {
            Some(tenant) => vec![self.root.join(component(tenant)?)],
            None => match std::fs::read_dir(&self.root) {
                Ok(dir) => dir.flatten().map(|e| e.path()).collect(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(e),
            },
        };
        // Every record file with when it was written, newest first; only those listed read.
        let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
        for tenant in tenants {
            let Ok(entries) = std::fs::read_dir(&tenant) else {
                continue;
            };
            for entry in entries.flatten() {
                let record = entry.path().join("record.json");
                if let Ok(modified) = std::fs::metadata(&record).and_then(|m| m.modified()) {
                    found.push((modified, record));
                }
            }
        }
        found.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        let mut records: Vec<ConversationRecord> = (found.into_iter().take(limit))
            .filter_map(|(_, path)| std::fs::read(path).ok())
            .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
            .collect();
        records.sort_by_key(|r| std::cmp::Reverse(r.saved_ms));
        Ok(records)
    }

    fn sweep_sync(&self) -> io::Result<usize> {
        let now = SystemTime::now();
        let old = |path: &Path| {
            std::fs::metadata(path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > self.ttl)
        };
        let mut swept = 0;
        let tenants = match std::fs::read_dir(&self.root) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        for tenant in tenants.flatten() {
            if !tenant.path().is_dir() {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(tenant.path()) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if entry.file_name() == "index" || entry.file_name() == "managed" {
                    continue;
                }
                if entry.file_name() == "responses" {
                    for response in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                        if old(&response.path()) {
                            std::fs::remove_file(response.path())?;
                        }
                    }
                    continue;
                }
                let touched = [path.join("record.json"), path.join("transcript.jsonl")];
                if touched.iter().all(|p| !p.exists() || old(p)) {
                    std::fs::remove_dir_all(&path)?;
                    swept += 1;
                }
            }
            // Index entries of conversations gone.
            if let Ok(index) = std::fs::read_dir(tenant.path().join("index")) {
                for entry in index.flatten() {
                    let id = std::fs::read_to_string(entry.path()).unwrap_or_default();
                    if id.trim().is_empty() || !tenant.path().join(id.trim()).exists() {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
            }
        }
        Ok(swept)
    }
}

/// Runs blocking file work off the runtime's threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)?
}

impl ConversationStore for DirStore {
    fn append<'a>(
        &'a self,
        key: &'a ConversationKey,
        lines: Vec<String>,
    ) -> BoxFuture<'a, io::Result<()>> {
        let (store, key) = (self.clone(), key.clone());
        Box::pin(blocking(move || store.append_sync(&key, &lines)))
    }

    fn save<'a>(&'a self, record: &'a ConversationRecord) -> BoxFuture<'a, io::Result<()>> {
        let (store, record) = (self.clone(), record.clone());
        Box::pin(blocking(move || store.save_sync(&record)))
    }

    fn find<'a>(
        &'a self,
        tenant: &'a str,
        hash: &'a str,
    ) -> BoxFuture<'a, io::Result<Option<ConversationRecord>>> {
        let (store, tenant, hash) = (self.clone(), tenant.to_owned(), hash.to_owned());
        Box::pin(blocking(move || store.find_sync(&tenant, &hash)))
    }

    fn load<'a>(
        &'a self,
        key: &'a ConversationKey,
    ) -> BoxFuture<'a, io::Result<Option<Vec<String>>>> {
        let (store, key) = (self.clone(), key.clone());
        Box::pin(blocking(move || store.load_sync(&key)))
    }

    fn peek<'a>(
        &'a self,
        key: &'a ConversationKey,
    ) -> BoxFuture<'a, io::Result<Option<Vec<String>>>> {
        self.load(key)
    }

    fn list<'a>(
        &'a self,
        tenant: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, io::Result<Vec<ConversationRecord>>> {
        let store = self.clone();
        let tenant = tenant.map(str::to_owned);
        Box::pin(blocking(move || store.list_sync(tenant.as_deref(), limit)))
    }

    fn save_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        response: String,
    ) -> BoxFuture<'a, io::Result<()>> {
        let file = self.response_file(tenant, id);
        Box::pin(blocking(move || {
            let file = file?;
            if let Some(dir) = file.parent() {
                private_dir(dir)?;
            }
            write_atomically(&file, response.as_bytes())
        }))
    }

    fn load_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, io::Result<Option<String>>> {
        let file = self.response_file(tenant, id);
        Box::pin(blocking(move || match std::fs::read_to_string(file?) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }))
    }

    fn save_managed<'a>(
        &'a self,
        tenant: &'a str,
        kind: &'a str,
        id: &'a str,
        json: Option<String>,
    ) -> BoxFuture<'a, io::Result<()>> {
        let file = (|| {
            Ok::<_, io::Error>(
                self.root
                    .join(component(tenant)?)
                    .join("managed")
                    .join(format!("{}.{}.json", component(kind)?, component(id)?)),
            )
        })();
        Box::pin(blocking(move || {
            let file = file?;
            match json {
                Some(json) => {
                    if let Some(dir) = file.parent() {
                        private_dir(dir)?;
                    }
                    write_atomically(&file, json.as_bytes())
                }
                None => match std::fs::remove_file(&file) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                },
            }
        }))
    }

    fn load_managed<'a>(
        &'a self,
        tenant: &'a str,
    ) -> BoxFuture<'a, io::Result<Vec<(String, String)>>> {
        let dir = component(tenant).map(|t| self.root.join(t).join("managed"));
        Box::pin(blocking(move || {
            let entries = match std::fs::read_dir(dir?) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(e),
            };
            let mut out = Vec::new();
            for entry in entries {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                // `<kind>.<id>.json`; a temporary file of a write cut short is not one.
                let Some((kind, _)) = name
                    .strip_suffix(".json")
                    .and_then(|stem| stem.split_once('.'))
                else {
                    continue;
                };
                out.push((kind.to_owned(), std::fs::read_to_string(entry.path())?));
            }
            Ok(out)
        }))
    }

    fn save_pool(&self, settings: String) -> BoxFuture<'_, io::Result<()>> {
        let root = self.root.clone();
        Box::pin(blocking(move || {
            private_dir(&root)?;
            write_atomically(&root.join("pool.json"), settings.as_bytes())
        }))
    }

    fn load_pool(&self) -> BoxFuture<'_, io::Result<Option<String>>> {
        let file = self.root.join("pool.json");
        Box::pin(blocking(move || match std::fs::read_to_string(file) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }))
    }

    fn sweep(&self) -> BoxFuture<'_, io::Result<usize>> {
        let store = self.clone();
        Box::pin(blocking(move || store.sweep_sync()))
    }
}

/// Makes `dir` and its missing parents, owner-only.
pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Whether the file at `path` is empty, absent, or ends with a newline.
fn ends_with_newline(path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8];
    file.read_exact_at(&mut last, len - 1)?;
    Ok(last[0] == b'\n')
}

/// Whether the file at `path` holds a whole line.
fn has_a_line(path: &Path) -> io::Result<bool> {
    use std::io::BufRead;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut first = Vec::new();
    io::BufReader::new(file).read_until(b'\n', &mut first)?;
    Ok(first.ends_with(b"\n"))
}

/// Opens a file owner-only, to append to or to write anew.
fn open_private(path: &Path, append: bool) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).mode(0o600);
    if append {
        options.append(true);
    } else {
        options.write(true).truncate(true);
    }
    options.open(path)
}

/// Replaces `path` with `bytes` all at once: a synced temporary file renamed over it, then the
/// directory synced.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut file = open_private(&tmp, false)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Writes a stored transcript where a resuming CLI reads it: `path`, which must be a
/// `<id>.jsonl` file inside `home` when a tenant home is given (the CLI's own transcript of that
/// conversation). Replaces what is there. Inside a tenant's home, which its tools write,
/// nothing on the way is followed if it is a link ([`crate::beneath`]).
pub(crate) fn materialize(
    lines: &[String],
    path: &Path,
    id: &str,
    home: Option<&Path>,
) -> io::Result<()> {
    let named = path.file_name().and_then(|n| n.to_str()) == Some(&format!("{id}.jsonl"));
    let inside = home.is_none_or(|home| {
        path.is_absolute()
            && path.starts_with(home)
            && path
                .components()
                .all(|c| !matches!(c, std::path::Component::ParentDir))
    });
    if !named || !inside {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a transcript of conversation {id}: {}", path.display()),
        ));
    }
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    match home {
        // The tenant's tools write its home: no link there is followed, at any level.
        // (The home itself is the gateway's to make: its parent is no tenant's.)
        Some(home) => private_dir(home)
            .and_then(|()| crate::beneath::write_below(home, path, text.as_bytes())),
        None => {
            if let Some(parent) = path.parent() {
                private_dir(parent)?;
            }
            write_atomically(path, text.as_bytes())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccwire_core::gateway::RecordState;

    fn record(id: &str, hash: &str) -> ConversationRecord {
        ConversationRecord {
            key: ConversationKey {
                tenant: "local".into(),
                id: id.into(),
            },
            hash: hash.into(),
            pending: Vec::new(),
            transcript: format!("/x/{id}.jsonl"),
            state: RecordState::Live,
            saved_ms: 1,
            model: None,
        }
    }

    #[tokio::test]
    async fn a_record_is_found_by_its_latest_hash_only_and_its_transcript_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path().join("store"), Duration::from_secs(3600));
        let a = record("c-1", "h1");
        assert_eq!(store.find("local", "h1").await.unwrap(), None);
        store
            .append(&a.key, vec![r#"{"type":"user"}"#.into()])
            .await
            .unwrap();
        store.save(&a).await.unwrap();
        assert_eq!(store.find("local", "h1").await.unwrap(), Some(a.clone()));
        assert_eq!(store.find("other", "h1").await.unwrap(), None);
        store
            .append(&a.key, vec![r#"{"type":"assistant"}"#.into()])
            .await
            .unwrap();
        let b = record("c-1", "h2");
        store.save(&b).await.unwrap();
        assert_eq!(store.find("local", "h1").await.unwrap(), None, "moved on");
        assert_eq!(store.find("local", "h2").await.unwrap(), Some(b.clone()));
        assert_eq!(
            store.load(&b.key).await.unwrap(),
            Some(vec![
                r#"{"type":"user"}"#.to_owned(),
                r#"{"type":"assistant"}"#.to_owned()
            ])
        );
        // A line a crash cut short is not read.
        let file = dir.path().join("store/local/c-1/transcript.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(br#"{"type":"us"#).unwrap();
        assert_eq!(store.load(&b.key).await.unwrap().unwrap().len(), 2);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "owner-only");
    }

    #[tokio::test]
    async fn a_record_that_cannot_resume_is_set_aside_and_a_torn_line_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path().join("store"), Duration::from_secs(3600));
        let conversation = |id: &str| dir.path().join("store/local").join(id);
        // A record that does not read: not found (no error to retry), set aside, once.
        let a = record("c-1", "h1");
        store.append(&a.key, vec!["{}".into()]).await.unwrap();
        store.save(&a).await.unwrap();
        std::fs::write(conversation("c-1").join("record.json"), b"{\"key\": tr").unwrap();
        assert_eq!(store.find("local", "h1").await.unwrap(), None);
        assert!(conversation("c-1").join("record.json.broken").exists());
        assert!(!dir.path().join("store/local/index/h1").exists());
        assert_eq!(store.find("local", "h1").await.unwrap(), None);
        // A record whose transcript is gone: the same.
        let b = record("c-2", "h2");
        store.append(&b.key, vec!["{}".into()]).await.unwrap();
        store.save(&b).await.unwrap();
        std::fs::remove_file(conversation("c-2").join("transcript.jsonl")).unwrap();
        assert_eq!(store.find("local", "h2").await.unwrap(), None);
        assert!(conversation("c-2").join("record.json.broken").exists());
        // A line a crash cut short: the next append starts on a line of its own, and the
        // torn line is left out of what is read back.
        let c = record("c-3", "h3");
        store
            .append(&c.key, vec![r#"{"n":1}"#.into()])
            .await
            .unwrap();
        let file = conversation("c-3").join("transcript.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(br#"{"n":"#).unwrap();
        store
            .append(&c.key, vec![r#"{"n":3}"#.into()])
            .await
            .unwrap();
        store.save(&c).await.unwrap();
        assert_eq!(store.find("local", "h3").await.unwrap(), Some(c.clone()));
        assert_eq!(
            store.load(&c.key).await.unwrap(),
            Some(vec![r#"{"n":1}"#.to_owned(), r#"{"n":3}"#.to_owned()])
        );
    }

    #[tokio::test]
    async fn keys_that_are_not_names_are_refused_and_old_conversations_swept() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path(), Duration::ZERO);
        let mut bad = record("../../etc", "h");
        assert!(store.save(&bad).await.is_err());
        bad.key.id = "ok".into();
        bad.key.tenant = "a/b".into();
        assert!(store.save(&bad).await.is_err());
        assert!(store.find("local", "../x").await.is_err());
        store.save(&record("c-2", "h3")).await.unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(store.sweep().await.unwrap(), 1);
        assert_eq!(store.find("local", "h3").await.unwrap(), None);
        assert!(!dir.path().join("local/index/h3").exists());
    }

    #[test]
    fn a_transcript_is_written_only_as_the_conversation_s_own_file_in_the_home() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let path = home.join(".claude/projects/-w/c-1.jsonl");
        let lines = vec![r#"{"a":1}"#.to_owned()];
        materialize(&lines, &path, "c-1", Some(&home)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
        let outside = dir.path().join("elsewhere/c-1.jsonl");
        assert!(materialize(&lines, &outside, "c-1", Some(&home)).is_err());
        let sneaky = home.join("../elsewhere/c-1.jsonl");
        assert!(materialize(&lines, &sneaky, "c-1", Some(&home)).is_err());
        assert!(materialize(&lines, &path, "c-2", Some(&home)).is_err());
        // A link the tenant put in its home, at any level, is not followed.
        std::fs::remove_dir_all(home.join(".claude/projects")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), home.join(".claude/projects"))
            .unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere/-w")).unwrap();
        assert!(materialize(&lines, &path, "c-1", Some(&home)).is_err());
        assert!(!dir.path().join("elsewhere/-w/c-1.jsonl").exists());
    }
}
