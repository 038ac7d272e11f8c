//! Vendors' text access logs, each line split into its fields by the names
//! the vendor documents: AWS Application Load Balancer, CloudFront standard
//! logs, Envoy's default format and HAProxy's `option httplog`.

use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

use super::logs::{Format, TimeCache};

/// The most fields a line of any of these formats has.
pub const MAX_FIELDS: usize = 34;

/// One line's fields, at the positions of its format's [`Text::names`]; a
/// field the line lacks is empty.
pub type Fields<'a> = [&'a str; MAX_FIELDS];

/// A vendor's text log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Text {
    /// AWS Application Load Balancer access logs (space-separated, quoted
    /// fields), by the field names of the ELB guide's "Access log entries".
    Alb,
    /// CloudFront standard logs (legacy, W3C, tab-separated): fields by the
    /// file's `#Fields:` line, else in the documented order.
    CloudFront,
    /// Envoy's default access log format (`[%START_TIME%] "%REQ(:METHOD)% …"`).
    Envoy,
    /// HAProxy's `option httplog` line, with or without a syslog prefix.
    Haproxy,
}

/// ALB's fields in the order it writes them, then `client` (the address of
/// `client:port` without its port).
const ALB: [&str; 31] = [
    "type",
    "time",
    "elb",
    "client:port",
    "target:port",
    "request_processing_time",
    "target_processing_time",
    "response_processing_time",
    "elb_status_code",
    "target_status_code",
    "received_bytes",
    "sent_bytes",
    "request",
    "user_agent",
    "ssl_cipher",
    "ssl_protocol",
    "target_group_arn",
    "trace_id",
    "domain_name",
    "chosen_cert_arn",
    "matched_rule_priority",
    "request_creation_time",
    "actions_executed",
    "redirect_url",
    "error_reason",
    "target:port_list",
    "target_status_code_list",
    "classification",
    "classification_reason",
    "conn_trace_id",
    "client",
];

/// CloudFront's standard log fields in their documented order.
const CLOUDFRONT: [&str; 33] = [
    "date",
    "time",
    "x-edge-location",
    "sc-bytes",
    "c-ip",
    "cs-method",
    "cs(Host)",
    "cs-uri-stem",
    "sc-status",
    "cs(Referer)",
    "cs(User-Agent)",
    "cs-uri-query",
    "cs(Cookie)",
    "x-edge-result-type",
    "x-edge-request-id",
    "x-host-header",
    "cs-protocol",
    "cs-bytes",
    "time-taken",
    "x-forwarded-for",
    "ssl-protocol",
    "ssl-cipher",
    "x-edge-response-result-type",
    "cs-protocol-version",
    "fle-status",
    "fle-encrypted-fields",
    "c-port",
    "time-to-first-byte",
    "x-edge-detailed-result-type",
    "sc-content-type",
    "sc-content-len",
    "sc-range-start",
    "sc-range-end",
];

/// Envoy's default format, its command operators by name.
const ENVOY: [&str; 13] = [
    "start_time",
    "request",
    "response_code",
    "response_flags",
    "bytes_received",
    "bytes_sent",
    "duration",
    "upstream_service_time",
    "x_forwarded_for",
    "user_agent",
    "request_id",
    "authority",
    "upstream_host",
];

/// HAProxy's httplog fields, by the names of its configuration manual
/// (section 8.2.3); the slash-joined groups are kept whole.
const HAPROXY: [&str; 19] = [
    "client_ip",
    "client_port",
    "request_date",
    "frontend_name",
    "backend_name",
    "server_name",
    "timers",
    "status_code",
    "bytes_read",
    "captured_request_cookie",
    "captured_response_cookie",
    "termination_state",
    "connections",
    "queues",
    "captured_request_headers",
    "captured_response_headers",
    "http_request",
    "accept_date",
    "backend_name/server_name",
];

/// Which field holds what a `where` or the turned-away count reads.
pub struct Roles {
    /// The request's time, by default.
    pub time: &'static str,
    /// `"METHOD TARGET PROTOCOL"`, or the method alone.
    pub request: &'static str,
    /// The path, when the request field holds only the method.
    pub path: Option<&'static str>,
    /// The response's status.
    pub status: &'static str,
    /// The Host the request names, if the format logs it.
    pub host: Option<&'static str>,
}

