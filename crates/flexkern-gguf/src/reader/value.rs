//! Metadata values: every GGUF value type, parsed with bounded nesting.

use super::header::Cursor;
use crate::error::{GgufError, Result};

/// GGUF metadata value type ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<Self> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Smallest encoded size of one value of this type (used to bound array counts).
    fn min_size(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

/// One metadata value. Arrays keep their element type so empty arrays round-trip.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(ValueType, Vec<Value>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(..) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// Any integer width, widened to i128 so every GGUF integer fits without loss.
    pub fn as_int(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// Any float or integer as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self.as_int().map(|i| i as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(_, v) => Some(v),
            _ => None,
        }
    }
}

/// Deepest array nesting accepted; real files use one level.
pub const MAX_NESTING: usize = 4;

pub(crate) fn read_value(
    c: &mut Cursor<'_>,
    ty: ValueType,
    key: &str,
    depth: usize,
) -> Result<Value> {
    let what = key;
    Ok(match ty {
        ValueType::U8 => Value::U8(c.u8(what)?),
        ValueType::I8 => Value::I8(c.u8(what)? as i8),
        ValueType::U16 => Value::U16(c.u16(what)?),
        ValueType::I16 => Value::I16(c.u16(what)? as i16),
        ValueType::U32 => Value::U32(c.u32(what)?),
        ValueType::I32 => Value::I32(c.u32(what)? as i32),
        ValueType::F32 => Value::F32(f32::from_bits(c.u32(what)?)),
        ValueType::Bool => match c.u8(what)? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            b => {
                return Err(GgufError::OutOfRange {
                    key: key.to_string(),
                    value: b.to_string(),
                    target: "bool",
                })
            }
        },
        ValueType::String => Value::String(c.string(what)?),
        ValueType::U64 => Value::U64(c.u64(what)?),
        ValueType::I64 => Value::I64(c.u64(what)? as i64),
        ValueType::F64 => Value::F64(f64::from_bits(c.u64(what)?)),
        ValueType::Array => {
            if depth >= MAX_NESTING {
                return Err(GgufError::NestingTooDeep {
                    key: key.to_string(),
                    max: MAX_NESTING,
                });
            }
            let id = c.u32(what)?;
            let elem = ValueType::from_id(id).ok_or_else(|| GgufError::UnknownValueType {
                key: key.to_string(),
                id,
            })?;
            let count = c.u64(what)?;
            let n = c.check_count(count, elem.min_size(), &format!("array {key:?}"))?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(read_value(c, elem, key, depth + 1)?);
            }
            Value::Array(elem, items)
        }
    })
}
