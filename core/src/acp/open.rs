//! Sessions opened and closed: `session/new` (a new CLI), `session/load` (the history shown
//! again, then a CLI that resumes the session), `session/resume` (the same without the
//! history) and `session/close`.

use std::path::Path;

use serde_json::{json, Value};

use super::schema::v1::{
    CloseSessionResponse, Error, ListSessionsRequest, ListSessionsResponse, McpServer,
    NewSessionRequest, PromptResponse, RequestId, SessionInfo, SessionNotification, StopReason,
    CLIENT_METHOD_NAMES,
};
use super::{history, rpc, AcpOutput, Agent, Ask, CliId, Live, TranscriptHead};
use crate::session::{Session, SessionConfig};
use crate::Timestamp;

/// What a session's CLI being ready answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opening {
    New,
    Load,
    Resume,
}

/// A `session/load` or `session/resume` waiting for the session's transcript.
#[derive(Debug)]
pub(super) struct Loading {
    id: RequestId,
    cwd: String,
    mcp: Vec<McpServer>,
    replay: bool,
}

impl Agent {
    pub(super) fn new_session(
        &mut self,
        now: Timestamp,
        id: RequestId,
        request: NewSessionRequest,
    ) {
        let Some(cwd) = absolute(&request.cwd) else {
            return self.fail(id, cwd_refused());
        };
        let n = self.next_id + 1;
        let session_id = crate::conversation::keyed_uuid(
            &self.config.id_key,
            &[b"acp session", &n.to_le_bytes()],
        );
        self.start(now, id, Opening::New, session_id, cwd, &request.mcp_servers);
    }

    /// `session/load` (`replay`) or `session/resume` of a session the CLI has a transcript of:
    /// one this agent opened, before or after a restart, or one run in a terminal.
    pub(super) fn load(
        &mut self,
        id: RequestId,
        session_id: String,
        cwd: &Path,
        mcp: Vec<McpServer>,
        replay: bool,
    ) {
        let Some(cwd) = absolute(cwd) else {
            return self.fail(id, cwd_refused());
        };
        if !is_uuid(&session_id) {
            return self.fail(id, Error::session_not_found(session_id));
        }
        let busy = self.loading.contains_key(&session_id)
            || (self.sessions.get(&session_id))
                .is_some_and(|l| !l.ended && (l.prompt.is_some() || l.opening.is_some()));
        if busy {
            let why = "the session is opening or running a prompt here; cancel it first";
            return self.fail(id, Error::invalid_request().data(json!(why)));
        }
        // Open here and idle: its CLI ends, and a new one takes the session from its transcript.
        if let Some(live) = self.sessions.get_mut(&session_id).filter(|l| !l.ended) {
            live.ended = true;
            self.outputs.push_back(AcpOutput::Stop { cli: live.cli });
        }
        let loading = Loading {
            id,
            cwd: cwd.clone(),
            mcp,
            replay,
        };
        self.loading.insert(session_id.clone(), loading);
        self.outputs
            .push_back(AcpOutput::ReadTranscript { session_id, cwd });
    }

    /// The transcript of a session being loaded or resumed, as the host read it (`None`: the
    /// CLI has none for that session and work directory). A load shows the history to the
    /// editor before its answer; either then starts a CLI that resumes the session.
    pub fn handle_transcript(
        &mut self,
        now: Timestamp,
        session_id: &str,
        transcript: Option<&[u8]>,
    ) {
        self.now = now;
        let Some(loading) = self.loading.remove(session_id) else {
            return;
        };
        let Some(transcript) = transcript else {
            let why = format!("Claude Code has no session {session_id} in {}", loading.cwd);
            let error = Error::resource_not_found(None)
                .data(json!({"sessionId": session_id, "message": why}));
            return self.fail(loading.id, error);
        };
        if loading.replay {
            for update in history::replay(transcript) {
                let update = SessionNotification::new(session_id.to_owned(), update);
                self.send(rpc::notification(
                    CLIENT_METHOD_NAMES.session_update,
                    update,
                ));
            }
        }
        let opening = if loading.replay {
            Opening::Load
        } else {
            Opening::Resume
        };
        let (id, cwd) = (loading.id, loading.cwd);
        self.start(now, id, opening, session_id.to_owned(), cwd, &loading.mcp);
    }

