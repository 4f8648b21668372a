//! GGUF reader (versions 2 and 3): parses the header, metadata and tensor descriptors,
//! validates them, and hands out bounds-checked slices of the memory-mapped tensor data.

mod getters;
pub mod header;
pub mod tensor_info;
pub mod validation;
pub mod value;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::Path;

use crate::error::{GgufError, Result};
use header::{read_header, Cursor};
use tensor_info::{read_tensor_info, TensorInfo};
use value::{read_value, Value, ValueType};

/// Bytes of a key/value pair at minimum: key length, type id, one byte of value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Bytes of a tensor descriptor at minimum: name length, n_dims, one dim, type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

enum Storage {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// A parsed, validated GGUF file whose tensor data stays in the map (or buffer).
pub struct GgufFile {
    storage: Storage,
    version: u32,
    alignment: u64,
    metadata: BTreeMap<String, Value>,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    data_start: usize,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("alignment", &self.alignment)
            .field("metadata_keys", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

struct Parsed {
    version: u32,
    alignment: u64,
    metadata: BTreeMap<String, Value>,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    data_start: usize,
}

impl GgufFile {
    /// Memory-maps and validates the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        // mmap on a directory fails with ENODEV ("No such device"): say what it is.
        if file.metadata().map_err(io)?.is_dir() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "is a directory, not a .gguf file",
            )));
        }
        // SAFETY: the map is read-only; like every mmap reader we assume nobody truncates
        // the model file while it is open.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Self::from_storage(Storage::Mapped(map))
    }

    /// Parses and validates an in-memory GGUF image.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::from_storage(Storage::Owned(bytes))
    }

    fn from_storage(storage: Storage) -> Result<Self> {
        let p = parse(storage.bytes())?;
        Ok(Self {
            storage,
            version: p.version,
            alignment: p.alignment,
            metadata: p.metadata,
            tensors: p.tensors,
            index: p.index,
            data_start: p.data_start,
        })
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    /// `general.alignment`, default 32.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    pub fn metadata(&self) -> &BTreeMap<String, Value> {
        &self.metadata
    }

    /// Tensor descriptors in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// Byte offset of the data section in the file.
    pub fn data_offset(&self) -> usize {
        self.data_start
    }

    /// The raw bytes of tensor `name` (bounds were checked at open time; checked again here).
    pub fn tensor_data(&self, name: &str) -> Result<&[u8]> {
        let t = self
            .tensor_info(name)
            .ok_or_else(|| GgufError::TensorNotFound(name.to_string()))?;
        let data = self.storage.bytes().get(self.data_start..).unwrap_or(&[]);
        let start = usize::try_from(t.offset).ok();
        let end = start.and_then(|s| s.checked_add(usize::try_from(t.size_bytes).ok()?));
        match (start, end) {
            (Some(s), Some(e)) if e <= data.len() => Ok(&data[s..e]),
            _ => Err(GgufError::TensorOutOfBounds {
                tensor: name.to_string(),
                offset: t.offset,
                size: t.size_bytes,
                data_len: data.len(),
            }),
        }
    }
}

fn parse(buf: &[u8]) -> Result<Parsed> {
    let mut c = Cursor::new(buf);
    let h = read_header(&mut c)?;
    let n_kv = c.check_count(h.kv_count, MIN_KV_BYTES, "metadata kv")?;
    let mut metadata = BTreeMap::new();
    for _ in 0..n_kv {
        let key = c.string("metadata key")?;
        let id = c.u32("metadata value type")?;
        let ty = ValueType::from_id(id).ok_or_else(|| GgufError::UnknownValueType {
            key: key.clone(),
            id,
        })?;
        let v = read_value(&mut c, ty, &key, 0)?;
        if metadata.insert(key.clone(), v).is_some() {
            return Err(GgufError::DuplicateKey(key));
        }
    }
    let alignment = validation::alignment(&metadata)?;
    let n_t = c.check_count(h.tensor_count, MIN_TENSOR_INFO_BYTES, "tensor")?;
    let mut tensors = Vec::with_capacity(n_t);
    for _ in 0..n_t {
        tensors.push(read_tensor_info(&mut c)?);
    }
    let data_start = validation::align_up(c.pos() as u64, alignment)
        .and_then(|d| usize::try_from(d).ok())
        .ok_or(GgufError::BadAlignment(alignment))?;
    // A file without tensors may end before the padding.
    let data_len = buf.len().saturating_sub(data_start);
    let index = validation::check_tensors(&tensors, alignment, data_len)?;
    Ok(Parsed {
        version: h.version,
        alignment,
        metadata,
        tensors,
        index,
        data_start,
    })
}

#[cfg(test)]
mod tests;
