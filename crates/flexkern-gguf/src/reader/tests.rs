use super::*;
use crate::reader::tensor_info::GgmlType;
use crate::writer::GgufWriter;

fn all_values() -> Vec<(&'static str, Value)> {
    vec![
        ("u8", Value::U8(200)),
        ("i8", Value::I8(-5)),
        ("u16", Value::U16(60000)),
        ("i16", Value::I16(-300)),
        ("u32", Value::U32(4_000_000_000)),
        ("i32", Value::I32(-7)),
        ("f32", Value::F32(1.5)),
        ("bool", Value::Bool(true)),
        ("str", Value::String("héllo".into())),
        ("u64", Value::U64(u64::MAX)),
        ("i64", Value::I64(i64::MIN)),
        ("f64", Value::F64(-2.25)),
        ("arr", Value::str_array(&["a", "", "c"])),
        ("empty", Value::Array(ValueType::F64, vec![])),
        (
            "nested",
            Value::Array(
                ValueType::Array,
                vec![Value::i32_array(&[1, 2]), Value::i32_array(&[])],
            ),
        ),
    ]
}

fn sample(align: Option<u32>) -> (GgufWriter, Vec<Vec<u8>>) {
    let mut w = GgufWriter::new();
    for (k, v) in all_values() {
        w.add_metadata(k, v).unwrap();
    }
    if let Some(a) = align {
        w.add_metadata("general.alignment", Value::U32(a)).unwrap();
    }
    let datas: Vec<Vec<u8>> = vec![
        (0..3 * 4 * 4).map(|i| i as u8).collect(),
        (0..2 * 20).map(|i| (i * 7) as u8).collect(),
        (0..144).map(|i| (i * 3) as u8).collect(),
    ];
    w.add_tensor("a.f32", &[3, 4], GgmlType::F32, datas[0].clone())
        .unwrap();
    w.add_tensor("b.q4_1", &[32, 1, 2], GgmlType::Q4_1, datas[1].clone())
        .unwrap();
    w.add_tensor("c.q4k", &[256], GgmlType::Q4_K, datas[2].clone())
        .unwrap();
    (w, datas)
}

#[test]
fn round_trip_all_value_types_and_tensors() {
    for align in [None, Some(1), Some(64)] {
        let (w, datas) = sample(align);
        let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
        assert_eq!(f.version(), 3);
        assert_eq!(f.alignment(), align.map_or(32, u64::from));
        for (k, v) in all_values() {
            assert_eq!(f.get(k), Some(&v), "{k}");
        }
        assert_eq!(f.tensors().len(), 3);
        assert_eq!(f.data_offset() as u64 % f.alignment(), 0);
        for (t, d) in f.tensors().iter().zip(&datas) {
            assert_eq!(t.offset % f.alignment(), 0);
            assert_eq!(t.size_bytes, d.len() as u64);
            assert_eq!(f.tensor_data(&t.name).unwrap(), &d[..]);
        }
        let b = f.tensor_info("b.q4_1").unwrap();
        assert_eq!(
            (b.dims.clone(), b.ggml_type, b.n_elements()),
            (vec![32, 1, 2], GgmlType::Q4_1, 64)
        );
    }
}

#[test]
fn typed_getters_convert_widths_and_name_the_key() {
    let (w, _) = sample(None);
    let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(f.get_u32("u8").unwrap(), 200);
    assert_eq!(f.get_u64("u16").unwrap(), 60000);
    assert_eq!(f.get_i64("i8").unwrap(), -5);
    assert_eq!(f.get_f32("f64").unwrap(), -2.25);
    assert_eq!(f.get_f64("u32").unwrap(), 4e9);
    assert_eq!(f.get_str("str").unwrap(), "héllo");
    assert!(f.get_bool("bool").unwrap());
    assert_eq!(f.get_str_array("arr").unwrap(), vec!["a", "", "c"]);
    assert_eq!(f.get_opt("missing", GgufFile::get_u32).unwrap(), None);
    assert!(matches!(f.get_u32("i8"), Err(GgufError::OutOfRange { key, .. }) if key == "i8"));
    assert!(matches!(
        f.get_u32("u64"),
        Err(GgufError::OutOfRange { .. })
    ));
    assert!(matches!(f.get_str("u8"), Err(GgufError::WrongType { key, .. }) if key == "u8"));
    assert!(matches!(f.get_u32("nope"), Err(GgufError::KeyNotFound(k)) if k == "nope"));
    assert!(matches!(
        f.tensor_data("nope"),
        Err(GgufError::TensorNotFound(_))
    ));
}

