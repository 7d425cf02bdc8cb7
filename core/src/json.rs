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

    /// Canonicalizes a value already known to be valid JSON. Text already in canonical form (as
    /// the CLI writes it) is copied as it is.
    pub fn canonical(raw: &RawValue) -> Json {
        match canonicalize(raw.get()) {
            None => Json(raw.to_owned()),
            Some(text) => {
                Json(RawValue::from_string(text).expect("canonical JSON of valid JSON is valid"))
            }
        }
    }

    /// Builds a canonical value from a `serde_json::Value`.
    pub fn from_value(value: &serde_json::Value) -> Json {
        let text = serde_json::to_string(value).expect("a Value always serializes");
        // serde_json's text differs from the canonical form in its numbers at most.
        let text = canonicalize(&text).unwrap_or(text);
        Json(RawValue::from_string(text).expect("serde_json output is valid JSON"))
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

/// [`buffered`] for an array of values.
///
/// # Errors
/// What the deserializer reports.
#[cfg(feature = "deserialize")]
pub fn buffered_vec<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Json>, D::Error> {
    struct Buffered(Json);
    impl<'de> serde::Deserialize<'de> for Buffered {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            buffered(deserializer).map(Buffered)
        }
    }
    let items: Vec<Buffered> = serde::Deserialize::deserialize(deserializer)?;
    Ok(items.into_iter().map(|b| b.0).collect())
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

/// [`serialize_js_number`] for a number that may be absent (`null`).
pub(crate) fn serialize_js_number_opt<S: serde::Serializer>(
    value: &Option<f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serialize_js_number(value, serializer),
        None => serializer.serialize_none(),
    }
}

/// Serializes a JSON value with every object's keys in sorted order, whatever order the value
/// holds them in (serde_json keeps insertion order in this build): for hashes and digests that
/// must not depend on how a client ordered its keys.
pub(crate) fn serialize_sorted<S: serde::Serializer>(
    value: &serde_json::Value,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    Sorted(value).serialize(serializer)
}

/// A JSON value that serializes with sorted object keys; see [`serialize_sorted`].
pub(crate) struct Sorted<'a>(pub(crate) &'a serde_json::Value);

impl Serialize for Sorted<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        use serde_json::Value;
        match self.0 {
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Sorted(item))?;
                }
                seq.end()
            }
            Value::Object(object) => {
                let mut entries: Vec<(&String, &Value)> = object.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, &Sorted(value))?;
                }
                map.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// The canonical form of `src`, which must be valid JSON, or `None` when `src` is in it already.
pub(crate) fn canonicalize(src: &str) -> Option<String> {
    let mut canon = Canon {
        src,
        out: None,
        kept: 0,
    };
    let bytes = src.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' => {
                canon.replace(i, i + 1, "");
                i += 1;
            }
            b'"' => i = canon.string(i),
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                canon.number(start, i);
            }
            // Structural characters and the letters of true/false/null stay.
            _ => i += 1,
        }
    }
    canon.finish()
}

/// Canonical text built lazily: pieces of the source that stay the same are only copied once a
/// piece before or after them changes.
struct Canon<'a> {
    src: &'a str,
    /// The canonical text up to `kept`, once something changed.
    out: Option<String>,
    /// Where the source not yet copied to `out` starts.
    kept: usize,
}

