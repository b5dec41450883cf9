//! A log's lines, plain or gzip-compressed (told by the first bytes, whatever the name), in
//! bounded memory: a line past [`MAX_LINE_LENGTH`] is given as [`Line::Long`] (its start only,
//! the rest skipped unread into memory), and a file whose first [`MAX_FIRST_LINE_LENGTH`] bytes
//! hold no line break is no text log ([`ReadError::NotText`]): a gzip of a GiB of zeros is
//! refused after its first MiB, not unpacked.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::rc::Rc;

use flate2::read::MultiGzDecoder;

/// The longest line read, in bytes without its line break (an access log's line is a request
/// line and a few headers; servers refuse request lines past 8 to 64 KiB).
pub const MAX_LINE_LENGTH: usize = 64 * 1024;
/// A file whose first this many bytes hold no line break is no text log.
pub const MAX_FIRST_LINE_LENGTH: usize = 1 << 20;
/// Bytes kept of a long line's start, to show it (redacted, by the caller).
pub const LONG_LINE_START: usize = 160;
const BUFFER: usize = 256 * 1024;

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadError {
    /// It could not be opened or read (`line`: the last line read whole).
    Io { line: u64, message: String },
    /// Its first MiB holds no line break; `zeros` when it starts with zero bytes.
    NotText { zeros: bool },
}

