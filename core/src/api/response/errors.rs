//! A failed turn's error in API terms: the status the model API gave, or the kind its words
//! say (credit, a prompt over the context), and when to try again.

use super::super::{ApiError, ApiErrorKind};

/// The error of a failed turn in API terms: the upstream status (or else the error's type)
/// when the CLI reported one, and for a limit or an outage, when to try again (the CLI's last wait before retrying — the
/// model's API's `retry-after` with a little jitter, or the CLI's own backoff — in whole
/// seconds rounded down, so the jitter does not add a second to what the API asked; at least
/// one).
pub(super) fn turn_error(
    result: Option<&str>,
    (subtype, terminal_reason): (Option<&str>, Option<&str>),
    (status, error_type): (Option<u16>, Option<&str>),
    errors: &crate::Json,
    failure: Option<&Failure>,
    retry_delay_ms: Option<u64>,
) -> ApiError {
    let errors: Vec<String> = serde_json::from_str(errors.get()).unwrap_or_default();
    let mut message = result
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .or_else(|| (!errors.is_empty()).then(|| errors.join("; ")))
        .unwrap_or_else(|| format!("the turn ended in error ({})", subtype.unwrap_or("error")));
    let class = failure.and_then(|f| f.error.as_deref());
    // The gateway's own credentials: its operator's to fix, not the client's key.
    let operator = class.is_some_and(|c| OPERATOR.contains(&c));
    if operator {
        message = format!(
            "the gateway's Claude Code cannot use its credentials ({}): its operator sets \
             ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN (`claude setup-token`) in the \
             environment `ccwire serve` starts with, or signs the account in; the CLI said: \
             {message}",
            class.unwrap_or_default()
        );
    }
    let kind = match status {
        // The CLI asked the model for the structured answer again and again, to no avail.
        _ if subtype == Some("error_max_structured_output_retries") => ApiErrorKind::Unprocessable,
        // A prompt over the model's context is the request's fault (whatever the CLI reports
        // with it): retrying cannot help.
        _ if terminal_reason == Some("prompt_too_long") => ApiErrorKind::InvalidRequest,
        // The model API's account cannot pay.
        _ if class == Some("billing_error") => ApiErrorKind::Billing,
        // No model request was made (no login at all): the gateway cannot serve.
        None if operator => ApiErrorKind::Unavailable,
        Some(402) => ApiErrorKind::Billing,
        Some(400) => ApiErrorKind::InvalidRequest,
        Some(401) => ApiErrorKind::Authentication,
        Some(403) => ApiErrorKind::Forbidden,
        Some(404) => ApiErrorKind::NotFound,
        Some(413) => ApiErrorKind::RequestTooLarge,
        Some(429) => ApiErrorKind::RateLimit,
        Some(503) => ApiErrorKind::Unavailable,
        Some(529) => ApiErrorKind::Overloaded,
        Some(_) => ApiErrorKind::Api,
        None => match class {
            Some("rate_limit") => ApiErrorKind::RateLimit,
            Some("overloaded") => ApiErrorKind::Overloaded,
            Some("invalid_request") => ApiErrorKind::InvalidRequest,
            Some("model_not_found") => ApiErrorKind::NotFound,
            // The first kind of that type: `invalid_request_error` is a 400, `api_error` a 500.
            _ => ApiErrorKind::ALL
                .into_iter()
                .find(|k| Some(k.anthropic_type()) == error_type)
                .unwrap_or(ApiErrorKind::Api),
        },
    };
    let error = ApiError::new(kind, message);
    match (kind, retry_delay_ms) {
        (
            ApiErrorKind::RateLimit | ApiErrorKind::Unavailable | ApiErrorKind::Overloaded,
            Some(ms),
        ) => error.retry_after((ms / 1000).max(1)),
        _ => error,
    }
}

/// What the CLI said of a turn's failed model request ([`Chunk::ApiError`](crate::Chunk::ApiError)).
#[derive(Debug, Clone, Default)]
pub(super) struct Failure {
    /// Its class (`authentication_failed`, `billing_error`, …).
    pub(super) error: Option<String>,
}

/// The classes of failure that are the gateway's own credentials or account: its operator's
/// to fix.
const OPERATOR: &[&str] = &[
    "authentication_failed",
    "oauth_org_not_allowed",
    "account_on_hold",
    "verification_required",
    "cloud_credential_error",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_over_the_context_is_a_400_whatever_status_the_cli_gives() {
        let none = crate::Json::from_value(&serde_json::json!([]));
        let long = "Prompt is too long";
        let over = (Some("success"), Some("prompt_too_long"));
        for status in [(None, None), (None, Some("api_error")), (Some(500), None)] {
            let error = turn_error(Some(long), over, status, &none, None, None);
            assert_eq!(error.kind, ApiErrorKind::InvalidRequest, "{status:?}");
            assert_eq!(error.kind.status(), 400);
        }
        // Other failures keep what the CLI reported.
        let failed = (Some("error"), Some("api_error"));
        let error = turn_error(Some("boom"), failed, (Some(500), None), &none, None, None);
        assert_eq!(error.kind.status(), 500);
    }

    /// The CLI's class of a failure decides, never its words: billing is a 402 whatever the
    /// status, the gateway's own credentials a 503 that tells the operator what to set.
    #[test]
    fn the_cli_s_class_of_a_failure_decides_its_status() {
        let none = crate::Json::from_value(&serde_json::json!([]));
        let class = |c: &str| Failure {
            error: Some(c.to_owned()),
        };
        let ended = (Some("success"), Some("api_error"));
        let billing = class("billing_error");
        let error = turn_error(
            Some("x"),
            ended,
            (Some(400), None),
            &none,
            Some(&billing),
            None,
        );
        assert_eq!(error.kind, ApiErrorKind::Billing);
        // The same words without the class are what the status says.
        let words = Some("Credit balance is too low");
        let error = turn_error(words, ended, (Some(400), None), &none, None, None);
        assert_eq!(error.kind.status(), 400);
        let login = class("authentication_failed");
        let said = Some("Not logged in · Please run /login");
        let error = turn_error(said, ended, (None, None), &none, Some(&login), None);
        assert_eq!(error.kind.status(), 503);
        assert!(
            error.message.contains("ANTHROPIC_API_KEY"),
            "{}",
            error.message
        );
        assert!(error.message.contains("CLAUDE_CODE_OAUTH_TOKEN"));
        assert!(error.message.contains("Not logged in"));
        // A key the model API refused keeps its 401, in the operator's words too.
        let error = turn_error(
            Some("x"),
            ended,
            (Some(401), None),
            &none,
            Some(&login),
            None,
        );
        assert_eq!(error.kind.status(), 401);
        assert!(
            error.message.contains("ANTHROPIC_API_KEY"),
            "{}",
            error.message
        );
        for (c, status) in [
            ("rate_limit", 429),
            ("overloaded", 529),
            ("model_not_found", 404),
        ] {
            let error = turn_error(Some("x"), ended, (None, None), &none, Some(&class(c)), None);
            assert_eq!(error.kind.status(), status, "{c}");
        }
    }
}
