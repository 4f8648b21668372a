//! flexkern-gguf: a validated GGUF reader and writer, tokenizers built from GGUF metadata
//! (byte-level BPE and SentencePiece-style), and chat templates.

pub mod chat_template;
pub mod error;
pub mod reader;
pub mod stream_writer;
pub mod tokenizer;
pub mod writer;

pub use chat_template::ChatTemplate;
pub use error::{GgufError, Result};
pub use reader::header::Header;
pub use reader::tensor_info::{GgmlType, TensorInfo};
pub use reader::value::{Value, ValueType};
pub use reader::GgufFile;
pub use stream_writer::{StreamWriter, TensorDecl};
pub use tokenizer::{StreamDecoder, Tokenizer, TokenizerKind};
pub use writer::GgufWriter;
