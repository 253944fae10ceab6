//! What one format's parser ([`crate::heroku`], [`crate::haproxy`], nginx's
//! [`crate::nginx::Template`]) makes of a line: a request, a line of its log that is not a
//! request, or a refusal saying whether the line is another format's or this one's but
//! unreadable. [`crate::parse`] tries the formats in turn and acts on these; they live here,
//! below both, so that the formats need not import the dispatcher that imports them.

use std::borrow::Cow;

use crate::record::Request;

/// What a format's parser makes of a line.
#[allow(clippy::large_enum_variant)] // one a line, on the stack: boxing would allocate each time
pub enum Attempt<'a> {
    /// A request, and the bytes that identify the line for duplicate detection.
    Request(Request<'a>, &'a [u8]),
    /// A line of this format's log that is not a request (`app[web.1]: ...`): skipped.
    Other,
    Reject(Reject),
}

/// Why a format's parser refused a line.
pub enum Reject {
    /// Not this format at all.
    NotMine,
    /// This format, but unreadable: the reason.
    Malformed(Cow<'static, str>),
}
