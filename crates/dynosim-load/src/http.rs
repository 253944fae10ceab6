//! One HTTP/1.1 exchange on a new connection: the request's bytes, and reading the response.

use crate::{ErrorKind, Record, Request, Shared};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest response head (status line and headers) read before giving up.
const MAX_HEAD: usize = 64 * 1024;

/// Whether `s` is an HTTP token (a header name).
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The request's bytes: `GET path HTTP/1.1`, `Host` (unless the request has its own),
/// `Connection: close`, then the request's headers.
pub(crate) fn request_bytes(target: SocketAddr, r: &Request) -> Result<Vec<u8>, String> {
    if !r.path.starts_with('/') || r.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "the path {:?} must start with / and hold no spaces or control characters",
            r.path
        ));
    }
    let mut out = format!("GET {} HTTP/1.1\r\n", r.path);
    if !r
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("host"))
    {
        out.push_str(&format!("Host: {target}\r\n"));
    }
    out.push_str("Connection: close\r\n");
    for (name, value) in &r.headers {
        if !is_token(name) || name.eq_ignore_ascii_case("connection") {
            return Err(format!(
                "{name:?} is not a header name it can send (Connection is always close)"
            ));
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(format!(
                "the value of header {name} holds a line break or NUL"
            ));
        }
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    Ok(out.into_bytes())
}

/// Reads some more bytes onto the end of `buf`; 0 at the end of the stream.
async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<usize, ErrorKind> {
    let len = buf.len();
    buf.resize(len + 8192, 0);
    match stream.read(&mut buf[len..]).await {
        Ok(n) => {
            buf.truncate(len + n);
            Ok(n)
        }
        Err(_) => {
            buf.truncate(len);
            Err(ErrorKind::Io)
        }
    }
}

/// Connects, sends `wire` (a request's bytes) and reads its response, filling `record` as it goes
/// (`connected`, `first_byte`, `status`, `bytes`, `headers`; the caller stamps `done`).
pub(crate) async fn exchange(
    shared: &Shared,
    wire: &[u8],
    record: &mut Record,
) -> Result<(), ErrorKind> {
    let mut stream = TcpStream::connect(shared.target)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
            _ => ErrorKind::Connect,
        })?;
    record.connected = shared.now();
    // Small writes go out at once rather than waiting for an acknowledgement.
    let _ = stream.set_nodelay(true);
    stream.write_all(wire).await.map_err(|_| ErrorKind::Io)?;

    let mut buf = Vec::new();
    let head_end = loop {
        let n = read_more(&mut stream, &mut buf).await?;
        if n == 0 {
            // Closed before a whole head: nothing at all is a failed connection, a part of
            // one is not a response.
            return Err(if buf.is_empty() {
                ErrorKind::Io
            } else {
                ErrorKind::BadResponse
            });
        }
        if record.bytes == 0 {
            record.first_byte = shared.now();
        }
        record.bytes += n as u64;
        let prefix = &buf[..buf.len().min(5)];
        if !b"HTTP/".starts_with(prefix) {
            return Err(ErrorKind::BadResponse);
        }
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(ErrorKind::BadResponse);
        }
    };
    let head = parse_head(&buf[..head_end], &shared.capture)?;
    record.status = head.status;
    record.headers = head.captured;

    let no_body = head.status < 200 || head.status == 204 || head.status == 304;
    let mut have = (buf.len() - head_end) as u64;
    match head.length {
        _ if no_body => {}
        Some(length) if !head.chunked => {
            while have < length {
                buf.clear();
                let n = read_more(&mut stream, &mut buf).await?;
                if n == 0 {
                    return Err(ErrorKind::Io); // closed in the middle of the body
                }
                have += n as u64;
                record.bytes += n as u64;
            }
        }
        // Chunked, or no length: the server closes the connection after the body
        // (`Connection: close`).
        _ => loop {
            buf.clear();
            let n = read_more(&mut stream, &mut buf).await?;
            if n == 0 {
                break;
            }
            record.bytes += n as u64;
        },
    }
    Ok(())
}

struct Head {
    status: u16,
    length: Option<u64>,
    chunked: bool,
    captured: Vec<Option<String>>,
}

/// Parses a response head (ending with the blank line); `capture` names are lower case.
fn parse_head(head: &[u8], capture: &[String]) -> Result<Head, ErrorKind> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().unwrap_or_default();
    if !(version == "HTTP/1.1" || version == "HTTP/1.0")
        || code.len() != 3
        || !code.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(ErrorKind::BadResponse);
    }
    let status: u16 = code.parse().map_err(|_| ErrorKind::BadResponse)?;
    if status < 100 {
        return Err(ErrorKind::BadResponse);
    }
    let mut out = Head {
        status,
        length: None,
        chunked: false,
        captured: vec![None; capture.len()],
    };
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').ok_or(ErrorKind::BadResponse)?;
        let (name, value) = (name.trim(), value.trim());
        if !is_token(name) {
            return Err(ErrorKind::BadResponse);
        }
        if name.eq_ignore_ascii_case("content-length") {
            let length = value.parse().map_err(|_| ErrorKind::BadResponse)?;
            if out.length.is_some_and(|l| l != length) {
                return Err(ErrorKind::BadResponse);
            }
            out.length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            out.chunked |= value.to_ascii_lowercase().contains("chunked");
        }
        for (slot, wanted) in out.captured.iter_mut().zip(capture) {
            if slot.is_none() && name.eq_ignore_ascii_case(wanted) {
                *slot = Some(value.to_string());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse() {
        let capture = vec!["x-a".to_string(), "x-missing".to_string()];
        let h = parse_head(
            b"HTTP/1.1 503 Service Unavailable\r\nX-A: one\r\nx-a: two\r\nContent-Length: 7\r\n\r\n",
            &capture,
        )
        .unwrap();
        assert_eq!(h.status, 503);
        assert_eq!(h.length, Some(7));
        assert_eq!(h.captured, vec![Some("one".to_string()), None]);
        let h = parse_head(b"HTTP/1.0 200\r\nTransfer-Encoding: chunked\r\n\r\n", &[]).unwrap();
        assert!(h.chunked && h.status == 200);
        for bad in [
            &b"HTTP/2 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        ] {
            assert_eq!(parse_head(bad, &[]).err(), Some(ErrorKind::BadResponse));
        }
    }

    #[test]
    fn requests_are_checked() {
        let target: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let r = |path: &str, headers: Vec<(&str, &str)>| Request {
            at: 0.0,
            path: path.to_string(),
            headers: headers
                .into_iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        };
        let ok = request_bytes(target, &r("/a?b=1", vec![("X-Phases", "cpu=0.1")])).unwrap();
        assert_eq!(
            String::from_utf8(ok).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\
             X-Phases: cpu=0.1\r\n\r\n"
        );
        let own_host = request_bytes(target, &r("/", vec![("host", "app")])).unwrap();
        assert!(!String::from_utf8(own_host).unwrap().contains("8080"));
        assert!(request_bytes(target, &r("a", vec![])).is_err());
        assert!(request_bytes(target, &r("/a b", vec![])).is_err());
        assert!(request_bytes(target, &r("/", vec![("X-A", "1\r\nX-B: 2")])).is_err());
        assert!(request_bytes(target, &r("/", vec![("X A", "1")])).is_err());
        assert!(request_bytes(target, &r("/", vec![("Connection", "keep-alive")])).is_err());
    }
}
