//! Minimal .npy (format 1.0/2.0) reader and writer: little-endian f32, f16, i32, i64, C order.
//! The CLI's interop path with numpy; errors name the file.

use half::f16;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The OS error is part of the message, not a `source`: an error chain prints it once.
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}: not a valid .npy file: {msg}")]
    Format { path: String, msg: String },
}

/// An array read from a .npy file.
#[derive(Debug, Clone, PartialEq)]
pub enum NpyData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Npy {
    pub shape: Vec<usize>,
    pub data: NpyData,
}

impl Npy {
    /// The data as f32 (f16 widened, integers converted).
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            NpyData::F32(v) => v.clone(),
            NpyData::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
            NpyData::I32(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::I64(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }
    /// The data as i64, for index arrays; floats are rejected.
    pub fn to_i64(&self, path: &str) -> Result<Vec<i64>, NpyError> {
        match &self.data {
            NpyData::I32(v) => Ok(v.iter().map(|&x| x as i64).collect()),
            NpyData::I64(v) => Ok(v.clone()),
            _ => Err(fmt_err(path, "expected an integer array (<i4 or <i8)")),
        }
    }
}

fn fmt_err(path: &str, msg: impl Into<String>) -> NpyError {
    NpyError::Format {
        path: path.to_string(),
        msg: msg.into(),
    }
}

pub fn read(path: &Path) -> Result<Npy, NpyError> {
    let p = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| NpyError::Io {
        path: p.clone(),
        err: e,
    })?;
    parse(&bytes).map_err(|m| fmt_err(&p, m))
}

/// Parses a .npy image held in memory (the fuzz targets' entry; `read` is this on a file).
pub fn from_bytes(b: &[u8]) -> Result<Npy, NpyError> {
    parse(b).map_err(|m| fmt_err("<bytes>", m))
}

fn parse(b: &[u8]) -> Result<Npy, String> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err("bad magic".into());
    }
    let (hlen, hstart) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10usize),
        2 | 3 => {
            if b.len() < 12 {
                return Err("truncated header".into());
            }
            (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
        }
        v => return Err(format!("unsupported version {v}")),
    };
    let hend = hstart
        .checked_add(hlen)
        .filter(|&e| e <= b.len())
        .ok_or("truncated header")?;
    let header = std::str::from_utf8(&b[hstart..hend]).map_err(|_| "header not UTF-8")?;
    let descr = dict_value(header, "descr").ok_or("no descr")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    if dict_value(header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err("fortran_order arrays are not supported".into());
    }
    let shape_s = header.split("'shape':").nth(1).ok_or("no shape")?;
    let open = shape_s.find('(').ok_or("bad shape")?;
    // The `)` after the `(`: one before it (found by cargo-fuzz) sliced backwards.
    let close = open + shape_s[open..].find(')').ok_or("bad shape")?;
    let mut shape = Vec::new();
    for part in shape_s[open + 1..close].split(',') {
        let t = part.trim();
        if !t.is_empty() {
            shape.push(t.parse::<usize>().map_err(|_| "bad shape entry")?);
        }
    }
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or("shape overflows")?;
    let body = &b[hend..];
    let take = |size: usize| -> Result<&[u8], String> {
        let n = count.checked_mul(size).ok_or("size overflows")?;
        body.get(..n)
            .ok_or_else(|| format!("data truncated: need {n} bytes, have {}", body.len()))
    };
    let data = match descr {
        "<f4" => NpyData::F32(
            take(4)?
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        "<f2" => NpyData::F16(
            take(2)?
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]))
                .collect(),
        ),
        "<i4" => NpyData::I32(
            take(4)?
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        "<i8" => NpyData::I64(
            take(8)?
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        d => return Err(format!("unsupported dtype {d} (use <f4, <f2, <i4 or <i8)")),
    };
    Ok(Npy { shape, data })
}

fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("'{key}':");
    let rest = header.split(pat.as_str()).nth(1)?.trim_start();
    let end = rest.find(',').unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// Writes `data` (f32) with `shape` as a version 1.0 .npy file.
pub fn write_f32(path: &Path, shape: &[usize], data: &[f32]) -> Result<(), NpyError> {
    let mut out = header_bytes("<f4", shape);
    out.reserve(data.len() * 4);
    for x in data {
        out.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(path, out).map_err(|e| NpyError::Io {
        path: path.display().to_string(),
        err: e,
    })
}

fn header_bytes(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_s = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_s}, }}");
    // Pad so the data starts on a 64-byte boundary, header ends with '\n'.
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closing_paren_before_the_opening_one_is_an_error() {
        let h = b"{'descr': '<f4', 'fortran_order': False, 'shape':)(2, 4 }";
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h);
        b.extend_from_slice(&[0; 32]);
        assert!(super::from_bytes(&b).is_err());
    }

    #[test]
    fn round_trip_and_errors() {
        let dir = std::env::temp_dir().join(format!("flexkern-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        let data: Vec<f32> = (0..6).map(|i| i as f32 * 0.5 - 1.0).collect();
        write_f32(&p, &[2, 3], &data).unwrap();
        let back = read(&p).unwrap();
        assert_eq!(back.shape, vec![2, 3]);
        assert_eq!(back.data, NpyData::F32(data));
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.truncate(bytes.len() - 3);
        assert!(parse(&bytes).is_err());
        assert!(parse(b"garbage").is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
