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

/// Replaces the rendered date (it comes from the clock) with a placeholder.
fn undate(s: &str) -> String {
    let Some(i) = s.find("Today Date: ") else {
        return s.to_string();
    };
    let start = i + "Today Date: ".len();
    let end = start + s[start..].find('\n').unwrap();
    assert_eq!(end - start, 11, "date like '22 Nov 2026' in {s:?}");
    format!("{}DATE{}", &s[..start], &s[end..])
}

#[test]
fn llama32_instruct_matches_jinja2() {
    let src = include_str!("data/llama3.2-instruct.jinja");
    let t = ChatTemplate::new(src, "<|begin_of_text|>", "<|eot_id|>").unwrap();
    let head = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: DATE\n\n";
    assert_eq!(
        undate(&t.apply(&[("user", " Hi ")], true).unwrap()),
        format!("{head}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    );
    let conv = [
        ("system", "Be brief. "),
        ("user", "Hi"),
        ("assistant", "Hello!"),
        ("user", "2+2?"),
    ];
    assert_eq!(
        undate(&t.apply(&conv, true).unwrap()),
        format!("{head}Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    );
    assert_eq!(
        undate(&t.apply(&[("user", "a"), ("tool", "r1")], false).unwrap()),
        format!("{head}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\na<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"r1\"<|eot_id|>")
    );
}
