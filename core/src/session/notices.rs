//! The notices beside the conversation: `system` frames other than `init` (typed notices,
//! `status` chunks for the other named subtypes), and the informational messages (rate limits,
//! tool-use summaries, auth status, prompt suggestions, conversation resets, transcript mirrors,
//! prompt lifecycles, the engine's events).

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::state::State;
use crate::chunk::{
    Chunk, CliEvent, CommandLifecycle, Fields, FileAttachmentsMissing, InheritedAsksSettled,
    InstructionSizeWarning, NoticeFields, PermissionCheck, PluginUi, TitleChanged,
};
use crate::json::Json;
use crate::wire::{MessageType, RawFields, PLUGIN_UI_SUBTYPES, SYSTEM_SUBTYPES};

impl State {
    /// A `system` frame other than `init`: a typed notice, a `status` chunk with every field
    /// for the other subtypes ccwire names, an `unknown` chunk for a subtype it does not.
    pub fn on_system_notice(&mut self, subtype: &str, text: &str) {
        let plugin_ui = PLUGIN_UI_SUBTYPES.contains(&subtype);
        if !plugin_ui && !SYSTEM_SUBTYPES.contains(&subtype) {
            self.unknown(text);
            return;
        }
        let Some(fields) = self.fields(text) else {
            return;
        };
        let mut frame = NoticeFields(fields);
        let chunk = match subtype {
            "session_title_changed" => TitleChanged::read(&mut frame).map(Chunk::TitleChanged),
            "instruction_size_warning" => {
                InstructionSizeWarning::read(&mut frame).map(Chunk::InstructionSizeWarning)
            }
            "file_attachments_missing" => {
                FileAttachmentsMissing::read(&mut frame).map(Chunk::FileAttachmentsMissing)
            }
            "permission_check_status" => {
                PermissionCheck::read(&mut frame).map(Chunk::PermissionCheck)
            }
            "inherited_asks_settled" => {
                InheritedAsksSettled::read(&mut frame).map(Chunk::InheritedAsksSettled)
            }
            _ if plugin_ui => Ok(Chunk::PluginUi(PluginUi {
                kind: subtype["ui_".len()..].to_owned(),
                plugin: frame.take_str("plugin"),
                text: frame.take_str("text"),
                fields: frame.0,
            })),
            _ => Ok(Chunk::Status {
                subtype: subtype.to_owned(),
                fields: frame.0,
            }),
        };
        match chunk {
            Ok(chunk) => self.emit(chunk),
            Err(err) => self.invalid(&format!("system/{subtype}: {err}"), text),
        }
    }

