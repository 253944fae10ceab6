//! The one error type of the crate: every message is one line naming where the problem is.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum LogError {
    /// A log that cannot be opened.
    Open { file: String, message: String },
    /// A log that breaks off: a read error, a truncated or corrupt gzip stream; `lines` were
    /// read before it.
    Read {
        file: String,
        lines: u64,
        message: String,
    },
    /// A bad option: `option` names it (`--log-format`, `--interval`).
    Option { option: String, message: String },
    /// Nothing to summarise: no request in the input, and why.
    NoRequests { message: String },
    /// Stopped by Ctrl-C or SIGTERM.
    Interrupted,
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogError::Open { file, message } => write!(f, "{file}: cannot read: {message}"),
            LogError::Read {
                file,
                lines,
                message,
            } => {
                write!(
                    f,
                    "{file}: {message}, after {lines} line{}",
                    if *lines == 1 { "" } else { "s" }
                )
            }
            LogError::Option { option, message } => write!(f, "{option}: {message}"),
            LogError::NoRequests { message } => f.write_str(message),
            LogError::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for LogError {}
