//! [`DirStore`]: the session store in a directory on the gateway's machine.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ccwire_core::gateway::usage::{Tally, UsageRow, Window};
use ccwire_core::gateway::{ConversationKey, ConversationRecord};
use futures::future::BoxFuture;

use super::{component, open_private, private_dir, write_atomically, ConversationStore, Swept};

mod keys;
mod usage;

use keys::{read_json_files, save_or_remove};

/// The embedded session store: one directory per conversation under
/// `<root>/<tenant>/<conversation>/` (`transcript.jsonl`, appended; `record.json`, replaced
/// atomically), `<root>/<tenant>/index/<hash>` naming the conversation a history continues,
/// `<root>/<tenant>/responses/<id>.json` the responses stored for `previous_response_id`,
/// `<root>/<tenant>/managed/<kind>.<id>.json` the Managed Agents API's resources,
/// `<root>/usage/` what keys used and the rate-limit windows, `<root>/keys/` the tenant keys
/// made over `/v1/keys`, and `<root>/pool.json`, the warm pool's settings.
/// Crash-safe: a record is written to a temporary file, synced, then renamed over the old
/// one, after the transcript it points at is synced; a transcript's last line cut short by a
/// crash is dropped when it is read. Private to its owner (mode 0700 directories, 0600
/// files).
#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
    ttl: Duration,
    /// The bytes each tenant's transcripts take, counted at its first append.
    usage: Arc<Mutex<HashMap<String, u64>>>,
    /// Where the sweep is.
    sweeping: Arc<Mutex<Sweeping>>,
    /// The usage files.
    usage_files: Arc<usage::UsageFiles>,
}

/// The sweep's place: what it has still to look at in its current pass.
#[derive(Debug, Default)]
struct Sweeping {
    /// Whether a pass is under way.
    started: bool,
    /// The tenants' directories not looked into yet.
    tenants: Vec<PathBuf>,
    /// What is still to look at in the current tenant's directory, the last first.
    items: Vec<SweepItem>,
}

/// One thing a step of the sweep looks at.
#[derive(Debug)]
enum SweepItem {
    /// A conversation's directory: forgotten when its record and transcript are old.
    Conversation { tenant: String, dir: PathBuf },
    /// A tenant's stored responses: each looked at in turn.
    Responses(PathBuf),
    /// A stored response: forgotten when old.
    Response(PathBuf),
    /// A tenant's index: each entry looked at in turn (after its conversations).
    Index(PathBuf),
    /// An index entry: forgotten when its conversation is gone.
    IndexEntry { tenant: PathBuf, entry: PathBuf },
}

