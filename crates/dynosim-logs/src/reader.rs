//! Reading logs into requests: what the summary, fitting and replaying share. A [`Reader`]
//! parses each line, skips other sources' lines, counts and keeps the first malformed lines,
//! drops duplicates and (with a host) other hosts' requests, and hands every remaining request
//! to a [`Visitor`], in file order (not time order: see docs/logs.md). The summary, fitting and
//! the replay's trace are visitors; [`read_logs`] is one pass over files into one, and
//! [`ReadSummary`] what every command reports of the reading.

use std::io::Read;

use serde::Serialize;

use crate::dedup::{RecentSet, WINDOW};
use crate::error::LogError;
use crate::hash::{digest, FastMap};
use crate::input::{self, Chunk, Lines};
use crate::parse::{FormatChoice, Line, Parser};
use crate::record::Request;

/// Malformed lines kept with their reason.
pub const MALFORMED_EXAMPLES: usize = 5;
/// Hosts tallied one by one.
pub const MAX_HOSTS: usize = 1000;
/// Lines between two looks at the stop flag (Ctrl-C).
const STOP_EVERY: u64 = 1 << 16;
/// The name of the pool of routes, dynos or hosts beyond the bounds.
pub const OTHER: &str = "(other)";

/// How to read logs, whatever is made of them: `--format`, `--log-format`, `--host`.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub format: FormatChoice,
    /// nginx's `log_format` (default: combined + `$request_time $upstream_response_time`).
    pub log_format: Option<String>,
    /// Only requests to this host (the Host header), when given.
    pub host: Option<String>,
}

impl ReadOptions {
    pub fn reader(&self) -> Result<Reader, LogError> {
        Reader::new(self.format, self.log_format.as_deref(), self.host.clone())
    }
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Malformed {
    pub file: String,
    pub line: u64,
    pub reason: String,
    /// Its first 200 characters.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSummary {
    pub name: String,
    pub lines: u64,
    pub requests: u64,
    pub malformed: u64,
}

/// What every command reports of the reading, first in its `--json`: the files, their lines,
/// and what became of the lines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadSummary {
    pub files: Vec<FileSummary>,
    pub lines: u64,
    /// Requests read (after duplicates and `--host`).
    pub requests: u64,
    pub malformed: u64,
    pub malformed_lines: Vec<Malformed>,
    /// Lines of the same request again (same request id, or the same line with a timestamp
    /// finer than a second), skipped.
    pub duplicates: u64,
    /// Lines of other sources (`app[web.1]`, HAProxy's own messages) and blank lines, skipped.
    pub other_lines: u64,
    /// Requests to other hosts than `--host`, skipped.
    pub other_hosts: u64,
    /// Requests by host (the Host header), of every host, `--host` or not: the busiest first,
    /// hosts past [`MAX_HOSTS`] pooled as `(other)`. Not serialised here: the summary reports it.
    #[serde(skip)]
    pub hosts: Vec<(String, u64)>,
}

