//! Tenant keys at run time: `/v1/keys` (the admin key only) makes, lists, labels, sets the
//! quota of and revokes keys without a restart. A key made here is shown once, when it is
//! made: the gateway keeps its SHA-256 digest, in memory and in the session store
//! ([`StoreAsk::KeepKey`]), never the key. The gateways of a cluster learn each other's
//! changes from the store ([`Gateway::handle_keys_loaded`]). The keys given at start keep
//! working; their label and quota may be set here too.

use serde::{Deserialize, Serialize};

use super::*;
use crate::api::guard::{digest, digest_tenant};
use crate::gateway::quota::Quota;

/// What the store keeps of a key made over `/v1/keys`, or of the label and quota set there
/// for a key given at start (opaque JSON to the store).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The key's id ([`tenant_id`]).
    pub id: String,
    /// The SHA-256 digest of a key made over the API, in hex; none for a key given at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Its quota, as `--quota` writes it (`tokens/day=…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<String>,
    /// When it was made or first set (Unix ms).
    pub created_ms: u64,
}

impl KeyRecord {
    /// The digest of a key made over the API.
    fn digest(&self) -> Option<[u8; 32]> {
        let hex = self.sha256.as_deref()?;
        let mut out = [0u8; 32];
        if hex.len() != 64 {
            return None;
        }
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(out)
    }

    /// The tenant of a key made over the API.
    fn tenant(&self) -> Option<String> {
        self.digest().map(|d| digest_tenant(&d))
    }
}

/// A change of `/v1/keys` the store has not kept yet: what it was, to undo it if the store
/// cannot keep it (its answer is then a 503, and the client retries), and so that keys read
/// from the store meanwhile do not undo it.
#[derive(Debug, Clone)]
pub(super) enum Unkept {
    /// A key made (not handed out until kept).
    Made(String),
    /// A key's label or quota set: the record before.
    Changed(String, Option<KeyRecord>),
    /// A key revoked: its record.
    Revoked(KeyRecord),
}

impl Unkept {
    fn id(&self) -> &str {
        match self {
            Unkept::Made(id) | Unkept::Changed(id, _) => id,
            Unkept::Revoked(record) => &record.id,
        }
    }
}

/// The longest label.
const MAX_LABEL: usize = 200;

/// A `POST` or `PATCH` body of `/v1/keys`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyChange {
    #[serde(default, deserialize_with = "present")]
    label: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    quota: Option<Option<String>>,
}

/// A field that may be `null` (to clear it), told apart from one left out.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

impl Gateway {
    /// Whether tenant keys are made over `/v1/keys`: a key is needed, and a session store
    /// keeps them (the host then reads them from the store now and then, and gives them to
    /// [`handle_keys_loaded`](Self::handle_keys_loaded)).
    pub fn manages_keys(&self) -> bool {
        self.config.store && !self.front.keys.is_empty()
    }

    /// The quota of the key with id `id`: set over `/v1/keys`, else given at start, else
    /// every key's (`*`).
    pub(super) fn quota_of(&self, id: &str) -> Option<Quota> {
        let set = (self.front.made.get(id)).and_then(|r| r.quota.as_deref()?.parse().ok());
        set.or_else(|| {
            (self.config.quotas.get(id))
                .or_else(|| self.config.quotas.get("*"))
                .cloned()
        })
    }

