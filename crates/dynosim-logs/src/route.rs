//! Routes: a request path with its query string dropped and its ids replaced by `:id`, so
//! that `/users/42/posts` and `/users/7/posts` are one route.
//!
//! A path segment is an id when, before any `.extension`, it is all digits (`42`), a UUID
//! (`0b10378e-abc4-312b-78b3-cb87758962ff`), or a hex string of 16 characters or more with
//! at least one digit (Mongo's ObjectIds, digests). `/users/42.json` becomes `/users/:id.json`.
//! Anything else (`v1`, slugs, names) stays as it is.

/// The route of `path`: borrowed from `path` when nothing needs replacing, else written into
/// `scratch` (reused from line to line, so no allocation per request).
pub fn normalise<'a>(path: &'a str, scratch: &'a mut String) -> &'a str {
    let path = strip_origin(path);
    let end = memchr::memchr2(b'?', b'#', path.as_bytes()).unwrap_or(path.len());
    let path = &path[..end];
    if !path.split('/').any(|seg| id_stem_len(seg).is_some()) {
        return path;
    }
    scratch.clear();
    for (i, seg) in path.split('/').enumerate() {
        if i > 0 {
            scratch.push('/');
        }
        match id_stem_len(seg) {
            Some(n) => {
                scratch.push_str(":id");
                scratch.push_str(&seg[n..]);
            }
            None => scratch.push_str(seg),
        }
    }
    scratch
}

/// `http://host/path` (a proxy's absolute form) as `/path`.
fn strip_origin(path: &str) -> &str {
    for scheme in ["http://", "https://"] {
        if let Some(rest) = path.strip_prefix(scheme) {
            return rest.find('/').map_or("/", |i| &rest[i..]);
        }
    }
    path
}

/// The length of the id at the start of `seg` when the segment is an id (possibly followed
/// by an extension), else None.
fn id_stem_len(seg: &str) -> Option<usize> {
    let stem_len = seg.find('.').unwrap_or(seg.len());
    let stem = &seg.as_bytes()[..stem_len];
    let ext = &seg.as_bytes()[stem_len..];
    if ext.len() > 1
        && !ext[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'.')
    {
        return None;
    }
    is_id(stem).then_some(stem_len)
}

fn is_id(s: &[u8]) -> bool {
    if s.is_empty() {
        return false;
    }
    if s.iter().all(u8::is_ascii_digit) {
        return true;
    }
    if s.len() == 36 {
        return s.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    }
    s.len() >= 16 && s.iter().all(u8::is_ascii_hexdigit) && s.iter().any(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(p: &str) -> String {
        let mut scratch = String::new();
        normalise(p, &mut scratch).to_string()
    }

    #[test]
    fn ids_become_placeholders() {
        assert_eq!(
            route("/api/users/1538823671/count_pending_messages"),
            "/api/users/:id/count_pending_messages"
        );
        assert_eq!(route("/users/42/posts/7"), "/users/:id/posts/:id");
        assert_eq!(
            route("/r/0b10378e-abc4-312b-78b3-cb87758962ff/x"),
            "/r/:id/x"
        );
        assert_eq!(route("/o/507f1f77bcf86cd799439011"), "/o/:id");
        assert_eq!(route("/users/42.json"), "/users/:id.json");
        assert_eq!(
            route("/assets/app-4f60293ab9070fc842510705b90cb6b7.css"),
            "/assets/app-4f60293ab9070fc842510705b90cb6b7.css"
        );
    }

    #[test]
    fn query_and_origin_are_dropped() {
        assert_eq!(
            route("/api/v1/dependencies?gems=rack,7"),
            "/api/v1/dependencies"
        );
        assert_eq!(route("/a#frag"), "/a");
        assert_eq!(route("https://example.com/users/3?x=1"), "/users/:id");
        assert_eq!(route("http://example.com"), "/");
    }

    #[test]
    fn words_stay() {
        for p in [
            "/",
            "/v1/posts",
            "/api/Schlachter 1951/books",
            "/deadbeefcafebabe",
            "/abc123",
            "",
            "*",
        ] {
            assert_eq!(route(p), p, "{p}");
        }
        // a UUID with a bad character is not one
        assert_eq!(
            route("/r/0b10378e-abc4-312b-78b3-cb87758962fz"),
            "/r/0b10378e-abc4-312b-78b3-cb87758962fz"
        );
    }

    #[test]
    fn borrowed_when_nothing_changes() {
        let mut scratch = String::new();
        let p = "/posts?page=2";
        let r = normalise(p, &mut scratch);
        assert_eq!(r, "/posts");
        assert!(scratch.is_empty());
    }
}