impl Text {
    /// The vendor's text format `format` names, if it is one.
    pub fn of(format: Format) -> Option<Text> {
        match format {
            Format::Alb => Some(Text::Alb),
            Format::Cloudfront => Some(Text::CloudFront),
            Format::Envoy => Some(Text::Envoy),
            Format::Haproxy => Some(Text::Haproxy),
            _ => None,
        }
    }

    /// The format that names it in a scenario.
    pub fn format(self) -> Format {
        match self {
            Text::Alb => Format::Alb,
            Text::CloudFront => Format::Cloudfront,
            Text::Envoy => Format::Envoy,
            Text::Haproxy => Format::Haproxy,
        }
    }

    /// Every field a key, a Host or the time may be taken from.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Text::Alb => &ALB,
            Text::CloudFront => &CLOUDFRONT,
            Text::Envoy => &ENVOY,
            Text::Haproxy => &HAPROXY,
        }
    }

    /// The position of the field named `name`.
    pub fn index(self, name: &str) -> Option<usize> {
        self.names().iter().position(|n| *n == name)
    }

    /// What each role reads.
    pub fn roles(self) -> Roles {
        match self {
            // request_creation_time: when the load balancer received the
            // request (`time` is when it answered).
            Text::Alb => Roles {
                time: "request_creation_time",
                request: "request",
                path: None,
                status: "elb_status_code",
                host: Some("request"),
            },
            Text::CloudFront => Roles {
                time: "time",
                request: "cs-method",
                path: Some("cs-uri-stem"),
                status: "sc-status",
                host: Some("x-host-header"),
            },
            Text::Envoy => Roles {
                time: "start_time",
                request: "request",
                path: None,
                status: "response_code",
                host: Some("authority"),
            },
            Text::Haproxy => Roles {
                time: "request_date",
                request: "http_request",
                path: None,
                status: "status_code",
                host: None,
            },
        }
    }

    /// Whether `line` carries no request: CloudFront's `#Version` and
    /// `#Fields` lines.
    pub fn is_directive(self, line: &str) -> bool {
        self == Text::CloudFront && line.starts_with('#')
    }

    /// For CloudFront's `#Fields: date time …` line: the position in
    /// [`Text::names`] of each column (`u8::MAX` for a field not named there).
    pub fn header(self, line: &str) -> Option<Vec<u8>> {
        let names = line.strip_prefix("#Fields:")?;
        Some(
            names
                .split_whitespace()
                .map(|name| self.index(name).map_or(u8::MAX, |i| i as u8))
                .collect(),
        )
    }

    /// Splits `line` into its fields; `None` when it is not in this format.
    /// `header` is CloudFront's column order from its `#Fields` line (empty
    /// for the documented order).
    pub fn split<'a>(self, line: &'a str, header: &[u8]) -> Option<Fields<'a>> {
        let mut fields = [""; MAX_FIELDS];
        match self {
            Text::CloudFront => {
                let mut columns = 0;
                // (Split at each tab byte: a char pattern's searcher was a
                // third of a CloudFront log's reading.)
                let ends = memchr::memchr_iter(b'\t', line.as_bytes()).chain([line.len()]);
                let values = ends.scan(0, |from, end| {
                    let value = &line[*from..end];
                    *from = end + 1;
                    Some(value)
                });
                for (i, value) in values.enumerate() {
                    let at = match header.get(i) {
                        Some(&at) => usize::from(at),
                        None if header.is_empty() => i,
                        None => return None,
                    };
                    if let Some(field) = fields.get_mut(at) {
                        *field = value;
                    }
                    columns = i + 1;
                }
                // Its date and time at least, and a method.
                (columns >= 6).then_some(fields)
            }
            Text::Alb => {
                let mut n = 0;
                for (i, (_, word)) in Words(line).enumerate() {
                    if i < 30 {
                        fields[i] = word;
                        n = i + 1;
                    }
                }
                if n < 13 {
                    return None;
                }
                let client = fields[3];
                fields[30] = client.rsplit_once(':').map_or(client, |(address, _)| {
                    address.trim_start_matches('[').trim_end_matches(']')
                });
                Some(fields)
            }
            Text::Envoy => {
                let mut words = Words(line);
                let (open, time) = words.next()?;
                if open != b'[' {
                    return None;
                }
                fields[0] = time;
                let mut n = 1;
                for (i, (_, word)) in words.enumerate() {
                    if i + 1 < ENVOY.len() {
                        fields[i + 1] = word;
                        n = i + 2;
                    }
                }
                (n >= 4).then_some(fields)
            }
            Text::Haproxy => {
                // Past any syslog prefix: the first bracketed word follows
                // the client's address and port.
                let mut words = Words(line).peekable();
                let mut client = None;
                while let Some((_, word)) = words.next() {
                    if words.peek().is_some_and(|(open, _)| *open == b'[') {
                        client = Some(word);
                        break;
                    }
                }
                let client = client?;
                let (ip, port) = client.rsplit_once(':')?;
                fields[0] = ip.trim_start_matches('[').trim_end_matches(']');
                fields[1] = port;
                fields[2] = words.next()?.1;
                fields[17] = fields[2];
                fields[3] = words.next()?.1;
                let backend_server = words.next()?.1;
                fields[18] = backend_server;
                let (backend, server) = backend_server.split_once('/')?;
                (fields[4], fields[5]) = (backend, server);
                for field in &mut fields[6..=13] {
                    *field = words.next()?.1;
                }
                let mut headers = 14;
                for (open, word) in words {
                    match open {
                        b'{' if headers <= 15 => {
                            fields[headers] = word;
                            headers += 1;
                        }
                        b'"' => {
                            fields[16] = word;
                            break;
                        }
                        _ => return None,
                    }
                }
                (!fields[16].is_empty()).then_some(fields)
            }
        }
    }

    /// The time of the field at `at` of `fields`, in nanoseconds since the
    /// Unix epoch; `None` when it is not a time.
    pub fn time(self, fields: &Fields<'_>, at: usize, times: &mut TimeCache) -> Option<u64> {
        let text = fields[at];
        match (self, self.names()[at]) {
            (Text::CloudFront, "time" | "date") => {
                // Date and time in UTC, whole seconds: in place where they
                // can be (the general parser was a tenth of a CloudFront
                // log's reading), else by the general parser.
                let (date, clock) = (fields[0], fields[1]);
                super::logs::cloudfront_time_fixed(date.as_bytes(), clock.as_bytes())
                    .or_else(|| cloudfront_time(date, clock))
            }
            (Text::Haproxy, _) => {
                // Local time with no offset: read as UTC, which keeps the
                // spacing of requests between two clock changes. In place
                // where it can be (the general parser was most of an
                // HAProxy log's reading), else by the general parser.
                super::logs::haproxy_time_fixed(text.as_bytes()).or_else(|| haproxy_time(text))
            }
            // Most lines share their second with the line before.
            _ => times.iso(text),
        }
    }

    /// Where the time field starts in its line (CloudFront's at its date).
    pub fn time_start<'a>(self, fields: &Fields<'a>, at: usize) -> &'a str {
        match (self, self.names()[at]) {
            (Text::CloudFront, "time" | "date") => fields[0],
            _ => fields[at],
        }
    }

    /// The time field's text as written (CloudFront's date and time joined).
    pub fn time_text(self, fields: &Fields<'_>, at: usize) -> String {
        match (self, self.names()[at]) {
            (Text::CloudFront, "time" | "date") => format!("{}\t{}", fields[0], fields[1]),
            _ => fields[at].to_string(),
        }
    }

    /// What the time field of this format looks like, in words.
    pub fn time_expected(self) -> &'static str {
        match self {
            Text::CloudFront => "a date and a time like 2019-12-04 and 21:02:31",
            Text::Haproxy => "a date like 06/Feb/2009:12:14:14.655",
            Text::Alb | Text::Envoy => "an ISO 8601 time like 2018-07-02T22:22:48.364000Z",
        }
    }

    /// Whether the gateway says it turned the request away by its own
    /// rate-limit flag (Envoy's `RL` response flag); `None` for a format
    /// that says so only by status.
    pub fn flagged(self, fields: &Fields<'_>) -> Option<bool> {
        match self {
            Text::Envoy => Some(fields[3].split(',').any(|flag| flag.trim() == "RL")),
            _ => None,
        }
    }
}