    /// `/v1/keys` and `/v1/keys/{id}`, with the admin key.
    pub(super) fn handle_keys(
        &mut self,
        now: Timestamp,
        request: RequestId,
        head: &HttpHead<'_>,
        id: Option<&str>,
        body: &[u8],
    ) {
        let refused = match self.front.has_admin() {
            false => Some(ApiError::new(
                ApiErrorKind::Forbidden,
                "no admin key is set (--admin-key or CCWIRE_ADMIN_KEY): keys cannot be managed",
            )),
            true if !self.front.is_admin(head) => Some(ApiError::new(
                ApiErrorKind::Authentication,
                "/v1/keys takes the admin key (Authorization: Bearer)",
            )),
            true => None,
        };
        if let Some(error) = refused {
            return self.respond_error(request, Api::Anthropic, &[], &error);
        }
        let answer = match (head.method, id) {
            ("GET", None) => Ok((200, self.key_list())),
            ("POST", None) => self.make_key(request, body),
            ("GET", Some(id)) => self.key_json(id).map(|key| (200, key)),
            ("PATCH", Some(id)) => self.change_key(request, id, body),
            ("DELETE", Some(id)) => self.revoke_key(now, request, id),
            _ => Err(ApiError::new(
                ApiErrorKind::MethodNotAllowed,
                "not a method of /v1/keys",
            )),
        };
        let mark = self.outputs.len();
        match answer {
            Ok((status, value)) => {
                // A change the store was asked to keep holds the answer until it is kept.
                let kept = self.outputs.iter().any(|o| {
                    matches!(o, GatewayOutput::Store(StoreAsk::KeepKey { request: Some(r), .. })
                        if *r == request)
                });
                self.respond_json(request, status, &value);
                if kept {
                    let undone = ApiError::new(
                        ApiErrorKind::Unavailable,
                        "the session store could not keep this change of the keys, so it is \
                         undone; retry shortly",
                    )
                    .retry_after(2);
                    self.hold_change(request, mark, 1, Some(undone));
                }
            }
            Err(error) => self.respond_error(request, Api::Anthropic, &[], &error),
        }
    }

    /// Every key: those given at start, then those made over the API.
    fn key_list(&self) -> Value {
        let made = (self.front.made.values())
            .filter(|r| r.sha256.is_some())
            .map(|r| &r.id);
        let ids = self.front.given_ids().iter().chain(made);
        let data: Vec<Value> = ids.filter_map(|id| self.key_json(id).ok()).collect();
        json!({"object": "list", "data": data})
    }

    /// A key as `/v1/keys` shows it (never the key itself).
    fn key_json(&self, id: &str) -> Result<Value, ApiError> {
        let given = self.front.given_ids().iter().any(|g| g == id);
        let record = self.front.made.get(id);
        if !given && record.is_none_or(|r| r.sha256.is_none()) {
            return Err(ApiError::new(
                ApiErrorKind::NotFound,
                format!("no key {id:?}"),
            ));
        }
        let quota = self.quota_of(id).map(|q| q.to_string());
        let conversations = (self.lives.iter())
            .filter(|(s, l)| !self.pool.contains_key(s) && tenant_id(&l.tenant) == id)
            .count();
        Ok(json!({
            "object": "key",
            "id": id,
            "source": if given { "command_line" } else { "api" },
            "label": record.and_then(|r| r.label.clone()),
            "quota": quota,
            "created_at": record
                .filter(|r| r.sha256.is_some())
                .map(|r| crate::gateway::written::iso_time(r.created_ms)),
            "conversations": conversations,
        }))
    }

    /// Reads a `POST`/`PATCH` body.
    fn key_change(body: &[u8]) -> Result<KeyChange, ApiError> {
        let invalid = |why: String| ApiError::new(ApiErrorKind::InvalidRequest, why);
        let change: KeyChange = if body.iter().all(u8::is_ascii_whitespace) {
            KeyChange::default()
        } else {
            serde_json::from_slice(body).map_err(|e| invalid(format!("the body: {e}")))?
        };
        if let Some(Some(label)) = &change.label {
            if label.chars().count() > MAX_LABEL {
                return Err(invalid(format!(
                    "label: longer than {MAX_LABEL} characters"
                )));
            }
        }
        if let Some(Some(quota)) = &change.quota {
            quota.parse::<Quota>().map_err(|e| invalid(e.to_string()))?;
        }
        Ok(change)
    }

