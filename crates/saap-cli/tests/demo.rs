//! `saap demo` runs with no setup and shows the symptom of the broken agent and its fix.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;

#[test]
fn demo_runs_the_examples_and_shows_the_optional_trap() {
    let out = Command::cargo_bin("saap")
        .unwrap()
        .arg("demo")
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("executions: plan ×1, search ×3, rank ×1, answer ×1"),
        "{text}"
    );
    assert!(text.contains("flowchart LR"), "{text}");
    // The approval's deadline: nobody answers, the engine's timer delivers the timeout.
    assert!(text.contains("timer 0 fired: ApprovalTimedOut"), "{text}");
    assert!(text.contains("→ Expired `wipe the cache`"), "{text}");
    // Delegation: the editor's two child runs, one waiting for a human; then a cancelled tree.
    assert!(
        text.contains("2d. EditorAgent delegating to ResearcherAgent"),
        "{text}"
    );
    assert!(text.contains("EditorAgent run "), "{text}");
    assert!(text.contains("(waiting_children)"), "{text}");
    assert!(
        text.contains("ResearcherAgent run ")
            && text.contains("(waiting_timer; awaited by the parent)"),
        "{text}"
    );
    assert!(
        text.contains("Brief `ants farm aphids for honeydew; moths (per the field guide)`"),
        "{text}"
    );
    assert!(
        text.contains("(cancelled; abandoned by the parent)")
            || text.contains("(cancelled; reported to the parent)"),
        "{text}"
    );
    // The same retrieval answered by the scripted model through saap::llm.
    assert!(text.contains("1b. RagModelAgent"), "{text}");
    assert!(text.contains("streamed:   "), "{text}");
    assert!(text.contains("model call: scripted-rag, tokens "), "{text}");
    assert!(
        text.contains("(LLMCostEvent, from the price table)"),
        "{text}"
    );
    assert!(
        text.contains("step `decide` waits for: required `approval_given`"),
        "{text}"
    );
    assert!(text.contains("resumed 1 live run(s)"), "{text}");
    assert!(
        text.contains("carried out once, as a journaled effect")
            && text.contains("`refund order 17` done at "),
        "{text}"
    );
    assert!(text.contains("[optional-trap] step `publish`"), "{text}");
    assert!(
        text.contains("publish executed 2 time(s)  ← the symptom"),
        "{text}"
    );
    assert!(text.contains("publish executed 1 time(s)\n"), "{text}");
}

#[test]
fn demo_json_is_one_object() {
    let out = Command::cargo_bin("saap")
        .unwrap()
        .args(["demo", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["optional_trap"][0]["variant"], "broken");
    assert_eq!(
        v["delegation"]["brief"],
        "ants farm aphids for honeydew; moths (per the field guide)"
    );
    assert_eq!(
        v["delegation"]["tree_after_cancel"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let model = &v["rag_model"];
    assert_eq!(model["model"], "scripted-rag");
    let chunks: Vec<&str> = model["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(chunks.concat(), model["answer"].as_str().unwrap());
    let tokens = &model["tokens"];
    assert_eq!(
        tokens["total"].as_i64().unwrap(),
        tokens["prompt"].as_i64().unwrap() + tokens["completion"].as_i64().unwrap()
    );
    assert!(model["cost_usd"].as_f64().unwrap() > 0.0);
    assert!(
        v["rag"]["mermaid"]
            .as_str()
            .unwrap()
            .starts_with("flowchart LR")
    );
}
