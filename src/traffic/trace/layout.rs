//! Where a trace's rows keep their time, key and Host: from a CSV file's
//! header, or from the configuration for a log.

use std::path::Path;

use super::logs;
use crate::traffic::vendor::Text;
use super::{Config, Format, Input, Reader, Unit, Where};
use crate::error::{FieldError, field_error};

/// Where a row's time and key are.
#[derive(Clone, Debug)]
pub(super) enum Layout {
    Csv {
        column: usize,
        unit: Unit,
        /// `elapsed_field`'s column.
        elapsed: Option<usize>,
        key: Option<usize>,
        host: Option<usize>,
        /// `where`, and the columns of the fields it reads.
        filter: Option<Box<(Where, [Option<usize>; 4])>>,
        /// The column of the response's status, if there is one.
        status: Option<usize>,
    },
    Combined {
        /// Places in [`logs::COMBINED_FIELDS`].
        key: Option<usize>,
        /// `key_fallback`'s place.
        fallback: Option<usize>,
        host: Option<usize>,
        filter: Option<Box<Where>>,
        /// Whether `key` or `host` is the referer or the user agent, so
        /// each line is cut that far ([`logs::Combined::in_tail`]).
        tail: bool,
    },
    /// A vendor's text log: positions of its fields.
    Text {
        format: Text,
        time: usize,
        key: Option<usize>,
        /// `key_fallback`'s place.
        fallback: Option<usize>,
        /// `host_field`, if given.
        host: Option<usize>,
        filter: Option<Box<Where>>,
        status: usize,
    },
    Json {
        time: String,
        unit: Option<Unit>,
        /// The unit of a time written as a number, unless `unit` says.
        numbers: Unit,
        /// `elapsed_field`.
        elapsed: Option<String>,
        key: Option<String>,
        /// `key_fallback`.
        fallback: Option<String>,
        host: Option<String>,
        /// `where`, and the fields it reads.
        filter: Option<Box<(Where, [Option<String>; 4])>>,
        /// The field of the response's status.
        status: String,
        /// The field in which the gateway flags a request its rate limit
        /// turned away, when the format has one.
        flag: Option<&'static str>,
    },
}


