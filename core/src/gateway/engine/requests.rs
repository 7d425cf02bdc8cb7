//! A request to its conversation: the queue and the caps, the live CLI it continues (or the
//! store's, or a new one) and the turn it opens.

use super::metering::QuotaCheck;
use super::prepared::Offer;
use super::*;

impl Gateway {
    /// A client's request on one of the three APIs without its HTTP head (for a host that
    /// routes and authenticates requests itself; [`handle_http`](Self::handle_http) does both),
    /// authenticated as `tenant` (the caller's key; it scopes conversations and stored
    /// responses). The response comes out as `Respond`, `Body`… and `End` outputs for
    /// `request`.
    pub fn handle_request(
        &mut self,
        now: Timestamp,
        request: RequestId,
        api: Api,
        tenant: &str,
        body: &[u8],
    ) {
        let prepared = prepared::prepare_request(api, tenant, body);
        self.handle_prepared(now, request, api, tenant, prepared);
    }

    /// [`handle_request`](Self::handle_request) with its body already read and prepared by
    /// [`prepare_request`].
    pub(super) fn handle_prepared(
        &mut self,
        now: Timestamp,
        request: RequestId,
        api: Api,
        tenant: &str,
        parsed: Result<PreparedRequest, ApiError>,
    ) {
        self.now = now;
        self.arrivals.insert(
            request,
            Arrival {
                api,
                tenant: tenant.to_owned(),
                at: now,
                cli_sent: None,
                cli_first: None,
            },
        );
        let parsed = match parsed {
            Ok(r) => r,
            Err(error) => return self.respond_error(request, api, &[], &error),
        };
        if let Some(error) = self.over_store_quota(tenant) {
            return self.respond_error(request, api, &[], &error);
        }
        let queued = Queued {
            request,
            api,
            tenant: tenant.to_owned(),
            parsed,
            deadline: now.saturating_add(self.config.queue_timeout_ms),
        };
        self.admit_turn(now, queued);
    }

    /// A turn whose request is read: refused over its key's quota, served, or queued.
    pub(super) fn admit_turn(&mut self, now: Timestamp, queued: Queued) {
        let (request, api) = (queued.request, queued.api);
        match self.check_quota(&queued.tenant) {
            QuotaCheck::Go => {}
            QuotaCheck::Refuse(error, headers) => {
                return self.respond_error(request, api, &headers, &error);
            }
            QuotaCheck::Wait => return self.wait_for_quota(queued),
        }
        let (tenant, parsed) = (queued.tenant.as_str(), queued.parsed);
        // Draining, nothing waits: a new conversation gets its 503 at once, a running one's
        // next turn goes ahead (only the live sessions' turns remain to be served).
        if self.draining.is_some() {
            return self.serve(now, request, (api, tenant), parsed, false);
        }
        // Requests wait their turn in order: none overtakes one already waiting.
        if self.queue.is_empty() && self.has_room(tenant) {
            return self.serve(now, request, (api, tenant), parsed, false);
        }
        if self.queue.len() >= self.config.max_queue {
            let error = ApiError::new(
                ApiErrorKind::RateLimit,
                format!(
                    "the gateway is at its limit of concurrent requests and {} are waiting; \
                     retry later",
                    self.queue.len()
                ),
            )
            .retry_after(1);
            return self.respond_error(request, api, &[], &error);
        }
        self.queue.push_back(Queued { parsed, ..queued });
        // It may fit now behind requests that wait for their own tenant's turns.
        self.turn_freed = true;
    }

    /// Whether a response may start now for `tenant`, under the concurrency caps.
    pub(super) fn has_room(&self, tenant: &str) -> bool {
        if self.requests.len() >= self.config.max_concurrent {
            return false;
        }
        let mine = self
            .requests
            .values()
            .filter(|r| r.tenant == tenant)
            .count();
        mine < self.config.max_concurrent_per_key
    }

