//! The session store's worker: one task that carries out the engine's store asks in order
//! (writes kept in a backlog while the store fails, lookups answered through
//! `Gateway::handle_store`), the stored transcripts resuming CLIs read, and the cluster's
//! route claims.

use super::*;
use ccwire_core::gateway::usage::Tally;

/// What the session store is asked to do.
pub(super) enum StoreOp {
    /// What the engine asks ([`GatewayOutput::Store`]).
    Ask(StoreAsk),
    /// Write a stored transcript where a resuming CLI reads it.
    Resume {
        spec: ResumeSpec,
        home: Option<PathBuf>,
        done: tokio::sync::oneshot::Sender<Result<(), NotResumed>>,
    },
    /// Claim a route key in the cluster registry.
    Claim(String),
    /// Release one.
    Release(String),
    /// Hear when everything asked before is done.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

/// Why a stored conversation's transcript could not be written for a CLI to resume it.
#[derive(Debug)]
pub(super) struct NotResumed {
    pub(super) detail: String,
    /// The session store failed or did not answer in time (the client is asked to retry),
    /// rather than the transcript being missing or not writable.
    pub(super) unavailable: bool,
}

impl NotResumed {
    pub(super) fn unavailable(detail: impl Into<String>) -> NotResumed {
        NotResumed {
            detail: detail.into(),
            unavailable: true,
        }
    }

    pub(super) fn failed(detail: impl Into<String>) -> NotResumed {
        NotResumed {
            detail: detail.into(),
            unavailable: false,
        }
    }
}

/// How long one call of the session store may take; past it the call counts as failed (a
/// lookup answers its request with a 503, a write waits in the backlog to be written again),
/// so a stuck store holds no request forever.
pub(super) const STORE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the end of a turn's response waits for its record (and the transcript lines
/// before it) to be kept; past it, the turn fails with a 503 and what was not written of its
/// conversation is dropped.
pub(super) const KEEP_WAIT: Duration = Duration::from_secs(20);

/// How long after a failed call the store is not called again (but for the backlog's next
/// try): calls meanwhile fail at once, so that while the store is down each request gets its
/// 503 without waiting in line behind the calls that wait out the store's own timeouts.
pub(super) const FAIL_FAST: Duration = Duration::from_secs(2);

/// The session store's calls: each bounded by [`STORE_TIMEOUT`], and failed at once for
/// [`FAIL_FAST`] after one failed.
#[derive(Debug, Clone, Default)]
pub(super) struct Calls {
    failed_at: Arc<Mutex<Option<tokio::time::Instant>>>,
}

impl Calls {
    /// Whether a call failed less than [`FAIL_FAST`] ago.
    fn failing(&self) -> bool {
        let failed_at = *self.failed_at.lock().expect("calls lock");
        failed_at.is_some_and(|at| at.elapsed() < FAIL_FAST)
    }

    /// Makes `call`, unless the store failed a moment ago.
    pub(super) async fn call<T>(
        &self,
        call: impl std::future::Future<Output = std::io::Result<T>>,
    ) -> std::io::Result<T> {
        if self.failing() {
            return Err(std::io::Error::other(
                "the session store failed a moment ago",
            ));
        }
        self.attempt(call).await
    }