    /// `POST /v1/keys`: a new key, shown once.
    fn make_key(&mut self, request: RequestId, body: &[u8]) -> Result<(u16, Value), ApiError> {
        let refused = |why: &str| ApiError::new(ApiErrorKind::InvalidRequest, why);
        if self.front.keys.is_empty() {
            return Err(refused(
                "this gateway takes no keys (anyone on its loopback address is served): start \
                 it with --api-key or --managed-keys to make keys",
            ));
        }
        if !self.config.store {
            return Err(refused(
                "keys made over the API are kept in the session store, and this gateway has \
                 none (--no-store)",
            ));
        }
        let change = Self::key_change(body)?;
        let secret = self.new_secret();
        let sha256 = digest(&secret);
        let id = tenant_id(&digest_tenant(&sha256));
        let record = KeyRecord {
            id: id.clone(),
            sha256: Some(crate::conversation::hex(&sha256)),
            label: change.label.flatten(),
            quota: change.quota.flatten(),
            created_ms: self.wall_ms(),
        };
        self.front.keys.insert_digest(sha256);
        self.front.unkept.insert(request, Unkept::Made(id.clone()));
        self.keep_key(request, record);
        let mut answer = self.key_json(&id)?;
        answer["key"] = Value::from(secret);
        Ok((201, answer))
    }

    /// A new key's secret: `ccw_` and 64 hex digits of a keyed hash of a counter and the
    /// time, unpredictable without the gateway's id key.
    fn new_secret(&mut self) -> String {
        use sha2::Digest;
        self.front.made_count += 1;
        let mut hash = sha2::Sha256::new();
        hash.update(self.config.id_key);
        hash.update(b"ccwire api key\0");
        hash.update(self.front.made_count.to_le_bytes());
        hash.update(self.wall_ms().to_le_bytes());
        format!("ccw_{}", crate::conversation::hex(&hash.finalize()))
    }

    /// `PATCH /v1/keys/{id}`: its label or quota (`null` clears either).
    fn change_key(
        &mut self,
        request: RequestId,
        id: &str,
        body: &[u8],
    ) -> Result<(u16, Value), ApiError> {
        self.key_json(id)?;
        let change = Self::key_change(body)?;
        if !self.config.store {
            return Err(ApiError::new(
                ApiErrorKind::InvalidRequest,
                "a key's label and quota are kept in the session store, and this gateway has \
                 none (--no-store): give --quota at start instead",
            ));
        }
        let wall = self.wall_ms();
        let before = self.front.made.get(id).cloned();
        self.front
            .unkept
            .insert(request, Unkept::Changed(id.to_owned(), before));
        let mut record = self.front.made.get(id).cloned().unwrap_or(KeyRecord {
            id: id.to_owned(),
            sha256: None,
            label: None,
            quota: None,
            created_ms: wall,
        });
        if let Some(label) = change.label {
            record.label = label;
        }
        if let Some(quota) = change.quota {
            record.quota = quota;
        }
        self.keep_key(request, record);
        self.key_json(id).map(|key| (200, key))
    }

    /// `DELETE /v1/keys/{id}`: a key made over the API no longer works; its conversations'
    /// CLIs are closed.
    fn revoke_key(
        &mut self,
        now: Timestamp,
        request: RequestId,
        id: &str,
    ) -> Result<(u16, Value), ApiError> {
        if self.front.given_ids().iter().any(|g| g == id) {
            return Err(ApiError::new(
                ApiErrorKind::InvalidRequest,
                "this key was given at start (--api-key, CCWIRE_API_KEYS): restart without it",
            ));
        }
        let Some(record) = self
            .front
            .made
            .get(id)
            .filter(|r| r.sha256.is_some())
            .cloned()
        else {
            return Err(ApiError::new(
                ApiErrorKind::NotFound,
                format!("no key {id:?}"),
            ));
        };
        self.forget_key(now, &record);
        self.front.unkept.insert(request, Unkept::Revoked(record));
        self.outputs
            .push_back(GatewayOutput::Store(StoreAsk::KeepKey {
                request: Some(request),
                id: id.to_owned(),
                json: None,
            }));
        Ok((200, json!({"object": "key", "id": id, "deleted": true})))
    }

