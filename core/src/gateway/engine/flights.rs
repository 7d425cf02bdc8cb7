//! A CLI's chunks into the responses in flight: encoders fed, held calls and approvals noted,
//! watches told, errors and ends answered.

use super::*;

impl Gateway {
    pub(super) fn on_chunk(&mut self, now: Timestamp, session: SessionId, chunk: Chunk) {
        if let Chunk::TranscriptMirror { file_path, entries } = chunk {
            return self.on_mirror(session, &file_path, entries);
        }
        self.meter_chunk(session, &chunk);
        if let (Chunk::SessionInit { model, .. }, Some(live)) =
            (&chunk, self.lives.get_mut(&session))
        {
            // Kept in its record (the console lists it).
            live.watched.model.clone_from(model);
        }
        if self.config.console {
            self.console_chunk(session, &chunk);
        }
        match &chunk {
            Chunk::PermissionRequest { .. } => self.on_permission_request(now, session, &chunk),
            Chunk::PermissionResolved { request_id, .. } => {
                self.permission_settled(session, request_id);
                let id = self
                    .approvals
                    .iter()
                    .find(|(_, a)| a.session == session && &a.request_id == request_id)
                    .map(|(id, _)| id.clone());
                if let Some(id) = id {
                    // The CLI settled it itself (the turn was interrupted).
                    self.forget_approval(&id, "cancelled");
                }
            }
            _ => {}
        }
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        match &chunk {
            Chunk::ControlResult {
                request_id,
                ok,
                response,
                error,
                ..
            } if live
                .starting
                .as_ref()
                .is_some_and(|s| &s.init_id == request_id) =>
            {
                let starting = live.starting.take().expect("checked above");
                if *ok {
                    if self.models.is_none() {
                        self.models = response
                            .as_ref()
                            .and_then(|r| r.to_value().get("models").cloned());
                    }
                    if let Some(prompt) = starting.prompt {
                        let request = live.request;
                        match prompt.send(&mut live.session, now) {
                            Ok(()) => {
                                if let Some(request) = request {
                                    self.sent_to_cli(request);
                                }
                            }
                            Err(error) => {
                                if let Some(request) = request {
                                    let error = ApiError::new(ApiErrorKind::Api, error.to_string());
                                    self.fail(now, request, error);
                                }
                            }
                        }
                    }
                } else {
                    let why = error.as_deref().unwrap_or("initialize failed").to_owned();
                    self.start_failed(now, session, &why);
                }
                return;
            }
            Chunk::McpToolCall {
                request_id,
                server,
                tool_use_id,
                ..
            } if server == CLIENT_SERVER => {
                let action =
                    self.registry
                        .tool_call(session, request_id, tool_use_id.as_deref(), now);
                if let CallAction::Answer(result) = action {
                    let _ = live.session.respond_mcp(now, request_id, result);
                }
            }
            Chunk::McpToolCancelled {
                tool_use_id: Some(id),
                ..
            } => self.registry.tool_cancelled(session, id),
            Chunk::HookRequest {
                request_id, event, ..
            } => {
                // The only hook the gateway registers: tools whose every call must ask (even
                // one the CLI deems safe to run unasked) are sent to the permission request.
                let output = match event.as_deref() {
                    Some("PreToolUse") => json!({"hookSpecificOutput": {
                        "hookEventName": "PreToolUse", "permissionDecision": "ask",
                        "permissionDecisionReason": "every call of this tool needs permission"}}),
                    _ => json!({}),
                };
                let _ = live.session.respond_hook(now, request_id, output);
            }
            Chunk::RateLimit {
                status, resets_at, ..
            } if status == "rejected" => {
                live.rate_limit_resets_ms = resets_at.map(|at| at * 1000);
            }
            Chunk::TurnComplete { .. } if live.settle_by.is_some() => {
                // The interrupted turn has ended: the conversation takes requests again.
                live.settle_by = None;
                self.registry.response_failed(session, now);
            }
            _ => {}
        }
        let Some(request) = live.request else {
            return;
        };
        if self.agent_sessions.is_turn(request) {
            self.turn_chunk(request, &chunk);
        }
        if let Some(arrival) = self.arrivals.get_mut(&request) {
            if arrival.cli_sent.is_some() && arrival.cli_first.is_none() {
                arrival.cli_first = Some(now);
            }
        }
        let Some(flight) = self.requests.get_mut(&request) else {
            return;
        };
        let frames = flight.encoder.push(&chunk);
        self.emit(now, request, frames);
    }

    /// Starts a server-sent event stream for `request`: its head at once (clients wait for
    /// it), `first` as its first bytes, then what `watch` follows as it comes, with
    /// keep-alives while quiet.
    pub(super) fn open_watch(&mut self, request: RequestId, watch: Watch, first: Vec<u8>) {
        self.outputs.push_back(GatewayOutput::Respond {
            request,
            status: 200,
            headers: vec![
                ("content-type".to_owned(), "text/event-stream".to_owned()),
                ("cache-control".to_owned(), "no-cache".to_owned()),
            ],
        });
        self.outputs.push_back(GatewayOutput::Body {
            request,
            bytes: first,
        });
        let next_ping = self.now.saturating_add(self.config.ping_every_ms);
        self.watchers.insert(request, (watch, next_ping));
    }