/// What gathers the requests read: go on after each, or stop the reading with an error.
pub trait Visitor {
    fn visit(&mut self, request: &Request<'_>) -> Result<(), LogError>;
}

impl<F: FnMut(&Request<'_>) -> Result<(), LogError>> Visitor for F {
    fn visit(&mut self, request: &Request<'_>) -> Result<(), LogError> {
        self(request)
    }
}

/// Reads the logs at `paths` (`-`: standard input) in one pass, handing each request to
/// `visitor`: what was read, and the visitor; the error saying why for logs in which no request
/// was read.
pub fn read_logs<V: Visitor>(
    options: &ReadOptions,
    paths: &[String],
    stop: &dyn Fn() -> bool,
    mut visitor: V,
) -> Result<(ReadSummary, V), LogError> {
    let mut reader = options.reader()?;
    reader.read_paths(paths, stop, &mut visitor)?;
    Ok((reader.finish()?, visitor))
}

pub struct Reader {
    parser: Parser,
    host: Option<String>,
    recent: RecentSet,
    pub files: Vec<FileSummary>,
    pub malformed_lines: Vec<Malformed>,
    /// Lines of a request already read (same request id, or the same line with a timestamp
    /// finer than a second).
    pub duplicates: u64,
    /// Lines of other sources and blank lines.
    pub other_lines: u64,
    /// Requests to other hosts than the one asked for.
    pub other_hosts: u64,
    /// Requests per host, every host (before the host filter), up to [`MAX_HOSTS`] hosts;
    /// `host_overflow` counts the requests of hosts past that.
    pub hosts: FastMap<String, u64>,
    pub host_overflow: u64,
}

impl Reader {
    /// `log_format`: nginx's layout (default: combined + `$request_time
    /// $upstream_response_time`); `host`: only requests to it.
    pub fn new(
        format: FormatChoice,
        log_format: Option<&str>,
        host: Option<String>,
    ) -> Result<Reader, LogError> {
        let parser = Parser::new(format, log_format).map_err(|message| LogError::Option {
            option: "--log-format".into(),
            message,
        })?;
        Ok(Reader {
            parser,
            host,
            recent: RecentSet::new(WINDOW),
            files: Vec::new(),
            malformed_lines: Vec::new(),
            duplicates: 0,
            other_lines: 0,
            other_hosts: 0,
            hosts: FastMap::default(),
            host_overflow: 0,
        })
    }

    pub fn lines(&self) -> u64 {
        self.files.iter().map(|f| f.lines).sum()
    }

    pub fn malformed(&self) -> u64 {
        self.files.iter().map(|f| f.malformed).sum()
    }

    /// The error for logs in which no request was read, saying why: empty files, a `--host`
    /// that matched none (with the hosts there are), malformed lines (the first few, with
    /// their numbers), or only other sources' lines.
    pub fn no_requests(&self) -> LogError {
        let (lines, malformed) = (self.lines(), self.malformed());
        let names = self
            .files
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let message = if lines == 0 {
            format!("{names}: empty: no lines to summarise")
        } else if self.other_hosts > 0 {
            let mut seen: Vec<_> = self.hosts.iter().collect();
            seen.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
            let seen: Vec<&str> = seen.iter().take(5).map(|(h, _)| h.as_str()).collect();
            format!(
                "--host {}: no request to that host; hosts in the log: {}",
                self.host.as_deref().unwrap_or(""),
                if seen.is_empty() {
                    "none".to_string()
                } else {
                    seen.join(", ")
                }
            )
        } else if malformed > 0 {
            let at = self
                .malformed_lines
                .iter()
                .map(|m| format!("{}:{}: {}", m.file, m.line, m.reason))
                .collect::<Vec<_>>()
                .join("; ");
            format!(
                "no request read: {malformed} of {lines} line{} malformed ({at}{})",
                if lines == 1 { "" } else { "s" },
                if malformed as usize > self.malformed_lines.len() {
                    "; ..."
                } else {
                    ""
                }
            )
        } else {
            format!("{names}: no router line among {lines} lines (other sources' lines only)")
        };
        LogError::NoRequests { message }
    }

    /// What was read; the error saying why for logs in which no request was read.
    pub fn finish(self) -> Result<ReadSummary, LogError> {
        let requests: u64 = self.files.iter().map(|f| f.requests).sum();
        if requests == 0 {
            return Err(self.no_requests());
        }
        let mut hosts: Vec<(String, u64)> = self.hosts.into_iter().collect();
        if self.host_overflow > 0 {
            hosts.push((OTHER.into(), self.host_overflow));
        }
        hosts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(ReadSummary {
            lines: self.files.iter().map(|f| f.lines).sum(),
            requests,
            malformed: self.files.iter().map(|f| f.malformed).sum(),
            malformed_lines: self.malformed_lines,
            duplicates: self.duplicates,
            other_lines: self.other_lines,
            other_hosts: self.other_hosts,
            files: self.files,
            hosts,
        })
    }

