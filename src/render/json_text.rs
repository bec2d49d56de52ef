//! JSON text written member by member into one `String`: the API's hot bodies (Get
//! Order, Get Orders, Create Order) are rendered on every request, and going through
//! serde_json's serializer spent most of their cost escaping about 45 member names that
//! never need it, one byte at a time. Here the names are written as they are (they are
//! constants of this crate), values are copied as they are when they hold nothing to
//! escape, and any value that does is escaped by serde_json itself, so the output is
//! byte for byte what serde_json writes.

use rust_decimal::Decimal;

use crate::time::Timestamp;

/// The members of one JSON object being written at the end of a `String`.
pub(super) struct JsonObject<'a> {
    out: &'a mut String,
    empty: bool,
}

impl JsonObject<'_> {
    /// Appends `{`, the members `fill` writes, and `}` to `out`.
    pub(super) fn write(out: &mut String, fill: impl FnOnce(&mut JsonObject<'_>)) {
        out.push('{');
        let mut object = JsonObject { out, empty: true };
        fill(&mut object);
        object.out.push('}');
    }

    /// Writes `"name":` (after a comma unless it is the first member) and returns the
    /// output for the value.
    fn name(&mut self, name: &'static str) -> &mut String {
        debug_assert!(needs_no_escape(name), "member name {name:?} must need no escaping");
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        self.out.push('"');
        self.out.push_str(name);
        self.out.push_str("\":");
        self.out
    }

    /// A string member.
    pub(super) fn string(&mut self, name: &'static str, value: &str) {
        push_string(self.name(name), value);
    }

    /// A string member, `null` when absent.
    pub(super) fn opt_string(&mut self, name: &'static str, value: Option<&str>) {
        match value {
            Some(value) => self.string(name, value),
            None => self.name(name).push_str("null"),
        }
    }

    /// An exact decimal as a JSON number with exactly its digits (as
    /// [`crate::money::to_json_number`]).
    pub(super) fn decimal(&mut self, name: &'static str, value: Decimal) {
        push_decimal(self.name(name), value);
    }

    /// An integer member.
    pub(super) fn int(&mut self, name: &'static str, value: i64) {
        self.name(name).push_str(itoa::Buffer::new().format(value));
    }

    /// An unsigned integer member.
    pub(super) fn uint(&mut self, name: &'static str, value: u64) {
        self.name(name).push_str(itoa::Buffer::new().format(value));
    }

    /// A `true`/`false` member.
    pub(super) fn bool(&mut self, name: &'static str, value: bool) {
        self.name(name).push_str(if value { "true" } else { "false" });
    }

    /// A timestamp as its ISO 8601 string.
    pub(super) fn timestamp(&mut self, name: &'static str, value: Timestamp) {
        let out = self.name(name);
        // An ISO timestamp holds only digits, `-`, `+`, `:`, `.`, `T` and `Z`.
        out.push('"');
        value.push_iso(out);
        out.push('"');
    }

    /// A member that is an object of its own.
    pub(super) fn object(&mut self, name: &'static str, fill: impl FnOnce(&mut JsonObject<'_>)) {
        JsonObject::write(self.name(name), fill);
    }

    /// A member that is an array of objects, one per item.
    pub(super) fn objects<T>(
        &mut self,
        name: &'static str,
        items: &[T],
        mut fill: impl FnMut(&mut JsonObject<'_>, &T),
    ) {
        let out = self.name(name);
        out.push('[');
        for (at, item) in items.iter().enumerate() {
            if at > 0 {
                out.push(',');
            }
            JsonObject::write(out, |object| fill(object, item));
        }
        out.push(']');
    }
}

/// True when JSON needs no escape anywhere in `text`: no `"`, no `\` and no control
/// character below U+0020 (the only characters serde_json escapes). Checks every byte
/// without stopping early, which the compiler turns into a loop over many bytes at once.
fn needs_no_escape(text: &str) -> bool {
    text.bytes().fold(true, |plain, byte| plain & (byte >= 0x20) & (byte != b'"') & (byte != b'\\'))
}

