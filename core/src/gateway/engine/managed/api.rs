//! The Managed Agents API's shapes, shared by its agents, environments and sessions: errors
//! as the API words them, query parameters and pages, JSON bodies, metadata.

use serde_json::{json, Map, Value};

/// An error in the API's shape: status, `error.type`, message, `error.details.error_code`.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) status: u16,
    pub(super) kind: &'static str,
    pub(super) message: String,
    pub(super) code: Option<&'static str>,
}

impl Refusal {
    /// The error's body in the API's envelope, and the headers that go with it: a conflict is
    /// the caller's to resolve, not the SDK's to retry; an outage says when to try again.
    pub(super) fn answer(&self) -> (Value, Vec<(String, String)>) {
        let mut error = json!({"type": self.kind, "message": self.message});
        if let Some(code) = self.code {
            error["details"] = json!({"error_code": code});
        }
        let headers = match self.status {
            409 => vec![("x-should-retry".to_owned(), "false".to_owned())],
            503 => vec![("retry-after".to_owned(), "2".to_owned())],
            _ => Vec::new(),
        };
        (
            json!({"type": "error", "error": error, "request_id": null}),
            headers,
        )
    }
}

pub(super) fn invalid(message: impl Into<String>) -> Refusal {
    Refusal {
        status: 400,
        kind: "invalid_request_error",
        message: message.into(),
        code: None,
    }
}

pub(super) fn not_found(what: &str, id: &str) -> Refusal {
    Refusal {
        status: 404,
        kind: "not_found_error",
        message: format!("{what} {id:?} not found"),
        code: None,
    }
}

/// A query string's parameters, decoded (`name[]` as `name`).
pub(in crate::gateway::engine) fn query(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| {
            let k = k.strip_suffix("[]").unwrap_or(&k).to_owned();
            (k, v.into_owned())
        })
        .collect()
}

/// The value of a query parameter.
pub(in crate::gateway::engine) fn param<'a>(
    params: &'a [(String, String)],
    name: &str,
) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A list's page: `limit` (default 20, at most 100; at most 1000 where `max` says) items after
/// the cursor `page` (the last id of the page before).
pub(super) fn page(
    items: Vec<Value>,
    params: &[(String, String)],
    max: usize,
) -> Result<Value, Refusal> {
    let limit = match param(params, "limit") {
        None => 20,
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => n,
            _ => return Err(invalid(format!("limit: must be between 1 and {max}"))),
        },
    };
    let start = match param(params, "page").filter(|p| !p.is_empty()) {
        None => 0,
        Some(cursor) => match items.iter().position(|i| i["id"] == cursor) {
            Some(at) => at + 1,
            None => {
                return Err(invalid(format!(
                    "page: not a page of this list: {cursor:?}"
                )))
            }
        },
    };
    let rest = items.len().saturating_sub(start);
    let data: Vec<Value> = items.into_iter().skip(start).take(limit).collect();
    let next = (rest > limit)
        .then(|| data.last().map(|i| i["id"].clone()))
        .flatten();
    Ok(json!({"data": data, "next_page": next}))
}

/// A request body as a JSON object (an empty body: an empty one).
pub(super) fn json_object(body: &[u8]) -> Result<Map<String, Value>, Refusal> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(invalid("the body must be a JSON object")),
        Err(e) => Err(invalid(format!("the body is not JSON: {e}"))),
    }
}

/// A string field: absent, null, or a string.
pub(super) fn string_or_null(
    body: &Map<String, Value>,
    name: &str,
) -> Result<Option<Option<String>>, Refusal> {
    match body.get(name) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::String(s)) => Ok(Some(Some(s.clone()))),
        Some(_) => Err(invalid(format!("{name}: must be a string or null"))),
    }
}

/// `metadata`: at most 16 string pairs, keys up to 64 characters, values up to 512; with
/// `patch`, a null value deletes its key from `current`.
pub(super) fn metadata(
    value: &Value,
    current: Option<&Map<String, Value>>,
    patch: bool,
) -> Result<Map<String, Value>, Refusal> {
    let Value::Object(given) = value else {
        return Err(invalid("metadata: must be an object of strings"));
    };
    let mut out = match (patch, current) {
        (true, Some(c)) => c.clone(),
        _ => Map::new(),
    };
    for (k, v) in given {
        match v {
            Value::String(s) if patch && s.is_empty() => {
                out.remove(k);
            }
            Value::String(s) => {
                if k.chars().count() > 64 || s.chars().count() > 512 {
                    return Err(invalid(
                        "metadata: keys are at most 64 characters, values at most 512",
                    ));
                }
                out.insert(k.clone(), v.clone());
            }
            Value::Null if patch => {
                out.remove(k);
            }
            _ => return Err(invalid(format!("metadata.{k}: must be a string"))),
        }
    }
    if out.len() > 16 {
        return Err(invalid("metadata: at most 16 pairs"));
    }
    Ok(out)
}
