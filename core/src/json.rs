//! Canonical JSON: the form `JSON.stringify(JSON.parse(text))` gives in JavaScript.
//!
//! Chunks carry parts of wire messages verbatim (tool inputs, usage, results). Copying those parts
//! as raw text keeps the engine fast, but the CLI, a recorder or a test may format JSON in other
//! ways (spaces after separators, `\u00e9` escapes, `1e-05`). Every such part is passed through
//! [`Json::canonical`] once, so native, wasm and npm builds emit the same bytes, and a JavaScript
//! consumer that re-serializes a chunk gets them back unchanged.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A JSON value held as canonical compact text.
///
/// Serializes as the JSON it holds (not as a string). Build one with [`Json::canonical`] from any
/// valid JSON text, or [`Json::from_value`].
#[derive(Clone)]
#[cfg_attr(test, derive(ts_rs::TS), ts(type = "Json"))]
pub struct Json(Box<RawValue>);

impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Json {}

impl Json {
    /// Canonicalizes valid JSON text: whitespace removed, string escapes as `JSON.stringify`
    /// writes them, numbers as JavaScript prints them.
    ///
    /// # Errors
    /// When `text` is not valid JSON.
    pub fn parse(text: &str) -> Result<Json, serde_json::Error> {
        let raw: &RawValue = serde_json::from_str(text)?;
        Ok(Json::canonical(raw))
    }

    /// Canonicalizes a value already known to be valid JSON.
    pub fn canonical(raw: &RawValue) -> Json {
        let mut out = String::with_capacity(raw.get().len());
        canonicalize_into(raw.get(), &mut out);
        Json(RawValue::from_string(out).expect("canonical JSON of valid JSON is valid"))
    }

    /// Builds a canonical value from a `serde_json::Value`.
    pub fn from_value(value: &serde_json::Value) -> Json {
        let text = serde_json::to_string(value).expect("a Value always serializes");
        Json::parse(&text).expect("serde_json output is valid JSON")
    }

    /// The JSON `null`.
    pub fn null() -> Json {
        Json(RawValue::from_string("null".to_owned()).expect("null is JSON"))
    }

    /// An empty JSON object `{}`.
    pub fn empty_object() -> Json {
        Json(RawValue::from_string("{}".to_owned()).expect("{} is JSON"))
    }

    /// The canonical text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Whether the value is `null`.
    pub fn is_null(&self) -> bool {
        self.get() == "null"
    }

    /// Parses the value into a `serde_json::Value`.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.get()).expect("canonical JSON parses")
    }

    /// The raw value, for embedding in other serde structures.
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for Json {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Ok(Json::canonical(&raw))
    }
}

/// Reads a [`Json`] through its JSON text, as a field of a tagged enum must be read
/// (serde buffers those, and a buffered value cannot be a raw one).
///
/// # Errors
/// What the deserializer reports.
#[cfg(feature = "deserialize")]
pub fn buffered<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
    // Written out as it comes (keys in their order), then put in canonical form.
    let mut text = Vec::new();
    serde_transcode::transcode(deserializer, &mut serde_json::Serializer::new(&mut text))
        .map_err(serde::de::Error::custom)?;
    let text = String::from_utf8(text).map_err(serde::de::Error::custom)?;
    Json::parse(&text).map_err(serde::de::Error::custom)
}

/// [`buffered`] for a field that may be missing (`None`); `null` reads as `Some(null)`.
///
/// # Errors
/// What the deserializer reports.
#[cfg(feature = "deserialize")]
pub fn buffered_option<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Json>, D::Error> {
    buffered(deserializer).map(Some)
}

impl Default for Json {
    fn default() -> Self {
        Json::null()
    }
}

impl From<&serde_json::Value> for Json {
    fn from(value: &serde_json::Value) -> Self {
        Json::from_value(value)
    }
}