    /// Serves the waiting requests that fit now, oldest first (a tenant at its own cap does
    /// not hold up the others).
    pub(super) fn run_queue(&mut self) {
        self.turn_freed = false;
        let now = self.now;
        let mut i = 0;
        while i < self.queue.len() && self.requests.len() < self.config.max_concurrent {
            if !self.has_room(&self.queue[i].tenant) {
                i += 1;
                continue;
            }
            let queued = self.queue.remove(i).expect("in range");
            let tenant = &queued.tenant;
            self.serve(
                now,
                queued.request,
                (queued.api, tenant),
                queued.parsed,
                false,
            );
        }
    }

    /// Routes a valid request and starts its response. A stored response this gateway does
    /// not hold (it expired here, or was stored before a restart) is read from the session
    /// store first, unless `chained` (every stored response it continues is at hand).
    pub(super) fn serve(
        &mut self,
        now: Timestamp,
        request: RequestId,
        (api, tenant): (Api, &str),
        prepared: PreparedRequest,
        chained: bool,
    ) {
        let missing = (self.config.store && !chained)
            .then(|| self.missing_response(tenant, &prepared))
            .flatten();
        if let Some(id) = missing {
            return self.fetch_response(request, api, tenant, prepared, id);
        }
        let PreparedRequest {
            request: mut parsed,
            scope,
            hashes,
            offer,
            session: managed,
        } = prepared;
        let mut headers = Vec::new();
        if !parsed.ignored.is_empty() {
            headers.push((
                "x-ccwire-ignored".to_owned(),
                ignored_header(&parsed.ignored),
            ));
        }
        let response_id = (api == Api::Responses).then(|| self.response_id());
        let previous_response_id = parsed.previous_response_id.clone();
        let ahead = Ahead {
            scope: &scope,
            hashes,
            prompt_ready: offer.start_prompt.is_some(),
            find: self.config.store,
        };
        let route = self.registry.match_prepared(
            tenant,
            &mut parsed,
            ahead,
            response_id.as_deref().unwrap_or_default(),
            now,
        );
        let route = match route {
            Ok(route) => route,
            Err(error) => return self.respond_error(request, api, &headers, &error),
        };
        let opening = Opening {
            api,
            tenant: tenant.to_owned(),
            parsed,
            offer,
            headers,
            response_id,
            previous_response_id,
            session: managed,
        };
        match route {
            Match::Find { hash, parted } => self.find(request, opening, hash, parted),
            route => self.open(now, request, opening, route, None),
        }
    }

