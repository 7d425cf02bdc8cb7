//! Matching a request to what it continues: the live session whose history it extends (with
//! the held calls its tool results answer), a lookup in the session store, or a new session
//! (rebuilt from the history a client sent when no session continues it).

use super::*;

impl Registry {
    #[cfg(test)]
    /// Routes a parsed request of any API: puts the stored history of a Responses request's
    /// `previous_response_id` in front of it ([`resolve_previous`](Self::resolve_previous)),
    /// finds what it continues or starts ([`match_conversation`](Self::match_conversation)) in the scope of `tenant`,
    /// and, for a Responses request with `store: true`, remembers to store its response under
    /// `response_id` when it ends ([`response_done`](Self::response_done)).
    ///
    /// # Errors
    /// Those of [`resolve_previous`](Self::resolve_previous) and [`match_conversation`](Self::match_conversation).
    pub fn match_request(
        &mut self,
        tenant: &str,
        request: &mut ApiRequest,
        response_id: &str,
        now: Timestamp,
    ) -> Result<Match, ApiError> {
        let scope = crate::gateway::translate::request_scope(tenant, request);
        let ahead = Ahead {
            scope: &scope,
            hashes: None,
            prompt_ready: false,
            find: false,
        };
        self.match_prepared(tenant, request, ahead, response_id, now)
    }

    /// Matches a request of any API with what was computed ahead of it ([`Ahead`]): puts
    /// the stored history of a Responses request's `previous_response_id` in front of it,
    /// finds what it continues or starts in the scope of `tenant`, and, for a Responses
    /// request with `store: true`, remembers to store its response under `response_id`.
    ///
    /// # Errors
    /// Those of [`resolve_previous`](Self::resolve_previous); 400 when the request's tool
    /// results do not match the calls the session waits for, 429 when the conversation is
    /// busy with another request.
    pub(crate) fn match_prepared(
        &mut self,
        tenant: &str,
        request: &mut ApiRequest,
        ahead: Ahead<'_>,
        response_id: &str,
        now: Timestamp,
    ) -> Result<Match, ApiError> {
        self.resolve_references(tenant, request)?;
        let store = (request.api == Api::Responses && request.store).then(|| PendingStore {
            tenant: tenant.to_owned(),
            response_id: response_id.to_owned(),
            previous: request.previous_response_id.clone(),
            input: request.conversation.messages.clone(),
        });
        let Ahead {
            scope,
            hashes,
            prompt_ready,
            find,
        } = ahead;
        self.resolve_previous(tenant, request, now)?;
        let hashes = hashes.unwrap_or_else(|| history_hashes(tenant, scope, &request.conversation));
        let matched = self.match_hashed(
            &request.conversation,
            scope,
            hashes,
            (prompt_ready, find),
            now,
        )?;
        match &matched {
            Match::Continue { session, .. } | Match::Start { session, .. } => {
                if let Some(entry) = self.sessions.get_mut(session) {
                    entry.store = store;
                }
            }
            Match::Find { hash, .. } => {
                if let Some(finding) = self.finding.get_mut(hash) {
                    finding.store = store;
                }
            }
        }
        Ok(matched)
    }

    #[cfg(test)]
    /// Finds what a request continues, or starts. The session is busy until
    /// [`response_done`](Self::response_done) or [`response_failed`](Self::response_failed).
    ///
    /// # Errors
    /// 400 when the request's tool results do not match the calls the session waits for
    /// (naming the ids), 429 when the conversation is busy with another request.
    pub fn match_conversation(
        &mut self,
        scope: &str,
        conversation: &Conversation,
        now: Timestamp,
    ) -> Result<Match, ApiError> {
        self.match_hashed(
            conversation,
            scope,
            history_hashes(scope, scope, conversation),
            (false, false),
            now,
        )
    }