/// CloudFront's date and time read by the general parsers, as UTC.
fn cloudfront_time(date: &str, clock: &str) -> Option<u64> {
    let date = time::Date::parse(date, CLOUDFRONT_DATE).ok()?;
    let clock = time::Time::parse(clock, CLOUDFRONT_TIME).ok()?;
    let at = time::PrimitiveDateTime::new(date, clock).assume_utc();
    u64::try_from(at.unix_timestamp_nanos()).ok()
}

/// HAProxy's date read by the general parser, as UTC.
fn haproxy_time(text: &str) -> Option<u64> {
    let at = time::PrimitiveDateTime::parse(text, HAPROXY_DATE)
        .ok()?
        .assume_utc();
    u64::try_from(at.unix_timestamp_nanos()).ok()
}

/// CloudFront's `date` field.
const CLOUDFRONT_DATE: &[BorrowedFormatItem<'static>] = format_description!("[year]-[month]-[day]");
/// CloudFront's `time` field.
const CLOUDFRONT_TIME: &[BorrowedFormatItem<'static>] =
    format_description!("[hour]:[minute]:[second]");
/// HAProxy's `%tr` / `%t`: `06/Feb/2009:12:14:14.655`.
const HAPROXY_DATE: &[BorrowedFormatItem<'static>] = format_description!(
    "[day]/[month repr:short case_sensitive:false]/[year]:[hour]:[minute]:[second].[subsecond]"
);

/// The words of a line: bare, `"quoted"` (backslash escapes kept as
/// written), `[bracketed]` or `{braced}`, each with its opening delimiter
/// (0 for a bare word) and without its delimiters.
struct Words<'a>(&'a str);

impl<'a> Iterator for Words<'a> {
    type Item = (u8, &'a str);

    // Byte by byte: spaces, tabs and delimiters are ASCII, never inside a
    // character of UTF-8 (a char pattern's searcher was over half of an
    // ALB log's reading).
    fn next(&mut self) -> Option<(u8, &'a str)> {
        let blank = |b: &u8| *b == b' ' || *b == b'\t';
        let start = self.0.bytes().position(|b| !blank(&b))?;
        let text = &self.0[start..];
        let open = text.as_bytes()[0];
        let close = match open {
            b'"' => b'"',
            b'[' => b']',
            b'{' => b'}',
            _ => {
                let end =
                    super::bytes::find(text.as_bytes(), [b' ', b'\t'], 0).unwrap_or(text.len());
                self.0 = &text[end..];
                return Some((0, &text[..end]));
            }
        };
        let body = &text[1..];
        let mut from = 0;
        loop {
            // The next closing delimiter, or backslash within quotes.
            let found = if open == b'"' {
                memchr::memchr2(close, b'\\', &body.as_bytes()[from..])
            } else {
                memchr::memchr(close, &body.as_bytes()[from..])
            };
            let Some(at) = found.map(|at| from + at) else {
                // Unclosed: the rest of the line.
                self.0 = "";
                return Some((open, body));
            };
            if body.as_bytes()[at] == close {
                self.0 = &body[at + 1..];
                return Some((open, &body[..at]));
            }
            // A backslash: the byte after it is escaped (a character of
            // UTF-8 after it begins with a byte that is neither).
            from = at + 2;
            if from > body.len() {
                self.0 = "";
                return Some((open, body));
            }
        }
    }
}

/// The path and Host of a request target: an absolute URL
/// (`http://shop.example:80/api/cart?x=1`, as ALB and GCP log it) gives
/// both; an origin-form target (`/api/cart`) gives only its path.
pub fn split_target(target: &str) -> (&str, Option<&str>) {
    let Some((_, rest)) = target.split_once("://") else {
        return (target, None);
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let path = match &rest[end..] {
        "" => "/",
        path => path,
    };
    (path, Some(host_of(&rest[..end])))
}

/// A Host without its port (and without `user@`).
pub fn host_of(authority: &str) -> &str {
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if let Some(bracketed) = authority.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or(bracketed);
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<'a>(format: Text, fields: &Fields<'a>, name: &str) -> &'a str {
        fields[format.index(name).unwrap()]
    }

    #[test]
    fn an_alb_line_as_the_elb_guide_shows_it() {
        let line = r#"https 2018-07-02T22:23:00.186641Z app/my-loadbalancer/50dc6c495c0c9188 192.168.131.39:2817 10.0.0.1:80 0.086 0.048 0.037 200 200 0 57 "GET https://www.example.com:443/api/cart?x=1 HTTP/1.1" "curl/7.46.0" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 "Root=1-58337281-1d84f3d73c47ec4e58577259" "www.example.com" "arn:aws:acm:us-east-2:123456789012:certificate/12345678-1234-1234-1234-123456789012" 1 2018-07-02T22:22:48.364000Z "authenticate,forward" "-" "-" "10.0.0.1:80" "200" "-" "-" TID_1234abcd5678ef90"#;
        let alb = Text::Alb;
        let fields = alb.split(line, &[]).unwrap();
        assert_eq!(field(alb, &fields, "client"), "192.168.131.39");
        assert_eq!(field(alb, &fields, "client:port"), "192.168.131.39:2817");
        assert_eq!(field(alb, &fields, "elb_status_code"), "200");
        assert_eq!(field(alb, &fields, "user_agent"), "curl/7.46.0");
        assert_eq!(field(alb, &fields, "conn_trace_id"), "TID_1234abcd5678ef90");
        let at = alb.index("request_creation_time").unwrap();
        // 2018-07-02T22:22:48.364Z, to the nanosecond.
        assert_eq!(
            alb.time(&fields, at, &mut Default::default()),
            Some(1_530_570_168_364_000_000)
        );
        let (path, host) = split_target(field(alb, &fields, "request").split(' ').nth(1).unwrap());
        assert_eq!((path, host), ("/api/cart?x=1", Some("www.example.com")));
        // An older line ends after ssl_protocol.
        let short = &line[..line.find(" arn:").unwrap()];
        let fields = alb.split(short, &[]).unwrap();
        assert_eq!(fields[at], "");
        assert_eq!(alb.time(&fields, at, &mut Default::default()), None);
        assert!(alb.split("http 2018-07-02T22:23:00Z app/x", &[]).is_none());
    }

    #[test]
    fn cloudfront_reads_its_fields_by_its_header() {
        let cf = Text::CloudFront;
        let line = "2019-12-04\t21:02:31\tLAX1\t392\t192.0.2.100\tGET\td111111abcdef8.cloudfront.net\t/index.html\t200\t-\tMozilla/5.0\t-\t-\tHit\tSOX4xwn4XV6Q4rgb7XiVGOHms_BGlTAC4KyHmureZmBNrjGdRLiNIQ==\tshop.example\thttps\t23\t0.001\t-\tTLSv1.2\tECDHE-RSA-AES128-GCM-SHA256\tHit\tHTTP/2.0\t-\t-\t11040\t0.001\tHit\ttext/html\t78\t-\t-";
        let fields = cf.split(line, &[]).unwrap();
        assert_eq!(field(cf, &fields, "c-ip"), "192.0.2.100");
        assert_eq!(field(cf, &fields, "x-host-header"), "shop.example");
        assert_eq!(field(cf, &fields, "sc-range-end"), "-");
        let at = cf.index("time").unwrap();
        assert_eq!(
            cf.time(&fields, at, &mut Default::default()),
            Some(1_575_493_351_000_000_000)
        );
        // A header choosing and ordering fields (new standard logging).
        let header = cf
            .header("#Fields: time date c-ip cs-method sc-status x-custom")
            .unwrap();
        assert_eq!(header[5], u8::MAX);
        let fields = cf
            .split("21:02:31\t2019-12-04\t192.0.2.9\tPOST\t429\tz", &header)
            .unwrap();
        assert_eq!(field(cf, &fields, "c-ip"), "192.0.2.9");
        assert_eq!(field(cf, &fields, "sc-status"), "429");
        assert_eq!(
            cf.time(&fields, at, &mut Default::default()),
            Some(1_575_493_351_000_000_000)
        );
        assert!(
            cf.split("a\tb\tc\td\te\tf\tg", &header).is_none(),
            "more columns than named"
        );
        assert!(cf.is_directive("#Version: 1.0"));
    }

    #[test]
    fn an_envoy_default_line_and_its_rate_limit_flag() {
        let envoy = Text::Envoy;
        let line = r#"[2016-04-15T20:17:00.310Z] "POST /api/v1/locations HTTP/2" 429 RL 154 0 226 100 "10.0.35.28" "nsq2http" "cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" "locations:8080" "tcp://10.0.2.1:80""#;
        let fields = envoy.split(line, &[]).unwrap();
        assert_eq!(
            envoy.time(&fields, 0, &mut Default::default()),
            Some(1_460_751_420_310_000_000)
        );
        assert_eq!(field(envoy, &fields, "x_forwarded_for"), "10.0.35.28");
        assert_eq!(field(envoy, &fields, "authority"), "locations:8080");
        assert_eq!(host_of("locations:8080"), "locations");
        assert_eq!(envoy.flagged(&fields), Some(true));
        let other = line.replace(" RL ", " UO,URX ");
        let fields = envoy.split(&other, &[]).unwrap();
        assert_eq!(envoy.flagged(&fields), Some(false));
        assert!(envoy.split("2016-04-15 POST /", &[]).is_none());
    }

    #[test]
    fn a_haproxy_httplog_line_with_and_without_syslog_and_captures() {
        let haproxy = Text::Haproxy;
        let line = r#"Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu|Mozilla/5.0 (X11)} {} "GET /index.html HTTP/1.1""#;
        let fields = haproxy.split(line, &[]).unwrap();
        assert_eq!(field(haproxy, &fields, "client_ip"), "10.0.1.2");
        assert_eq!(field(haproxy, &fields, "backend_name"), "static");
        assert_eq!(field(haproxy, &fields, "status_code"), "200");
        assert_eq!(
            field(haproxy, &fields, "captured_request_headers"),
            "1wt.eu|Mozilla/5.0 (X11)"
        );
        assert_eq!(
            field(haproxy, &fields, "http_request"),
            "GET /index.html HTTP/1.1"
        );
        assert_eq!(
            haproxy.time(&fields, 2, &mut Default::default()),
            Some(1_233_922_454_655_000_000)
        );
        let raw = &line[line.find("10.0.1.2").unwrap()..];
        let bare = raw.replace(" {1wt.eu|Mozilla/5.0 (X11)} {}", "");
        let fields = haproxy.split(&bare, &[]).unwrap();
        assert_eq!(
            field(haproxy, &fields, "http_request"),
            "GET /index.html HTTP/1.1"
        );
        assert_eq!(field(haproxy, &fields, "termination_state"), "----");
        assert!(
            haproxy
                .split("10.0.1.2:1 [06/Feb/2009:12:14:14.655] fe", &[])
                .is_none()
        );
    }

    #[test]
    fn targets_split_into_path_and_host() {
        assert_eq!(split_target("/a?b"), ("/a?b", None));
        assert_eq!(
            split_target("https://shop.example"),
            ("/", Some("shop.example"))
        );
        assert_eq!(split_target("http://[::1]:80/x"), ("/x", Some("::1")));
        assert_eq!(host_of("Shop.Example"), "Shop.Example");
    }

    /// The words as the reading before bytes found them (char patterns,
    /// a flag for the escape): the reference the byte reading is held to.
    fn words_by_chars(mut line: &str) -> Vec<(u8, &str)> {
        let mut words = Vec::new();
        loop {
            let text = line.trim_start_matches([' ', '\t']);
            let Some(&open) = text.as_bytes().first() else {
                return words;
            };
            let close = match open {
                b'"' => b'"',
                b'[' => b']',
                b'{' => b'}',
                _ => {
                    let end = text.find([' ', '\t']).unwrap_or(text.len());
                    words.push((0, &text[..end]));
                    line = &text[end..];
                    continue;
                }
            };
            let body = &text[1..];
            let mut escaped = false;
            let mut closed = None;
            for (i, b) in body.bytes().enumerate() {
                match b {
                    b'\\' if open == b'"' && !escaped => escaped = true,
                    b if b == close && !escaped => {
                        closed = Some(i);
                        break;
                    }
                    _ => escaped = false,
                }
            }
            match closed {
                Some(i) => {
                    words.push((open, &body[..i]));
                    line = &body[i + 1..];
                }
                None => {
                    words.push((open, body));
                    return words;
                }
            }
        }
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Lines of words, quoted, bracketed and braced, with escapes,
        /// characters past ASCII and unclosed delimiters: read byte by byte
        /// as char patterns read them; a CloudFront line's tabs alike.
        #[test]
        fn words_and_columns_are_read_by_bytes_as_by_chars(
            pieces in prop::collection::vec(prop::sample::select(vec![
                " ", "\t", "  ", "a", "GET", "é", "€", "\"", "\\", "[", "]", "{", "}", "\\\"", "\\\\", "x\\é", "10.0.0.1:80",
            ]), 0..40)
        ) {
            let line: String = pieces.concat();
            prop_assert_eq!(Words(&line).collect::<Vec<_>>(), words_by_chars(&line), "{:?}", line);
            let columns = Text::CloudFront.split(&line, &[]);
            let by_chars: Vec<&str> = line.split('\t').collect();
            if by_chars.len() >= 6 {
                let columns = columns.unwrap();
                for (i, column) in by_chars.iter().enumerate().take(MAX_FIELDS) {
                    prop_assert_eq!(columns[i], *column);
                }
            } else {
                prop_assert!(columns.is_none());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Where HAProxy's dates are read in place, they read as the
        /// general parser reads them; and every one of that layout is.
        #[test]
        fn an_haproxy_date_read_in_place_reads_as_the_general_parser_reads_it(
            year in prop_oneof![1969u32..=1971, 1999u32..=2101, 0u32..=9999],
            month in prop::sample::select(vec!["Jan", "feb", "MAR", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "Foo", "Ju"]),
            day in 0u32..=32,
            hour in 0u32..=24,
            minute in 0u32..=60,
            second in 0u32..=60,
            fraction in prop::option::of("[0-9]{0,11}"),
            tail in prop::sample::select(vec!["", "", "", " ", "Z"]),
        ) {
            let fraction = fraction.map_or(String::new(), |f| format!(".{f}"));
            let text = format!("{day:02}/{month}/{year:04}:{hour:02}:{minute:02}:{second:02}{fraction}{tail}");
            let general = haproxy_time(&text);
            match super::super::logs::haproxy_time_fixed(text.as_bytes()) {
                Some(nanos) => prop_assert_eq!(Some(nanos), general, "{}", text),
                None => {
                    let in_layout = (2..=10).contains(&fraction.len()) && tail.is_empty() && month.len() == 3 && general.is_some();
                    prop_assert!(!in_layout, "{} left to the general parser", text);
                }
            }
        }

        /// Where CloudFront's dates and times are read in place, they read
        /// as the general parsers read them; and every one of that layout is.
        #[test]
        fn a_cloudfront_date_and_time_read_in_place_read_as_the_general_parsers_read_them(
            year in prop_oneof![1969u32..=1971, 1999u32..=2101, 0u32..=99999],
            month in 0u32..=13,
            day in 0u32..=32,
            hour in 0u32..=24,
            minute in 0u32..=60,
            second in 0u32..=61,
            (wide, tail) in (0usize..=3, prop::sample::select(vec!["", "", "", " ", "Z", ".5"])),
        ) {
            let date = format!("{year:04}-{month:0w$}-{day:02}", w = if wide == 0 { 1 } else { 2 });
            let clock = format!("{hour:02}:{minute:02}:{second:02}{tail}");
            let general = cloudfront_time(&date, &clock);
            match super::super::logs::cloudfront_time_fixed(date.as_bytes(), clock.as_bytes()) {
                Some(nanos) => prop_assert_eq!(Some(nanos), general, "{} {}", date, clock),
                None => {
                    let in_layout = date.len() == 10 && clock.len() == 8 && general.is_some();
                    prop_assert!(!in_layout, "{} {} left to the general parsers", date, clock);
                }
            }
        }
    }
}
