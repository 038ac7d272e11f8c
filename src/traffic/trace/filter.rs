//! `where = { … }`: the rows of a mixed log a trace keeps — those of the
//! path, method, Host and status a limit applies to.

use serde::Deserialize;

use crate::error::{FieldError, field_error};
use crate::traffic::vendor::{Fields, Text, host_of, split_target};

/// `where = { path_prefix = "/api/", method = "POST", host = "…", status = … }`:
/// a row is kept when it matches every condition given.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Where {
    /// The request's path starts with this (the query string is part of
    /// the path, as the log writes it).
    pub path_prefix: Option<String>,
    /// The request's method, in any case (`"POST"`).
    pub method: Option<String>,
    /// The Host the request names, in any case.
    pub host: Option<String>,
    /// The response's status: a code (`429`), a class (`"4xx"`), or a list of either.
    pub status: Option<Statuses>,
    /// The CSV column or JSON field of the path (default `path`).
    pub path_field: Option<String>,
    /// The CSV column or JSON field of the method (default `method`).
    pub method_field: Option<String>,
    /// The CSV column or JSON field of the status (default `status`).
    pub status_field: Option<String>,
}

/// One status condition or several, any of which matches.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Statuses {
    /// `status = 429` or `status = "4xx"`.
    One(Status),
    /// `status = [200, "3xx"]`.
    Any(Vec<Status>),
}

/// A status code or a class of them.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Status {
    /// A code, like 429.
    Code(u16),
    /// A class like `"4xx"`, or a code written as text.
    Text(String),
}

/// Which of a row's fields the conditions read, in this order.
pub(super) const FIELDS: [&str; 4] = ["method", "path", "status", "host"];

/// A row's fields as the log writes them, those the conditions read.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Row<'a> {
    pub(super) method: Option<&'a str>,
    pub(super) path: Option<&'a str>,
    pub(super) status: Option<&'a str>,
    pub(super) host: Option<&'a str>,
}

impl<'a> Row<'a> {
    /// A combined log's `"METHOD PATH PROTOCOL"` request and its status.
    pub(super) fn of_request(request: &'a str, status: &'a str) -> Row<'a> {
        let mut words = request.split(' ');
        Row {
            method: words.next(),
            path: words.next(),
            status: Some(status),
            host: None,
        }
    }
}

impl<'a> Row<'a> {
    /// The fields of a vendor's text log that `where` reads; the Host from
    /// the field at `host` if given, else where the format keeps it.
    pub(super) fn of_text(format: Text, fields: &Fields<'a>, host: Option<usize>) -> Row<'a> {
        let roles = format.roles();
        let at = |name: &str| format.index(name).map(|i| fields[i]);
        let status = at(roles.status);
        let mut row = match roles.path {
            Some(path) => Row {
                method: at(roles.request),
                path: at(path),
                status,
                host: None,
            },
            None => Row::of_request(at(roles.request).unwrap_or_default(), status.unwrap_or_default()),
        };
        row.host = match host {
            Some(i) => Some(fields[i]),
            // ALB keeps the Host in the request's absolute URL.
            None if roles.host == Some(roles.request) => row.path,
            None => roles.host.and_then(at),
        };
        row
    }
}

impl Status {
    fn matches(&self, status: &str) -> bool {
        match self {
            Status::Code(code) => status.parse::<u16>() == Ok(*code),
            Status::Text(text) => {
                text.len() == status.len()
                    && text
                        .bytes()
                        .zip(status.bytes())
                        .all(|(want, got)| want.eq_ignore_ascii_case(&b'x') || want == got)
            }
        }
    }

    fn check(&self) -> Result<(), FieldError> {
        let fine = match self {
            Status::Code(code) => (100..=599).contains(code),
            Status::Text(text) => {
                text.len() == 3
                    && text.as_bytes()[0].is_ascii_digit()
                    && text
                        .bytes()
                        .all(|b| b.is_ascii_digit() || b.eq_ignore_ascii_case(&b'x'))
            }
        };
        if fine {
            Ok(())
        } else {
            Err(FieldError::new(format!(
                "{} is not a status: give a code from 100 to 599 (429) or a class (\"4xx\")",
                match self {
                    Status::Code(code) => code.to_string(),
                    Status::Text(text) => format!("{text:?}"),
                }
            )))
        }
    }
}

impl Where {
    /// Checks that there is a condition and that each is well formed.
    pub(super) fn check(&self) -> Result<(), FieldError> {
        if self.path_prefix.is_none()
            && self.method.is_none()
            && self.host.is_none()
            && self.status.is_none()
        {
            return Err(field_error!(
                "where",
                "keeps every row: give path_prefix, method, host or status, or remove it"
            ));
        }
        for status in self.statuses() {
            status.check().map_err(|err| err.within("where.status"))?;
        }
        Ok(())
    }