    /// Makes `call` whatever happened before (the backlog's tries, which find when the store
    /// is back).
    async fn attempt<T>(
        &self,
        call: impl std::future::Future<Output = std::io::Result<T>>,
    ) -> std::io::Result<T> {
        let result = tokio::time::timeout(STORE_TIMEOUT, call)
            .await
            .unwrap_or_else(|_| {
                Err(std::io::Error::other(
                    "the session store did not answer in time",
                ))
            });
        let failed = match &result {
            Ok(_) => false,
            // The store answered about one conversation (not its id, not there, not readable,
            // taken over): not a store that fails.
            Err(e) => {
                use std::io::ErrorKind::{InvalidData, InvalidInput, NotFound};
                !is_superseded(e) && !matches!(e.kind(), InvalidInput | InvalidData | NotFound)
            }
        };
        *self.failed_at.lock().expect("calls lock") = failed.then(tokio::time::Instant::now);
        result
    }
}

/// A write the session store has not taken yet.
pub(super) enum Unwritten {
    Lines(Vec<String>),
    Record(ConversationRecord),
}

/// Each conversation's writes the session store has not taken yet, in order, and the
/// store's calls.
#[derive(Default)]
pub(super) struct Backlog {
    queues: HashMap<ConversationKey, std::collections::VecDeque<Unwritten>>,
    calls: Calls,
    /// What the store said each tenant's transcripts take, since the engine last heard it.
    usage: HashMap<String, u64>,
}

impl Backlog {
    fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Queues a write; a record replaces a record queued before it (the newer one says all).
    fn push(&mut self, key: &ConversationKey, write: Unwritten) {
        let queue = self.queues.entry(key.clone()).or_default();
        if let (Unwritten::Record(_), Some(Unwritten::Record(_))) = (&write, queue.back()) {
            queue.pop_back();
        }
        queue.push_back(write);
    }

    /// Drops what is queued of a conversation.
    fn forget(&mut self, key: &ConversationKey) {
        self.queues.remove(key);
    }

    /// Writes a conversation's queue in order; at the first failure, the rest is kept (or,
    /// when another gateway has taken the conversation over, dropped).
    async fn flush(&mut self, store: &dyn ConversationStore, key: &ConversationKey) -> Flushed {
        self.flush_with(store, key, false).await
    }

    /// [`flush`](Self::flush), calling the store even if it failed a moment ago (`retry`).
    async fn flush_with(
        &mut self,
        store: &dyn ConversationStore,
        key: &ConversationKey,
        retry: bool,
    ) -> Flushed {
        let Some(queue) = self.queues.get_mut(key) else {
            return Flushed::Written;
        };
        while let Some(write) = queue.front() {
            let write = async {
                match write {
                    Unwritten::Lines(lines) => store.append(key, lines.clone()).await.map(Some),
                    Unwritten::Record(record) => store.save(record).await.map(|()| None),
                }
            };
            let written = match retry {
                true => self.calls.attempt(write).await,
                false => self.calls.call(write).await,
            };
            match written {
                Ok(None) => {}
                Ok(Some(used)) => {
                    self.usage.insert(key.tenant.clone(), used);
                }
                Err(error) if is_superseded(&error) => {
                    tracing::warn!(%error, "a conversation moved to another gateway");
                    self.queues.remove(key);
                    return Flushed::Superseded;
                }
                Err(error) => {
                    tracing::warn!(%error, conversation = %key.id, "cannot keep a conversation yet; trying again");
                    return Flushed::Failed;
                }
            }
            queue.pop_front();
        }
        self.queues.remove(key);
        Flushed::Written
    }

    /// Writes every queue; whether all were written (or dropped), and the conversations
    /// found taken over by another gateway.
    async fn flush_all(&mut self, store: &dyn ConversationStore) -> (bool, Vec<ConversationKey>) {
        let keys: Vec<ConversationKey> = self.queues.keys().cloned().collect();
        let mut moved = Vec::new();
        for key in keys {
            match self.flush_with(store, &key, true).await {
                Flushed::Written => {}
                Flushed::Superseded => moved.push(key),
                Flushed::Failed => return (false, moved),
            }
        }
        (true, moved)
    }
}

/// What [`Backlog::flush`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flushed {
    /// Everything queued is kept.
    Written,
    /// Something failed; it and what follows wait for the next try.
    Failed,
    /// Another gateway has resumed the conversation: what was queued is dropped.
    Superseded,
}

/// How many conversations (and index entries, and stored responses) one step of the sweep
/// looks at, and the pause between steps: a store of any size is swept a little at a time.
const SWEEP_STEP: usize = 256;
const SWEEP_PAUSE: Duration = Duration::from_millis(20);

