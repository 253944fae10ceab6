//! Production router logs: a streaming parser for Heroku's router (every era, `heroku logs`
//! and drain framing), HAProxy's HTTP log and nginx's access log (any `log_format`), and a
//! one-pass summary in bounded memory. No Python here: `dynosim-py` exposes it.
//!
//! ```no_run
//! use dynosim_logs::{parse::{FormatChoice, Line, Parser}};
//! let mut parser = Parser::new(FormatChoice::Auto, None).unwrap();
//! let line = b"2014-01-09T06:16:53.748849+00:00 heroku[router]: at=info method=GET path=/users/42 host=a.com dyno=web.12 connect=12ms service=21ms status=200 bytes=78";
//! if let Ok(Line::Request(request, _)) = parser.parse(line) {
//!     assert_eq!(request.route, "/users/:id");
//! }
//! ```
//!
//! What each router's fields mean, and what is assumed, is in docs/logs.md.

pub mod attempt;
pub mod dedup;
pub mod error;
pub mod fit;
pub mod haproxy;
pub mod hash;
pub mod heroku;
pub mod input;
pub mod nginx;
pub mod number;
pub mod overlap;
pub mod parse;
pub mod reader;
pub mod record;
pub mod route;
pub mod series;
pub mod summary;
pub mod time;
pub mod trace;
pub mod window;

pub use error::LogError;
pub use fit::{fit_data, FitData, FitOptions};
pub use parse::{FormatChoice, Line, Parser};
pub use reader::{read_logs, ReadOptions, ReadSummary, Reader, Visitor};
pub use record::{Detail, Format, OwnedRequest, Request};
pub use summary::{summarise, Options, Summariser, Summary};
pub use trace::{build_trace, TraceOptions, TraceReport};
pub use window::{Bound, Window};
