//! Log files as lines: plain, gzip (recognised by its magic bytes, whatever the name; several
//! gzip members one after another, as `cat a.gz b.gz` makes, read as one), or standard input
//! (`-`). Lines are slices of one reused buffer: memory is flat however large the file.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};

use flate2::read::MultiGzDecoder;

use crate::error::LogError;

/// The longest line read; a longer one is reported malformed and skipped.
pub const MAX_LINE: usize = 1 << 20;
const CHUNK: usize = 1 << 20;

/// An opened log: its reader, and whether it is gzip-compressed.
pub struct Source {
    pub name: String,
    pub reader: Box<dyn Read + Send>,
    pub gzip: bool,
}

/// Opens `path` (`-` is standard input).
pub fn open(path: &str) -> Result<Source, LogError> {
    let name = if path == "-" {
        "<stdin>".to_string()
    } else {
        path.to_string()
    };
    let raw: Box<dyn Read + Send> = if path == "-" {
        Box::new(io::stdin())
    } else {
        match File::open(path) {
            Ok(f) if f.metadata().is_ok_and(|m| m.is_dir()) => {
                return Err(LogError::Open {
                    file: name,
                    message: "is a folder, not a log file".into(),
                })
            }
            Ok(f) => Box::new(f),
            Err(e) => {
                return Err(LogError::Open {
                    file: name,
                    message: io_reason(&e),
                })
            }
        }
    };
    let mut buffered = BufReader::with_capacity(CHUNK, raw);
    let head = buffered.fill_buf().map_err(|e| LogError::Read {
        file: name.clone(),
        lines: 0,
        message: io_reason(&e),
    })?;
    let gzip = head.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn Read + Send> = if gzip {
        Box::new(MultiGzDecoder::new(buffered))
    } else {
        Box::new(buffered)
    };
    Ok(Source { name, reader, gzip })
}

/// The operating system's reason, without Rust's "(os error 2)".
pub fn io_reason(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// A line of the input.
pub enum Chunk<'a> {
    /// A line, without its `\n` or `\r\n`.
    Line(&'a [u8]),
    /// A line longer than [`MAX_LINE`], skipped.
    TooLong,
}

/// Splits a reader into lines.
pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    skipping: bool,
}

impl<R: Read> Lines<R> {
    pub fn new(reader: R) -> Self {
        Lines {
            reader,
            buf: vec![0; CHUNK],
            start: 0,
            end: 0,
            eof: false,
            skipping: false,
        }
    }

    /// The next line; None at the end. A last line without a line end is a line.
    #[allow(clippy::should_implement_trait)] // it lends a slice of its buffer: not an Iterator
    pub fn next(&mut self) -> io::Result<Option<Chunk<'_>>> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                let line_start = self.start;
                let line_end = self.start + i;
                self.start = line_end + 1;
                if self.skipping {
                    self.skipping = false;
                    continue;
                }
                let mut line = &self.buf[line_start..line_end];
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                return Ok(Some(Chunk::Line(line)));
            }
            if self.eof {
                if self.start == self.end {
                    return Ok(None);
                }
                let line_start = self.start;
                self.start = self.end;
                if std::mem::take(&mut self.skipping) {
                    return Ok(None);
                }
                let mut line = &self.buf[line_start..self.end];
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                return Ok(Some(Chunk::Line(line)));
            }
            // No line end in the buffer: keep the partial line, read more.
            if self.end - self.start >= MAX_LINE {
                self.start = self.end;
                if !self.skipping {
                    self.skipping = true;
                    return Ok(Some(Chunk::TooLong));
                }
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8]) -> Vec<String> {
        let mut l = Lines::new(input);
        let mut out = vec![];
        while let Some(c) = l.next().unwrap() {
            out.push(match c {
                Chunk::Line(b) => String::from_utf8_lossy(b).into_owned(),
                Chunk::TooLong => "<too long>".into(),
            });
        }
        out
    }

    #[test]
    fn line_ends_of_every_kind() {
        assert_eq!(lines(b"a\nb\r\nc"), ["a", "b", "c"]);
        assert_eq!(lines(b"a\n\nb\n"), ["a", "", "b"]);
        assert_eq!(lines(b""), Vec::<String>::new());
        assert_eq!(lines(b"\r\n"), [""]);
    }

    #[test]
    fn long_lines_are_skipped_whole() {
        let mut input = b"short\n".to_vec();
        input.extend(vec![b'x'; MAX_LINE + 10]);
        input.extend(b"\nafter\n");
        assert_eq!(lines(&input), ["short", "<too long>", "after"]);
        // a line of exactly CHUNK bytes with its end in the next read
        let mut input = vec![b'y'; CHUNK - 1];
        input.extend(b"\nz");
        let got = lines(&input);
        assert_eq!((got.len(), got[1].as_str()), (2, "z"));
    }
}
