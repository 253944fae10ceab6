//! The text files a scenario names (a trace's requests, a sample file's service times): opened
//! with errors that name the file and its line, and read a line at a time in bounded memory.
//! One record a line; blank lines and lines starting with `#` are skipped.

use crate::error::{Error, Result};
use crate::params::Params;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The longest line (4 KiB): a record needs a few dozen characters.
pub const MAX_LINE_BYTES: usize = 4096;

/// An error in a file: its line (from 1; 0 for the file as a whole) and what is wrong.
pub type LineError = (usize, String);

/// The largest file read, and the words that say so in an error (`"a sample file may hold
/// (1 GiB)"`, after "more than").
pub type MaxBytes<'a> = Option<(u64, &'a str)>;

/// Opens `path`, the file scenario key `key` of `p` names, checked to be a regular file (of
/// `holds`, such as "service times", for the error) of at most `max_bytes`.
pub fn open(
    p: &Params,
    key: &str,
    path: &Path,
    holds: &str,
    max_bytes: MaxBytes<'_>,
) -> Result<BufReader<File>> {
    let cannot_read =
        |e: std::io::Error| p.error(key, format!("cannot read {}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(cannot_read)?;
    if !meta.is_file() {
        return Err(error(
            p,
            key,
            path,
            (
                0,
                format!("not a regular file; expected a text file of {holds}, one a line"),
            ),
        ));
    }
    if let Some((max, words)) = max_bytes {
        if meta.len() > max {
            return Err(error(
                p,
                key,
                path,
                (0, format!("{} bytes is more than {words}", meta.len())),
            ));
        }
    }
    Ok(BufReader::new(File::open(path).map_err(cannot_read)?))
}

/// An error in `path`, the file scenario key `key` of `p` names, at a line (0: the file as a
/// whole).
pub fn error(p: &Params, key: &str, path: &Path, (line, message): LineError) -> Error {
    match line {
        0 => p.error(key, format!("{}: {message}", path.display())),
        line => p.error(key, format!("{}:{line}: {message}", path.display())),
    }
}

/// Reads `reader` a line at a time: each line neither blank nor a comment goes to `each`,
/// trimmed, with its number (from 1), and an error `each` returns is that line's. A line longer
/// than [`MAX_LINE_BYTES`] or not UTF-8 is an error, and with `max_bytes` so is more text than
/// that.
pub fn for_each_line(
    reader: impl BufRead,
    max_bytes: MaxBytes<'_>,
    mut each: impl FnMut(usize, &str) -> std::result::Result<(), String>,
) -> std::result::Result<(), LineError> {
    let (max, words) = max_bytes.unwrap_or((u64::MAX - 1, ""));
    // One byte past the limit tells a file that grew while it was read from one that fits.
    let mut reader = reader.take(max + 1);
    let mut raw = Vec::new();
    for number in 1.. {
        raw.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut raw)
            .map_err(|e| (0, format!("cannot read: {e}")))?;
        if read == 0 {
            break;
        }
        if reader.limit() == 0 {
            return Err((0, format!("more than {words}")));
        }
        if raw.len() > MAX_LINE_BYTES && raw.last() != Some(&b'\n') {
            return Err((number, format!("longer than {MAX_LINE_BYTES} bytes")));
        }
        let line = std::str::from_utf8(&raw)
            .map_err(|_| (number, "not UTF-8 text".to_string()))?
            .trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        each(number, line).map_err(|message| (number, message))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn lines(
        text: &[u8],
        max_bytes: MaxBytes<'_>,
    ) -> std::result::Result<Vec<(usize, String)>, LineError> {
        let mut seen = Vec::new();
        for_each_line(Cursor::new(text.to_vec()), max_bytes, |n, line| {
            if line == "bad" {
                return Err("a bad line".into());
            }
            seen.push((n, line.to_string()));
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn lines_come_trimmed_with_their_numbers_and_without_blanks_or_comments() {
        let seen = lines(b"a\n# note\n\n  b \r\nc", None).unwrap();
        assert_eq!(
            seen,
            vec![(1, "a".into()), (4, "b".into()), (5, "c".into())]
        );
        assert_eq!(
            lines(b"a\n\nbad\n", None).unwrap_err(),
            (3, "a bad line".to_string())
        );
    }

    #[test]
    fn lines_and_files_are_read_within_their_bounds() {
        let long = format!("7\n{}\n", "1".repeat(MAX_LINE_BYTES + 1));
        assert_eq!(
            lines(long.as_bytes(), None).unwrap_err(),
            (2, format!("longer than {MAX_LINE_BYTES} bytes"))
        );
        // No line end at all (a device of zeros): stopped at the first line's limit.
        let zeros = std::io::repeat(0).take(10 * MAX_LINE_BYTES as u64);
        let (line, message) =
            for_each_line(BufReader::new(zeros), None, |_, _| Ok(())).unwrap_err();
        assert_eq!(
            (line, message.contains("longer than")),
            (1, true),
            "{message}"
        );
        assert_eq!(
            lines(b"7\n\xff\n", None).unwrap_err(),
            (2, "not UTF-8 text".to_string())
        );
        assert_eq!(lines(b"1\n2\n", Some((4, "four bytes"))).unwrap().len(), 2);
        assert_eq!(
            lines(b"1\n2\n3\n", Some((4, "four bytes"))).unwrap_err(),
            (0, "more than four bytes".to_string())
        );
    }
}