    /// Finds what a conversation continues, or starts, with its [`history_hashes`] computed
    /// ahead.
    fn match_hashed(
        &mut self,
        conversation: &Conversation,
        scope: &str,
        hashes: Hashes,
        (prompt_ready, find): (bool, bool),
        now: Timestamp,
    ) -> Result<Match, ApiError> {
        let Hashes {
            live: hash,
            store,
            hasher,
            prefixes,
        } = hashes;
        let n = conversation.history_len();
        let new = &conversation.messages[n..];
        let given = tool_results(new);
        if n == 0 {
            if let Some((id, _)) = given.first() {
                return Err(ApiError::invalid(
                    "messages",
                    format!("messages: tool result for unknown tool_use id {id}"),
                ));
            }
            let session = self.insert(scope, hasher, now);
            return Ok(Match::Start {
                session,
                kind: SessionKind::New,
                prompt: if prompt_ready {
                    Vec::new()
                } else {
                    prompt_blocks(new)
                },
                replaces: None,
                reason: None,
            });
        }
        if self.finding.contains_key(&store) {
            return Err(busy());
        }
        // A history the gateway did not write as it is (an assistant turn's blocks in another
        // order) continues the live session whose calls its tool results answer, all of them.
        let holding = || self.holding(scope, &given);
        let Some(session) = self.by_hash.get(&hash).copied().or_else(holding) else {
            // Results for the calls a live conversation of the tenant holds under other
            // settings go on under the new ones (that conversation is closed); else the
            // history may have parted from a live conversation's.
            let parted = self
                .holding_elsewhere(scope, &given)
                .map(|holder| Parted {
                    reason: ResumeReason::Settings,
                    replaces: Some(holder),
                })
                .or_else(|| self.diverged(scope, &prefixes));
            // Tool results are written into the history a new CLI resumes whatever the store
            // holds: only a history without them is looked up.
            if find && given.is_empty() {
                self.finding.insert(
                    store.clone(),
                    Finding {
                        scope: scope.to_owned(),
                        hasher,
                        store: None,
                    },
                );
                return Ok(Match::Find {
                    hash: store,
                    parted,
                });
            }
            return Ok(self.rebuild(scope, hasher, conversation, parted, prompt_ready, now));
        };
        let entry = self
            .sessions
            .get_mut(&session)
            .expect("hashes point at sessions");
        if entry.busy() {
            return Err(busy());
        }
        let expected: BTreeSet<&str> = entry.expected.iter().map(String::as_str).collect();
        let given_ids: BTreeSet<&str> = given.iter().map(|(id, _)| id.as_str()).collect();
        let mut missing: Vec<&str> = entry
            .expected
            .iter()
            .map(String::as_str)
            .filter(|id| !given_ids.contains(id))
            .collect();
        missing.dedup();
        let unknown: Vec<&str> = given
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| !expected.contains(id) && !entry.delivered.contains(*id))
            .collect();
        let mut problems = Vec::new();
        if !missing.is_empty() {
            problems.push(format!(
                "the tool calls {} have no tool result; every tool_use of the previous response \
                 needs its result in this request",
                missing.join(", ")
            ));
        }
        if !unknown.is_empty() {
            problems.push(format!(
                "tool result for unknown tool_use id {}",
                unknown.join(", ")
            ));
        }
        if !problems.is_empty() {
            return Err(ApiError::invalid(
                "messages",
                format!("messages: {}", problems.join("; ")),
            ));
        }
        let gone = |id: &String| entry.settled.contains(id) || entry.delivered.contains(id);
        if !given.is_empty() && given.iter().all(|(id, _)| gone(id)) {
            // Every call was given up on (deadline) and the turn went on without the client, or
            // the results were delivered by a request whose response failed (the client went
            // away) and are sent again: the live session no longer matches; a new one carries
            // the whole history.
            let late = given.iter().any(|(id, _)| entry.settled.contains(id));
            let parted = Parted {
                reason: if late {
                    ResumeReason::Late
                } else {
                    ResumeReason::Retried
                },
                replaces: Some(session),
            };
            let scope = scope.to_owned();
            return Ok(self.rebuild(
                &scope,
                hasher,
                conversation,
                Some(parted),
                prompt_ready,
                now,
            ));
        }
        let mut answers = Vec::new();
        entry.delivered = given.iter().map(|(id, _)| id.clone()).collect();
        for (id, result) in given {
            if entry.settled.remove(&id) {
                continue;
            }
            match entry.held.remove(&id) {
                Some(held) => answers.push((held.request_id, result)),
                None => {
                    entry.results.insert(id, result);
                }
            }
        }
        entry.expected.clear();
        entry.in_flight = Some(hasher);
        entry.last_active = now;
        let prompt = prompt_blocks(new);
        Ok(Match::Continue {
            session,
            answers,
            prompt: (!prompt.is_empty()).then_some(prompt),
        })
    }

    /// The live session of `scope` (the same tenant and settings) whose last response's client
    /// tool calls are exactly those `given` results answer.
    fn holding(&self, scope: &str, given: &[(String, McpCallResult)]) -> Option<SessionId> {
        self.holder(given, |entry| entry.scope == scope)
    }

    /// The live session of the same tenant under other settings than `scope`'s, idle, whose
    /// last response's client tool calls are exactly those `given` results answer.
    fn holding_elsewhere(
        &self,
        scope: &str,
        given: &[(String, McpCallResult)],
    ) -> Option<SessionId> {
        let tenant = scope_tenant(scope);
        self.holder(given, |entry| {
            entry.scope != scope && scope_tenant(&entry.scope) == tenant && !entry.busy()
        })
    }

    /// The live session `which` takes whose last response's client tool calls are exactly
    /// those `given` results answer.
    fn holder(
        &self,
        given: &[(String, McpCallResult)],
        which: impl Fn(&Entry) -> bool,
    ) -> Option<SessionId> {
        if given.is_empty() {
            return None;
        }
        let ids: BTreeSet<&str> = given.iter().map(|(id, _)| id.as_str()).collect();
        fn calls(entry: &Entry) -> BTreeSet<&str> {
            entry.expected.iter().map(String::as_str).collect()
        }
        self.sessions
            .iter()
            .find(|(_, entry)| which(entry) && !entry.expected.is_empty() && calls(entry) == ids)
            .map(|(id, _)| *id)
    }

    fn rebuild(
        &mut self,
        scope: &str,
        hasher: HistoryHasher,
        conversation: &Conversation,
        parted: Option<Parted>,
        prompt_ready: bool,
        now: Timestamp,
    ) -> Match {
        let replaces = parted.and_then(|p| p.replaces);
        if let Some(old) = replaces {
            self.close(old);
        }
        let session = self.insert(scope, hasher, now);
        Match::Start {
            session,
            kind: SessionKind::Rebuilt,
            prompt: if prompt_ready {
                Vec::new()
            } else {
                rebuild_prompt(&conversation.messages)
            },
            replaces,
            reason: parted.map(|p| p.reason),
        }
    }

    /// Where a history that matches no live session parted from one of `scope`: the length of
    /// the longest of its shorter histories (`prefixes`, longest first) that a live session
    /// holds, and that session when it waits for client tool results the request does not
    /// bring (the client went another way: its CLI is closed).
    fn diverged(&self, scope: &str, prefixes: &[(usize, String)]) -> Option<Parted> {
        prefixes.iter().find_map(|(at, hash)| {
            let session = *self.by_hash.get(&live_hash(scope, hash))?;
            let entry = self.sessions.get(&session)?;
            let waits = !entry.busy() && (!entry.expected.is_empty() || !entry.held.is_empty());
            Some(Parted {
                reason: ResumeReason::Diverged(*at),
                replaces: waits.then_some(session),
            })
        })
    }

    fn insert(&mut self, scope: &str, request: HistoryHasher, now: Timestamp) -> SessionId {
        self.next_id += 1;
        let id = self.next_id;
        self.sessions.insert(
            id,
            Entry {
                scope: scope.to_owned(),
                in_flight: Some(request),
                last_active: now,
                ..Entry::default()
            },
        );
        id
    }

    /// The session store answered a [`Match::Find`] for the history `hash`: the request
    /// starts a session (busy until its response ends), whose id this gives; `None` when no
    /// request is looked up under `hash` (it went away: [`abandon`](Self::abandon)).
    pub fn found(&mut self, hash: &str, now: Timestamp) -> Option<SessionId> {
        let finding = self.finding.remove(hash)?;
        let session = self.insert(&finding.scope, finding.hasher, now);
        if let Some(entry) = self.sessions.get_mut(&session) {
            entry.store = finding.store;
        }
        Some(session)
    }

    /// Forgets a request looked up under `hash` (its client went away).
    pub fn abandon(&mut self, hash: &str) {
        self.finding.remove(hash);
    }
}

/// The tenant a [`request_scope`](crate::gateway::translate::request_scope) is of (its first
/// line).
fn scope_tenant(scope: &str) -> &str {
    scope.split('\n').next().unwrap_or(scope)
}