/// Serializes an `f64` as JavaScript prints it (`0.00001`, not `1e-5`), for chunk fields that
/// hold numbers taken from the wire.
pub(crate) fn serialize_js_number<S: serde::Serializer>(
    value: &f64,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut text = String::new();
    write_js_number(*value, &mut text);
    RawValue::from_string(text)
        .map_err(serde::ser::Error::custom)?
        .serialize(serializer)
}

/// Writes canonical JSON text for `src`, which must be valid JSON.
pub(crate) fn canonicalize_into(src: &str, out: &mut String) {
    let bytes = src.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'"' => i = copy_string(src, i, out),
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                write_number_literal(&src[start..i], out);
            }
            _ => {
                // Structural characters and the literals true/false/null.
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                    i += 1;
                }
                out.push_str(&src[start..i]);
            }
        }
    }
}

/// Copies the string starting at `start` (the opening quote) in canonical form; returns the index
/// after the closing quote.
fn copy_string(src: &str, start: usize, out: &mut String) -> usize {
    let bytes = src.as_bytes();
    out.push('"');
    let mut i = start + 1;
    let mut plain = i;
    loop {
        // Plain runs are copied whole: only a quote or a backslash ends one.
        i += memchr::memchr2(b'"', b'\\', &bytes[i..]).expect("valid JSON closes its strings");
        if bytes[i] == b'"' {
            out.push_str(&src[plain..i]);
            out.push('"');
            return i + 1;
        }
        out.push_str(&src[plain..i]);
        let esc = bytes[i + 1];
        i += 2;
        match esc {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'/' => out.push('/'),
            b'b' => out.push_str("\\b"),
            b'f' => out.push_str("\\f"),
            b'n' => out.push_str("\\n"),
            b'r' => out.push_str("\\r"),
            b't' => out.push_str("\\t"),
            b'u' => {
                let unit = hex4(&bytes[i..i + 4]);
                i += 4;
                if (0xD800..0xDC00).contains(&unit)
                    && bytes.get(i) == Some(&b'\\')
                    && bytes.get(i + 1) == Some(&b'u')
                {
                    let low = hex4(&bytes[i + 2..i + 6]);
                    if (0xDC00..0xE000).contains(&low) {
                        let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                        out.push(char::from_u32(code).expect("valid surrogate pair"));
                        i += 6;
                        plain = i;
                        continue;
                    }
                }
                push_code_unit(unit, out);
            }
            _ => unreachable!("valid JSON has no other escapes"),
        }
        plain = i;
    }
}

fn hex4(digits: &[u8]) -> u32 {
    digits.iter().fold(0, |acc, d| {
        acc * 16
            + (*d as char)
                .to_digit(16)
                .expect("valid JSON has hex digits here")
    })
}

fn push_code_unit(unit: u32, out: &mut String) {
    match unit {
        0x08 => out.push_str("\\b"),
        0x09 => out.push_str("\\t"),
        0x0A => out.push_str("\\n"),
        0x0C => out.push_str("\\f"),
        0x0D => out.push_str("\\r"),
        0x22 => out.push_str("\\\""),
        0x5C => out.push_str("\\\\"),
        0..=0x1F => {
            out.push_str(&format!("\\u{unit:04x}"));
        }
        // A lone surrogate cannot live in a Rust string; keep it escaped as JavaScript does.
        0xD800..=0xDFFF => out.push_str(&format!("\\u{unit:04x}")),
        _ => out.push(char::from_u32(unit).expect("not a surrogate")),
    }
}

fn write_number_literal(literal: &str, out: &mut String) {
    let is_integer = !literal.contains(['.', 'e', 'E']);
    let digits = literal.trim_start_matches('-').len();
    if is_integer && digits <= 15 {
        if literal == "-0" {
            out.push('0');
        } else {
            out.push_str(literal);
        }
        return;
    }
    let value: f64 = literal.parse().unwrap_or(0.0);
    write_js_number(value, out);
}

