//! The context a CLI records after a conversation's first message — its environment, model,
//! tool, agent and skill listings, date (transcript `attachment` entries) — learned from the
//! first turns of the tenant's conversations, so that a history the gateway writes for a new
//! CLI carries it where a CLI that ran the conversation from its start recorded it: the
//! resuming CLI then shows the model the conversation as it shows a resumed one of its own.

use std::sync::Arc;

use serde_json::Value;

use super::{Gateway, SessionId};
use crate::Json;

/// The attachments of a first turn that are the CLI's context (not the turn's own: a
/// `prompt_snapshot` is written for the system prompt the conversation goes on with).
const CONTEXT: &[&str] = &[
    "environment",
    "model",
    "deferred_tools_delta",
    "agent_listing_delta",
    "skill_listing",
    "total_tokens_reminder",
    "session_context",
    "date",
    "remote_session_change",
];

/// The contexts learned, by tenant and the model (`--model`) its CLIs start with, with when.
pub(super) type Contexts =
    std::collections::BTreeMap<(String, Option<String>), (crate::Timestamp, Arc<Vec<Value>>)>;

/// The most contexts kept (by tenant and model); the oldest learned goes first.
const MAX_CONTEXTS: usize = 256;

/// A new CLI's first turn, watched for the context it records.
#[derive(Debug, Clone, Default)]
pub(super) struct FirstTurn {
    /// The model the CLI was started with (`--model`; `None`: its own default).
    model: Option<String>,
    seen_prompt: bool,
    attachments: Vec<Value>,
}

impl FirstTurn {
    /// The first turn of a CLI started with `args`.
    pub(super) fn of(args: &[String]) -> FirstTurn {
        let model = (args.iter().position(|a| a == "--model"))
            .and_then(|at| args.get(at + 1))
            .cloned();
        FirstTurn {
            model,
            ..FirstTurn::default()
        }
    }

    /// Takes mirrored transcript entries; the context once the turn's first model message
    /// is recorded (the context is recorded before it).
    fn read(&mut self, entries: &[Json]) -> Option<Vec<Value>> {
        #[derive(serde::Deserialize)]
        struct Entry {
            #[serde(rename = "type")]
            kind: Option<String>,
            attachment: Option<Value>,
        }
        for entry in entries {
            let Ok(entry) = serde_json::from_str::<Entry>(entry.get()) else {
                continue;
            };
            match (entry.kind.as_deref(), entry.attachment) {
                (Some("user"), _) => self.seen_prompt = true,
                (Some("assistant"), _) if self.seen_prompt => {
                    return Some(std::mem::take(&mut self.attachments))
                }
                (Some("attachment"), Some(attachment)) if self.seen_prompt => {
                    let kind = attachment.get("type").and_then(Value::as_str);
                    if kind.is_some_and(|k| CONTEXT.contains(&k)) {
                        self.attachments.push(attachment);
                    }
                }
                _ => {}
            }
        }
        None
    }
}

impl Gateway {
    /// A CLI mirrored these entries of its own transcript: during its first turn (a
    /// conversation it started, in the tenant's own working directory), the context it
    /// records is learned for the tenant and its model.
    pub(super) fn watch_first_turn(&mut self, session: SessionId, entries: &[Json]) {
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        let Some(first) = &mut live.first_turn else {
            return;
        };
        let Some(attachments) = first.read(entries) else {
            return;
        };
        let model = first.model.clone();
        live.first_turn = None;
        let (tenant, cwd) = (live.tenant.clone(), live.cwd.clone());
        let own_cwd = self.cli_dirs(&tenant, None).map(|(cwd, _)| cwd);
        if attachments.is_empty() || cwd != own_cwd {
            return;
        }
        let key = (tenant, model);
        if !self.contexts.contains_key(&key) && self.contexts.len() >= MAX_CONTEXTS {
            let oldest = (self.contexts.iter())
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.contexts.remove(&oldest);
            }
        }
        self.contexts.insert(key, (self.now, Arc::new(attachments)));
    }

    /// The context to write after the first message of a history for a CLI of `tenant` with
    /// `model` working in `cwd`, as its CLIs recorded it (none learned yet: nothing).
    pub(super) fn context_for(&self, tenant: &str, model: Option<String>, cwd: &str) -> Vec<Value> {
        let Some((_, learned)) = self.contexts.get(&(tenant.to_owned(), model)) else {
            return Vec::new();
        };
        let mut context = learned.as_ref().clone();
        for attachment in &mut context {
            if attachment["type"] == "environment" {
                if let Some(snapshot) = attachment
                    .get_mut("snapshot")
                    .and_then(Value::as_object_mut)
                {
                    snapshot.insert("workingDirectory".into(), cwd.into());
                }
            }
        }
        context
    }
}