    /// Starts the response of a routed request: continues its live session, or starts one
    /// (that resumes a stored conversation with `resume`).
    pub(super) fn open(
        &mut self,
        now: Timestamp,
        request: RequestId,
        opening: Opening,
        route: Match,
        resume: Option<ResumeSpec>,
    ) {
        let Opening {
            api,
            tenant,
            parsed,
            offer,
            mut headers,
            response_id,
            previous_response_id,
            session: managed,
        } = opening;
        let Offer {
            client_tools,
            tools,
            listed,
            tools_digest,
            start_prompt,
            structured,
        } = offer;
        let managed_id = managed.as_ref().map(|m| m.id.as_str());
        let tenant = tenant.as_str();
        if let (
            Some(_),
            Match::Start {
                session, replaces, ..
            },
        ) = (self.draining, &route)
        {
            let (session, replaces) = (*session, *replaces);
            self.registry.close(session);
            if let Some(old) = replaces {
                self.close(now, old);
            }
            let error = ApiError::new(
                ApiErrorKind::Unavailable,
                "the gateway is shutting down and takes no new conversations; retry on another",
            )
            .retry_after(1);
            return self.respond_error(request, api, &headers, &error);
        }
        // A history no CLI wrote goes to a new CLI as the transcript it resumes; where it
        // cannot, as one prompt that retells it (counted, with why).
        let mut rebuilt_because = None;
        let (route, resume, start_prompt) = match (route, resume) {
            (
                Match::Start {
                    session,
                    kind: SessionKind::Rebuilt,
                    prompt,
                    replaces,
                    reason,
                },
                None,
            ) => match self.write_history(tenant, managed_id, &parsed) {
                Ok((spec, prompt)) => {
                    let reason = reason.unwrap_or(ResumeReason::History);
                    let route = Match::Start {
                        session,
                        kind: SessionKind::Resumed(reason),
                        prompt,
                        replaces,
                        reason: Some(reason),
                    };
                    (route, Some(spec), None)
                }
                Err(why) => {
                    rebuilt_because = Some(why);
                    self.count(tenant, |m| *m.rebuilds.entry(why).or_default() += 1);
                    let route = Match::Start {
                        session,
                        kind: SessionKind::Rebuilt,
                        prompt,
                        replaces,
                        reason,
                    };
                    (route, None, start_prompt)
                }
            },
            (route, resume) => (route, resume, start_prompt),
        };
        let kind = match &route {
            Match::Continue { .. } | Match::Find { .. } => SessionKind::Continued,
            Match::Start { kind, .. } => *kind,
        };
        headers.push(("x-ccwire-session".to_owned(), kind.as_str().to_owned()));
        if let Some(why) = rebuilt_because {
            headers.push(("x-ccwire-session-reason".to_owned(), why.to_owned()));
        }
        if let SessionKind::Resumed(reason) = kind {
            headers.push(("x-ccwire-session-reason".to_owned(), reason.to_string()));
            self.count(tenant, |m| {
                *m.resumes.entry(reason.as_str()).or_default() += 1
            });
        }
        let wall = self.wall_ms();
        self.count(tenant, |m| {
            *m.turns.entry(kind.as_str()).or_default() += 1;
            m.recent.at(wall).turns += 1;
        });
        let encoder = ResponseEncoder::new(EncoderOptions {
            api,
            stream: parsed.stream,
            model: parsed.model.clone(),
            id: response_id,
            created: (self.config.unix_epoch_ms.saturating_add(now)) / 1000,
            include_usage: parsed.include_usage,
            client_tools,
            client_tool_prefix: None,
            previous_response_id,
            store: parsed.store,
            show_thinking: parsed.show_thinking,
            structured: structured.as_ref().map(|s| s.answer.clone()),
            echo: parsed.echo.clone(),
        });
        match route {
            Match::Find { .. } => unreachable!("a request looked up is opened once found"),
            Match::Continue {
                session,
                answers,
                prompt,
            } => {
                let Some(live) = self.lives.get_mut(&session) else {
                    // The registry and the live sessions are closed together.
                    self.registry.close(session);
                    let error = ApiError::new(
                        ApiErrorKind::Api,
                        "the conversation's Claude Code session ended",
                    );
                    return self.respond_error(request, api, &headers, &error);
                };
                live.request = Some(request);
                let flight = InFlight::new(session, tenant, api, parsed.stream, encoder, headers);
                self.requests.insert(request, flight);
                for (request_id, result) in answers {
                    // A call the CLI gave up on meanwhile is answered no more.
                    let _ = live.session.respond_mcp(now, &request_id, result);
                }
                if let Some(prompt) = prompt {
                    let message = UserMessage::blocks(prompt_content(&prompt));
                    if let Err(error) = live.session.send_user_message(now, message) {
                        let error = ApiError::new(ApiErrorKind::Api, error.to_string());
                        self.fail(now, request, error);
                    }
                }
                self.sent_to_cli(request);
                self.drain_session(now, session);
            }
            Match::Start {
                session,
                prompt,
                replaces,
                ..
            } => {
                if let Some(old) = replaces {
                    self.close(now, old);
                }
                let cli = self.cli_for(
                    &parsed,
                    (tools, listed),
                    structured.as_ref(),
                    tenant,
                    managed.as_ref(),
                );
                // The pool starts more CLIs of these settings; without one they serve this
                // CLI alone (a request's tools are not copied). A resumed conversation's CLI
                // is its own, and so is a Managed Agents session's (its own directory).
                let settings = (self.config.pool > 0 && resume.is_none() && managed.is_none())
                    .then(|| cli.clone());
                let signature = format!(
                    "{}\n{:?}\n{}\n{tools_digest}",
                    cli.spec.args.join("\u{0}"),
                    cli.spec.tenant,
                    Value::Object(cli.init.clone()),
                );
                // A CLI that goes on from the client's tool results by itself is sent nothing.
                let prompt = match (start_prompt, resume.as_ref().is_some_and(|r| r.rerun)) {
                    (_, true) => None,
                    (Some(ready), false) => Some(FirstPrompt::Ready(ready)),
                    (None, false) => Some(FirstPrompt::Message(UserMessage::blocks(
                        prompt_content(&prompt),
                    ))),
                };
                // A tenant at its own cap makes room from its own conversations.
                let own = self
                    .lives
                    .iter()
                    .filter(|(id, l)| l.tenant == tenant && !self.pool.contains_key(id))
                    .count();
                let cap = self.sessions_cap(tenant);
                if own >= cap {
                    let Some(idle) = self.idle_to_evict(Some(tenant)) else {
                        self.registry.close(session);
                        let limit = cap;
                        let why = format!("this key runs its maximum of {limit} conversations");
                        return self.respond_error(request, api, &headers, &at_cap(why));
                    };
                    self.evict(now, idle);
                }
                let warm = match (&resume, &managed) {
                    (None, None) => self.take_warm(&signature),
                    _ => None,
                };
                let session = match warm {
                    Some(warm) => {
                        // A CLI started ahead takes the conversation.
                        self.registry.rekey(session, warm);
                        self.metrics.pool_hits += 1;
                        let wall = self.wall_ms();
                        self.metrics.recent.at(wall).pool_hits += 1;
                        let live = self.lives.get_mut(&warm).expect("warm CLIs are live");
                        match (&mut live.starting, prompt) {
                            (Some(starting), prompt) => starting.prompt = prompt,
                            (None, Some(prompt)) => {
                                let _ = prompt.send(&mut live.session, now);
                                self.sent_to_cli(request);
                            }
                            (None, None) => {}
                        }
                        warm
                    }
                    None => {
                        if settings.is_some() {
                            self.metrics.pool_misses += 1;
                            let wall = self.wall_ms();
                            self.metrics.recent.at(wall).pool_misses += 1;
                        }
                        // A conversation goes before a warm CLI of other settings, and before
                        // the CLI of a conversation that waits for nothing (it is resumed or
                        // rebuilt when it comes back): the tenant's own first, the least
                        // recently used.
                        if self.lives.len() >= self.config.max_sessions {
                            if let Some(&oldest) = self.pool.keys().next() {
                                self.close(now, oldest);
                            } else if let Some(idle) = self
                                .idle_to_evict(Some(tenant))
                                .or_else(|| self.idle_to_evict(None))
                            {
                                self.evict(now, idle);
                            }
                        }
                        if self.lives.len() >= self.config.max_sessions {
                            self.registry.close(session);
                            let limit = self.config.max_sessions;
                            let why = format!("the gateway runs its maximum of {limit} sessions");
                            return self.respond_error(request, api, &headers, &at_cap(why));
                        }
                        self.spawn(now, session, cli, prompt, resume);
                        session
                    }
                };
                if let Some(live) = self.lives.get_mut(&session) {
                    live.request = Some(request);
                    live.tenant = tenant.to_owned();
                }
                self.flush_mirrored(session);
                let flight = InFlight::new(session, tenant, api, parsed.stream, encoder, headers);
                self.requests.insert(request, flight);
                self.drain_session(now, session);
                if let Some(cli) = settings {
                    self.refill(now, &signature, &cli, warm.is_some());
                }
            }
        }
    }
}
