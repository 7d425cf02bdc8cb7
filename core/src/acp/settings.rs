//! A session's permission mode and model: `session/set_mode`, `session/set_config_option`,
//! and what the editor is shown of them (`modes`, `configOptions`, their updates).

use serde_json::{json, Value};

use super::schema::v1::{
    ConfigOptionUpdate, CurrentModeUpdate, Error, RequestId, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode, SessionModeState,
    SessionUpdate, SetSessionConfigOptionResponse, SetSessionModeResponse,
};
use super::{Agent, Live, MODES};
use crate::Timestamp;

/// A change the editor asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Setting {
    /// A permission mode (`default`, `acceptEdits`, `plan`, `bypassPermissions`).
    Mode(String),
    /// A model the CLI offers (`default`: the CLI's own).
    Model(String),
}

/// A change sent to the CLI: the editor's request, and whether it came as a config option.
#[derive(Debug)]
pub(super) struct Pending {
    id: RequestId,
    setting: Setting,
    as_option: bool,
}

impl Agent {
    /// `session/set_mode`, or `session/set_config_option` (`as_option`).
    pub(super) fn set(
        &mut self,
        now: Timestamp,
        id: RequestId,
        session_id: &str,
        setting: Setting,
        as_option: bool,
    ) {
        let Some(live) = self.sessions.get_mut(session_id).filter(|l| !l.ended) else {
            return self.fail(id, Error::session_not_found(session_id.to_owned()));
        };
        let known = match &setting {
            Setting::Mode(mode) => MODES.iter().any(|(m, ..)| m == mode),
            Setting::Model(model) => live.models.iter().any(|(m, ..)| m == model),
        };
        if !known {
            let why = match &setting {
                Setting::Mode(mode) => format!("no mode {mode}"),
                Setting::Model(model) => format!("no model {model}"),
            };
            return self.fail(id, Error::invalid_params().data(json!(why)));
        }
        let sent = match &setting {
            Setting::Mode(mode) => live.session.set_permission_mode(now, mode),
            Setting::Model(model) => {
                let model = Some(model.as_str()).filter(|m| *m != "default");
                live.session.set_model(now, model)
            }
        };
        let request_id = sent.expect("a live driver session takes commands");
        let pending = Pending {
            id,
            setting,
            as_option,
        };
        live.settings.insert(request_id, pending);
        self.pump(session_id);
    }
}

/// The CLI answered a control request of `live`: the answer to a change the editor asked for,
/// and the updates that show it (`None` if the request was not a change).
pub(super) fn answered(
    live: &mut Live,
    request_id: &str,
    ok: bool,
    error: Option<String>,
) -> Option<(RequestId, Result<Value, Error>, Vec<SessionUpdate>)> {
    let Pending {
        id,
        setting,
        as_option,
    } = live.settings.remove(request_id)?;
    if !ok {
        return Some((id, Err(Error::internal_error().data(json!(error))), vec![]));
    }
    let mut updates = Vec::new();
    match setting {
        Setting::Mode(mode) => updates = mode_changed(live, mode),
        Setting::Model(model) => live.model = model,
    }
    let answer = if as_option {
        serde_json::to_value(SetSessionConfigOptionResponse::new(config_options(live)))
    } else {
        serde_json::to_value(SetSessionModeResponse::new())
    };
    Some((id, Ok(answer.expect("a response serializes")), updates))
}

/// The session's mode is `mode` now: the updates that say so.
pub(super) fn mode_changed(live: &mut Live, mode: String) -> Vec<SessionUpdate> {
    live.mode = mode.clone();
    vec![
        SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode)),
        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(config_options(live))),
    ]
}

/// The modes, for editors that know modes only.
pub(super) fn modes(current: &str) -> SessionModeState {
    SessionModeState::new(
        current.to_owned(),
        MODES
            .iter()
            .map(|(id, name, about)| SessionMode::new(*id, *name).description((*about).to_owned()))
            .collect(),
    )
}

/// The mode and the model, as config options.
pub(super) fn config_options(live: &Live) -> Vec<SessionConfigOption> {
    let modes: Vec<SessionConfigSelectOption> = MODES
        .iter()
        .map(|(id, name, about)| {
            SessionConfigSelectOption::new(*id, *name).description((*about).to_owned())
        })
        .collect();
    let mut options = vec![
        SessionConfigOption::select("mode", "Mode", live.mode.clone(), modes)
            .category(SessionConfigOptionCategory::Mode),
    ];
    if !live.models.is_empty() {
        let models: Vec<SessionConfigSelectOption> = (live.models.iter())
            .map(|(value, name, about)| {
                SessionConfigSelectOption::new(value.clone(), name.clone())
                    .description(about.clone())
            })
            .collect();
        options.push(
            SessionConfigOption::select("model", "Model", live.model.clone(), models)
                .category(SessionConfigOptionCategory::Model),
        );
    }
    options
}

/// The models of the CLI's `initialize` answer (`value`, `displayName`, `description`), with
/// the session's own model where the list does not name it.
pub(super) fn models(list: &Value, current: &str) -> Vec<(String, String, Option<String>)> {
    let text = |m: &Value, key: &str| m.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut models: Vec<(String, String, Option<String>)> = (list.as_array().into_iter().flatten())
        .filter_map(|m| {
            let value = text(m, "value")?;
            let name = text(m, "displayName").unwrap_or_else(|| value.clone());
            Some((value, name, text(m, "description")))
        })
        .collect();
    if !models.is_empty() && !models.iter().any(|(m, ..)| m == current) {
        models.push((current.to_owned(), current.to_owned(), None));
    }
    models
}
