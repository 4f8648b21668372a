//! Real-world chat templates rendered by minijinja must match Python jinja2 (HF's renderer, with
//! trim_blocks/lstrip_blocks); expected strings were produced by jinja2 3.x.

use flexkern_gguf::ChatTemplate;

#[test]
fn qwen25_instruct_matches_jinja2() {
    let src = include_str!("data/qwen2.5-instruct.jinja");
    let t = ChatTemplate::new(src, "", "<|im_end|>").unwrap();
    assert_eq!(
        t.apply(&[("user", "Hi")], true).unwrap(),
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let conv = [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello!"),
        ("user", "2+2?"),
    ];
    assert_eq!(
        t.apply(&conv, true).unwrap(),
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(
        t.apply(&[("user", "a"), ("tool", "r1"), ("tool", "r2")], false).unwrap(),
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n"
    );
}
