//! The spec parser and compiler never panic on any input; a spec that parses serializes
//! and parses back to itself; a spec that compiles can be checked and simulated.
#![no_main]

use libfuzzer_sys::fuzz_target;
use saap_dispatch::sim::{Policy, simulate};
use saap_dispatch::{CompiledSpec, SpecSyntax, parse_spec};
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for syntax in [SpecSyntax::Json, SpecSyntax::Yaml] {
        let Ok(spec) = parse_spec(text, syntax) else {
            continue;
        };
        let json = serde_json::to_string(&spec).expect("a parsed spec serializes");
        let again = parse_spec(&json, SpecSyntax::Json).expect("a serialized spec parses");
        assert_eq!(again, spec);
        if let Ok(compiled) = CompiledSpec::compile(&spec) {
            let _ = saap_dispatch::check::check(&compiled);
            let _ = simulate(Arc::new(compiled), Policy::Fifo, 200);
        }
    }
});
