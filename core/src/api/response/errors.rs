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
    subtype: Option<&str>,
    (status, error_type): (Option<u16>, Option<&str>),
    errors: &crate::Json,
    retry_delay_ms: Option<u64>,
) -> ApiError {
    let errors: Vec<String> = serde_json::from_str(errors.get()).unwrap_or_default();
    let message = result
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .or_else(|| (!errors.is_empty()).then(|| errors.join("; ")))
        .unwrap_or_else(|| format!("the turn ended in error ({})", subtype.unwrap_or("error")));
    let kind = match status {
        // The model API's account cannot pay: the CLI's and the API's own words for it.
        _ if is_billing(&message) || errors.iter().any(|e| is_billing(e)) => ApiErrorKind::Billing,
        // A prompt over the model's context is the request's fault (whatever the CLI reports
        // with it): retrying cannot help.
        _ if message.starts_with(PROMPT_TOO_LONG) => ApiErrorKind::InvalidRequest,
        // The CLI asked the model for the structured answer again and again, to no avail.
        _ if subtype == Some("error_max_structured_output_retries") => ApiErrorKind::Unprocessable,
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
        // The first kind of that type: `invalid_request_error` is a 400, `api_error` a 500.
        None => ApiErrorKind::ALL
            .into_iter()
            .find(|k| Some(k.anthropic_type()) == error_type)
            .unwrap_or(ApiErrorKind::Api),
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

/// How the CLI begins its message for a prompt over the model's context window.
const PROMPT_TOO_LONG: &str = "Prompt is too long";

/// Whether an error text is the model API refusing for want of credit or usage allowance, in
/// the words of the API ("Your credit balance is too low…") or of the CLI ("Credit balance is
/// too low", "You're out of extra usage", …).
fn is_billing(text: &str) -> bool {
    const SAID: [&str; 5] = [
        "credit balance is too low",
        "out of extra usage",
        "extra usage is required",
        "usage credits are required",
        "usage allocation has been disabled",
    ];
    let text = text.to_ascii_lowercase();
    SAID.iter().any(|said| text.contains(said))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_over_the_context_is_a_400_whatever_status_the_cli_gives() {
        let none = crate::Json::from_value(&serde_json::json!([]));
        let long = "Prompt is too long · automatic compaction failed: the summary is too long";
        for status in [(None, None), (None, Some("api_error")), (Some(500), None)] {
            let error = turn_error(Some(long), Some("success"), status, &none, None);
            assert_eq!(error.kind, ApiErrorKind::InvalidRequest, "{status:?}");
            assert_eq!(error.kind.status(), 400);
        }
        // Other failures keep what the CLI reported.
        let error = turn_error(Some("boom"), Some("error"), (Some(500), None), &none, None);
        assert_eq!(error.kind.status(), 500);
    }
}
