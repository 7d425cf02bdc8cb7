//! CLIs closed, retired and evicted, and the drain.

use super::*;

impl Gateway {
    /// A Responses API id: `resp_` and 32 hex digits.
    pub(super) fn response_id(&mut self) -> String {
        self.next_response += 1;
        self.secret_id("resp_", self.next_response)
    }

    /// `prefix` and 32 hex digits of the keyed SHA-256 of `prefix` and `counter`: 128 bits
    /// that no number of other ids reveals without the [id key](GatewayConfig::id_key).
    pub(super) fn secret_id(&self, prefix: &str, counter: u64) -> String {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(self.config.id_key);
        hash.update(prefix.as_bytes());
        hash.update(counter.to_le_bytes());
        format!(
            "{prefix}{}",
            crate::conversation::hex(&hash.finalize()[..16])
        )
    }

    /// Starts shutting down: new conversations get a 503, warm CLIs are closed, every session
    /// is closed as soon as it has no turn running (no response in flight, no tool call
    /// waiting for the client), and whatever still runs after `grace_ms` is closed then.
    /// [`is_drained`](Self::is_drained) says when no CLI is left.
    pub fn drain(&mut self, now: Timestamp, grace_ms: u64) {
        self.now = now;
        if self.draining.is_some() {
            return;
        }
        self.draining = Some(now.saturating_add(grace_ms));
        self.pool_wanted.clear();
        for queued in std::mem::take(&mut self.queue) {
            let Queued {
                request,
                api,
                tenant,
                parsed,
                ..
            } = queued;
            self.serve(now, request, (api, &tenant), parsed, false);
        }
        for request in std::mem::take(&mut self.watchers).into_keys() {
            self.outputs.push_back(GatewayOutput::End { request });
        }
        let warm: Vec<SessionId> = self.pool.keys().copied().collect();
        for id in warm {
            self.close(now, id);
        }
        self.close_finished(now);
    }

    /// Whether the gateway is draining ([`drain`](Self::drain)).
    pub fn is_draining(&self) -> bool {
        self.draining.is_some()
    }

    /// Whether the gateway is draining and no CLI is left.
    pub fn is_drained(&self) -> bool {
        self.draining.is_some() && self.lives.is_empty()
    }

    /// While draining: closes the sessions with no turn running.
    pub(super) fn close_finished(&mut self, now: Timestamp) {
        let done: Vec<SessionId> = self
            .lives
            .iter()
            .filter(|(id, live)| {
                live.request.is_none() && live.settle_by.is_none() && self.registry.is_idle(**id)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            self.close(now, id);
        }
    }

    /// Closes a session (the gateway shutting down): its response, if any, fails, and the
    /// host is asked to end its process.
    pub fn close(&mut self, now: Timestamp, session: SessionId) {
        self.now = now;
        self.registry.close(session);
        self.pool.remove(&session);
        self.forget_session_approvals(session);
        let Some(live) = self.lives.remove(&session) else {
            return;
        };
        self.console_closed(session, &live.cli_id);
        self.outputs.push_back(GatewayOutput::Close { session });
        if let Some(request) = live.request {
            let error = ApiError::new(
                ApiErrorKind::Api,
                "the Claude Code session was closed before the response was complete",
            );
            self.fail(now, request, error);
        }
        self.retire(Retired::Session(Box::new(live)));
    }

    /// The live conversation used least recently whose CLI waits for nothing: no request in
    /// flight, no call held or expected from the client, no approval pending, not starting or
    /// settling an interrupted turn; of `tenant`'s conversations when one is named.
    pub(super) fn idle_to_evict(&self, tenant: Option<&str>) -> Option<SessionId> {
        self.lives
            .iter()
            .filter(|(id, live)| {
                tenant.is_none_or(|t| live.tenant == t)
                    && !self.pool.contains_key(id)
                    && self.is_waiting_for_nothing(**id)
            })
            .min_by_key(|(id, _)| self.registry.last_active(**id))
            .map(|(id, _)| *id)
    }

    /// Closes an idle conversation's CLI to make room (it is resumed, or without a session
    /// store rebuilt, when it comes back).
    pub(super) fn evict(&mut self, now: Timestamp, session: SessionId) {
        *self.metrics.exits.entry("evicted_idle").or_default() += 1;
        self.record_closed(session, RecordState::Hibernated);
        self.close(now, session);
    }

    /// Keeps an ended session for the host to free ([`take_ended`](Self::take_ended)); past
    /// a few, the oldest is freed here.
    pub(super) fn retire(&mut self, retired: Retired) {
        if self.ended.len() >= ENDED_KEPT {
            self.ended.remove(0);
        }
        self.ended.push(retired);
    }

    /// The sessions and responses that ended since the last call, for the host to drop where
    /// it holds nothing up: freeing those of hundreds of thousands of client tools takes a while,
    /// and a host that shares the gateway between threads drops them after releasing its
    /// lock. A host that never calls this loses nothing: past a few, they are freed as they
    /// end.
    pub fn take_ended(&mut self) -> Ended {
        Ended(std::mem::take(&mut self.ended))
    }

    /// Drains a session's outputs: writes go to the host, chunks to the gateway's bookkeeping
    /// and the response in flight.
    pub(super) fn drain_session(&mut self, now: Timestamp, session: SessionId) {
        loop {
            let Some(live) = self.lives.get_mut(&session) else {
                return;
            };
            let Some(output) = live.session.poll_output() else {
                return;
            };
            match output {
                Output::Write(bytes) => {
                    self.outputs
                        .push_back(GatewayOutput::Write { session, bytes });
                }
                Output::Chunk(chunk) => self.on_chunk(now, session, chunk),
            }
        }
    }

    /// A CLI that did not become ready (`why`: its `initialize` failed, or it did not answer
    /// in time): closed, and the request it was started for failed, saying so.
    pub(super) fn start_failed(&mut self, now: Timestamp, session: SessionId, why: &str) {
        let request = self.lives.get_mut(&session).and_then(|l| l.request.take());
        self.close(now, session);
        if let Some(request) = request {
            let why = format!("cannot start a Claude Code session: {why}");
            self.fail(now, request, ApiError::new(ApiErrorKind::Api, why));
        }
    }
}