/// Where a JSON log's fields are, by the vendor's field names: its time,
/// the unit of a time written as a number, and the method, path, status
/// and Host `where` reads.
struct JsonPreset {
    time: &'static str,
    numbers: Unit,
    fields: [&'static str; 4],
    flag: Option<&'static str>,
}

impl JsonPreset {
    fn of(format: Format) -> JsonPreset {
        match format {
            // Traefik v3's accesslog field names (pkg/middlewares/accesslog/logdata.go).
            Format::Traefik => JsonPreset {
                time: "StartUTC",
                numbers: Unit::Seconds,
                fields: ["RequestMethod", "RequestPath", "DownstreamStatus", "RequestHost"],
                flag: None,
            },
            // Cloudflare's http_requests dataset fields (Logpush).
            Format::Cloudflare => JsonPreset {
                time: "EdgeStartTimestamp",
                numbers: Unit::Nanos,
                fields: [
                    "ClientRequestMethod",
                    "ClientRequestPath",
                    "EdgeResponseStatus",
                    "ClientRequestHost",
                ],
                flag: Some("EdgeRateLimitAction"),
            },
            // Cloud Logging's LogEntry with its HttpRequest: the method, the
            // request's URL (its path and Host), the status.
            Format::Gcp => JsonPreset {
                time: "timestamp",
                numbers: Unit::Seconds,
                fields: [
                    "httpRequest.requestMethod",
                    "httpRequest.requestUrl",
                    "httpRequest.status",
                    "httpRequest.requestUrl",
                ],
                flag: None,
            },
            // `kong.log.serialize()` (kong/pdk/log.lua, Kong 3.x): the
            // start from `kong.request.get_start_time()` in milliseconds,
            // the path as requested (its query included), the Host header.
            Format::Kong => JsonPreset {
                time: "started_at",
                numbers: Unit::Millis,
                fields: ["request.method", "request.uri", "response.status", "request.headers.host"],
                flag: None,
            },
            _ => JsonPreset {
                time: "time",
                numbers: Unit::Seconds,
                fields: super::filter::FIELDS,
                flag: None,
            },
        }
    }
}

impl Config {
    /// Where each row's time and key are: from the header of a CSV file,
    /// from the configuration for a log.
    pub(super) fn locate(&self, shown: &Path, input: &mut Input) -> Result<Layout, FieldError> {
        let shown = shown.to_path_buf();
        if self.key_fallback.is_some() && self.key.is_none() {
            return Err(field_error!(
                "key_fallback",
                "it keys the rows whose key_field is absent; set key_field"
            ));
        }
        if self.key_fallback.is_some() && self.format.absent_key().is_none() {
            return Err(field_error!(
                "key_fallback",
                "a CSV cell is never absent (an empty one is a key like any); key_fallback takes the place of a text log's `-` or a JSON member missing or null"
            ));
        }
        if self.elapsed_field.is_some() && !self.format.is_json() && self.format != Format::Csv {
            return Err(field_error!(
                "elapsed_field",
                "{} logs {}; elapsed_field is for JSON lines and CSV (nginx's $msec and $request_time)",
                self.format.name(),
                match self.format {
                    Format::Combined => "write no duration, and their time is whole seconds",
                    Format::Cloudfront => "write their time to the whole second, so a start time-taken before it is known only to the second",
                    _ => "write each request's start already",
                }
            ));
        }
        match (self.format, input) {
            (Format::Csv, Input::Csv { reader, .. }) => self.locate_csv(&shown, reader),
            (Format::Combined, _) => {
                if self.column.is_some() || self.unit.is_some() {
                    return Err("time_field and unit: a combined log's time is its [10/Oct/2000:13:55:36 -0700] field; remove them".into());
                }
                let field = |name: &Option<String>, what: &'static str| match name {
                    None => Ok(None),
                    Some(name) => logs::COMBINED_FIELDS
                        .iter()
                        .position(|f| *f == name.as_str())
                        .map(Some)
                        .ok_or_else(|| {
                            FieldError::at(
                                what,
                                format!(
                                    "a combined log has no field {name:?}; it has {}",
                                    logs::COMBINED_FIELDS.join(", ")
                                ),
                            )
                        }),
                };
                if self.filter.as_ref().is_some_and(|w| w.host.is_some()) {
                    return Err(field_error!(
                        "where.host",
                        "a combined log names no Host; log $host (a JSON or CSV log) to filter by it"
                    ));
                }
                let (key, host) = (field(&self.key, "key_field")?, field(&self.host, "host_field")?);
                let fallback = field(&self.key_fallback, "key_fallback")?;
                Ok(Layout::Combined {
                    key,
                    fallback,
                    host,
                    filter: self.filter.clone(),
                    tail: [key, fallback, host].into_iter().flatten().any(logs::Combined::in_tail),
                })
            }
            (Format::Alb | Format::Cloudfront | Format::Envoy | Format::Haproxy, _) => {
                self.locate_text()
            }
            (Format::Jsonl | Format::Traefik | Format::Cloudflare | Format::Gcp | Format::Kong, _) => {
                let preset = JsonPreset::of(self.format);
                Ok(Layout::Json {
                    time: self.column.clone().unwrap_or_else(|| preset.time.into()),
                    unit: self.unit,
                    numbers: preset.numbers,
                    elapsed: self.elapsed_field.clone(),
                    key: self.key.clone(),
                    fallback: self.key_fallback.clone(),
                    host: self.host.clone(),
                    filter: self.filter.as_ref().map(|conditions| {
                        Box::new((
                            (**conditions).clone(),
                            conditions.names(self.host.as_deref(), preset.fields),
                        ))
                    }),
                    status: self
                        .filter
                        .as_ref()
                        .and_then(|w| w.status_field.clone())
                        .unwrap_or_else(|| preset.fields[2].to_string()),
                    flag: preset.flag,
                })
            }
            (Format::Csv, Input::Lines { .. }) => unreachable!("a CSV file is read as CSV"),
        }
    }