    /// Notes `record` and asks the store to keep it.
    fn keep_key(&mut self, request: RequestId, record: KeyRecord) {
        let json = serde_json::to_string(&record).expect("a key record serializes");
        self.outputs
            .push_back(GatewayOutput::Store(StoreAsk::KeepKey {
                request: Some(request),
                id: record.id.clone(),
                json: Some(json),
            }));
        self.front.made.insert(record.id.clone(), record);
    }

    /// A key made over the API no longer works: its conversations' CLIs are closed (their
    /// responses in flight end with an error), its queued requests refused.
    fn forget_key(&mut self, now: Timestamp, record: &KeyRecord) {
        self.front.made.remove(&record.id);
        let Some(tenant) = record.tenant() else {
            return;
        };
        self.front.keys.remove(&tenant);
        let theirs: Vec<SessionId> = (self.lives.iter())
            .filter(|(_, l)| l.tenant == tenant)
            .map(|(s, _)| *s)
            .collect();
        for session in theirs {
            self.close(now, session);
        }
        let revoked = ApiError::new(ApiErrorKind::Authentication, "this API key was revoked");
        let queued: Vec<Queued> = {
            let (theirs, others) = std::mem::take(&mut self.queue)
                .into_iter()
                .partition(|q| q.tenant == tenant);
            self.queue = others;
            theirs.into_iter().collect()
        };
        for q in queued {
            self.respond_error(q.request, q.api, &[], &revoked);
        }
    }

    /// The store's answer to a change of `/v1/keys`: kept, it stands; not kept, it is undone
    /// (the client gets a 503 and retries).
    pub(super) fn key_kept(&mut self, now: Timestamp, request: RequestId, kept: bool) {
        let Some(unkept) = self.front.unkept.remove(&request) else {
            return;
        };
        if kept {
            return;
        }
        match unkept {
            Unkept::Made(id) => {
                if let Some(record) = self.front.made.get(&id).cloned() {
                    self.forget_key(now, &record);
                }
            }
            Unkept::Changed(id, Some(before)) => {
                self.front.made.insert(id, before);
            }
            Unkept::Changed(id, None) => {
                self.front.made.remove(&id);
            }
            Unkept::Revoked(record) => {
                if let Some(sha256) = record.digest() {
                    self.front.keys.insert_digest(sha256);
                }
                self.front.made.insert(record.id.clone(), record);
            }
        }
    }

    /// The keys the session store keeps (each as [`StoreAsk::KeepKey`] kept it), read by
    /// the host at start and now and then: keys another gateway made work here, those it
    /// revoked no longer do, labels and quotas follow. A record that does not read is
    /// skipped, and so is a key whose change here the store has not kept yet (read before
    /// it, the store's record is older).
    pub fn handle_keys_loaded(&mut self, now: Timestamp, keys: &[String]) {
        self.now = now;
        let unkept: Vec<String> = (self.front.unkept.values())
            .map(|u| u.id().to_owned())
            .collect();
        let loaded: BTreeMap<String, KeyRecord> = (keys.iter())
            .filter_map(|json| serde_json::from_str::<KeyRecord>(json).ok())
            .filter(|r| !unkept.contains(&r.id))
            .map(|r| (r.id.clone(), r))
            .collect();
        let gone: Vec<KeyRecord> = (self.front.made.values())
            .filter(|r| r.sha256.is_some() && !loaded.contains_key(&r.id))
            .filter(|r| !unkept.contains(&r.id))
            .cloned()
            .collect();
        for record in gone {
            self.forget_key(now, &record);
        }
        for record in loaded.into_values() {
            if let Some(sha256) = record.digest() {
                self.front.keys.insert_digest(sha256);
            }
            self.front.made.insert(record.id.clone(), record);
        }
    }
}