    fn statuses(&self) -> &[Status] {
        match &self.status {
            None => &[],
            Some(Statuses::One(one)) => std::slice::from_ref(one),
            Some(Statuses::Any(any)) => any,
        }
    }

    /// Which fields the conditions read (by [`FIELDS`]' order).
    pub(super) fn reads(&self) -> [bool; 4] {
        [
            self.method.is_some(),
            self.path_prefix.is_some(),
            self.status.is_some(),
            self.host.is_some(),
        ]
    }

    /// The CSV column or JSON field holding each field read (by
    /// [`FIELDS`]' order): as `where` names it, else the format's `defaults`;
    /// the Host's is the trace's `host_field` if it has one.
    pub(super) fn names(&self, host_field: Option<&str>, defaults: [&str; 4]) -> [Option<String>; 4] {
        let [method, path, status, host] = self.reads();
        let named = |wanted: bool, given: &Option<String>, default: &str| {
            wanted.then(|| given.clone().unwrap_or_else(|| default.to_string()))
        };
        [
            named(method, &self.method_field, defaults[0]),
            named(path, &self.path_field, defaults[1]),
            named(status, &self.status_field, defaults[2]),
            host.then(|| host_field.unwrap_or(defaults[3]).to_string()),
        ]
    }

    /// Whether `row` matches every condition; a field the row lacks
    /// matches none.
    pub(super) fn keeps(&self, row: &Row<'_>) -> bool {
        let text = |field: Option<&str>, want: &Option<String>, same: &dyn Fn(&str, &str) -> bool| {
            want.as_deref()
                .is_none_or(|want| field.is_some_and(|got| same(got.trim(), want)))
        };
        // A path may be an absolute URL (ALB, GCP): its path; a Host may be
        // a URL or carry a port: its name.
        fn host(text: &str) -> &str {
            match split_target(text) {
                (_, Some(host)) => host,
                (_, None) => host_of(text),
            }
        }
        text(row.method, &self.method, &|got, want| got.eq_ignore_ascii_case(want))
            && text(row.path, &self.path_prefix, &|got, want| {
                split_target(got).0.starts_with(want)
            })
            && text(row.host, &self.host, &|got, want| host(got).eq_ignore_ascii_case(want))
            && (self.status.is_none()
                || row.status.is_some_and(|got| {
                    self.statuses().iter().any(|s| s.matches(got.trim()))
                }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Where {
        toml::from_str::<Where>(text).unwrap()
    }

    #[test]
    fn a_row_is_kept_when_it_matches_every_condition() {
        let api_posts = parsed("path_prefix = \"/api/\"\nmethod = \"post\"\nstatus = [\"2xx\", 429]");
        api_posts.check().unwrap();
        let row = |request, status| Row::of_request(request, status);
        assert!(api_posts.keeps(&row("POST /api/cart HTTP/1.1", "201")));
        assert!(api_posts.keeps(&row("POST /api/cart HTTP/1.1", "429")));
        assert!(!api_posts.keeps(&row("POST /api/cart HTTP/1.1", "503")), "5xx");
        assert!(!api_posts.keeps(&row("GET /api/cart HTTP/1.1", "200")), "method");
        assert!(!api_posts.keeps(&row("POST /static/a.css HTTP/1.1", "200")), "path");
        assert!(!api_posts.keeps(&row("POST", "200")), "no path");
        let host = parsed("host = \"Shop.Example\"");
        assert!(host.keeps(&Row { host: Some("shop.example"), ..Row::default() }));
        assert!(!host.keeps(&Row { host: Some("blog.example"), ..Row::default() }));
        assert!(!host.keeps(&Row::default()), "a row without a Host");
    }

    #[test]
    fn conditions_that_keep_everything_or_name_no_status_are_refused() {
        assert!(parsed("path_field = \"uri\"").check().is_err());
        for bad in ["status = 42", "status = \"4x\"", "status = \"x00\"", "status = [\"abc\"]"] {
            assert!(parsed(bad).check().is_err(), "{bad}");
        }
        assert!(parsed("status = \"5XX\"").check().is_ok());
        assert!(parsed("status = \"5XX\"").keeps(&Row { status: Some("503"), ..Row::default() }));
    }
}
