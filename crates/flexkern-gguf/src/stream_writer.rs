//! A GGUF writer that streams tensor data to its sink: the header and every tensor's info go
//! out first (sizes are known from dims and type), then each tensor's bytes in declaration
//! order, padded to the alignment. Memory stays bounded by what the caller holds at once,
//! so a 15 GB model is written without building it in memory. Same layout as `to_bytes`.

use std::collections::HashSet;
use std::io::Write;

use crate::error::{GgufError, Result};
use crate::reader::tensor_info::GgmlType;
use crate::writer::{bad, check_tensor, header, pad, GgufWriter, TensorInfoOut};

/// A tensor declared before its data is written.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorDecl {
    pub name: String,
    /// GGUF order: `dims[0]` varies fastest.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
}

impl TensorDecl {
    pub fn new(name: impl Into<String>, dims: &[u64], ty: GgmlType) -> Self {
        TensorDecl {
            name: name.into(),
            dims: dims.to_vec(),
            ty,
        }
    }
}

/// Writes one GGUF file: `new` emits the header, `write` appends to the current tensor (in as
/// many pieces as the caller likes), `finish` checks every declared byte arrived.
pub struct StreamWriter<W: Write> {
    out: W,
    sizes: Vec<u64>,
    names: Vec<String>,
    align: usize,
    /// Tensor being written, and bytes of it written so far.
    current: usize,
    written: u64,
    /// Bytes of the data section written (for padding).
    data_pos: u64,
}

fn io(e: std::io::Error) -> GgufError {
    GgufError::Io {
        path: "<stream>".into(),
        source: e,
    }
}

impl<W: Write> StreamWriter<W> {
    /// Validates the declarations (dims, whole blocks, unique names), then writes the header
    /// with `meta`'s metadata (which must hold no tensors).
    pub fn new(meta: GgufWriter, tensors: &[TensorDecl], mut out: W) -> Result<Self> {
        let (metadata, align) = meta.into_metadata()?;
        let mut seen = HashSet::new();
        let mut sizes = Vec::with_capacity(tensors.len());
        for t in tensors {
            sizes.push(check_tensor(&t.name, &t.dims, t.ty)?);
            if !seen.insert(t.name.as_str()) {
                return Err(bad("name", format!("duplicate tensor {:?}", t.name)));
            }
        }
        let infos = tensors.iter().zip(&sizes).map(|(t, &size)| TensorInfoOut {
            name: &t.name,
            dims: &t.dims,
            ty: t.ty,
            size,
        });
        let (head, _) = header(&metadata, infos, align);
        out.write_all(&head).map_err(io)?;
        Ok(StreamWriter {
            out,
            sizes,
            names: tensors.iter().map(|t| t.name.clone()).collect(),
            align,
            current: 0,
            written: 0,
            data_pos: 0,
        })
    }

    /// Appends `bytes` to the current tensor, moving to the next one once it is complete.
    pub fn write(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            let Some(&size) = self.sizes.get(self.current) else {
                return Err(bad(
                    "data",
                    format!("{} bytes past the last declared tensor", bytes.len()),
                ));
            };
            let take = (size - self.written).min(bytes.len() as u64) as usize;
            self.out.write_all(&bytes[..take]).map_err(io)?;
            bytes = &bytes[take..];
            self.written += take as u64;
            self.data_pos += take as u64;
            if self.written == size {
                self.next_tensor()?;
            }
        }
        Ok(())
    }

    /// Pads to the alignment and moves on (zero-size tensors cannot be declared).
    fn next_tensor(&mut self) -> Result<()> {
        self.current += 1;
        self.written = 0;
        if self.current < self.sizes.len() {
            let end = pad(self.data_pos as usize, self.align) as u64;
            let zeros = vec![0u8; (end - self.data_pos) as usize];
            self.out.write_all(&zeros).map_err(io)?;
            self.data_pos = end;
        }
        Ok(())
    }

    /// Name of the tensor the next bytes belong to (None once all are written).
    pub fn current_tensor(&self) -> Option<&str> {
        self.names.get(self.current).map(String::as_str)
    }

    /// Checks that every declared tensor was written in full, flushes, returns the sink.
    pub fn finish(mut self) -> Result<W> {
        if let Some(name) = self.names.get(self.current) {
            return Err(bad(
                "data",
                format!(
                    "tensor {name:?} got {} of {} bytes ({} tensors not finished)",
                    self.written,
                    self.sizes[self.current],
                    self.sizes.len() - self.current
                ),
            ));
        }
        self.out.flush().map_err(io)?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GgufFile, Value};

    fn meta() -> GgufWriter {
        let mut w = GgufWriter::new();
        w.add_metadata("general.architecture", Value::String("llama".into()))
            .unwrap();
        w.add_metadata("general.alignment", Value::U32(64)).unwrap();
        w
    }

    fn tensors() -> Vec<(TensorDecl, Vec<u8>)> {
        let mut seed = 7u32;
        let mut bytes = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 24) as u8
                })
                .collect()
        };
        vec![
            (TensorDecl::new("a", &[5], GgmlType::F32), bytes(20)),
            (
                TensorDecl::new("b", &[64, 3], GgmlType::Q8_0),
                bytes(34 * 2 * 3),
            ),
            (TensorDecl::new("c", &[3, 7], GgmlType::F16), bytes(42)),
        ]
    }

    #[test]
    fn stream_equals_to_bytes() {
        let mut whole = meta();
        for (d, b) in tensors() {
            whole.add_tensor(d.name, &d.dims, d.ty, b).unwrap();
        }
        let want = whole.to_bytes();
        let decls: Vec<_> = tensors().into_iter().map(|t| t.0).collect();
        let mut s = StreamWriter::new(meta(), &decls, Vec::new()).unwrap();
        for (_, b) in tensors() {
            // Uneven pieces, to cross the writer's tensor boundaries.
            for piece in b.chunks(7) {
                s.write(piece).unwrap();
            }
        }
        let got = s.finish().unwrap();
        assert_eq!(got, want);
        let f = GgufFile::from_bytes(got).unwrap();
        assert_eq!(f.tensor_data("c").unwrap(), &tensors()[2].1[..]);
    }

    #[test]
    fn bad_streams_are_typed_errors() {
        let decls: Vec<_> = tensors().into_iter().map(|t| t.0).collect();
        // Too few bytes.
        let mut s = StreamWriter::new(meta(), &decls, Vec::new()).unwrap();
        s.write(&[0; 20]).unwrap();
        assert_eq!(s.current_tensor(), Some("b"));
        let e = s.finish().unwrap_err().to_string();
        assert!(e.contains("\"b\" got 0 of 204"), "{e}");
        // Too many.
        let mut s = StreamWriter::new(meta(), &decls, Vec::new()).unwrap();
        let e = s.write(&[0; 20 + 204 + 42 + 1]).unwrap_err().to_string();
        assert!(e.contains("past the last declared tensor"), "{e}");
        // Duplicate names, partial blocks, tensors already in the writer.
        let mut dup = decls.clone();
        dup[2].name = "a".into();
        assert!(StreamWriter::new(meta(), &dup, Vec::new()).is_err());
        let partial = [TensorDecl::new("q", &[33, 2], GgmlType::Q8_0)];
        let e = StreamWriter::new(meta(), &partial, Vec::new())
            .err()
            .unwrap();
        assert!(e.to_string().contains("dims"), "{e}");
        let mut with = meta();
        with.add_f32_tensor("x", &[1], &[1.0]).unwrap();
        assert!(StreamWriter::new(with, &decls, Vec::new()).is_err());
    }
}