#[test]
fn version_2_is_accepted() {
    let mut b = sample(None).0.to_bytes();
    b[4] = 2;
    assert_eq!(GgufFile::from_bytes(b).unwrap().version(), 2);
}

#[test]
fn open_reads_a_file_and_reports_missing_ones() {
    let dir = std::env::temp_dir().join(format!("flexkern-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("t.gguf");
    sample(None).0.write(&p).unwrap();
    let f = GgufFile::open(&p).unwrap();
    assert_eq!(f.tensor_data("a.f32").unwrap()[5], 5);
    assert!(matches!(
        GgufFile::open(dir.join("missing.gguf")),
        Err(GgufError::Io { .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}

/// Hand-assembled files for the malformed cases the writer refuses to produce.
struct Raw(Vec<u8>);

impl Raw {
    fn new(version: u32, n_tensors: u64, n_kv: u64) -> Self {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        dims.iter().for_each(|&d| {
            self.u64(d);
        });
        self.u32(ty).u64(offset)
    }
    /// Pads to 32 and appends `n` data bytes.
    fn data(&mut self, n: usize) -> Vec<u8> {
        let mut b = self.0.clone();
        b.resize(b.len().div_ceil(32) * 32 + n, 0);
        b
    }
    fn parse(&mut self, n: usize) -> Result<GgufFile> {
        GgufFile::from_bytes(self.data(n))
    }
}

#[test]
fn malformed_headers_are_typed_errors() {
    let good = sample(None).0.to_bytes();
    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(matches!(
        GgufFile::from_bytes(bad),
        Err(GgufError::BadMagic { .. })
    ));
    for v in [1u32, 4, 0x0300_0000] {
        let mut bad = good.clone();
        bad[4..8].copy_from_slice(&v.to_le_bytes());
        assert!(
            matches!(GgufFile::from_bytes(bad), Err(GgufError::UnsupportedVersion(x)) if x == v)
        );
    }
    // Every truncation fails cleanly (the last tensor's bytes are needed).
    for n in 0..good.len() {
        assert!(
            GgufFile::from_bytes(good[..n].to_vec()).is_err(),
            "prefix {n}"
        );
    }
    assert!(matches!(
        Raw::new(3, 0, u64::MAX).parse(0),
        Err(GgufError::CountTooLarge { .. })
    ));
    assert!(matches!(
        Raw::new(3, 1 << 40, 0).parse(0),
        Err(GgufError::CountTooLarge { .. })
    ));
}

#[test]
fn malformed_metadata_is_a_typed_error() {
    let e = Raw::new(3, 0, 1).str("k").u32(99).parse(0);
    assert!(matches!(e, Err(GgufError::UnknownValueType { id: 99, .. })));
    let e = Raw::new(3, 0, 1).str("k").u32(8).u64(u64::MAX).parse(0);
    assert!(matches!(e, Err(GgufError::Truncated { .. })));
    let e = Raw::new(3, 0, 1)
        .str("k")
        .u32(9)
        .u32(4)
        .u64(1 << 62)
        .parse(0);
    assert!(matches!(e, Err(GgufError::CountTooLarge { .. })));
    let mut r = Raw::new(3, 0, 1);
    r.str("k").u32(7).0.push(2);
    assert!(matches!(r.parse(0), Err(GgufError::OutOfRange { .. })));
    let mut r = Raw::new(3, 0, 1);
    r.str("k").u32(8).u64(2);
    r.0.extend_from_slice(&[0xff, 0xfe]);
    assert!(matches!(r.parse(0), Err(GgufError::InvalidUtf8 { .. })));
    let e = Raw::new(3, 0, 2)
        .str("k")
        .u32(4)
        .u32(1)
        .str("k")
        .u32(4)
        .u32(2)
        .parse(0);
    assert!(matches!(e, Err(GgufError::DuplicateKey(k)) if k == "k"));
    let mut r = Raw::new(3, 0, 1);
    r.str("k").u32(9);
    for _ in 0..6 {
        r.u32(9).u64(1);
    }
    assert!(matches!(r.parse(64), Err(GgufError::NestingTooDeep { .. })));
    for a in [0u32, 3, 48] {
        let e = Raw::new(3, 0, 1)
            .str("general.alignment")
            .u32(4)
            .u32(a)
            .parse(0);
        assert!(matches!(e, Err(GgufError::BadAlignment(_))), "{a}");
    }
    let e = Raw::new(3, 0, 1)
        .str("general.alignment")
        .u32(8)
        .str("x")
        .parse(0);
    assert!(matches!(e, Err(GgufError::WrongType { .. })));
}

#[test]
fn malformed_tensor_infos_are_typed_errors() {
    let ok = Raw::new(3, 1, 0).tensor("t", &[4], 0, 0).parse(16);
    assert!(ok.is_ok());
    let e = Raw::new(3, 1, 0).tensor("t", &[4], 31, 0).parse(16);
    assert!(matches!(
        e,
        Err(GgufError::UnknownTensorType { id: 31, .. })
    ));
    let e = Raw::new(3, 1, 0)
        .tensor("t", &[1, 1, 1, 1, 1], 0, 0)
        .parse(16);
    assert!(matches!(e, Err(GgufError::BadTensor { .. })));
    let e = Raw::new(3, 1, 0).tensor("t", &[], 0, 0).parse(16);
    assert!(matches!(e, Err(GgufError::BadTensor { .. })));
    let e = Raw::new(3, 1, 0).tensor("t", &[4, 0], 0, 0).parse(16);
    assert!(matches!(e, Err(GgufError::BadTensor { .. })));
    let e = Raw::new(3, 1, 0)
        .tensor("t", &[1 << 62, 1 << 62], 0, 0)
        .parse(16);
    assert!(matches!(e, Err(GgufError::BadTensor { .. })));
    let e = Raw::new(3, 1, 0).tensor("t", &[1 << 62], 0, 0).parse(16);
    assert!(
        matches!(e, Err(GgufError::BadTensor { .. })),
        "size overflow"
    );
    let e = Raw::new(3, 1, 0).tensor("t", &[31], 2, 0).parse(64);
    assert!(
        matches!(e, Err(GgufError::BadTensor { .. })),
        "partial block"
    );
    let e = Raw::new(3, 1, 0).tensor("t", &[4], 0, 8).parse(64);
    assert!(matches!(e, Err(GgufError::BadTensor { .. })), "unaligned");
    let e = Raw::new(3, 1, 0).tensor("t", &[4], 0, 0).parse(15);
    assert!(matches!(e, Err(GgufError::TensorOutOfBounds { .. })));
    let e = Raw::new(3, 1, 0)
        .tensor("t", &[4], 0, u64::MAX - 31)
        .parse(16);
    assert!(matches!(e, Err(GgufError::TensorOutOfBounds { .. })));
    let e = Raw::new(3, 2, 0)
        .tensor("t", &[4], 0, 0)
        .tensor("t", &[4], 0, 32)
        .parse(64);
    assert!(matches!(e, Err(GgufError::DuplicateTensor(n)) if n == "t"));
}

#[test]
fn writer_rejects_bad_arguments() {
    let mut w = GgufWriter::new();
    let bad = |r: Result<&mut GgufWriter>| matches!(r, Err(GgufError::Writer { .. }));
    assert!(bad(w.add_tensor("x", &[4], GgmlType::F32, vec![0; 15])));
    assert!(bad(w.add_tensor("x", &[31], GgmlType::Q4_0, vec![0; 18])));
    assert!(bad(w.add_tensor("x", &[], GgmlType::F32, vec![])));
    assert!(bad(w.add_tensor(
        "x",
        &[1, 1, 1, 1, 1],
        GgmlType::F32,
        vec![0; 4]
    )));
    assert!(bad(w.add_metadata("general.alignment", Value::U32(3))));
    assert!(bad(w.add_metadata(
        "a",
        Value::Array(ValueType::U8, vec![Value::I8(1)])
    )));
    assert!(bad(w.add_f32_tensor("y", &[2, 2], &[1.0; 3])));
    w.add_tensor("x", &[4], GgmlType::F32, vec![0; 16]).unwrap();
    assert!(bad(w.add_tensor("x", &[4], GgmlType::F32, vec![0; 16])));
    w.add_f32_tensor("y", &[2, 2], &[1.0, 2.0, 3.0, -4.0])
        .unwrap();
    let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(&f.tensor_data("y").unwrap()[12..], &(-4.0f32).to_le_bytes());
}

#[test]
fn type_table_matches_ggml() {
    assert_eq!(GgmlType::from_id(12), Some(GgmlType::Q4_K));
    assert_eq!(GgmlType::from_id(4), None);
    assert_eq!(GgmlType::from_id(31), None);
    assert_eq!(GgmlType::Q6_K.tensor_bytes(&[256, 2]), Some(420));
    assert_eq!(GgmlType::Q8_0.tensor_bytes(&[64]), Some(68));
    assert_eq!(GgmlType::BF16.tensor_bytes(&[3, 3]), Some(18));
    assert_eq!(GgmlType::Q4_0.tensor_bytes(&[33]), None);
}
