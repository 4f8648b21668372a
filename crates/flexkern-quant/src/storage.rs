//! Byte buffers viewed as block slices. Block types need 2- or 4-byte alignment; a borrowed
//! buffer that lacks it is copied once into an 8-byte-aligned one rather than rejected.

use bytemuck::Pod;

#[derive(Clone, Debug)]
pub(crate) enum Storage<'a> {
    Borrowed(&'a [u8]),
    /// An aligned copy: `len` bytes at the start of the words.
    Owned(Vec<u64>, usize),
}

impl<'a> Storage<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        if (bytes.as_ptr() as usize).is_multiple_of(8) {
            return Storage::Borrowed(bytes);
        }
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        Storage::Owned(words, bytes.len())
    }

    pub fn bytes(&self) -> &[u8] {
        match self {
            Storage::Borrowed(b) => b,
            Storage::Owned(w, len) => &bytemuck::cast_slice(w)[..*len],
        }
    }
}

/// View `bytes` as blocks; `bytes` must be aligned (see `Storage`) and a whole number of blocks.
pub(crate) fn blocks<B: Pod>(bytes: &[u8]) -> &[B] {
    bytemuck::cast_slice(bytes)
}