/// Formats like ECMAScript `Number.prototype.toString()`.
pub(crate) fn write_js_number(value: f64, out: &mut String) {
    if !value.is_finite() {
        out.push_str("null");
        return;
    }
    if value == 0.0 {
        out.push('0');
        return;
    }
    // Shortest round-trip digits, from Rust's formatter in exponent form: "d.ddde-n".
    let sci = format!("{:e}", value.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = digits.len() as i32;
    let n = exp + 1; // position of the decimal point relative to the digits
    if value < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
}

/// Escapes every character outside ASCII in JSON text (`\uXXXX`, as valid JSON has them only
/// inside strings): the same JSON value, in bytes a JavaScript host turns into a string without
/// decoding UTF-8 (one byte, one character) before `JSON.parse`.
pub fn escape_non_ascii(json: &mut Vec<u8>) {
    let Some(first) = json.iter().position(|b| !b.is_ascii()) else {
        return;
    };
    let tail = json.split_off(first);
    let mut rest = std::str::from_utf8(&tail).expect("JSON text is UTF-8");
    while let Some(at) = rest.bytes().position(|b| !b.is_ascii()) {
        json.extend_from_slice(&rest.as_bytes()[..at]);
        let c = rest[at..].chars().next().expect("a character starts here");
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            let hex = |shift: u16| b"0123456789abcdef"[usize::from((*unit >> shift) & 15)];
            json.extend_from_slice(&[b'\\', b'u', hex(12), hex(8), hex(4), hex(0)]);
        }
        rest = &rest[at + c.len_utf8()..];
    }
    json.extend_from_slice(rest.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        Json::parse(text).unwrap().get().to_owned()
    }

    #[test]
    fn whitespace_outside_strings_is_removed() {
        assert_eq!(
            canon("{\"a\": [1, 2 ,\n 3], \"b\" : \"x y\"}"),
            r#"{"a":[1,2,3],"b":"x y"}"#
        );
    }

    #[test]
    fn escapes_match_json_stringify() {
        assert_eq!(
            canon(r#""caf\u00e9 \u2014 \/ \"q\" \\""#),
            r#""café — / \"q\" \\""#
        );
        assert_eq!(
            canon(r#""\u0001\u001F\b\f\n\r\t""#),
            r#""\u0001\u001f\b\f\n\r\t""#
        );
        assert_eq!(canon(r#""\ud83d\ude00""#), "\"😀\"");
        assert_eq!(canon(r#""\uD800x""#), r#""\ud800x""#);
    }

    #[test]
    fn numbers_print_as_javascript_does() {
        assert_eq!(canon("1e-05"), "0.00001");
        assert_eq!(canon("0.000282"), "0.000282");
        assert_eq!(canon("1.0"), "1");
        assert_eq!(canon("1e21"), "1e+21");
        assert_eq!(canon("1.5e-7"), "1.5e-7");
        assert_eq!(canon("-0"), "0");
        assert_eq!(canon("123456789012"), "123456789012");
        assert_eq!(canon("2.5E+3"), "2500");
        assert_eq!(canon("-12.75"), "-12.75");
    }

    #[test]
    fn literals_pass_through() {
        assert_eq!(canon("[true, false, null]"), "[true,false,null]");
    }

    #[test]
    fn non_ascii_is_escaped_to_the_same_value() {
        let value = serde_json::json!({"text": "caf\u{e9} \u{1f600} \"q\"", "n": 1});
        let mut json = serde_json::to_vec(&value).unwrap();
        super::escape_non_ascii(&mut json);
        assert!(json.is_ascii());
        assert!(String::from_utf8_lossy(&json).contains(r"caf\u00e9 \ud83d\ude00"));
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
            value
        );
        let mut ascii = b"{\"a\":\"plain\"}".to_vec();
        super::escape_non_ascii(&mut ascii);
        assert_eq!(ascii, b"{\"a\":\"plain\"}");
    }
}
