//! Bounds-checked little-endian cursor and the fixed GGUF header.

use crate::error::{GgufError, Result};

/// "GGUF" read as a little-endian u32.
pub const GGUF_MAGIC: u32 = 0x4655_4747;

/// Reads little-endian scalars from a byte slice; every read is bounds-checked.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() as u64 {
            return Err(GgufError::Truncated {
                what: what.to_string(),
                offset: self.pos,
                needed: n,
                len: self.buf.len(),
            });
        }
        let n = n as usize;
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: u64 length then bytes (UTF-8 required).
    pub fn string(&mut self, what: &str) -> Result<String> {
        let len = self.u64(what)?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::InvalidUtf8 {
            what: what.to_string(),
        })
    }

    /// Rejects a count whose elements (each at least `min_size` bytes) cannot fit in what is left,
    /// so a corrupt count never triggers a huge allocation.
    pub fn check_count(&self, count: u64, min_size: u64, what: &str) -> Result<usize> {
        let fits = count
            .checked_mul(min_size)
            .is_some_and(|b| b <= self.remaining() as u64);
        if !fits {
            return Err(GgufError::CountTooLarge {
                what: what.to_string(),
                count,
                remaining: self.remaining(),
            });
        }
        Ok(count as usize)
    }
}

/// The fixed part of a GGUF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: u32,
    pub tensor_count: u64,
    pub kv_count: u64,
}

pub(crate) fn read_header(c: &mut Cursor<'_>) -> Result<Header> {
    let magic = c.u32("magic")?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = c.u32("version")?;
    // v1 used 32-bit counts; a byte-swapped version means a big-endian file.
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let tensor_count = c.u64("tensor_count")?;
    let kv_count = c.u64("kv_count")?;
    Ok(Header {
        version,
        tensor_count,
        kv_count,
    })
}