    /// A frame's fields but `type` and `subtype`, in wire order; `None` (and an
    /// `invalid_message`) when it is not an object.
    fn fields(&mut self, text: &str) -> Option<Fields> {
        let Ok(RawFields(raw_fields)) = serde_json::from_str::<RawFields<'_>>(text) else {
            self.invalid("the frame must be an object", text);
            return None;
        };
        Some(Fields(
            raw_fields
                .into_iter()
                .filter(|(k, _)| k != "type" && k != "subtype")
                .map(|(k, v)| (k.into_owned(), Json::canonical(v)))
                .collect(),
        ))
    }

    /// `rate_limit_event`, `tool_use_summary`, `auth_status`, `prompt_suggestion`,
    /// `conversation_reset`, `transcript_mirror`, `command_lifecycle` and the engine's events
    /// (`name`: the message's `type`): each becomes its chunk.
    pub fn on_info(&mut self, ty: MessageType, name: &str, text: &str) {
        use serde::Deserialize;
        #[derive(Deserialize)]
        struct RateLimit<'a> {
            #[serde(borrow)]
            rate_limit_info: &'a RawValue,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct RateLimitInfo<'a> {
            #[serde(borrow)]
            status: Cow<'a, str>,
            resets_at: Option<f64>,
            #[serde(borrow)]
            rate_limit_type: Option<Cow<'a, str>>,
            utilization: Option<f64>,
        }
        #[derive(Deserialize)]
        struct Summary<'a> {
            #[serde(borrow)]
            summary: Cow<'a, str>,
            #[serde(default)]
            preceding_tool_use_ids: Vec<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Auth<'a> {
            is_authenticating: bool,
            #[serde(default)]
            output: Vec<String>,
            #[serde(borrow)]
            error: Option<Cow<'a, str>>,
        }
        #[derive(Deserialize)]
        struct Suggestion<'a> {
            #[serde(borrow)]
            suggestion: Cow<'a, str>,
        }
        #[derive(Deserialize)]
        struct Reset<'a> {
            #[serde(borrow)]
            new_conversation_id: Cow<'a, str>,
            #[serde(borrow)]
            trigger: Option<Cow<'a, str>>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Mirror<'a> {
            #[serde(borrow)]
            file_path: Cow<'a, str>,
            #[serde(borrow)]
            entries: Vec<&'a RawValue>,
        }
        let chunk = match ty {
            MessageType::RateLimitEvent => {
                serde_json::from_str::<RateLimit<'_>>(text).and_then(|m| {
                    let info: RateLimitInfo<'_> = serde_json::from_str(m.rate_limit_info.get())?;
                    Ok(Chunk::RateLimit {
                        status: info.status.into_owned(),
                        // Unix seconds (milliseconds, as some releases sent, converted).
                        resets_at: info
                            .resets_at
                            .filter(|t| t.is_finite() && *t >= 0.0)
                            .map(|t| {
                                if t < 1e11 {
                                    t as u64
                                } else {
                                    (t / 1000.0) as u64
                                }
                            }),
                        rate_limit_type: info.rate_limit_type.map(Cow::into_owned),
                        utilization: info.utilization,
                        info: Json::canonical(m.rate_limit_info),
                    })
                })
            }
            MessageType::ToolUseSummary => {
                serde_json::from_str::<Summary<'_>>(text).map(|m| Chunk::ToolUseSummary {
                    summary: m.summary.into_owned(),
                    tool_use_ids: m.preceding_tool_use_ids,
                })
            }
            MessageType::AuthStatus => {
                serde_json::from_str::<Auth<'_>>(text).map(|m| Chunk::AuthStatus {
                    authenticating: m.is_authenticating,
                    output: m.output,
                    error: m.error.map(Cow::into_owned),
                })
            }
            MessageType::PromptSuggestion => {
                serde_json::from_str::<Suggestion<'_>>(text).map(|m| Chunk::PromptSuggestion {
                    suggestion: m.suggestion.into_owned(),
                })
            }
            MessageType::ConversationReset => {
                serde_json::from_str::<Reset<'_>>(text).map(|m| Chunk::ConversationReset {
                    new_conversation_id: m.new_conversation_id.into_owned(),
                    trigger: m.trigger.map(Cow::into_owned),
                })
            }
            MessageType::TranscriptMirror => {
                serde_json::from_str::<Mirror<'_>>(text).map(|m| Chunk::TranscriptMirror {
                    file_path: m.file_path.into_owned(),
                    entries: m.entries.into_iter().map(Json::canonical).collect(),
                })
            }
            MessageType::CommandLifecycle => {
                let Some(fields) = self.fields(text) else {
                    return;
                };
                match CommandLifecycle::read(&mut NoticeFields(fields)) {
                    Ok(notice) => Ok(Chunk::CommandLifecycle(notice)),
                    Err(err) => {
                        self.invalid(&format!("command_lifecycle: {err}"), text);
                        return;
                    }
                }
            }
            MessageType::CliEvent => Json::parse(text).map(|message| {
                Chunk::CliEvent(CliEvent {
                    event: name.to_owned(),
                    message,
                })
            }),
            _ => {
                self.unknown(text);
                return;
            }
        };
        match chunk {
            Ok(chunk) => self.emit(chunk),
            Err(err) => self.invalid(&err.to_string(), text),
        }
    }
}