/// `text` as a JSON string.
fn push_string(out: &mut String, text: &str) {
    if needs_no_escape(text) {
        out.reserve(text.len() + 2);
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        // Serializing a `str` cannot fail; the fallback only keeps the text valid JSON.
        out.push_str(&serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string()));
    }
}

/// A decimal as a JSON number with exactly its digits: the normalized value's mantissa
/// (integer digits, no trailing zero) with the point put back `scale` digits from the
/// right. That is `-?digits(.digits)?`, never an exponent, always a valid JSON number,
/// and the same text as `Decimal`'s `Display` (the tests compare the two), without a
/// trip through `core::fmt`, which cost about 1,000 instructions per amount.
fn push_decimal(out: &mut String, value: Decimal) {
    let value = value.normalize();
    let mut digits_buffer = itoa::Buffer::new();
    let digits = digits_buffer.format(value.mantissa().unsigned_abs());
    let scale = value.scale() as usize;
    if value.is_sign_negative() && !value.is_zero() {
        out.push('-');
    }
    if scale == 0 {
        out.push_str(digits);
    } else if digits.len() > scale {
        let (whole, fraction) = digits.split_at(digits.len() - scale);
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', scale - digits.len()));
        out.push_str(digits);
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn written(fill: impl FnOnce(&mut JsonObject<'_>)) -> String {
        let mut out = String::new();
        JsonObject::write(&mut out, fill);
        out
    }

    #[test]
    fn strings_come_out_as_serde_json_writes_them() {
        let samples = [
            "",
            "plain",
            "Ünïcödé ✓ 漢字 🙂",
            "quote \" inside",
            "back\\slash",
            "new\nline\ttab\r",
            "\u{0}\u{1}\u{1f} controls",
            "\u{7f} delete is not escaped",
            "\u{2028} line separator",
            "</script><script>alert(1)</script>",
        ];
        for sample in samples {
            let ours = written(|object| object.string("v", sample));
            let theirs = serde_json::json!({ "v": sample }).to_string();
            assert_eq!(ours, theirs, "for {sample:?}");
        }
    }

    #[test]
    fn decimals_keep_exactly_their_digits() {
        let samples = [
            "0",
            "-0",
            "0.00",
            "-0.000",
            "19.99",
            "19.990",
            "-5.5",
            "-0.05",
            "0.1",
            "1",
            "10",
            "1000000000000",
            "123456789.000000001",
            "0.0000000000000000000000000001",
            "-0.0000000000000000000000000001",
            "79228162514264337593543950335",
            "-79228162514264337593543950335",
            "7.9228162514264337593543950335",
        ];
        for text in samples {
            let value = Decimal::from_str(text).expect("a decimal sample");
            let ours = written(|object| object.decimal("v", value));
            let theirs = serde_json::json!({ "v": crate::money::to_json_number(value) }).to_string();
            assert_eq!(ours, theirs, "for {text}");
            // And it parses back as a JSON number, not a string.
            let parsed: serde_json::Value = serde_json::from_str(&ours).expect("valid JSON");
            assert!(parsed["v"].is_number(), "{ours}");
            assert_eq!(ours, format!("{{\"v\":{}}}", value.normalize()), "Display of {text}");
        }
    }

    #[test]
    fn members_are_separated_and_nested() {
        let text = written(|object| {
            object.int("status", 200);
            object.opt_string("none", None);
            object.bool("yes", true);
            object.timestamp("at", Timestamp(0));
            object.object("inner", |inner| inner.int("n", -3));
            object.objects("items", &[1_i64, 2], |item, n| item.int("n", *n));
            object.objects("empty", &[] as &[i64], |item, n| item.int("n", *n));
            object.object("nothing", |_| {});
        });
        assert_eq!(
            text,
            r#"{"status":200,"none":null,"yes":true,"at":"1970-01-01T00:00:00.000Z","inner":{"n":-3},"items":[{"n":1},{"n":2}],"empty":[],"nothing":{}}"#
        );
    }
}
