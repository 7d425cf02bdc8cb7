//! The Managed Agents API's environments, typed as the API shows them. The environment is
//! the local machine (each session's CLI works in a directory of its own); a `cloud` config's
//! networking and packages are kept and echoed, and named as not applied.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::api::{invalid, Refusal};

/// An environment as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Environment {
    pub(super) archived_at: Option<String>,
    pub(super) config: Config,
    pub(super) created_at: String,
    pub(super) description: Option<String>,
    pub(super) id: String,
    pub(super) metadata: Map<String, Value>,
    pub(super) name: String,
    /// Always `organization`.
    pub(super) scope: String,
    /// Always `environment`.
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) updated_at: String,
}

/// An environment's `config` (always `cloud`: the self-hosted kind is refused).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Config {
    #[serde(rename = "type")]
    pub(super) kind: String,
    /// As given (`unrestricted`, or `limited` with its allowances).
    pub(super) networking: Value,
    pub(super) packages: Packages,
}

/// The packages a cloud environment would install, by package manager.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Packages {
    /// Always `packages`.
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) apt: Vec<Value>,
    pub(super) cargo: Vec<Value>,
    pub(super) gem: Vec<Value>,
    pub(super) go: Vec<Value>,
    pub(super) npm: Vec<Value>,
    pub(super) pip: Vec<Value>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            kind: "cloud".to_owned(),
            networking: serde_json::json!({"type": "unrestricted"}),
            packages: Packages {
                kind: "packages".to_owned(),
                apt: Vec::new(),
                cargo: Vec::new(),
                gem: Vec::new(),
                go: Vec::new(),
                npm: Vec::new(),
                pip: Vec::new(),
            },
        }
    }
}

impl Packages {
    /// The list of package manager `manager`.
    fn list(&mut self, manager: &str) -> Option<&mut Vec<Value>> {
        Some(match manager {
            "apt" => &mut self.apt,
            "cargo" => &mut self.cargo,
            "gem" => &mut self.gem,
            "go" => &mut self.go,
            "npm" => &mut self.npm,
            "pip" => &mut self.pip,
            _ => return None,
        })
    }
}

/// An environment's `config`, resolved (on `current`, or the default), with what cannot
/// apply here.
pub(super) fn config(
    value: Option<&Value>,
    current: Option<&Config>,
) -> Result<(Config, Vec<String>), Refusal> {
    let mut config = current.cloned().unwrap_or_default();
    let Some(given) = value.filter(|v| !v.is_null()) else {
        return Ok((config, Vec::new()));
    };
    match given["type"].as_str() {
        Some("cloud") => {}
        Some("self_hosted") => {
            return Err(invalid(
                "config.type: self_hosted environments are not supported by this gateway (its environment is the local machine: use cloud)",
            ))
        }
        _ => return Err(invalid("config.type: cloud")),
    }
    let mut ignored = Vec::new();
    match &given["networking"] {
        Value::Null => {}
        n @ Value::Object(_) => {
            match n["type"].as_str() {
                Some("unrestricted") => {}
                Some("limited") => ignored.push("config.networking (limited)".to_owned()),
                _ => return Err(invalid("config.networking.type: unrestricted or limited")),
            }
            config.networking = n.clone();
        }
        _ => return Err(invalid("config.networking: must be an object")),
    }
    match &given["packages"] {
        Value::Null => {}
        Value::Object(p) => {
            for manager in ["apt", "cargo", "gem", "go", "npm", "pip"] {
                match p.get(manager) {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(list)) => {
                        if !list.is_empty() {
                            ignored.push(format!("config.packages.{manager}"));
                        }
                        if let Some(kept) = config.packages.list(manager) {
                            kept.clone_from(list);
                        }
                    }
                    Some(_) => {
                        return Err(invalid(format!(
                            "config.packages.{manager}: must be an array of strings"
                        )))
                    }
                }
            }
        }
        _ => return Err(invalid("config.packages: must be an object")),
    }
    Ok((config, ignored))
}