impl DirStore {
    /// A store in `root` (made when first written to) that forgets conversations left alone
    /// for `ttl`.
    pub fn new(root: impl Into<PathBuf>, ttl: Duration) -> DirStore {
        let root = root.into();
        DirStore {
            usage_files: Arc::new(usage::UsageFiles::new(&root)),
            root,
            ttl,
            usage: Arc::default(),
            sweeping: Arc::default(),
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

    fn append_sync(&self, key: &ConversationKey, lines: &[String]) -> io::Result<u64> {
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
        file.write_all(text.as_bytes())?;
        self.usage_sync(&key.tenant, text.len() as u64)
    }

    /// The bytes `tenant`'s transcripts take, with `added` more: counted the first time,
    /// then kept up to date by appends and the sweep.
    fn usage_sync(&self, tenant: &str, added: u64) -> io::Result<u64> {
        let mut usage = self.usage.lock().expect("usage lock");
        if let Some(used) = usage.get_mut(tenant) {
            *used += added;
            return Ok(*used);
        }
        let used = self.count(tenant)?;
        usage.insert(tenant.to_owned(), used);
        Ok(used)
    }

    /// The bytes `tenant`'s transcripts take, counted.
    fn count(&self, tenant: &str) -> io::Result<u64> {
        let mut used = 0;
        let entries = match std::fs::read_dir(self.root.join(component(tenant)?)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        for entry in entries.flatten() {
            if let Ok(meta) = std::fs::symlink_metadata(entry.path().join("transcript.jsonl")) {
                used += meta.len();
            }
        }
        Ok(used)
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

    /// One step of the sweep: looks at no more than `budget` conversations, stored responses
    /// and index entries, going on from where the step before it stopped.
    fn sweep_sync(&self, budget: usize) -> io::Result<Swept> {
        let now = SystemTime::now();
        let old = |path: &Path| {
            std::fs::symlink_metadata(path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > self.ttl)
        };
        let mut sweeping = self.sweeping.lock().expect("sweep lock");
        if !sweeping.started {
            sweeping.started = true;
            sweeping.tenants = match std::fs::read_dir(&self.root) {
                Ok(dir) => dir.flatten().map(|e| e.path()).collect(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(e),
            };
        }
        let mut swept = Swept::default();
        let mut looked = 0;
        while looked < budget {
            let Some(item) = sweeping.items.pop() else {
                let Some(tenant) = sweeping.tenants.pop() else {
                    *sweeping = Sweeping::default();
                    swept.done = true;
                    return Ok(swept);
                };
                sweeping.items = tenant_items(&tenant);
                continue;
            };
            looked += 1;
            match item {
                SweepItem::Conversation { tenant, dir } => {
                    let transcript = dir.join("transcript.jsonl");
                    let touched = [dir.join("record.json"), transcript.clone()];
                    if touched.iter().all(|p| !p.exists() || old(p)) {
                        let size = std::fs::symlink_metadata(&transcript).map_or(0, |m| m.len());
                        std::fs::remove_dir_all(&dir)?;
                        swept.forgotten += 1;
                        let mut usage = self.usage.lock().expect("usage lock");
                        if let Some(used) = usage.get_mut(&tenant) {
                            *used = used.saturating_sub(size);
                        }
                    }
                }
                SweepItem::Responses(dir) => {
                    let responses = std::fs::read_dir(&dir).into_iter().flatten().flatten();
                    sweeping
                        .items
                        .extend(responses.map(|r| SweepItem::Response(r.path())));
                }
                SweepItem::Response(path) => {
                    if old(&path) {
                        std::fs::remove_file(path)?;
                    }
                }
                SweepItem::Index(tenant) => {
                    let entries = std::fs::read_dir(tenant.join("index"))
                        .into_iter()
                        .flatten();
                    sweeping
                        .items
                        .extend(entries.flatten().map(|e| SweepItem::IndexEntry {
                            tenant: tenant.clone(),
                            entry: e.path(),
                        }));
                }
                SweepItem::IndexEntry { tenant, entry } => {
                    // An index entry of a conversation gone.
                    let id = std::fs::read_to_string(&entry).unwrap_or_default();
                    let id = id.trim();
                    if component(id).is_err() || !tenant.join(id).exists() {
                        let _ = std::fs::remove_file(entry);
                    }
                }
            }
        }
        Ok(swept)
    }
}

/// What the sweep looks at in a tenant's directory (one listing of it, names only): its
/// conversations and stored responses, then its index.
fn tenant_items(tenant: &Path) -> Vec<SweepItem> {
    let mut items = vec![SweepItem::Index(tenant.to_owned())];
    let name = tenant.file_name().map(|n| n.to_string_lossy().into_owned());
    let (Some(name), Ok(entries)) = (name, std::fs::read_dir(tenant)) else {
        return items;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_name().to_str() {
            Some("index" | "managed") => {}
            Some("responses") => items.push(SweepItem::Responses(path)),
            _ => items.push(SweepItem::Conversation {
                tenant: name.clone(),
                dir: path,
            }),
        }
    }
    items
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
    ) -> BoxFuture<'a, io::Result<u64>> {
        let (store, key) = (self.clone(), key.clone());
        Box::pin(blocking(move || store.append_sync(&key, &lines)))
    }

    fn usage<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, io::Result<u64>> {
        let (store, tenant) = (self.clone(), tenant.to_owned());
        Box::pin(blocking(move || store.usage_sync(&tenant, 0)))
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
        Box::pin(blocking(move || save_or_remove(&file?, json)))
    }

    fn load_managed<'a>(
        &'a self,
        tenant: &'a str,
    ) -> BoxFuture<'a, io::Result<Vec<(String, String)>>> {
        let dir = component(tenant).map(|t| self.root.join(t).join("managed"));
        Box::pin(blocking(move || {
            // `<kind>.<id>.json`.
            let files = read_json_files(&dir?)?.into_iter();
            let kinds =
                files.filter_map(|(stem, json)| Some((stem.split_once('.')?.0.to_owned(), json)));
            Ok(kinds.collect())
        }))
    }

    fn add_usage<'a>(
        &'a self,
        day: &'a str,
        tenant: &'a str,
        model: &'a str,
        tally: Tally,
    ) -> BoxFuture<'a, io::Result<()>> {
        let (files, day, tenant, model) = (
            self.usage_files.clone(),
            day.to_owned(),
            tenant.to_owned(),
            model.to_owned(),
        );
        Box::pin(blocking(move || files.add(&day, &tenant, &model, tally)))
    }

    fn read_usage<'a>(
        &'a self,
        from: &'a str,
        to: &'a str,
        tenant: Option<&'a str>,
    ) -> BoxFuture<'a, io::Result<Vec<UsageRow>>> {
        let (files, from, to) = (self.usage_files.clone(), from.to_owned(), to.to_owned());
        let tenant = tenant.map(str::to_owned);
        Box::pin(blocking(move || files.rows(&from, &to, tenant.as_deref())))
    }

    fn keep_window<'a>(&'a self, window: &'a Window) -> BoxFuture<'a, io::Result<()>> {
        let (files, window) = (self.usage_files.clone(), window.clone());
        Box::pin(blocking(move || files.keep_window(&window)))
    }

    fn windows(&self) -> BoxFuture<'_, io::Result<Vec<Window>>> {
        let files = self.usage_files.clone();
        Box::pin(blocking(move || files.windows()))
    }

    fn save_key<'a>(&'a self, id: &'a str, json: Option<String>) -> BoxFuture<'a, io::Result<()>> {
        let file = component(id).map(|id| self.root.join("keys").join(format!("{id}.json")));
        Box::pin(blocking(move || save_or_remove(&file?, json)))
    }

    fn load_keys(&self) -> BoxFuture<'_, io::Result<Vec<String>>> {
        let dir = self.root.join("keys");
        let records = move || {
            Ok(read_json_files(&dir)?
                .into_iter()
                .map(|(_, json)| json)
                .collect())
        };
        Box::pin(blocking(records))
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

    fn sweep(&self, budget: usize) -> BoxFuture<'_, io::Result<Swept>> {
        let store = self.clone();
        Box::pin(blocking(move || store.sweep_sync(budget)))
    }
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
        let step = store.sweep(100).await.unwrap();
        assert_eq!((step.forgotten, step.done), (1, true));
        assert_eq!(store.find("local", "h3").await.unwrap(), None);
        assert!(!dir.path().join("local/index/h3").exists());
    }

    /// Makes a file look last written a day ago.
    fn age(path: &Path) {
        let day_ago = SystemTime::now() - Duration::from_secs(24 * 3600);
        let file = std::fs::File::options().append(true).open(path).unwrap();
        file.set_modified(day_ago).unwrap();
    }

    #[tokio::test]
    async fn the_sweep_goes_a_step_at_a_time_and_forgets_only_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path(), Duration::from_secs(3600));
        // Two tenants, 300 conversations each; two in three left alone for a day.
        for tenant in ["ka", "kb"] {
            for n in 0..300 {
                let mut r = record(&format!("c-{n}"), &format!("h{n}"));
                r.key.tenant = tenant.into();
                store.append(&r.key, vec!["{}".into()]).await.unwrap();
                store.save(&r).await.unwrap();
                if n % 3 != 0 {
                    let conversation = dir.path().join(tenant).join(format!("c-{n}"));
                    age(&conversation.join("record.json"));
                    age(&conversation.join("transcript.jsonl"));
                }
            }
        }
        let mut steps = Vec::new();
        loop {
            let step = store.sweep(100).await.unwrap();
            assert!(
                step.forgotten <= 100,
                "no step looks at more than its budget"
            );
            steps.push(step.forgotten);
            if step.done {
                break;
            }
        }
        assert!(
            steps.len() >= 12,
            "600 conversations and 600 index entries: {steps:?}"
        );
        assert_eq!(steps.iter().sum::<usize>(), 400);
        for tenant in ["ka", "kb"] {
            assert!(store.find(tenant, "h3").await.unwrap().is_some(), "kept");
            assert!(
                store.find(tenant, "h4").await.unwrap().is_none(),
                "forgotten"
            );
            let index = std::fs::read_dir(dir.path().join(tenant).join("index")).unwrap();
            assert_eq!(
                index.count(),
                100,
                "the index entries of those forgotten are gone"
            );
        }
        // The next pass starts anew and finds nothing more to forget.
        let mut again = 0;
        loop {
            let step = store.sweep(1000).await.unwrap();
            again += step.forgotten;
            if step.done {
                break;
            }
        }
        assert_eq!(again, 0);
    }

    #[tokio::test]
    async fn each_tenant_s_transcripts_are_counted_across_restarts_and_sweeps() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path(), Duration::from_secs(3600));
        let mut a = record("c-1", "h1");
        a.key.tenant = "ka".into();
        let mut b = record("c-2", "h2");
        b.key.tenant = "ka".into();
        let mut other = record("c-1", "h1");
        other.key.tenant = "kb".into();
        let line = |n: usize| format!("{{\"x\":\"{}\"}}", "y".repeat(n));
        // Each line counts with its newline.
        assert_eq!(store.append(&a.key, vec![line(10)]).await.unwrap(), 19);
        assert_eq!(
            store.append(&a.key, vec![line(0), line(1)]).await.unwrap(),
            19 + 9 + 10
        );
        assert_eq!(
            store.append(&b.key, vec![line(91)]).await.unwrap(),
            38 + 100
        );
        assert_eq!(store.append(&other.key, vec![line(0)]).await.unwrap(), 9);
        store.save(&a).await.unwrap();
        store.save(&b).await.unwrap();
        // A gateway started again counts what the store keeps.
        let store = DirStore::new(dir.path(), Duration::from_secs(3600));
        assert_eq!(store.append(&a.key, vec![line(0)]).await.unwrap(), 138 + 9);
        // What the sweep forgets no longer counts.
        for file in ["record.json", "transcript.jsonl"] {
            age(&dir.path().join("ka/c-2").join(file));
        }
        while !store.sweep(10).await.unwrap().done {}
        assert_eq!(
            store.append(&a.key, vec![line(0)]).await.unwrap(),
            147 - 100 + 9
        );
    }
}
