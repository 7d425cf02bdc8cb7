//! Responses whose turn waits to be kept: with a session store, the end of a turn's response
//! (its last frames, or its whole body) reaches the client only once the store has kept the
//! conversation's record ([`StoreAnswer::Kept`]). A store that cannot keep it
//! ([`StoreAnswer::NotKept`], or no answer by [`GatewayConfig::keep_timeout_ms`]) makes the
//! turn fail with a 503 that asks to retry: a client is never told a turn succeeded that a
//! gateway killed a moment later would lose. The conversation's CLI, which has the turn the
//! store does not, is closed without saving it: the retry goes on from what the store kept.
//! A Managed Agents request that changes a resource or a session waits the same way for the
//! store to keep each change ([`StoreAsk::Managed`] with its request), answered whole.

use super::*;

/// A response held until the store keeps its conversation's record.
#[derive(Debug)]
pub(super) struct Keeping {
    /// When it fails if the store has not answered.
    pub(super) deadline: Timestamp,
    /// The conversation's CLI (none: a Managed Agents change).
    session: Option<SessionId>,
    /// How many writes the store has still to keep.
    waiting: usize,
    /// Its end as the turn made it: what the client gets once the record is kept.
    done: Vec<GatewayOutput>,
    /// Its end as a failure: what the client gets when the record cannot be kept.
    failed: Vec<GatewayOutput>,
}

/// The error of a Managed Agents change the session store could not keep.
fn change_not_kept() -> ApiError {
    ApiError::new(
        ApiErrorKind::Unavailable,
        "this gateway made the change, but the session store could not keep it, so it would \
         not outlive a restart; retry shortly",
    )
    .retry_after(2)
}

/// The error of a turn whose record the session store could not keep.
pub(super) fn not_kept() -> ApiError {
    ApiError::new(
        ApiErrorKind::Unavailable,
        "the session store could not keep this conversation, so this turn is not kept; retry \
         shortly",
    )
    .retry_after(2)
}

/// A whole error response of `request`: head, body, end.
fn error_answer(
    request: RequestId,
    api: Api,
    error: &ApiError,
    headers: Vec<(String, String)>,
) -> Vec<GatewayOutput> {
    let response = http::error_response(api, error, headers);
    vec![
        GatewayOutput::Respond {
            request,
            status: response.status,
            headers: response.headers,
        },
        GatewayOutput::Body {
            request,
            bytes: response.body,
        },
        GatewayOutput::End { request },
    ]
}

impl Gateway {
    /// Holds the outputs of `request` from `mark` on (its response's end) until the store
    /// answers the save of its record. `failure` are the frames that end its stream with an
    /// error, should the record not be kept; `headers` its extra headers.
    pub(super) fn hold_end(
        &mut self,
        (request, session): (RequestId, SessionId),
        mark: usize,
        api: Api,
        headers: Vec<(String, String)>,
        failure: Vec<String>,
    ) {
        let done = self.take_outputs(request, mark);
        let head_held = done
            .iter()
            .any(|o| matches!(o, GatewayOutput::Respond { .. }));
        let failed = if head_held {
            error_answer(request, api, &not_kept(), headers)
        } else {
            vec![
                GatewayOutput::Body {
                    request,
                    bytes: failure.concat().into_bytes(),
                },
                GatewayOutput::End { request },
            ]
        };
        self.hold(request, Some(session), 1, done, failed);
    }

    /// Holds the whole answer of a Managed Agents request (its outputs from `mark` on) until
    /// the store has kept the `waiting` changes it asked to keep; `failure` is its answer if
    /// one is not (by default, that the change is made here but not kept).
    pub(super) fn hold_change(
        &mut self,
        request: RequestId,
        mark: usize,
        waiting: usize,
        failure: Option<ApiError>,
    ) {
        let done = self.take_outputs(request, mark);
        let error = failure.unwrap_or_else(change_not_kept);
        let failed = error_answer(request, Api::Anthropic, &error, Vec::new());
        self.hold(request, None, waiting, done, failed);
    }

    /// Takes the outputs of `request` from `mark` on out of those waiting for the host.
    fn take_outputs(&mut self, request: RequestId, mark: usize) -> Vec<GatewayOutput> {
        let mut taken = Vec::new();
        let mut at = mark;
        while at < self.outputs.len() {
            if self.outputs[at].request() == Some(request) {
                taken.extend(self.outputs.remove(at));
            } else {
                at += 1;
            }
        }
        taken
    }

    fn hold(
        &mut self,
        request: RequestId,
        session: Option<SessionId>,
        waiting: usize,
        done: Vec<GatewayOutput>,
        failed: Vec<GatewayOutput>,
    ) {
        let deadline = self.now.saturating_add(self.config.keep_timeout_ms);
        let keeping = Keeping {
            deadline,
            session,
            waiting,
            done,
            failed,
        };
        self.keeping.insert(request, keeping);
    }

    /// The store answered the save of `request`'s record (or of one of its Managed Agents
    /// changes): its response ends, as the turn made it (`kept`, every change kept) or with a
    /// 503 (and a turn's CLI is closed, the record it would save forgotten).
    pub(super) fn kept(&mut self, now: Timestamp, request: RequestId, kept: bool) {
        self.now = now;
        let Some(mut keeping) = self.keeping.remove(&request) else {
            return;
        };
        if kept {
            keeping.waiting = keeping.waiting.saturating_sub(1);
            if keeping.waiting > 0 {
                self.keeping.insert(request, keeping);
            } else {
                self.outputs.extend(keeping.done);
            }
            return;
        }
        let what = if keeping.session.is_some() {
            "turn"
        } else {
            "managed"
        };
        *self.metrics.store_failures.entry(what).or_default() += 1;
        self.outputs.extend(keeping.failed);
        let Some(session) = keeping.session else {
            return;
        };
        if let Some(live) = self.lives.get_mut(&session) {
            live.record = None;
            self.close(now, session);
        }
    }

    /// Fails the held responses whose store has not answered by now.
    pub(super) fn keeping_due(&mut self, now: Timestamp) {
        let due: Vec<RequestId> = (self.keeping.iter())
            .filter(|(_, k)| k.deadline <= now)
            .map(|(request, _)| *request)
            .collect();
        for request in due {
            self.kept(now, request, false);
        }
    }
}

impl GatewayOutput {
    /// The request an output answers, if it answers one.
    fn request(&self) -> Option<RequestId> {
        match self {
            GatewayOutput::Respond { request, .. }
            | GatewayOutput::Body { request, .. }
            | GatewayOutput::End { request } => Some(*request),
            _ => None,
        }
    }
}