    /// `session/list`: the CLI's sessions of a directory (or of every one), the most recent
    /// first, a page at a time (the cursor is how many went before).
    pub(super) fn list(&mut self, id: RequestId, request: ListSessionsRequest) {
        let cwd = match request.cwd.as_deref().map(absolute) {
            None => None,
            Some(Some(cwd)) => Some(cwd),
            Some(None) => return self.fail(id, cwd_refused()),
        };
        let Ok(skip) = request.cursor.as_deref().map_or(Ok(0), str::parse::<usize>) else {
            let why = json!("not a cursor of this agent's");
            return self.fail(id, Error::invalid_params().data(why));
        };
        self.next_id += 1;
        let list = self.next_id;
        self.lists.insert(list, (id, cwd.clone(), skip));
        let take = PAGE + 1;
        self.outputs.push_back(AcpOutput::ListTranscripts {
            list,
            cwd,
            skip,
            take,
        });
    }

    /// The transcripts of a `session/list`, as the host found them
    /// ([`AcpOutput::ListTranscripts`]): the sessions, with the directory the CLI recorded and
    /// the first prompt as the title.
    pub fn handle_transcript_list(
        &mut self,
        now: Timestamp,
        list: u64,
        found: Vec<TranscriptHead>,
    ) {
        self.now = now;
        let Some((id, cwd, skip)) = self.lists.remove(&list) else {
            return;
        };
        let more = found.len() > PAGE;
        let sessions: Vec<SessionInfo> = (found.into_iter().take(PAGE))
            .filter(|file| is_uuid(&file.session_id))
            .filter_map(|file| {
                let (recorded, title) = history::about(&file.head)?;
                if cwd.as_ref().is_some_and(|cwd| *cwd != recorded) {
                    return None;
                }
                let info = SessionInfo::new(file.session_id, recorded)
                    .title(title)
                    .updated_at(crate::gateway::iso_time(file.modified_ms));
                Some(info)
            })
            .collect();
        let next = more.then(|| (skip + PAGE).to_string());
        self.reply(id, ListSessionsResponse::new(sessions).next_cursor(next));
    }

    /// `session/close`: the session's CLI ends; a prompt running answers `cancelled`.
    pub(super) fn close(&mut self, id: RequestId, session_id: &str) {
        let Some(live) = self.sessions.remove(session_id) else {
            return self.fail(id, Error::session_not_found(session_id.to_owned()));
        };
        if let Some(prompt) = live.prompt {
            let cancelled = PromptResponse::new(StopReason::Cancelled);
            self.send(rpc::response(prompt, Ok(cancelled)));
        }
        if let Some((opening, _)) = live.opening {
            let why = json!("the session was closed");
            self.fail(opening, Error::invalid_request().data(why));
        }
        if !live.ended {
            self.outputs.push_back(AcpOutput::Stop { cli: live.cli });
        }
        // The editor's answers to the session's questions have no one to go to.
        self.kill_terminals(session_id, None);
        self.asks.retain(|_, ask| match ask {
            Ask::Permission { session, .. } => session != session_id,
            Ask::Tool(_) | Ask::Nothing => true,
        });
        self.reply(id, CloseSessionResponse::new());
    }