/// Forgets the session store's old conversations at the start and hourly, in steps.
async fn sweeper(store: Arc<dyn ConversationStore>) {
    let mut sweep = tokio::time::interval(Duration::from_secs(3600));
    loop {
        sweep.tick().await;
        let mut forgotten = 0;
        loop {
            match store.sweep(SWEEP_STEP).await {
                Ok(step) => {
                    forgotten += step.forgotten;
                    if step.done {
                        break;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot sweep the session store");
                    break;
                }
            }
            tokio::time::sleep(SWEEP_PAUSE).await;
        }
        if forgotten > 0 {
            tracing::info!(
                conversations = forgotten,
                "the session store forgot old conversations"
            );
        }
    }
}

/// Tells the engine what the store said each tenant's transcripts take (when it has a quota
/// to check them against).
fn report_usage(app: &std::sync::Weak<App>, backlog: &mut Backlog) {
    if backlog.usage.is_empty() {
        return;
    }
    let usage = std::mem::take(&mut backlog.usage);
    let app = app.upgrade();
    if let Some(app) = app.filter(|app| app.options.engine.store_quota.is_some()) {
        app.input(|gateway, now| {
            for (tenant, bytes) in usage {
                gateway.handle_store(now, StoreAnswer::Usage { tenant, bytes });
            }
        });
    }
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Carries out the session store's work in order; a lookup's answer goes to the gateway. Ends
/// when the gateway shuts down. Forgets old conversations at its start and hourly.
///
/// What the store could not take (transcript lines, a record) is kept, in order, and written
/// again every two seconds and before anything else of its conversation: a record is saved
/// only once every line before it is kept, so a store that comes back after a failure has
/// lost nothing the gateway acknowledged (while the gateway lives).
pub(super) async fn store_worker(
    app: std::sync::Weak<App>,
    store: Arc<dyn ConversationStore>,
    cluster: Option<Cluster>,
    mut ops: mpsc::UnboundedReceiver<StoreOp>,
) {
    // The sweep of old conversations runs beside the worker, never holding up its writes.
    let sweeping = tokio::spawn(sweeper(store.clone()));
    let _stop_sweeping = AbortOnDrop(sweeping);
    // Keys made over /v1/keys, by this gateway or another on the store: read at start and
    // every few seconds.
    let mut keys = tokio::time::interval(KEYS_EVERY);
    keys.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let manages_keys = app
        .upgrade()
        .is_some_and(|app| app.input(|g, _| g.manages_keys()));
    let mut retry = tokio::time::interval(Duration::from_secs(2));
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut backlog = Backlog::default();
    let calls = backlog.calls.clone();
    // Usage not written yet (day, tenant, model, figures), each row's figures summed: added
    // to the store once a second (so it does not hold up a turn's record), before usage is
    // read, and at the end.
    let mut unmetered = std::collections::VecDeque::new();
    let mut metering = tokio::time::interval(METERING_EVERY);
    metering.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Claims (true) and releases the cluster registry could not take yet, in order.
    let mut routes = std::collections::VecDeque::<(bool, String)>::new();
    let write_failed = |app: &std::sync::Weak<App>| {
        if let Some(app) = app.upgrade() {
            app.input(|gateway, now| gateway.handle_store(now, StoreAnswer::WriteFailed));
        }
    };
    // A conversation another gateway has resumed: its CLI here is stale.
    let superseded = |app: &std::sync::Weak<App>, key: &ConversationKey| {
        if let Some(app) = app.upgrade() {
            app.input(|gateway, now| {
                gateway.handle_store(now, StoreAnswer::Superseded { key: key.clone() })
            });
        }
    };
    let flushed =
        |app: &std::sync::Weak<App>, key: &ConversationKey, flushed: Flushed| match flushed {
            Flushed::Written => {}
            Flushed::Failed => write_failed(app),
            Flushed::Superseded => superseded(app, key),
        };
    loop {
        report_usage(&app, &mut backlog);
        let op = tokio::select! {
            op = ops.recv() => match op {
                Some(op) => op,
                None => {
                    // What is still unwritten gets one more try before the gateway ends.
                    backlog.flush_all(store.as_ref()).await;
                    add_usage(store.as_ref(), &calls, &mut unmetered).await;
                    return;
                }
            },
            _ = metering.tick(), if !unmetered.is_empty() => {
                if !add_usage(store.as_ref(), &calls, &mut unmetered).await {
                    write_failed(&app);
                }
                continue;
            }
            _ = keys.tick(), if manages_keys => {
                match calls.call(store.load_keys()).await {
                    Ok(records) => {
                        let Some(app) = app.upgrade() else {
                            return;
                        };
                        app.input(|gateway, now| gateway.handle_keys_loaded(now, &records));
                    }
                    Err(error) => tracing::warn!(%error, "cannot read the keys from the session store"),
                }
                continue;
            }
            _ = retry.tick(), if !backlog.is_empty() || !routes.is_empty() => {
                if !routes.is_empty() && flush_routes(cluster.as_ref(), &mut routes).await {
                    tracing::info!("the cluster registry has the claims it could not take before");
                }
                let waiting = !backlog.is_empty();
                let (all, moved) = backlog.flush_all(store.as_ref()).await;
                if waiting && all {
                    tracing::info!("the session store has kept what it could not take before");
                }
                for key in &moved {
                    superseded(&app, key);
                }
                continue;
            }
        };
        match op {
            StoreOp::Ask(StoreAsk::Append { key, entries }) => {
                let lines = entries.iter().map(|e| e.get().to_owned()).collect();
                backlog.push(&key, Unwritten::Lines(lines));
                flushed(&app, &key, backlog.flush(store.as_ref(), &key).await);
            }
            StoreOp::Ask(StoreAsk::Save { record, request }) => {
                let key = record.key.clone();
                backlog.push(&key, Unwritten::Record(record));
                // The response waiting for this record ends as its turn made it only once
                // the record, and every line before it, is kept. If they cannot be, the turn
                // fails, and nothing written of it later may make it look kept: what is
                // queued of its conversation (all since its last kept record) is dropped.
                let written = match request {
                    Some(_) => tokio::time::timeout(KEEP_WAIT, backlog.flush(store.as_ref(), &key))
                        .await
                        .unwrap_or(Flushed::Failed),
                    None => backlog.flush(store.as_ref(), &key).await,
                };
                flushed(&app, &key, written);
                if request.is_some() && written == Flushed::Failed {
                    backlog.forget(&key);
                }
                report_usage(&app, &mut backlog);
                if let (Some(request), Some(app)) = (request, app.upgrade()) {
                    let answer = match written {
                        Flushed::Written => StoreAnswer::Kept { request },
                        Flushed::Failed | Flushed::Superseded => StoreAnswer::NotKept { request },
                    };
                    app.input(|gateway, now| gateway.handle_store(now, answer));
                }
            }
            StoreOp::Ask(StoreAsk::Response {
                tenant,
                id,
                response,
            }) => {
                if let Err(error) = calls
                    .call(store.save_response(&tenant, &id, response))
                    .await
                {
                    tracing::warn!(%error, response = %id, "cannot keep a stored response");
                    write_failed(&app);
                }
            }
            StoreOp::Ask(StoreAsk::FindResponse {
                request,
                tenant,
                id,
            }) => {
                // An id that is no store key (a client's invention) is no stored response.
                let found = match calls.call(store.load_response(&tenant, &id)).await {
                    Err(error) if error.kind() == std::io::ErrorKind::InvalidInput => Ok(None),
                    found => found,
                };
                let answer = |response| StoreAnswer::FoundResponse { request, response };
                let failed = "cannot read a stored response from the session store";
                if !answer_lookup(&app, request, found, failed, answer) {
                    return;
                }
            }
            StoreOp::Ask(StoreAsk::Usage { tenant }) => {
                match calls.call(store.usage(&tenant)).await {
                    Ok(bytes) => {
                        backlog.usage.insert(tenant, bytes);
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot read a tenant's usage of the session store")
                    }
                }
            }
            StoreOp::Ask(StoreAsk::Pool { settings }) => {
                if let Err(error) = calls.call(store.save_pool(settings)).await {
                    tracing::warn!(%error, "cannot keep the warm pool's settings");
                }
            }
            StoreOp::Ask(StoreAsk::Find {
                request,
                tenant,
                hash,
            }) => {
                let found = calls.call(store.find(&tenant, &hash)).await;
                let answer = |record| StoreAnswer::Found { request, record };
                let failed = "cannot look a conversation up in the session store";
                if !answer_lookup(&app, request, found, failed, answer) {
                    return;
                }
            }
            StoreOp::Resume { spec, home, done } => {
                // (What this gateway could not write of a conversation taken over since is
                // dropped: the store's transcript is the one to resume.)
                let loaded = if backlog.flush(store.as_ref(), &spec.key).await != Flushed::Failed {
                    calls.call(store.load(&spec.key)).await
                } else {
                    Err(std::io::Error::other(
                        "what the gateway keeps of it cannot be written to the session store",
                    ))
                };
                let written = match loaded {
                    Ok(Some(lines)) => tokio::task::spawn_blocking(move || {
                        let lines = spec.transcript(lines);
                        let path = PathBuf::from(&spec.path);
                        materialize(&lines, &path, &spec.key.id, home.as_deref())
                    })
                    .await
                    .map_err(|e| NotResumed::failed(e.to_string()))
                    .and_then(|r| r.map_err(|e| NotResumed::failed(e.to_string()))),
                    Ok(None) => Err(NotResumed::failed(
                        "its transcript is not in the session store",
                    )),
                    Err(error) => Err(NotResumed::unavailable(error.to_string())),
                };
                let _ = done.send(written);
            }
            StoreOp::Ask(StoreAsk::Managed {
                request,
                tenant,
                kind,
                id,
                json,
            }) => {
                // A request's change: its answer ends once kept, or fails when it cannot be.
                let save = calls.call(store.save_managed(&tenant, &kind, &id, json));
                let kept = match tokio::time::timeout(KEEP_WAIT, save).await {
                    Ok(Ok(())) => true,
                    Ok(Err(error)) => {
                        tracing::warn!(%error, resource = %id, "cannot keep a Managed Agents resource");
                        false
                    }
                    Err(_) => {
                        tracing::warn!(resource = %id, "the session store did not keep a Managed Agents resource in time");
                        false
                    }
                };
                match (request, app.upgrade()) {
                    (Some(request), Some(app)) => {
                        let answer = match kept {
                            true => StoreAnswer::Kept { request },
                            false => StoreAnswer::NotKept { request },
                        };
                        app.input(|gateway, now| gateway.handle_store(now, answer));
                    }
                    (None, _) if !kept => write_failed(&app),
                    _ => {}
                }
            }
            StoreOp::Ask(StoreAsk::List {
                request,
                tenant,
                limit,
            }) => {
                // Reads for the console, after the writes before them, but not holding up
                // the writes after them.
                let (store, app, calls) = (store.clone(), app.clone(), calls.clone());
                tokio::spawn(async move {
                    let listed = calls.call(store.list(tenant.as_deref(), limit)).await;
                    let Some(app) = app.upgrade() else {
                        return;
                    };
                    let listed = listed
                        .map_err(|error| {
                            tracing::warn!(%error, "cannot list the conversations of the session store");
                        })
                        .ok();
                    app.input(|gateway, now| {
                        gateway.handle_store(
                            now,
                            StoreAnswer::Listed {
                                request,
                                records: listed,
                            },
                        )
                    });
                });
            }
            StoreOp::Ask(StoreAsk::Load { request, key }) => {
                let (store, app, calls) = (store.clone(), app.clone(), calls.clone());
                tokio::spawn(async move {
                    let read = calls.call(store.peek(&key)).await;
                    let Some(app) = app.upgrade() else {
                        return;
                    };
                    let read = read.map_err(|error| {
                        tracing::warn!(%error, "cannot read a transcript of the session store");
                    });
                    app.input(|gateway, now| {
                        gateway.handle_store(
                            now,
                            StoreAnswer::TranscriptLoaded {
                                request,
                                lines: read,
                            },
                        )
                    });
                });
            }
            StoreOp::Ask(StoreAsk::LoadManaged { request, tenant }) => {
                let loaded = calls.call(store.load_managed(&tenant)).await;
                let Some(app) = app.upgrade() else {
                    return;
                };
                let loaded = loaded
                    .map_err(|error| {
                        tracing::warn!(%error, "cannot read Managed Agents resources from the session store");
                    })
                    .ok();
                app.input(|gateway, now| {
                    gateway.handle_store(
                        now,
                        StoreAnswer::ManagedLoaded {
                            request,
                            resources: loaded,
                        },
                    )
                });
            }
            StoreOp::Ask(StoreAsk::AddUsage {
                tenant,
                day,
                model,
                tally,
            }) => {
                // Figures of a row already waiting are added to it.
                let same = (unmetered.iter_mut())
                    .find(|(d, t, m, _)| *d == day && *t == tenant && *m == model);
                match same {
                    Some((_, _, _, waiting)) => waiting.add(&tally),
                    None => {
                        if unmetered.len() >= UNMETERED_CAP {
                            tracing::error!(
                                "the session store has taken no usage for long: the oldest is dropped"
                            );
                            unmetered.pop_front();
                        }
                        unmetered.push_back((day, tenant, model, tally));
                    }
                }
            }
            StoreOp::Ask(StoreAsk::KeepKey { request, id, json }) => {
                let kept = calls.call(store.save_key(&id, json)).await;
                if let Err(error) = &kept {
                    tracing::warn!(%error, key = %id, "cannot keep a key's record");
                    write_failed(&app);
                }
                if let (Some(request), Some(app)) = (request, app.upgrade()) {
                    let answer = match kept {
                        Ok(()) => StoreAnswer::Kept { request },
                        Err(_) => StoreAnswer::NotKept { request },
                    };
                    app.input(|gateway, now| gateway.handle_store(now, answer));
                }
            }
            StoreOp::Ask(StoreAsk::KeepWindow { window }) => {
                if let Err(error) = calls.call(store.keep_window(&window)).await {
                    tracing::warn!(%error, "cannot keep a rate-limit window");
                    write_failed(&app);
                }
            }
            StoreOp::Ask(StoreAsk::ReadUsage {
                request,
                tenant,
                from,
                to,
            }) => {
                // What was metered before it is read with it.
                if !add_usage(store.as_ref(), &calls, &mut unmetered).await {
                    write_failed(&app);
                }
                let read = async {
                    let rows = calls
                        .call(store.read_usage(&from, &to, tenant.as_deref()))
                        .await?;
                    let windows = calls.call(store.windows()).await?;
                    Ok::<_, std::io::Error>((rows, windows))
                };
                let read = read
                    .await
                    .map_err(
                        |error| tracing::warn!(%error, "cannot read usage from the session store"),
                    )
                    .ok();
                let Some(app) = app.upgrade() else {
                    return;
                };
                app.input(|gateway, now| {
                    let answer = StoreAnswer::UsageRead {
                        request,
                        tenant,
                        read,
                    };
                    gateway.handle_store(now, answer)
                });
            }
            StoreOp::Ask(ask) => {
                tracing::warn!(
                    ?ask,
                    "a session store request this gateway does not carry out"
                );
            }
            StoreOp::Claim(key) => {
                routes.push_back((true, key));
                flush_routes(cluster.as_ref(), &mut routes).await;
            }
            StoreOp::Release(key) => {
                routes.push_back((false, key));
                flush_routes(cluster.as_ref(), &mut routes).await;
            }
            StoreOp::Barrier(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// Adds the usage not yet added, in order, until the store fails; whether all of it is added.
async fn add_usage(
    store: &dyn ConversationStore,
    calls: &Calls,
    unmetered: &mut std::collections::VecDeque<(String, String, String, Tally)>,
) -> bool {
    while let Some((day, tenant, model, tally)) = unmetered.front() {
        if let Err(error) = calls
            .call(store.add_usage(day, tenant, model, *tally))
            .await
        {
            tracing::warn!(%error, "cannot add usage to the session store; retried shortly");
            return false;
        }
        unmetered.pop_front();
    }
    true
}

/// How often the keys made over `/v1/keys` are read from the store: how long a key another
/// gateway made or revoked takes to work or stop working here.
const KEYS_EVERY: Duration = Duration::from_secs(5);

/// How often the usage metered since is added to the store.
const METERING_EVERY: Duration = Duration::from_secs(1);

/// The most usage additions kept for a store that fails (about a megabyte).
const UNMETERED_CAP: usize = 10_000;

/// Gives a lookup's answer to the gateway, or, when the store failed (`failed` says what could
/// not be done), a [`StoreAnswer::LookupFailed`]; `false` once the gateway is gone.
fn answer_lookup<T>(
    app: &std::sync::Weak<App>,
    request: RequestId,
    found: std::io::Result<T>,
    failed: &str,
    answer: impl FnOnce(T) -> StoreAnswer,
) -> bool {
    let Some(app) = app.upgrade() else {
        return false;
    };
    let answer = match found {
        Ok(found) => answer(found),
        Err(error) => {
            tracing::warn!(%error, "{failed}");
            StoreAnswer::LookupFailed { request }
        }
    };
    app.input(|gateway, now| gateway.handle_store(now, answer));
    true
}

/// Writes the claims and releases not written yet, in order; whether all were (at the first
/// failure, it and the rest wait for the next try).
pub(super) async fn flush_routes(
    cluster: Option<&Cluster>,
    routes: &mut std::collections::VecDeque<(bool, String)>,
) -> bool {
    let Some(cluster) = cluster else {
        routes.clear();
        return true;
    };
    while let Some((claim, key)) = routes.front() {
        let written = match claim {
            true => cluster.claim(key).await,
            false => cluster.release(key).await,
        };
        if let Err(error) = written {
            tracing::warn!(%error, waiting = routes.len(), "cannot write to the cluster registry yet; other gateways resume this one's new conversations from the store meanwhile");
            return false;
        }
        routes.pop_front();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A store down: the first call waits out its failure; the calls right after fail at once
    /// without reaching it, but for the backlog's tries, and one that succeeds ends that.
    #[tokio::test]
    async fn a_store_that_just_failed_is_not_called_again_for_a_moment() {
        let calls = Calls::default();
        let made = AtomicUsize::new(0);
        let made = &made;
        let down = |kind: std::io::ErrorKind| async move {
            made.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(std::io::Error::new(kind, "down"))
        };
        // A conversation's own trouble (an id, a record that does not read) is not an outage.
        for kind in [
            std::io::ErrorKind::InvalidInput,
            std::io::ErrorKind::InvalidData,
        ] {
            assert!(calls.call(down(kind)).await.is_err());
            assert!(!calls.failing());
        }
        assert!(calls.call(down(std::io::ErrorKind::Other)).await.is_err());
        assert_eq!(made.load(Ordering::SeqCst), 3);
        let fast = calls.call(down(std::io::ErrorKind::Other)).await;
        assert!(fast.unwrap_err().to_string().contains("a moment ago"));
        assert_eq!(made.load(Ordering::SeqCst), 3, "not called");
        // The backlog's try reaches the store, and finds it back.
        let back = calls.attempt(async { Ok::<_, std::io::Error>(7) }).await;
        assert_eq!(back.unwrap(), 7);
        assert!(calls
            .call(async { Ok::<_, std::io::Error>(()) })
            .await
            .is_ok());
    }
}
