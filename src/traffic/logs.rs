//! Access logs as traces: one request per line of an nginx/Apache combined
//! (or common) log or of JSON lines, and timestamps as RFC 3339 / ISO 8601
//! text, epoch seconds or epoch milliseconds.

use serde::Deserialize;
use time::format_description::BorrowedFormatItem;
use time::format_description::well_known::{Iso8601, Rfc3339};
use time::macros::format_description;

/// How a trace's file is laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// CSV with a header (the default).
    #[default]
    Csv,
    /// nginx's or Apache's combined log format (or the common format, its
    /// first seven fields): `ADDR IDENT USER [TIME] "REQUEST" STATUS BYTES "REFERER" "AGENT"`.
    Combined,
    /// One JSON object per line.
    Jsonl,
    /// Traefik's JSON access log (`accessLog.format = "json"`): JSON lines,
    /// the request's start in `StartUTC` (RFC 3339, nanoseconds).
    Traefik,
    /// Cloudflare Logpush's HTTP requests dataset in JSON lines: the
    /// request's start in `EdgeStartTimestamp` (Unix nanoseconds, Logpush's
    /// default; `unit = "s"` for its `unix` option; RFC 3339 text as written).
    Cloudflare,
    /// Google Cloud's external Application Load Balancer logs as Cloud
    /// Logging exports them (one LogEntry per line): time `timestamp`, the
    /// request's fields under `httpRequest` (`httpRequest.remoteIp`).
    Gcp,
    /// AWS Application Load Balancer access logs.
    Alb,
    /// CloudFront standard logs (tab-separated, `#Fields:` header).
    Cloudfront,
    /// Envoy's default access log format.
    Envoy,
    /// HAProxy's `option httplog` lines.
    Haproxy,
}

impl Format {
    /// Its name in a scenario.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Combined => "combined",
            Format::Jsonl => "jsonl",
            Format::Traefik => "traefik",
            Format::Cloudflare => "cloudflare",
            Format::Gcp => "gcp",
            Format::Alb => "alb",
            Format::Cloudfront => "cloudfront",
            Format::Envoy => "envoy",
            Format::Haproxy => "haproxy",
        }
    }
}

/// The fields of a combined-log line a key may be taken from, by nginx's names.
pub const COMBINED_FIELDS: [&str; 8] = [
    "remote_addr",
    "remote_user",
    "request",
    "status",
    "body_bytes_sent",
    "http_referer",
    "http_user_agent",
    "ident",
];

/// One combined-log line's fields, as written (quotes removed).
pub struct Combined<'a> {
    /// `[10/Oct/2000:13:55:36 -0700]`, without brackets.
    pub time: &'a str,
    fields: [&'a str; 8],
}

impl<'a> Combined<'a> {
    /// Splits `line`; `None` when it is not in the combined or common format.
    pub fn parse(line: &'a str) -> Option<Combined<'a>> {
        let (remote_addr, rest) = line.trim_start().split_once(' ')?;
        let (ident, rest) = rest.split_once(' ')?;
        let (remote_user, rest) = rest.split_once(" [")?;
        let (time, rest) = rest.split_once("] ")?;
        let (request, rest) = quoted(rest)?;
        let mut rest = rest.trim_start().splitn(3, ' ');
        let status = rest.next()?;
        let body_bytes_sent = rest.next().unwrap_or("");
        let tail = rest.next().unwrap_or("");
        let (referer, agent) = match quoted(tail) {
            Some((referer, tail)) => (referer, quoted(tail.trim_start()).map_or("", |q| q.0)),
            None => ("", ""),
        };
        Some(Combined {
            time,
            fields: [
                remote_addr,
                remote_user,
                request,
                status,
                body_bytes_sent.trim_end(),
                referer,
                agent,
                ident,
            ],
        })
    }

    /// The field named `name` (one of [`COMBINED_FIELDS`]).
    pub fn field(&self, name: &str) -> Option<&'a str> {
        COMBINED_FIELDS
            .iter()
            .position(|f| *f == name)
            .map(|i| self.fields[i])
    }
}