/// One line, without its line break.
#[derive(Debug, PartialEq)]
pub enum Line<'a> {
    Text(&'a [u8]),
    /// A line past [`MAX_LINE_LENGTH`]: its first [`LONG_LINE_START`] bytes.
    Long(&'a [u8]),
}

/// Counts the bytes read from the file itself (compressed, for a gzip): how far the reading is.
struct Counted {
    file: File,
    read: Rc<Cell<u64>>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// The lines of one file.
pub struct LineReader {
    source: Box<dyn Read>,
    raw: Rc<Cell<u64>>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    first: bool,
    long_start: Vec<u8>,
    /// Lines given so far (the next one's number less one).
    pub lines: u64,
}

impl LineReader {
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let io_error = |error: io::Error| ReadError::Io { line: 0, message: error.to_string() };
        let mut file = File::open(path).map_err(io_error)?;
        let mut magic = [0u8; 2];
        let mut have = 0;
        while have < 2 {
            let n = file.read(&mut magic[have..]).map_err(io_error)?;
            if n == 0 {
                break;
            }
            have += n;
        }
        let file = File::open(path).map_err(io_error)?;
        let raw = Rc::new(Cell::new(0));
        let counted = Counted { file, read: raw.clone() };
        let source: Box<dyn Read> =
            if have == 2 && magic == [0x1f, 0x8b] { Box::new(MultiGzDecoder::new(counted)) } else { Box::new(counted) };
        Ok(Self::new(source, raw))
    }

    /// Lines of any reader (tests, fuzzing): `raw` counts nothing.
    pub fn from_reader(source: Box<dyn Read>) -> Self {
        Self::new(source, Rc::new(Cell::new(0)))
    }

    fn new(source: Box<dyn Read>, raw: Rc<Cell<u64>>) -> Self {
        LineReader {
            source,
            raw,
            buf: vec![0; BUFFER],
            start: 0,
            end: 0,
            eof: false,
            first: true,
            long_start: Vec::new(),
            lines: 0,
        }
    }

    /// Bytes read from the file so far (compressed bytes for a gzip), as they grow.
    pub fn raw_bytes(&self) -> Rc<Cell<u64>> {
        self.raw.clone()
    }

    /// Reads more into the buffer, after what is pending (moved to its front); false at the end.
    fn fill(&mut self) -> Result<bool, ReadError> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        loop {
            match self.source.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(ReadError::Io { line: self.lines, message: error.to_string() }),
            }
        }
    }

    /// The next line, or None at the end of the file.
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, ReadError> {
        let mut searched = 0;
        loop {
            let pending = &self.buf[self.start + searched..self.end];
            if let Some(at) = memchr::memchr(b'\n', pending) {
                let line_end = self.start + searched + at;
                if line_end - self.start > MAX_LINE_LENGTH {
                    return self.skip_long(Some(line_end));
                }
                let line_start = self.start;
                self.start = line_end + 1;
                return Ok(Some(self.text(line_start, line_end)));
            }
            searched = self.end - self.start;
            if searched > MAX_LINE_LENGTH {
                return self.skip_long(None);
            }
            if !self.fill()? {
                if self.start == self.end {
                    return Ok(None);
                }
                let (line_start, line_end) = (self.start, self.end);
                self.start = self.end;
                return Ok(Some(self.text(line_start, line_end)));
            }
        }
    }

    fn text(&mut self, start: usize, mut end: usize) -> Line<'_> {
        self.lines += 1;
        self.first = false;
        while end > start && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        Line::Text(&self.buf[start..end])
    }

    /// Skips a line past the limit (its break at `line_end` when already in the buffer), keeping
    /// its start.
    fn skip_long(&mut self, line_end: Option<usize>) -> Result<Option<Line<'_>>, ReadError> {
        self.long_start.clear();
        self.long_start.extend_from_slice(&self.buf[self.start..self.start + LONG_LINE_START]);
        match line_end {
            Some(at) => self.start = at + 1,
            None => {
                let mut skipped = (self.end - self.start) as u64;
                self.start = self.end;
                loop {
                    if self.first && skipped > MAX_FIRST_LINE_LENGTH as u64 {
                        return Err(ReadError::NotText { zeros: self.long_start.iter().all(|&b| b == 0) });
                    }
                    if !self.fill()? {
                        break;
                    }
                    if let Some(at) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                        self.start += at + 1;
                        break;
                    }
                    skipped += (self.end - self.start) as u64;
                    self.start = self.end;
                }
            }
        }
        self.lines += 1;
        self.first = false;
        Ok(Some(Line::Long(&self.long_start)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(data: Vec<u8>) -> Result<Vec<String>, ReadError> {
        let mut reader = LineReader::from_reader(Box::new(io::Cursor::new(data)));
        let mut out = Vec::new();
        while let Some(line) = reader.next_line()? {
            out.push(match line {
                Line::Text(text) => String::from_utf8_lossy(text).into_owned(),
                Line::Long(start) => format!("LONG {}", start.len()),
            });
        }
        Ok(out)
    }

    #[test]
    fn lines_with_and_without_a_last_break() {
        assert_eq!(lines_of(b"a\r\nb\n\nc".to_vec()).unwrap(), ["a", "b", "", "c"]);
        assert_eq!(lines_of(b"a\n".to_vec()).unwrap(), ["a"]);
        assert!(lines_of(Vec::new()).unwrap().is_empty());
    }

    #[test]
    fn a_line_at_the_limit_is_read_and_one_past_it_skipped() {
        let mut data = vec![b'x'; MAX_LINE_LENGTH];
        data.push(b'\n');
        data.extend(vec![b'y'; MAX_LINE_LENGTH + 1]);
        data.extend(b"\nz\n");
        data.extend(vec![b'w'; 3 * BUFFER]);
        data.extend(b"\nlast");
        let lines = lines_of(data).unwrap();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0].len(), MAX_LINE_LENGTH);
        assert_eq!(lines[1..], ["LONG 160", "z", "LONG 160", "last"]);
    }

    #[test]
    fn a_first_mib_without_a_break_is_no_text() {
        assert_eq!(lines_of(vec![0; MAX_FIRST_LINE_LENGTH + BUFFER]), Err(ReadError::NotText { zeros: true }));
        // A long line after the first is only a long line.
        let mut data = b"first\n".to_vec();
        data.extend(vec![b'a'; 2 * MAX_FIRST_LINE_LENGTH]);
        assert_eq!(lines_of(data).unwrap(), ["first", "LONG 160"]);
    }
}
