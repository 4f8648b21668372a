//! Structs the kernels take by value, declared once: `device_struct!` defines the `#[repr(C)]`
//! Rust struct and writes its CUDA declaration from the same field list, with a size check the
//! compiler runs, so the two sides cannot drift apart.

/// `device_struct! { /// doc  pub struct Name { /// doc  field: RustType => "cuda type", ... } }`
/// defines `Name` (`#[repr(C)]`, `Clone`, `Copy`, `Default`, `Debug`, `PartialEq`) and
/// `Name::cuda()`, the CUDA `struct Name { ... };` with `static_assert(sizeof(Name) == n)`.
macro_rules! device_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty => $cty:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        $vis struct $name {
            $( $(#[$fmeta])* pub(crate) $field: $ty ),*
        }

        impl $name {
            /// The CUDA declaration of this struct, with a check of its size.
            pub(crate) fn cuda() -> String {
                let mut s = format!("struct {} {{\n", stringify!($name));
                $( s += &format!("  {} {};\n", $cty, stringify!($field)); )*
                s += &format!(
                    "}};\nstatic_assert(sizeof({}) == {}, \"{} as the host lays it out\");\n",
                    stringify!($name),
                    std::mem::size_of::<$name>(),
                    stringify!($name)
                );
                s
            }
        }
    };
}

pub(crate) use device_struct;

#[cfg(test)]
mod tests {
    device_struct! {
        /// A test struct: a pointer, an i32 and a float (16 bytes).
        pub struct FkProbe {
            /// The address.
            p: u64 => "const float*",
            n: i32 => "int",
            x: f32 => "float",
        }
    }

    #[test]
    fn the_declaration_follows_the_fields_and_checks_the_size() {
        assert_eq!(
            FkProbe::cuda(),
            "struct FkProbe {\n  const float* p;\n  int n;\n  float x;\n};\n\
             static_assert(sizeof(FkProbe) == 16, \"FkProbe as the host lays it out\");\n"
        );
        let v = FkProbe { p: 1, n: 2, x: 3.0 };
        assert_eq!((v.p, v.n, v.x), (1, 2, 3.0));
    }
}
