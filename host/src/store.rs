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
use std::path::Path;

use ccwire_core::gateway::usage::{Tally, UsageRow, Window};
use ccwire_core::gateway::{ConversationKey, ConversationRecord};
use futures::future::BoxFuture;

mod dir;
mod redis;
pub use self::dir::DirStore;
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
    /// Appends lines to a conversation's transcript (each a JSON object); returns how many
    /// bytes the transcripts of the conversation's tenant take in the store now (what a
    /// per-tenant quota is checked against; the transcripts of conversations forgotten as old
    /// no longer count).
    fn append<'a>(
        &'a self,
        key: &'a ConversationKey,
        lines: Vec<String>,
    ) -> BoxFuture<'a, io::Result<u64>>;

    /// How many bytes the transcripts of `tenant`'s conversations take in the store, as
    /// [`append`](Self::append) returns it.
    fn usage<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, io::Result<u64>>;

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

    /// Adds `tally` to the row of `tenant` and `model` on `day` (UTC, `YYYY-MM-DD`): every
    /// gateway on a shared store adds into the same rows.
    fn add_usage<'a>(
        &'a self,
        day: &'a str,
        tenant: &'a str,
        model: &'a str,
        tally: Tally,
    ) -> BoxFuture<'a, io::Result<()>>;

    /// The usage rows of the days from `from` to `to` (both included) of `tenant` (`None`:
    /// every tenant's).
    fn read_usage<'a>(
        &'a self,
        from: &'a str,
        to: &'a str,
        tenant: Option<&'a str>,
    ) -> BoxFuture<'a, io::Result<Vec<UsageRow>>>;

    /// Keeps a rate-limit window, unless the one kept for its credential and kind was
    /// observed later.
    fn keep_window<'a>(&'a self, window: &'a Window) -> BoxFuture<'a, io::Result<()>>;

    /// Every rate-limit window kept.
    fn windows(&self) -> BoxFuture<'_, io::Result<Vec<Window>>>;

    /// Keeps a tenant key's record (opaque JSON: its id, the digest of a key made over the
    /// API, its label and quota; never a key) under its `id`, replacing what was kept there;
    /// `None` forgets it. Kept until forgotten.
    fn save_key<'a>(&'a self, id: &'a str, json: Option<String>) -> BoxFuture<'a, io::Result<()>>;

    /// Every key record [`save_key`](Self::save_key) kept.
    fn load_keys(&self) -> BoxFuture<'_, io::Result<Vec<String>>>;

    /// Keeps the warm pool's settings (opaque JSON), replacing those kept before.
    fn save_pool(&self, settings: String) -> BoxFuture<'_, io::Result<()>>;

    /// The warm pool's settings kept last, if any.
    fn load_pool(&self) -> BoxFuture<'_, io::Result<Option<String>>>;

    /// One step of the sweep that forgets the conversations not saved or appended to for
    /// longer than the store's time-to-live: it looks at no more than `budget` of them (and
    /// of their index entries and stored responses), going on from where the step before it
    /// stopped. A store whose backend expires keys itself does nothing.
    fn sweep(&self, budget: usize) -> BoxFuture<'_, io::Result<Swept>>;
}

/// What one step of a [`ConversationStore::sweep`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// The conversations it forgot.
    pub forgotten: usize,
    /// Whether the sweep has looked at everything (the next step starts a new one).
    pub done: bool,
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

/// Makes `dir` and its missing parents, owner-only.
pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Opens a file owner-only, to append to or to write anew.
pub(super) fn open_private(path: &Path, append: bool) -> io::Result<std::fs::File> {
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
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
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