    /// Sends `bytes` to every event stream `which` picks (their keep-alives start over).
    pub(super) fn send_to_watches(&mut self, which: impl Fn(&Watch) -> bool, bytes: &[u8]) {
        let next_ping = self.now.saturating_add(self.config.ping_every_ms);
        for (&request, (watch, ping)) in &mut self.watchers {
            if which(watch) {
                *ping = next_ping;
                self.outputs.push_back(GatewayOutput::Body {
                    request,
                    bytes: bytes.to_vec(),
                });
            }
        }
    }

    /// Ends every event stream `which` picks, `last` their last bytes.
    pub(super) fn end_watches(&mut self, which: impl Fn(&Watch) -> bool, last: Option<&[u8]>) {
        let ending: Vec<RequestId> = (self.watchers.iter())
            .filter(|(_, (watch, _))| which(watch))
            .map(|(request, _)| *request)
            .collect();
        for request in ending {
            self.watchers.remove(&request);
            if let Some(bytes) = last {
                self.outputs.push_back(GatewayOutput::Body {
                    request,
                    bytes: bytes.to_vec(),
                });
            }
            self.outputs.push_back(GatewayOutput::End { request });
        }
    }

    /// Ends a request's response with an error: an HTTP error when nothing was sent yet, else
    /// the API's error event in the stream.
    pub(super) fn fail(&mut self, now: Timestamp, request: RequestId, error: ApiError) {
        let Some(flight) = self.requests.get_mut(&request) else {
            return;
        };
        let frames = flight.encoder.fail(error);
        self.emit(now, request, frames);
    }

    /// Sends what the encoder produced for a request, and settles it once complete.
    pub(super) fn emit(&mut self, now: Timestamp, request: RequestId, frames: Vec<String>) {
        let Some(flight) = self.requests.get_mut(&request) else {
            return;
        };
        // Where this response's end begins, should it wait for the store to keep its turn.
        let mark = self.outputs.len();
        if flight.stream && !frames.is_empty() {
            flight.next_ping = Some(now.saturating_add(self.config.ping_every_ms));
            if !flight.responded {
                flight.responded = true;
                let mut headers = vec![
                    ("content-type".to_owned(), "text/event-stream".to_owned()),
                    ("cache-control".to_owned(), "no-cache".to_owned()),
                ];
                headers.extend(flight.headers.iter().cloned());
                let wall = self.config.unix_epoch_ms.saturating_add(now);
                headers.extend(self.metering.headers(wall));
                self.outputs.push_back(GatewayOutput::Respond {
                    request,
                    status: 200,
                    headers,
                });
                self.responded(request, 200);
            }
            self.outputs.push_back(GatewayOutput::Body {
                request,
                bytes: frames.concat().into_bytes(),
            });
        }
        let Some(flight) = self.requests.get(&request) else {
            return;
        };
        if flight.encoder.outcome().is_none() {
            return;
        }
        let mut flight = self.requests.remove(&request).expect("looked up above");
        let headers = flight.headers.clone();
        if self.end_flight(now, request, &mut flight) {
            let failure = flight.encoder.failure(&keeping::not_kept());
            self.hold_end(
                (request, flight.session),
                mark,
                flight.api,
                headers,
                failure,
            );
        }
        // Freed by the host where it holds nothing up: its client tool names can be many.
        self.retire(Retired::Response(Box::new(flight)));
    }

