//! Deadlines: the next one ([`poll_timeout`](Gateway::poll_timeout)) and what each does when
//! it comes ([`handle_timeout`](Gateway::handle_timeout)).

use super::*;

impl Gateway {
    /// Applies every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.now = now;
        if self.draining.is_some_and(|until| until <= now) {
            let all: Vec<SessionId> = self.lives.keys().copied().collect();
            for id in all {
                self.close(now, id);
            }
        }
        for action in self.registry.handle_timeout(now) {
            match action {
                Action::Answer {
                    session,
                    request_id,
                    result,
                } => {
                    self.metrics.held_call_timeouts += 1;
                    if let Some(live) = self.lives.get_mut(&session) {
                        let _ = live.session.respond_mcp(now, &request_id, result);
                        self.drain_session(now, session);
                    }
                }
                Action::Close { session, expired } => {
                    let state = if expired {
                        RecordState::Expired
                    } else {
                        *self.metrics.exits.entry("hibernated").or_default() += 1;
                        RecordState::Hibernated
                    };
                    self.record_closed(session, state);
                    self.close(now, session);
                }
            }
        }
        let ids: Vec<SessionId> = self.lives.keys().copied().collect();
        for session in ids {
            let Some(live) = self.lives.get_mut(&session) else {
                continue;
            };
            if live.starting.as_ref().is_some_and(|s| s.deadline <= now) {
                let seconds = self.config.start_timeout_ms / 1000;
                let why = format!("the CLI did not answer within {seconds} s");
                self.start_failed(now, session, &why);
                continue;
            }
            if live.settle_by.is_some_and(|t| t <= now) {
                self.close(now, session);
                continue;
            }
            if live.session.poll_timeout().is_some_and(|(t, _)| t <= now) {
                live.session.handle_timeout(now);
                self.drain_session(now, session);
            }
        }
        let expired: Vec<String> = self
            .approvals
            .iter()
            .filter(|(_, a)| a.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let decision = PermissionDecision::deny(
                "No one answered this approval in time; the tool did not run.",
            );
            self.settle_approval(now, &id, decision, "expired");
        }
        self.retry_turns(now);
        self.keeping_due(now);
        for (&request, (_, next_ping)) in &mut self.watchers {
            if *next_ping <= now {
                *next_ping = now.saturating_add(self.config.ping_every_ms);
                self.outputs.push_back(GatewayOutput::Body {
                    request,
                    bytes: b": ping\n\n".to_vec(),
                });
            }
        }
        while let Some(at) = self.queue.iter().position(|q| q.deadline <= now) {
            let queued = self.queue.remove(at).expect("in range");
            let error = ApiError::new(
                ApiErrorKind::RateLimit,
                format!(
                    "the gateway stayed at its limit of concurrent requests for {} s; retry later",
                    self.config.queue_timeout_ms / 1000
                ),
            )
            .retry_after(1);
            self.respond_error(queued.request, queued.api, &[], &error);
        }
        let ping_every = self.config.ping_every_ms;
        for (&request, flight) in &mut self.requests {
            if flight.next_ping.is_some_and(|t| t <= now) {
                let frame = flight.encoder.ping();
                flight.next_ping = Some(now.saturating_add(ping_every));
                self.outputs.push_back(GatewayOutput::Body {
                    request,
                    bytes: frame.into_bytes(),
                });
            }
        }
    }

    /// The next deadline and why; call [`handle_timeout`](Self::handle_timeout) then.
    pub fn poll_timeout(&self) -> Option<(Timestamp, GatewayTimeout)> {
        let mut next: Option<(Timestamp, GatewayTimeout)> = None;
        let mut consider = |at: Timestamp, why: GatewayTimeout| {
            if next.as_ref().is_none_or(|(t, _)| at < *t) {
                next = Some((at, why));
            }
        };
        if let Some((at, why)) = self.registry.poll_timeout() {
            consider(at, why.into());
        }
        for (&session, live) in &self.lives {
            if let Some(starting) = &live.starting {
                consider(starting.deadline, GatewayTimeout::Start { session });
            }
            if let Some(at) = live.settle_by {
                consider(at, GatewayTimeout::Settle { session });
            }
            if let Some((at, reason)) = live.session.poll_timeout() {
                consider(at, GatewayTimeout::Session { session, reason });
            }
        }
        for (&request, flight) in &self.requests {
            if let Some(at) = flight.next_ping {
                consider(at, GatewayTimeout::Ping { request });
            }
        }
        if let Some(approval) = self.approvals.values().min_by_key(|a| a.deadline) {
            consider(approval.deadline, GatewayTimeout::Approval);
        }
        if let Some(at) = self.agent_sessions.next_retry() {
            consider(at, GatewayTimeout::ManagedTurn);
        }
        for (&request, (_, at)) in &self.watchers {
            consider(*at, GatewayTimeout::Ping { request });
        }
        if let Some((&request, keeping)) = self.keeping.iter().min_by_key(|(_, k)| k.deadline) {
            consider(keeping.deadline, GatewayTimeout::Keep { request });
        }
        if let Some(until) = self.draining.filter(|_| !self.lives.is_empty()) {
            consider(until, GatewayTimeout::Drain);
        }
        if let Some(queued) = self.queue.iter().min_by_key(|q| q.deadline) {
            consider(
                queued.deadline,
                GatewayTimeout::Queued {
                    request: queued.request,
                },
            );
        }
        next
    }
}