impl Canon<'_> {
    /// The source from `from` to `to` becomes `with`.
    fn replace(&mut self, from: usize, to: usize, with: &str) {
        let out = self
            .out
            .get_or_insert_with(|| String::with_capacity(self.src.len()));
        out.push_str(&self.src[self.kept..from]);
        out.push_str(with);
        self.kept = to;
    }

    /// Keeps `src[from..to]` unless `canonical` differs from it.
    fn keep_or_replace(&mut self, from: usize, to: usize, canonical: &str) {
        if &self.src[from..to] != canonical {
            self.replace(from, to, canonical);
        }
    }

    fn finish(mut self) -> Option<String> {
        let mut out = self.out.take()?;
        out.push_str(&self.src[self.kept..]);
        Some(out)
    }

    fn number(&mut self, from: usize, to: usize) {
        if let Some(canonical) = number_literal(&self.src[from..to]) {
            self.replace(from, to, &canonical);
        }
    }

    /// The string starting at `start` (the opening quote); returns the index after its closing
    /// quote. Plain runs (only a quote or a backslash ends one) stay as they are.
    fn string(&mut self, start: usize) -> usize {
        let bytes = self.src.as_bytes();
        let mut i = start + 1;
        loop {
            i += memchr::memchr2(b'"', b'\\', &bytes[i..]).expect("valid JSON closes its strings");
            if bytes[i] == b'"' {
                return i + 1;
            }
            let escape = i;
            i += 2;
            match bytes[escape + 1] {
                b'/' => self.replace(escape, i, "/"),
                b'u' => {
                    let unit = hex4(&bytes[i..i + 4]);
                    i += 4;
                    let mut canonical = String::new();
                    if (0xD800..0xDC00).contains(&unit)
                        && bytes.get(i) == Some(&b'\\')
                        && bytes.get(i + 1) == Some(&b'u')
                    {
                        let low = hex4(&bytes[i + 2..i + 6]);
                        if (0xDC00..0xE000).contains(&low) {
                            let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                            canonical.push(char::from_u32(code).expect("valid surrogate pair"));
                            i += 6;
                            self.replace(escape, i, &canonical);
                            continue;
                        }
                    }
                    push_code_unit(unit, &mut canonical);
                    self.keep_or_replace(escape, i, &canonical);
                }
                // `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t` are JSON.stringify's own.
                _ => {}
            }
        }
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

/// A number literal as JavaScript prints its value, or `None` when it is printed so already.
fn number_literal(literal: &str) -> Option<String> {
    let is_integer = !literal.contains(['.', 'e', 'E']);
    if is_integer && literal.trim_start_matches('-').len() <= 15 && literal != "-0" {
        return None;
    }
    let mut out = String::new();
    write_js_number(literal.parse().unwrap_or(0.0), &mut out);
    (out != literal).then_some(out)
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
    // Shortest round-trip digits, from serde_json's printer (the one the chunks use already;
    // `{:e}` would bring in core's own float formatting, ~10 KiB of WebAssembly).
    let (digits, n) = shortest_digits(value.abs());
    let k = digits.len() as i32;
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

/// The shortest digits that read back as `value` (finite, positive), without leading or trailing
/// zeros, and `n`: the value is `0.digits × 10^n`.
fn shortest_digits(value: f64) -> (String, i32) {
    let printed = serde_json::Number::from_f64(value)
        .expect("a finite number")
        .to_string();
    let (mantissa, exp) = match printed.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().expect("an exponent is an integer")),
        None => (printed.as_str(), 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let significant = all.trim_start_matches('0');
    let leading = (all.len() - significant.len()) as i32;
    let digits = significant.trim_end_matches('0').to_owned();
    (digits, int.len() as i32 + exp - leading)
}

/// A `serde_json` formatter that writes every character outside ASCII as a `\uXXXX` escape
/// (a surrogate pair above U+FFFF), in strings and in raw values alike: the same JSON values, in
/// bytes a JavaScript host turns into a string without decoding UTF-8 (one byte, one
/// character) before `JSON.parse`. Everything else is written as [`CompactFormatter`] does.
///
/// [`CompactFormatter`]: serde_json::ser::CompactFormatter
#[derive(Debug, Clone, Copy, Default)]
pub struct AsciiFormatter;

impl serde_json::ser::Formatter for AsciiFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        write_ascii(writer, fragment)
    }

    fn write_raw_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        // Valid JSON has characters outside ASCII only inside strings, where an escape is the
        // same character.
        write_ascii(writer, fragment)
    }
}