    /// A response whose turn has an outcome: the conversation's bookkeeping, then the end of
    /// its stream or its whole answer. Whether the session store was asked to keep the turn
    /// (its end then waits for the answer).
    pub(super) fn end_flight(
        &mut self,
        now: Timestamp,
        request: RequestId,
        flight: &mut InFlight,
    ) -> bool {
        self.turn_freed = true;
        let mut keeping = false;
        let session = flight.session;
        let done = matches!(
            flight.encoder.outcome(),
            Some(Outcome::ToolCalls | Outcome::Finished(_))
        );
        if let Some(live) = self.lives.get_mut(&session) {
            if live.request == Some(request) {
                live.request = None;
            }
        }
        if done {
            let usage = flight.encoder.usage();
            for (kind, n) in [
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("cache_read", usage.cache_read_input_tokens),
                ("cache_creation", usage.cache_creation_input_tokens),
            ] {
                let wall = self.wall_ms();
                self.count(&flight.tenant, |m| {
                    *m.tokens.entry(kind).or_default() += n;
                    *m.recent.at(wall).tokens.entry(kind).or_default() += n;
                });
            }
            let pending: Vec<String> = flight
                .encoder
                .tool_calls()
                .into_iter()
                .map(|c| c.id.clone())
                .collect();
            let forced = flight.encoder.structured().is_some_and(|s| s.is_call());
            let output = (&flight.encoder.message(), flight.encoder.output_texts());
            let hash = self
                .registry
                .response_done(session, output, pending.clone(), now);
            if forced {
                // The CLI's turn is over (its structured-output tool took the call), and its
                // session answers every turn against the call's schema: the conversation goes
                // on in a new one, from the history the next request carries (a stored
                // response stays). Its transcript holds the structured-output call, not the
                // client's: it is not resumed.
                self.close(now, session);
            } else if let Some(hash) = hash {
                keeping = self.save_record(session, hash, pending, request);
            }
        } else if self
            .lives
            .get(&session)
            .is_none_or(|live| live.settle_by.is_none())
        {
            self.registry.response_failed(session, now);
        }
        // The conversation's new key is claimed before the client can send its next request.
        self.publish();
        if flight.responded {
            self.outputs.push_back(GatewayOutput::End { request });
            self.ended(request);
            return keeping;
        }
        match (flight.encoder.body(), flight.encoder.outcome()) {
            (Some(body), _) => {
                let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
                headers.extend(std::mem::take(&mut flight.headers));
                headers.extend(self.metering.headers(self.wall_ms()));
                self.respond_whole(request, 200, headers, body.to_string().into_bytes());
            }
            (None, Some(Outcome::Failed(error))) => {
                let mut error = error.clone();
                // An account limit the CLI reported says when it lifts.
                let resets = self
                    .lives
                    .get(&session)
                    .and_then(|l| l.rate_limit_resets_ms);
                if let (ApiErrorKind::RateLimit, None, Some(resets)) =
                    (error.kind, error.retry_after, resets)
                {
                    let wall = self.config.unix_epoch_ms.saturating_add(now);
                    error = error.retry_after(resets.saturating_sub(wall).div_ceil(1000).max(1));
                }
                let mut headers = std::mem::take(&mut flight.headers);
                headers.extend(self.metering.headers(self.wall_ms()));
                self.respond_error(request, flight.api, &headers, &error);
            }
            (None, _) => {
                let error = ApiError::new(ApiErrorKind::Api, "the response ended without a body");
                self.respond_error(request, flight.api, &flight.headers, &error);
            }
        }
        keeping
    }

    /// Moves the routing index's changes, and the responses stored for the session store,
    /// into the outputs.
    pub(super) fn publish(&mut self) {
        for stored in self.registry.take_stored() {
            let response = serde_json::to_string(&stored).expect("a response serializes");
            self.outputs
                .push_back(GatewayOutput::Store(StoreAsk::Response {
                    tenant: tenant_id(&stored.tenant),
                    id: stored.id,
                    response,
                }));
        }
        for change in self.registry.take_index_changes() {
            self.outputs.push_back(match change {
                IndexChange::Claim(key) => GatewayOutput::Claim { key },
                IndexChange::Release(key) => GatewayOutput::Release { key },
            });
        }
    }

    pub(super) fn respond_error(
        &mut self,
        request: RequestId,
        api: Api,
        extra: &[(String, String)],
        error: &ApiError,
    ) {
        let response = http::error_response(api, error, extra.to_vec());
        self.respond_whole(request, response.status, response.headers, response.body);
    }

    /// A whole JSON response.
    pub(super) fn respond_json(&mut self, request: RequestId, status: u16, value: &Value) {
        let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        self.respond_whole(request, status, headers, value.to_string().into_bytes());
    }

    pub(super) fn respond_whole(
        &mut self,
        request: RequestId,
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) {
        if self.agent_sessions.is_turn(request) {
            // A session's turn: its answer is the session's events, not a response.
            self.arrivals.remove(&request);
            return self.turn_answered(request, status, &body);
        }
        self.outputs.push_back(GatewayOutput::Respond {
            request,
            status,
            headers,
        });
        self.responded(request, status);
        self.outputs.push_back(GatewayOutput::Body {
            request,
            bytes: body,
        });
        self.outputs.push_back(GatewayOutput::End { request });
        self.ended(request);
    }

    /// Counts a response head: the request's API and status, its time to first byte.
    pub(super) fn responded(&mut self, request: RequestId, status: u16) {
        let Some(arrival) = self.arrivals.get(&request).cloned() else {
            return;
        };
        let first_byte = self.now.saturating_sub(arrival.at);
        let added = (arrival.cli_sent.zip(arrival.cli_first))
            .map(|(sent, first)| first_byte.saturating_sub(first.saturating_sub(sent)));
        let wall = self.wall_ms();
        self.count(&arrival.tenant, |m| {
            *m.requests.entry((arrival.api.name(), status)).or_default() += 1;
            m.first_byte.observe(first_byte as f64 / 1000.0);
            if let Some(added) = added {
                m.added.observe(added as f64 / 1000.0);
                m.recent.at(wall).observe_added(added);
            }
        });
    }

    /// The request's turn reached the CLI now.
    pub(super) fn sent_to_cli(&mut self, request: RequestId) {
        if let Some(arrival) = self.arrivals.get_mut(&request) {
            arrival.cli_sent.get_or_insert(self.now);
        }
    }

    /// Counts the end of a response.
    pub(super) fn ended(&mut self, request: RequestId) {
        if let Some(arrival) = self.arrivals.remove(&request) {
            let took = seconds(self.now, arrival.at);
            self.count(&arrival.tenant, |m| m.response.observe(took));
        }
    }
}