/// `"…"` at the start of `text` (backslash escapes kept as written), and what follows.
fn quoted(text: &str) -> Option<(&str, &str)> {
    let body = text.strip_prefix('"')?;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some((&body[..i], &body[i + 1..])),
            _ => escaped = false,
        }
    }
    None
}

/// nginx's `$time_local` and Apache's `%t`: `10/Oct/2000:13:55:36 -0700`.
const COMBINED_TIME: &[BorrowedFormatItem<'static>] = format_description!(
    "[day]/[month repr:short case_sensitive:false]/[year]:[hour]:[minute]:[second] [offset_hour sign:mandatory][offset_minute]"
);

/// Nanoseconds since the Unix epoch of a combined log's time.
pub fn combined_time(text: &str) -> Option<u64> {
    let time = time::OffsetDateTime::parse(text.trim(), COMBINED_TIME).ok()?;
    u64::try_from(time.unix_timestamp_nanos()).ok()
}

/// Nanoseconds since the Unix epoch of an RFC 3339 or ISO 8601 date and time
/// with an offset (`2026-11-30T12:00:00.250Z`, `2026-11-30T13:00:00+01:00`);
/// also with a space for the `T`.
pub fn iso_time(text: &str) -> Option<u64> {
    let text = text.trim();
    let time = time::OffsetDateTime::parse(text, &Rfc3339)
        .or_else(|_| time::OffsetDateTime::parse(text, &Iso8601::DEFAULT))
        .or_else(|_| {
            // RFC 3339 allows a space in place of the `T`; the parser does not.
            match text.get(10..11) {
                Some(" ") => time::OffsetDateTime::parse(
                    &format!("{}T{}", &text[..10], &text[11..]),
                    &Rfc3339,
                ),
                _ => Err(time::error::Parse::ParseFromDescription(
                    time::error::ParseFromDescription::InvalidComponent("T"),
                )),
            }
        })
        .ok()?;
    u64::try_from(time.unix_timestamp_nanos()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_combined_line_and_its_fields() {
        let line = r#"203.0.113.7 - frank [10/Oct/2000:13:55:36 -0700] "GET /a \"b\" HTTP/1.1" 429 15 "-" "curl/8.5""#;
        let combined = Combined::parse(line).unwrap();
        assert_eq!(combined.time, "10/Oct/2000:13:55:36 -0700");
        assert_eq!(combined.field("remote_addr"), Some("203.0.113.7"));
        assert_eq!(combined.field("remote_user"), Some("frank"));
        assert_eq!(combined.field("request"), Some(r#"GET /a \"b\" HTTP/1.1"#));
        assert_eq!(combined.field("status"), Some("429"));
        assert_eq!(combined.field("http_user_agent"), Some("curl/8.5"));
        // The common format: no referer or agent.
        let common =
            Combined::parse(r#"::1 - - [01/Jan/2026:00:00:00 +0000] "GET / HTTP/1.1" 200 5"#)
                .unwrap();
        assert_eq!(common.field("body_bytes_sent"), Some("5"));
        assert_eq!(common.field("http_user_agent"), Some(""));
        assert!(Combined::parse("not a log line").is_none());
    }

    #[test]
    fn times_with_offsets_are_the_same_instant() {
        let utc = combined_time("10/Oct/2000:20:55:36 +0000").unwrap();
        assert_eq!(combined_time("10/Oct/2000:13:55:36 -0700"), Some(utc));
        assert_eq!(combined_time("10/oct/2000:13:55:36 -0700"), Some(utc));
        assert_eq!(utc, 971_211_336_000_000_000);
        assert_eq!(iso_time("2000-10-10T20:55:36Z"), Some(utc));
        assert_eq!(iso_time("2000-10-10T22:55:36+02:00"), Some(utc));
        assert_eq!(iso_time("2000-10-10 20:55:36Z"), Some(utc));
        assert_eq!(iso_time("2000-10-10T20:55:36.000000250Z"), Some(utc + 250));
        assert_eq!(iso_time("1969-12-31T23:59:59Z"), None, "before the epoch");
        assert_eq!(iso_time("yesterday"), None);
        assert_eq!(combined_time("10/Foo/2000:13:55:36 -0700"), None);
    }
}
