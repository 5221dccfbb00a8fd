//! Arbitrary text never crashes the analysis: random edits of the example agents (tokens
//! deleted, duplicated, swapped, lines cut) and random token soup give a report or a coded
//! error, never a panic (which the analysis thread would report as SAAP-P010). Cases:
//! `PROPTEST_CASES` (default 256).
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use saap_python::check_source;

const EXAMPLES: &[&str] = &[
    include_str!("../../../examples/python/correct.py"),
    include_str!("../../../examples/python/config.py"),
    include_str!("../../../examples/python/never_runs.py"),
    include_str!("../../../examples/python/context_smuggle.py"),
    include_str!("../../../examples/python/support_agent/agent.py"),
];

const TOKENS: &[&str] = &[
    "class ",
    "def ",
    "async ",
    "@step()",
    "@precondition()",
    "(",
    ")",
    "[",
    "]",
    ":",
    ",",
    " | ",
    "None",
    "Optional[",
    "list[",
    "FixedList(",
    "Agent",
    "ControlEvent",
    "StopEvent",
    "UserMessageEvent",
    "self",
    ".",
    "=",
    "\n",
    "    ",
    "->",
    "return ",
    "if ",
    "'",
    "\"",
    "#",
    "import ",
    "from ",
    "x",
    "1",
    "lambda",
    "await ",
    "not ",
    "\\",
    "\t",
];

fn no_panic(text: &str) {
    if let Err(e) = check_source("fuzz.py", text) {
        assert_ne!(e.code(), "SAAP-P010", "{e}\n---\n{text}");
    }
}

proptest! {
    #[test]
    fn edited_examples(which in 0..EXAMPLES.len(), edits in prop::collection::vec((any::<u16>(), any::<u16>(), 0..4u8), 1..8)) {
        let mut words: Vec<String> = EXAMPLES[which]
            .split_inclusive(|c: char| c.is_whitespace() || "()[]:,.|".contains(c))
            .map(str::to_string)
            .collect();
        for (a, b, op) in edits {
            if words.is_empty() { break; }
            let i = a as usize % words.len();
            let j = b as usize % words.len();
            match op {
                0 => { words.remove(i); }
                1 => { let w = words[i].clone(); words.insert(j, w); }
                2 => words.swap(i, j),
                _ => words.truncate(i.max(1)),
            }
        }
        no_panic(&words.concat());
    }

    #[test]
    fn token_soup(picks in prop::collection::vec(0..TOKENS.len(), 0..300)) {
        let text: String = picks.into_iter().map(|i| TOKENS[i]).collect();
        no_panic(&text);
    }
}
