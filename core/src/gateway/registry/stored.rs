//! Stored responses (`previous_response_id`): a Responses request's stored history put in
//! front of it, responses stored as their turns end, chained, kept for the session store and
//! read back from it.

use super::*;
use crate::conversation::Role;

impl Registry {
    /// Puts the history of the stored response a Responses request continues
    /// (`previous_response_id`) in front of its conversation, and keeps the chain of stored
    /// responses alive; `previous_response_id` is cleared (the request now carries its whole
    /// history). A request without `previous_response_id` is left as it is.
    ///
    /// # Errors
    /// 400 naming `previous_response_id` when the tenant has no such stored response (never
    /// stored, or expired).
    pub fn resolve_previous(
        &mut self,
        tenant: &str,
        request: &mut ApiRequest,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let Some(first) = request.previous_response_id.take() else {
            return Ok(());
        };
        let mut chain: Vec<StoredKey> = Vec::new();
        let mut next = Some(first.clone());
        while let Some(id) = next {
            let key = (tenant.to_owned(), id);
            let Some(stored) = self.stored.get(&key) else {
                let error = ApiError::invalid(
                    "previous_response_id",
                    format!(
                        "previous_response_id: no stored response {first:?} (responses are kept \
                         for {} minutes after their last use)",
                        self.config.idle_ttl_ms / 60_000
                    ),
                );
                request.previous_response_id = Some(first);
                return Err(error);
            };
            next = stored.previous.clone();
            chain.push(key);
            if chain.len() > self.stored.len() {
                break;
            }
        }
        // (The Responses API carries no signed thinking to keep.)
        let mut conversation = Conversation {
            system: request.conversation.system.take(),
            messages: Vec::new(),
            tools: std::mem::take(&mut request.conversation.tools),
            thinking: Vec::new(),
        };
        for key in chain.into_iter().rev() {
            let stored = self.stored.get_mut(&key).expect("found above");
            self.stored_by_time.remove(&(stored.touched, key.clone()));
            stored.touched = now;
            self.stored_by_time.insert((now, key));
            for message in &stored.messages {
                conversation.push(message.role, message.content.clone());
            }
        }
        for message in std::mem::take(&mut request.conversation.messages) {
            conversation.push(message.role, message.content);
        }
        request.conversation = conversation;
        Ok(())
    }

    /// Puts the text of each output message item a Responses request references
    /// (`item_reference`, [`ApiRequest::references`]) where its placeholder stands in the
    /// request's conversation.
    ///
    /// # Errors
    /// 400 naming the reference's `id` when `tenant` has no stored response with that item
    /// (never stored, another tenant's, or expired).
    pub fn resolve_references(
        &mut self,
        tenant: &str,
        request: &mut ApiRequest,
    ) -> Result<(), ApiError> {
        for reference in std::mem::take(&mut request.references) {
            let text = (reference.response_id())
                .and_then(|id| self.stored.get(&(tenant.to_owned(), id)))
                .and_then(|stored| stored.items.iter().find(|(id, _)| *id == reference.id))
                .map(|(_, text)| text.clone());
            let Some(text) = text else {
                let at = &reference.at;
                return Err(ApiError::invalid(
                    format!("{at}.id"),
                    format!(
                        "{at}.id: no output item {:?} of a response stored for this key \
                         (responses are kept for {} minutes after their last use)",
                        reference.id,
                        self.config.idle_ttl_ms / 60_000
                    ),
                ));
            };
            let placeholder = reference.placeholder();
            let assistant = (request.conversation.messages.iter_mut())
                .filter(|m| m.role == Role::Assistant)
                .flat_map(|m| m.content.iter_mut());
            for block in assistant {
                if let Block::Text { text: written } = block {
                    if written.contains(&placeholder) {
                        *written = written.replace(&placeholder, &text);
                    }
                }
            }
        }
        Ok(())
    }

    /// Keeps a Responses API response (`store: true`) so a later request can continue it
    /// with `previous_response_id`: `input` is the request's own messages (without the
    /// history of the response it continued, `previous`), `response` the response's message.
    pub fn store_response(
        &mut self,
        tenant: &str,
        id: &str,
        previous: Option<&str>,
        input: Vec<Message>,
        (response, items): (Message, Vec<(String, String)>),
        now: Timestamp,
    ) {
        let key = (tenant.to_owned(), id.to_owned());
        let mut messages = input;
        messages.push(response);
        if let Some(out) = &mut self.stored_out {
            out.push(StoredOut {
                tenant: tenant.to_owned(),
                id: id.to_owned(),
                previous: previous.map(str::to_owned),
                messages: messages.clone(),
                items: items.clone(),
            });
        }
        let stored = StoredResponse {
            previous: previous.map(str::to_owned),
            messages,
            items,
            touched: now,
        };
        match self.stored.insert(key.clone(), stored) {
            Some(old) => {
                self.stored_by_time.remove(&(old.touched, key.clone()));
            }
            None => self.changed(IndexChange::Claim(stored_response_key(tenant, id))),
        }
        self.stored_by_time.insert((now, key));
        while self.stored.len() > self.config.max_stored_responses {
            let Some((_, oldest)) = self.stored_by_time.pop_first() else {
                break;
            };
            self.stored.remove(&oldest);
            self.changed(IndexChange::Release(stored_response_key(
                &oldest.0, &oldest.1,
            )));
        }
    }

    /// Keeps the responses stored from now on for [`take_stored`](Self::take_stored).
    pub fn persist_stored(&mut self) {
        self.stored_out.get_or_insert_with(Vec::new);
    }

    /// The responses stored since the last call (none unless
    /// [`persist_stored`](Self::persist_stored) was called).
    pub fn take_stored(&mut self) -> Vec<StoredOut> {
        self.stored_out
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The first response of the chain `id` starts that `tenant` has not in memory (it
    /// expired here, or was stored before a restart), if any.
    pub fn missing_link(&self, tenant: &str, id: &str) -> Option<String> {
        let mut next = Some(id.to_owned());
        let mut seen = 0;
        while let Some(id) = next {
            let key = (tenant.to_owned(), id);
            let Some(stored) = self.stored.get(&key) else {
                return Some(key.1);
            };
            seen += 1;
            if seen > self.stored.len() {
                return None;
            }
            next = stored.previous.clone();
        }
        None
    }

    /// The first response whose output items a Responses request references
    /// ([`ApiRequest::references`]) that `tenant` has not in memory, if any.
    pub fn missing_referenced(&self, tenant: &str, request: &ApiRequest) -> Option<String> {
        (request.references.iter())
            .filter_map(|r| r.response_id())
            .find(|id| !self.stored.contains_key(&(tenant.to_owned(), id.clone())))
    }

    /// Puts back a response a session store kept ([`StoredOut`]), as stored `now`.
    pub fn restore_response(&mut self, tenant: &str, id: &str, stored: StoredOut, now: Timestamp) {
        let out = self.stored_out.take();
        let mut messages = stored.messages;
        let response = messages.pop();
        if let Some(response) = response {
            self.store_response(
                tenant,
                id,
                stored.previous.as_deref(),
                messages,
                (response, stored.items),
                now,
            );
        }
        self.stored_out = out;
    }

    /// Stored responses, over all tenants.
    pub fn stored_count(&self) -> usize {
        self.stored.len()
    }
}