    /// Reads the logs at `paths` (`-`: standard input) one after another.
    pub fn read_paths(
        &mut self,
        paths: &[String],
        stop: &dyn Fn() -> bool,
        visit: &mut dyn Visitor,
    ) -> Result<(), LogError> {
        for path in paths {
            let source = input::open(path)?;
            self.read(&source.name, source.reader, source.gzip, stop, visit)?;
        }
        Ok(())
    }

    /// Reads a whole log named `name` (`gzip`: its bytes are decompressed ones, for the error
    /// messages); `stop` is polled now and then (Ctrl-C).
    pub fn read(
        &mut self,
        name: &str,
        reader: impl Read,
        gzip: bool,
        stop: &dyn Fn() -> bool,
        visit: &mut dyn Visitor,
    ) -> Result<(), LogError> {
        let index = self.files.len();
        self.files.push(FileSummary {
            name: name.to_string(),
            lines: 0,
            requests: 0,
            malformed: 0,
        });
        let mut lines = Lines::new(reader);
        let mut n: u64 = 0;
        loop {
            let chunk = match lines.next() {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    let message = match e.kind() {
                        std::io::ErrorKind::UnexpectedEof if gzip => {
                            "truncated gzip file: it ends inside its compressed data".to_string()
                        }
                        _ if gzip => format!("corrupt gzip data: {}", input::io_reason(&e)),
                        _ => format!("cannot read: {}", input::io_reason(&e)),
                    };
                    return Err(LogError::Read {
                        file: name.to_string(),
                        lines: n,
                        message,
                    });
                }
            };
            n += 1;
            if n % STOP_EVERY == 0 && stop() {
                return Err(LogError::Interrupted);
            }
            match chunk {
                Chunk::Line(line) => self.line(index, n, line, visit)?,
                Chunk::TooLong => {
                    self.malformed_line(index, n, "a line longer than 1 MiB".into(), b"")
                }
            }
        }
        self.files[index].lines = n;
        Ok(())
    }

    fn malformed_line(&mut self, file: usize, line: u64, reason: String, text: &[u8]) {
        self.files[file].malformed += 1;
        if self.malformed_lines.len() < MALFORMED_EXAMPLES {
            let text: String = String::from_utf8_lossy(text).chars().take(200).collect();
            self.malformed_lines.push(Malformed {
                file: self.files[file].name.clone(),
                line,
                reason,
                text,
            });
        }
    }

    /// Line `number` (from 1) of file `file` (an index into the files read).
    fn line(
        &mut self,
        file: usize,
        number: u64,
        line: &[u8],
        visit: &mut dyn Visitor,
    ) -> Result<(), LogError> {
        let (request, identity) = match self.parser.parse(line) {
            Ok(Line::Request(r, identity)) => (r, identity),
            Ok(Line::Other) => {
                self.other_lines += 1;
                return Ok(());
            }
            Err(reason) => {
                let reason = reason.into_owned();
                self.malformed_line(file, number, reason, line);
                return Ok(());
            }
        };
        // The same request again: by its id, or by its whole line when the timestamp is fine
        // enough for identical lines to be copies rather than two requests.
        let key = match request.request_id {
            Some(id) => Some(digest(&[b"id", id.as_bytes()])),
            None if request.precise_time => {
                Some(digest(&[identity, &request.time.to_bits().to_le_bytes()]))
            }
            None => None,
        };
        if let Some(key) = key {
            if !self.recent.insert(key) {
                self.duplicates += 1;
                return Ok(());
            }
        }
        // Every host is tallied, those the filter leaves out too (to say which there are).
        if !request.host.is_empty() {
            if let Some(n) = self.hosts.get_mut(request.host) {
                *n += 1;
            } else if self.hosts.len() < MAX_HOSTS {
                self.hosts.insert(request.host.to_string(), 1);
            } else {
                self.host_overflow += 1;
            }
        }
        if let Some(host) = &self.host {
            if request.host != host.as_str() {
                self.other_hosts += 1;
                return Ok(());
            }
        }
        self.files[file].requests += 1;
        visit.visit(&request)
    }
}
