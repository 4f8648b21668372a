//! GGUF v3 writer: the whole file in memory (`to_bytes`, tiny models for tests); large files
//! stream through `stream::StreamWriter` with the same layout.

use std::path::Path;

use crate::error::{GgufError, Result};
use crate::reader::header::GGUF_MAGIC;
use crate::reader::tensor_info::{GgmlType, MAX_DIMS};
use crate::reader::validation::{align_up, ALIGNMENT_KEY, DEFAULT_ALIGNMENT};
use crate::reader::value::{Value, ValueType};

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    data: Vec<u8>,
}

/// Collects metadata and tensors, then serialises them as GGUF v3.
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

pub(crate) fn bad(arg: &str, reason: impl Into<String>) -> GgufError {
    GgufError::Writer {
        arg: arg.to_string(),
        reason: reason.into(),
    }
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a metadata key. Set `general.alignment` (u32) to change alignment.
    pub fn add_metadata(&mut self, key: impl Into<String>, value: Value) -> Result<&mut Self> {
        let key = key.into();
        check_value(&key, &value, 0)?;
        if key == ALIGNMENT_KEY {
            let ok = value
                .as_int()
                .is_some_and(|a| a > 0 && a <= u32::MAX as i128 && (a as u64).is_power_of_two());
            if !ok {
                return Err(bad("general.alignment", "must be a power-of-two integer"));
            }
        }
        self.metadata.retain(|(k, _)| *k != key);
        self.metadata.push((key, value));
        Ok(self)
    }

    /// Adds a tensor; `data` must be exactly the ggml size of `dims` in `ty`.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> Result<&mut Self> {
        let name = name.into();
        let size = check_tensor(&name, dims, ty)?;
        if size != data.len() as u64 {
            return Err(bad(
                "data",
                format!("tensor {name:?} needs {size} bytes, got {}", data.len()),
            ));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(bad("name", format!("duplicate tensor {name:?}")));
        }
        self.tensors.push(PendingTensor {
            name,
            dims: dims.to_vec(),
            ty,
            data,
        });
        Ok(self)
    }

    /// Adds an F32 tensor from values (little-endian), checking the count against `dims`.
    pub fn add_f32_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        values: &[f32],
    ) -> Result<&mut Self> {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.add_tensor(name, dims, GgmlType::F32, data)
    }

    /// The metadata added so far (the streaming writer takes it over).
    pub(crate) fn into_metadata(self) -> Result<(Vec<(String, Value)>, usize)> {
        if !self.tensors.is_empty() {
            return Err(bad(
                "tensors",
                "a streamed file declares its tensors up front; add none to the writer",
            ));
        }
        let align = self.alignment() as usize;
        Ok((self.metadata, align))
    }

    fn alignment(&self) -> u64 {
        self.metadata
            .iter()
            .find(|(k, _)| k == ALIGNMENT_KEY)
            .and_then(|(_, v)| v.as_int())
            .map_or(DEFAULT_ALIGNMENT, |a| a as u64)
    }

    /// The whole file as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let align = self.alignment() as usize;
        let infos = self.tensors.iter().map(|t| TensorInfoOut {
            name: &t.name,
            dims: &t.dims,
            ty: t.ty,
            size: t.data.len() as u64,
        });
        let (mut out, offsets) = header(&self.metadata, infos, align);
        let base = out.len();
        for (t, off) in self.tensors.iter().zip(offsets) {
            out.resize(base + off as usize, 0);
            out.extend_from_slice(&t.data);
        }
        out
    }

    /// Writes the file to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_bytes()).map_err(|source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// A tensor's byte size from its dims and type, or an error naming `dims`.
pub(crate) fn check_tensor(name: &str, dims: &[u64], ty: GgmlType) -> Result<u64> {
    if dims.is_empty() || dims.len() > MAX_DIMS || dims.contains(&0) {
        return Err(bad("dims", format!("{dims:?} for tensor {name:?}")));
    }
    ty.tensor_bytes(dims)
        .ok_or_else(|| bad("dims", format!("{dims:?} not whole {} blocks", ty.name())))
}

/// One tensor's entry in the header.
pub(crate) struct TensorInfoOut<'a> {
    pub name: &'a str,
    pub dims: &'a [u64],
    pub ty: GgmlType,
    pub size: u64,
}

/// Header, metadata and tensor infos, padded to `align`; returns the bytes and each tensor's
/// offset in the data section. Shared by `to_bytes` and the streaming writer, so both lay out
/// a file the same way.
pub(crate) fn header<'a>(
    metadata: &[(String, Value)],
    tensors: impl ExactSizeIterator<Item = TensorInfoOut<'a>>,
    align: usize,
) -> (Vec<u8>, Vec<u64>) {
    let mut out = Vec::new();
    put_u32(&mut out, GGUF_MAGIC);
    put_u32(&mut out, 3);
    put_u64(&mut out, tensors.len() as u64);
    put_u64(&mut out, metadata.len() as u64);
    for (k, v) in metadata {
        put_str(&mut out, k);
        put_u32(&mut out, v.value_type() as u32);
        put_value(&mut out, v);
    }
    let mut offset = 0usize;
    let mut offsets = Vec::with_capacity(tensors.len());
    for t in tensors {
        put_str(&mut out, t.name);
        put_u32(&mut out, t.dims.len() as u32);
        t.dims.iter().for_each(|&d| put_u64(&mut out, d));
        put_u32(&mut out, t.ty as u32);
        put_u64(&mut out, offset as u64);
        offsets.push(offset as u64);
        offset = pad(offset + t.size as usize, align);
    }
    out.resize(pad(out.len(), align), 0);
    (out, offsets)
}

pub(crate) fn pad(n: usize, align: usize) -> usize {
    align_up(n as u64, align as u64).map_or(n, |v| v as usize)
}

/// Arrays must be homogeneous and of their declared element type.
fn check_value(key: &str, v: &Value, depth: usize) -> Result<()> {
    if let Value::Array(ty, items) = v {
        if depth >= crate::reader::value::MAX_NESTING {
            return Err(bad("value", format!("array {key:?} nested too deep")));
        }
        for item in items {
            if item.value_type() != *ty {
                return Err(bad(
                    "value",
                    format!(
                        "array {key:?} declared {} holds {}",
                        ty.name(),
                        item.value_type().name()
                    ),
                ));
            }
            check_value(key, item, depth + 1)?;
        }
    }
    Ok(())
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => put_u32(out, *x),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(*x as u8),
        Value::String(s) => put_str(out, s),
        Value::U64(x) => put_u64(out, *x),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Array(ty, items) => {
            put_u32(out, *ty as u32);
            put_u64(out, items.len() as u64);
            items.iter().for_each(|i| put_value(out, i));
        }
    }
}

// Convenience constructors for common array values.
impl Value {
    pub fn str_array<S: AsRef<str>>(items: &[S]) -> Value {
        Value::Array(
            ValueType::String,
            items
                .iter()
                .map(|s| Value::String(s.as_ref().to_string()))
                .collect(),
        )
    }

    pub fn f32_array(items: &[f32]) -> Value {
        Value::Array(
            ValueType::F32,
            items.iter().map(|&f| Value::F32(f)).collect(),
        )
    }

    pub fn i32_array(items: &[i32]) -> Value {
        Value::Array(
            ValueType::I32,
            items.iter().map(|&i| Value::I32(i)).collect(),
        )
    }
}