fn write_ascii<W: ?Sized + std::io::Write>(writer: &mut W, text: &str) -> std::io::Result<()> {
    if text.is_ascii() {
        // (Checked a word at a time: most text is ASCII.)
        return writer.write_all(text.as_bytes());
    }
    let mut rest = text;
    while let Some(at) = rest.bytes().position(|b| !b.is_ascii()) {
        writer.write_all(&rest.as_bytes()[..at])?;
        let c = rest[at..].chars().next().expect("a character starts here");
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            let hex = |shift: u16| b"0123456789abcdef"[usize::from((*unit >> shift) & 15)];
            writer.write_all(&[b'\\', b'u', hex(12), hex(8), hex(4), hex(0)])?;
        }
        rest = &rest[at + c.len_utf8()..];
    }
    writer.write_all(rest.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        let canonical = Json::parse(text).unwrap().get().to_owned();
        // Canonical text is left as it is, and kept whole when it is already so.
        assert_eq!(canonicalize(&canonical), None, "{canonical} is canonical");
        assert_eq!(canonicalize(text).is_none(), canonical == text, "{text}");
        canonical
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
    fn canonical_text_is_kept_and_changes_anywhere_are_found() {
        let kept = r#"{"a":[1,-2.5,1e+21,true,null],"s":"x\"\\\n\u0001\ud800 é"}"#;
        assert_eq!(canon(kept), kept);
        assert_eq!(canon(r#"[1 ]"#), "[1]");
        assert_eq!(canon(r#""a\/b""#), r#""a/b""#);
        assert_eq!(canon(r#"{"a":"\u00e9","b":1.0}"#), r#"{"a":"é","b":1}"#);
        assert_eq!(canon(r#""\u001F""#), r#""\u001f""#);
    }

    #[test]
    fn shortest_digits_read_back_and_are_as_few_as_rusts_own() {
        // Over a spread of doubles (a fixed sequence of bit patterns): the digits read back as
        // the value, and there are as many as in Rust's `{:e}` (also shortest round-trip).
        let mut bits: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut values = vec![1.0, 0.1, 5e-324, f64::MAX, 1e21, 1e-7, 123.456, 0.000001];
        for _ in 0..20_000 {
            bits = bits.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            values.push(f64::from_bits(bits >> 1));
        }
        for value in values.into_iter().filter(|v| v.is_finite() && *v > 0.0) {
            let (digits, n) = shortest_digits(value);
            let back: f64 = format!("0.{digits}e{n}").parse().unwrap();
            assert_eq!(back, value, "{value:e}");
            let sci = format!("{value:e}");
            let rust_digits = sci.split_once('e').unwrap().0.replace('.', "");
            assert_eq!(digits.len(), rust_digits.len(), "{value:e}");
        }
        // Where the value lies halfway between two shortest forms JavaScript takes the even
        // one (as `{:e}` does not: it prints 6.104755973862153e14).
        let mut out = String::new();
        write_js_number(610_475_597_386_215.2, &mut out); // exactly …215.25
        assert_eq!(out, "610475597386215.2");
    }

    #[test]
    fn literals_pass_through() {
        assert_eq!(canon("[true, false, null]"), "[true,false,null]");
    }

    fn ascii<T: Serialize>(value: &T) -> Vec<u8> {
        let mut out = Vec::new();
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, AsciiFormatter);
        value.serialize(&mut serializer).unwrap();
        out
    }

    #[test]
    fn non_ascii_is_escaped_to_the_same_value() {
        let value =
            serde_json::json!({"text": "caf\u{e9} \u{1f600} \"q\"", "n": 1, "k\u{e9}y": null});
        let json = ascii(&value);
        assert!(json.is_ascii());
        assert!(String::from_utf8_lossy(&json).contains(r"caf\u00e9 \ud83d\ude00"));
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
            value
        );
        // Raw values too.
        let raw = Json::parse(r#"{"raw":"ü","n":[1.5]}"#).unwrap();
        assert_eq!(ascii(&raw), br#"{"raw":"\u00fc","n":[1.5]}"#);
        // ASCII text is written as the compact formatter writes it.
        let plain = serde_json::json!({"a": "plain \n", "b": [true]});
        assert_eq!(ascii(&plain), serde_json::to_vec(&plain).unwrap());
    }
}