    /// Where a vendor's text log keeps the time, key, Host and status.
    fn locate_text(&self) -> Result<Layout, FieldError> {
        let format = Text::of(self.format).expect("a text format");
        let roles = format.roles();
        if self.unit.is_some() {
            return Err(field_error!(
                "unit",
                "{} logs write their own time; remove unit",
                self.format.name()
            ));
        }
        let field = |name: &str, what: &'static str| {
            format.index(name).ok_or_else(|| {
                FieldError::at(
                    what,
                    format!(
                        "{} logs have no field {name:?}; they have {}",
                        self.format.name(),
                        format.names().join(", ")
                    ),
                )
            })
        };
        let time = field(self.column.as_deref().unwrap_or(roles.time), "time_field")?;
        let key = self.key.as_deref().map(|name| field(name, "key_field")).transpose()?;
        let fallback = self.key_fallback.as_deref().map(|name| field(name, "key_fallback")).transpose()?;
        let host = self.host.as_deref().map(|name| field(name, "host_field")).transpose()?;
        if let Some(conditions) = &self.filter {
            if conditions.host.is_some() && host.is_none() && roles.host.is_none() {
                return Err(field_error!(
                    "where.host",
                    "{} logs name no Host; capture it and name the field with host_field",
                    self.format.name()
                ));
            }
            for (given, what) in [
                (&conditions.path_field, "where.path_field"),
                (&conditions.method_field, "where.method_field"),
                (&conditions.status_field, "where.status_field"),
            ] {
                if given.is_some() {
                    return Err(FieldError::at(
                        what,
                        format!(
                            "{} logs keep their method, path and status in known fields; remove it",
                            self.format.name()
                        ),
                    ));
                }
            }
        }
        Ok(Layout::Text {
            format,
            time,
            key,
            fallback,
            host,
            filter: self.filter.clone(),
            status: field(roles.status, "where.status")?,
        })
    }

    /// The time column, its unit and the key column, from a CSV header.
    fn locate_csv(&self, shown: &Path, reader: &mut Reader) -> Result<Layout, FieldError> {
        let headers = reader
            .headers()
            .map_err(|err| format!("{}: {err}", shown.display()))?;
        let wanted: Vec<&str> = match &self.column {
            Some(column) => vec![column.as_str()],
            None => vec!["time_ns", "time_s", "time_ms"],
        };
        let (column, name) = wanted
            .iter()
            .find_map(|name| {
                headers
                    .iter()
                    .position(|h| h.trim() == *name)
                    .map(|i| (i, *name))
            })
            .ok_or_else(|| {
                format!(
                    "{}:1: no column {} in the header",
                    shown.display(),
                    wanted.join(" or ")
                )
            })?;
        let column_of = |name: &Option<String>, what: &str| match name {
            None => Ok(None),
            Some(name) => headers
                .iter()
                .position(|h| h.trim() == name)
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "{}:1: no {what} column {name:?} in the header",
                        shown.display()
                    )
                }),
        };
        let key = column_of(&self.key, "key")?;
        let host = column_of(&self.host, "host")?;
        let elapsed = column_of(&self.elapsed_field, "elapsed")?;
        let unit = match (self.unit, name) {
            (Some(unit), _) => unit,
            (None, name) if name.ends_with("_ns") => Unit::Nanos,
            (None, name) if name.ends_with("_s") => Unit::Seconds,
            (None, name) if name.ends_with("_ms") => Unit::Millis,
            (None, name) => {
                return Err(field_error!(
                    "unit",
                    "the unit of column {name:?} is unknown; set unit = \"ns\", \"s\", \"ms\" or \"rfc3339\""
                ));
            }
        };
        let filter = match &self.filter {
            None => None,
            Some(conditions) => {
                let mut columns = [None; 4];
                for (i, name) in conditions
                    .names(self.host.as_deref(), super::filter::FIELDS)
                    .iter()
                    .enumerate()
                {
                    if let Some(name) = name {
                        columns[i] = column_of(&Some(name.clone()), super::filter::FIELDS[i])?;
                    }
                }
                Some(Box::new(((**conditions).clone(), columns)))
            }
        };
        let status_name = self
            .filter
            .as_ref()
            .and_then(|w| w.status_field.clone())
            .unwrap_or_else(|| "status".to_string());
        let status = headers.iter().position(|h| h.trim() == status_name);
        Ok(Layout::Csv {
            column,
            unit,
            elapsed,
            key,
            host,
            filter,
            status,
        })
    }

}
