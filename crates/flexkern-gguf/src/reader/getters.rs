//! Typed metadata getters; integers of any width convert when the value fits.

use super::value::Value;
use super::GgufFile;
use crate::error::{GgufError, Result};

fn wrong(key: &str, expected: &'static str, v: &Value) -> GgufError {
    GgufError::WrongType {
        key: key.to_string(),
        expected,
        found: v.value_type().name(),
    }
}

fn int_as<T: TryFrom<i128>>(key: &str, v: &Value, target: &'static str) -> Result<T> {
    let i = v.as_int().ok_or_else(|| wrong(key, "integer", v))?;
    T::try_from(i).map_err(|_| GgufError::OutOfRange {
        key: key.to_string(),
        value: i.to_string(),
        target,
    })
}

impl GgufFile {
    /// The raw value, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    /// The value, or `KeyNotFound`.
    pub fn require(&self, key: &str) -> Result<&Value> {
        self.get(key)
            .ok_or_else(|| GgufError::KeyNotFound(key.to_string()))
    }

    pub fn get_u32(&self, key: &str) -> Result<u32> {
        int_as(key, self.require(key)?, "u32")
    }

    pub fn get_u64(&self, key: &str) -> Result<u64> {
        int_as(key, self.require(key)?, "u64")
    }

    pub fn get_i64(&self, key: &str) -> Result<i64> {
        int_as(key, self.require(key)?, "i64")
    }

    pub fn get_usize(&self, key: &str) -> Result<usize> {
        int_as(key, self.require(key)?, "usize")
    }

    /// F32 or F64 (narrowed) or any integer.
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        Ok(self.get_f64(key)? as f32)
    }

    pub fn get_f64(&self, key: &str) -> Result<f64> {
        let v = self.require(key)?;
        v.as_f64().ok_or_else(|| wrong(key, "number", v))
    }

    pub fn get_bool(&self, key: &str) -> Result<bool> {
        match self.require(key)? {
            Value::Bool(b) => Ok(*b),
            v => Err(wrong(key, "bool", v)),
        }
    }

    pub fn get_str(&self, key: &str) -> Result<&str> {
        let v = self.require(key)?;
        v.as_str().ok_or_else(|| wrong(key, "string", v))
    }

    pub fn get_array(&self, key: &str) -> Result<&[Value]> {
        let v = self.require(key)?;
        v.as_array().ok_or_else(|| wrong(key, "array", v))
    }

    /// An array of strings.
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>> {
        self.get_array(key)?
            .iter()
            .map(|v| v.as_str().ok_or_else(|| wrong(key, "array of string", v)))
            .collect()
    }

    /// An array of numbers as f32.
    pub fn get_f32_array(&self, key: &str) -> Result<Vec<f32>> {
        self.get_array(key)?
            .iter()
            .map(|v| {
                v.as_f64()
                    .map(|f| f as f32)
                    .ok_or_else(|| wrong(key, "array of number", v))
            })
            .collect()
    }

    /// An array of integers as i64.
    pub fn get_i64_array(&self, key: &str) -> Result<Vec<i64>> {
        self.get_array(key)?
            .iter()
            .map(|v| int_as(key, v, "i64"))
            .collect()
    }

    /// `Ok(None)` when absent, the typed error when present with the wrong type.
    pub fn get_opt<'a, T>(
        &'a self,
        key: &str,
        f: impl FnOnce(&'a Self, &str) -> Result<T>,
    ) -> Result<Option<T>> {
        if self.get(key).is_none() {
            return Ok(None);
        }
        f(self, key).map(Some)
    }
}
