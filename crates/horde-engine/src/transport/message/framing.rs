//! Cutting a TCP byte stream into messages (`target.framing`), and writing a message framed.

use bytes::{Buf, BytesMut};
use horde_plan::{Endian, Framing};
use std::io;

/// The largest message a framed stream may carry: a length field (or a line) announcing more is
/// read as a broken stream, not as a reason to hold gigabytes per VU.
pub(crate) const MAX_FRAMED_BYTES: usize = horde_plan::MAX_MESSAGE_BYTES;

/// Appends `payload` to `out` as one framed message.
pub(crate) fn encode(framing: Framing, payload: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    match framing {
        Framing::Newline => {
            out.extend_from_slice(payload);
            out.push(b'\n');
        }
        Framing::Raw => out.extend_from_slice(payload),
        Framing::Length { bytes, endian, adjust } => {
            let field = payload.len() as i64 + adjust;
            let limit = if bytes >= 8 { i64::MAX } else { (1i64 << (8 * u32::from(bytes))) - 1 };
            if !(0..=limit).contains(&field) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a {}-byte message does not fit a {bytes}-byte length field (adjust {adjust})",
                        payload.len()
                    ),
                ));
            }
            let be = (field as u64).to_be_bytes();
            let field_bytes = &be[8 - usize::from(bytes)..];
            match endian {
                Endian::Big => out.extend_from_slice(field_bytes),
                Endian::Little => out.extend(field_bytes.iter().rev()),
            }
            out.extend_from_slice(payload);
        }
    }
    Ok(())
}

/// Takes the first whole message out of `buffer`, if there is one. A broken frame (a length
/// below zero or past [`MAX_FRAMED_BYTES`]) is `InvalidData`: the stream cannot be read on.
pub(crate) fn decode(framing: Framing, buffer: &mut BytesMut) -> io::Result<Option<BytesMut>> {
    match framing {
        Framing::Raw => Ok((!buffer.is_empty()).then(|| buffer.split())),
        Framing::Newline => match buffer.iter().position(|byte| *byte == b'\n') {
            Some(end) => {
                let mut line = buffer.split_to(end + 1);
                line.truncate(end);
                if line.last() == Some(&b'\r') {
                    line.truncate(end - 1);
                }
                Ok(Some(line))
            }
            None if buffer.len() > MAX_FRAMED_BYTES => {
                Err(broken("newline", format!("a line longer than {MAX_FRAMED_BYTES} bytes")))
            }
            None => Ok(None),
        },
        Framing::Length { bytes, endian, adjust } => {
            let width = usize::from(bytes);
            if buffer.len() < width {
                return Ok(None);
            }
            let mut field: u64 = 0;
            for index in 0..width {
                let byte = match endian {
                    Endian::Big => buffer[index],
                    Endian::Little => buffer[width - 1 - index],
                };
                field = (field << 8) | u64::from(byte);
            }
            let length = field as i64 - adjust;
            if length < 0 || length as u64 > MAX_FRAMED_BYTES as u64 {
                return Err(broken(
                    &format!("length, {bytes} bytes"),
                    format!("a length field of {field} (adjust {adjust}) announces {length} bytes"),
                ));
            }
            let length = length as usize;
            if buffer.len() < width + length {
                buffer.reserve(width + length - buffer.len());
                return Ok(None);
            }
            buffer.advance(width);
            Ok(Some(buffer.split_to(length)))
        }
    }
}

/// A stream that does not follow the plan's framing, in words that name the protocol read (the
/// kind it counts under, `protocol`, is HTTP's too).
fn broken(framing: &str, why: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the tcp:// stream does not follow target.framing ({framing}): {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(framing: Framing, messages: &[&[u8]]) {
        let mut wire = Vec::new();
        for message in messages {
            encode(framing, message, &mut wire).unwrap();
        }
        // Fed one byte at a time: a message is whole only once its last byte came.
        let mut buffer = BytesMut::new();
        let mut decoded = Vec::new();
        for byte in wire {
            buffer.extend_from_slice(&[byte]);
            while let Some(message) = decode(framing, &mut buffer).unwrap() {
                decoded.push(message.to_vec());
            }
        }
        assert_eq!(decoded, messages.iter().map(|message| message.to_vec()).collect::<Vec<_>>(), "{framing:?}");
        assert!(buffer.is_empty());
    }

    #[test]
    fn length_prefixes_round_trip_in_every_width_and_order() {
        let messages: [&[u8]; 4] = [b"hello", b"", &[0, 1, 2, 255], b"move 12 34"];
        for bytes in [1, 2, 4] {
            for endian in [Endian::Big, Endian::Little] {
                for adjust in [0, i64::from(bytes)] {
                    round_trip(Framing::Length { bytes, endian, adjust }, &messages);
                }
            }
        }
    }

    #[test]
    fn length_fields_are_written_as_asked() {
        let mut wire = Vec::new();
        encode(Framing::Length { bytes: 2, endian: Endian::Big, adjust: 0 }, b"abc", &mut wire).unwrap();
        assert_eq!(wire, [0, 3, b'a', b'b', b'c']);
        wire.clear();
        encode(Framing::Length { bytes: 4, endian: Endian::Little, adjust: 4 }, b"abc", &mut wire).unwrap();
        assert_eq!(wire, [7, 0, 0, 0, b'a', b'b', b'c']);
        wire.clear();
        let too_long = vec![0u8; 256];
        assert!(encode(Framing::Length { bytes: 1, endian: Endian::Big, adjust: 0 }, &too_long, &mut wire).is_err());
    }

    #[test]
    fn lines_drop_their_line_break_and_broken_lengths_are_errors() {
        round_trip(Framing::Newline, &[b"ping 1", b"", b"pong 2"]);
        let mut buffer = BytesMut::from(&b"a\r\nb"[..]);
        assert_eq!(decode(Framing::Newline, &mut buffer).unwrap().unwrap().as_ref(), b"a");
        assert!(decode(Framing::Newline, &mut buffer).unwrap().is_none());
        let mut buffer = BytesMut::from(&[0u8, 1][..]);
        assert!(
            decode(Framing::Length { bytes: 2, endian: Endian::Big, adjust: 2 }, &mut buffer).is_err(),
            "1 - 2 < 0"
        );
        let mut buffer = BytesMut::from(&[0xFFu8, 0xFF, 0xFF, 0xFF][..]);
        assert!(
            decode(Framing::Length { bytes: 4, endian: Endian::Big, adjust: 0 }, &mut buffer).is_err(),
            "4 GiB announced"
        );
    }
}
