//! Whole-file checks: alignment, tensor placement, duplicate names.

use std::collections::{BTreeMap, HashMap};

use super::tensor_info::TensorInfo;
use super::value::Value;
use crate::error::{GgufError, Result};

pub const DEFAULT_ALIGNMENT: u64 = 32;
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// `general.alignment` (any integer type) or the default; must be a non-zero power of two.
pub(crate) fn alignment(meta: &BTreeMap<String, Value>) -> Result<u64> {
    let Some(v) = meta.get(ALIGNMENT_KEY) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let a = v.as_int().ok_or(GgufError::WrongType {
        key: ALIGNMENT_KEY.into(),
        expected: "integer",
        found: v.value_type().name(),
    })?;
    if a <= 0 || a > u32::MAX as i128 || !(a as u64).is_power_of_two() {
        return Err(GgufError::BadAlignment(a.clamp(0, u64::MAX as i128) as u64));
    }
    Ok(a as u64)
}

/// Offset rounded up to `align`, or `None` on overflow.
pub fn align_up(offset: u64, align: u64) -> Option<u64> {
    offset.checked_add(align - 1).map(|v| v / align * align)
}

/// Every tensor aligned, inside the data section, and uniquely named; returns a name index.
pub(crate) fn check_tensors(
    tensors: &[TensorInfo],
    align: u64,
    data_len: usize,
) -> Result<HashMap<String, usize>> {
    let mut index = HashMap::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        if t.offset % align != 0 {
            return Err(GgufError::BadTensor {
                tensor: t.name.clone(),
                reason: format!("offset {} not a multiple of alignment {align}", t.offset),
            });
        }
        let in_bounds = t
            .offset
            .checked_add(t.size_bytes)
            .is_some_and(|end| end <= data_len as u64);
        if !in_bounds {
            return Err(GgufError::TensorOutOfBounds {
                tensor: t.name.clone(),
                offset: t.offset,
                size: t.size_bytes,
                data_len,
            });
        }
        if index.insert(t.name.clone(), i).is_some() {
            return Err(GgufError::DuplicateTensor(t.name.clone()));
        }
    }
    Ok(index)
}