    /// Starts the CLI of a session: a new one, or one that resumes `session_id`.
    fn start(
        &mut self,
        now: Timestamp,
        id: RequestId,
        opening: Opening,
        session_id: String,
        cwd: String,
        mcp: &[McpServer],
    ) {
        self.next_id += 1;
        let n = self.next_id.to_le_bytes();
        let mut args = self.config.cli.clone();
        if opening == Opening::New {
            args.session_id = Some(session_id.clone());
        } else {
            args.resume = Some(session_id.clone());
        }
        args.permission_prompts = true;
        args.include_partial_messages = true;
        args.mcp_servers.extend(mcp.iter().filter_map(mcp_server));
        let mode = (args.permission_mode.clone()).unwrap_or_else(|| "default".to_owned());
        let model = args.model.clone().unwrap_or_else(|| "default".to_owned());
        let seed = crate::conversation::keyed_hash(&self.config.id_key, &[b"acp seed", &n]);
        let seed = u64::from_le_bytes(seed[..8].try_into().expect("eight bytes"));
        // The editor's files and terminals, where it offers them, in place of the CLI's own.
        let servers: Vec<_> = self.offers.server().into_iter().collect();
        for server in &servers {
            // Offered to the model from the start (not behind a tool search), and a long
            // command is not moved to the background: its terminal is on screen.
            let extra = json!({"alwaysLoad": true, "disableAutoBackground": true});
            let Value::Object(extra) = extra else {
                unreachable!("an object")
            };
            args.sdk_mcp_servers.push((server.name.clone(), extra));
            args.disallowed_tools.extend(self.offers.replaced());
        }
        let mut session = Session::driver(SessionConfig {
            seed,
            timeouts: self.config.timeouts,
            mcp_servers: servers,
            ..SessionConfig::default()
        });
        session
            .initialize(now, &[], args.initialize())
            .expect("a new driver session takes commands");
        let cli = CliId(self.next_id);
        self.outputs.push_back(AcpOutput::Spawn {
            cli,
            session_id: session_id.clone(),
            cwd: cwd.clone(),
            args: Box::new(args),
        });
        self.clis.insert(cli, session_id.clone());
        let live = Live {
            cli,
            session,
            cwd,
            opening: Some((id, opening)),
            prompt: None,
            cancelled: false,
            mode,
            model,
            models: Vec::new(),
            tools: Default::default(),
            settings: Default::default(),
            context: None,
            window: None,
            asked: Default::default(),
            ended: false,
        };
        self.sessions.insert(session_id.clone(), live);
        self.pump(&session_id);
    }
}

/// The sessions of one `session/list` answer.
const PAGE: usize = 50;

fn absolute(cwd: &Path) -> Option<String> {
    cwd.to_str()
        .filter(|c| c.starts_with('/'))
        .map(str::to_owned)
}

fn cwd_refused() -> Error {
    Error::invalid_params().data(json!("cwd must be an absolute path"))
}

/// Whether `id` is a session id as the CLI makes them (a UUID, lower or upper case): what
/// names a transcript file, so nothing else reaches a path.
fn is_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The CLI's MCP server setting for a server the editor passed.
fn mcp_server(server: &McpServer) -> Option<(String, Value)> {
    let headers = |list: &[super::schema::v1::HttpHeader]| -> serde_json::Map<String, Value> {
        list.iter()
            .map(|h| (h.name.clone(), json!(h.value)))
            .collect()
    };
    Some(match server {
        McpServer::Stdio(s) => (
            s.name.clone(),
            json!({
                "type": "stdio",
                "command": s.command,
                "args": s.args,
                "env": s.env.iter().map(|e| (e.name.clone(), json!(e.value))).collect::<serde_json::Map<_, _>>(),
            }),
        ),
        McpServer::Http(s) => (
            s.name.clone(),
            json!({"type": "http", "url": s.url, "headers": headers(&s.headers)}),
        ),
        McpServer::Sse(s) => (
            s.name.clone(),
            json!({"type": "sse", "url": s.url, "headers": headers(&s.headers)}),
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::is_uuid;

    #[test]
    fn only_a_uuid_names_a_transcript() {
        assert!(is_uuid("15f2d71a-1bc5-4647-92ce-c709fa6e5cc2"));
        assert!(is_uuid("15F2D71A-1BC5-4647-92CE-C709FA6E5CC2"));
        for bad in [
            "",
            "../../etc/passwd",
            "15f2d71a-1bc5-4647-92ce-c709fa6e5cc2/..",
            "15f2d71a-1bc5-4647-92ce-c709fa6e5cc",
            "15f2d71a-1bc5-4647-92ce-c709fa6e5cg2",
            "15f2d71a1bc5-4647-92ce-c709fa6e5cc2-",
        ] {
            assert!(!is_uuid(bad), "{bad}");
        }
    }
}
