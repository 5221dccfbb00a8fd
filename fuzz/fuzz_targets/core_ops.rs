//! Arbitrary operation sequences applied to the dispatch core (arrivals, re-deliveries,
//! completions, failures, retries, stale and duplicate completions) on the example specs:
//! never a panic, and the journal always replays to the same records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use saap_dispatch::replay::{RunInput, replay};
use saap_dispatch::{
    DeclaredConditions, ExecutionId, NewEvent, Outcome, Run, SpecSyntax, compile_spec_text,
};
use saap_dispatch::{counter_event_id, derived_event_id};
use std::sync::{Arc, OnceLock};

const SPECS: [&str; 5] = [
    include_str!("../../examples/specs/race-condition.yaml"),
    include_str!("../../examples/specs/list-reruns.yaml"),
    include_str!("../../examples/specs/fixedlist-fix.yaml"),
    include_str!("../../examples/specs/dangling-stop.yaml"),
    include_str!("../../examples/specs/rag.yaml"),
];

fn specs() -> &'static Vec<Arc<saap_dispatch::CompiledSpec>> {
    static S: OnceLock<Vec<Arc<saap_dispatch::CompiledSpec>>> = OnceLock::new();
    S.get_or_init(|| {
        SPECS
            .iter()
            .map(|t| Arc::new(compile_spec_text(t, SpecSyntax::Yaml).expect("example compiles")))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, ops)) = data.split_first() else {
        return;
    };
    let spec = specs()[first as usize % SPECS.len()].clone();
    let ntypes = spec.types.len();
    let mut run = Run::new(spec.clone(), 9);
    let mut journal = Vec::new();
    let mut pre = DeclaredConditions;
    let mut next = 1u64;
    for pair in ops.chunks(2) {
        let (op, arg) = (pair[0], *pair.get(1).unwrap_or(&0) as usize);
        let input = match op % 6 {
            0 | 1 => {
                let ty = (arg % ntypes) as u32;
                next += 1;
                RunInput::Append(NewEvent::known(counter_event_id(next), ty))
            }
            2 => RunInput::Append(NewEvent::known(
                counter_event_id(1 + (arg as u64 % next)),
                (arg % ntypes) as u32,
            )),
            3 | 4 => {
                let running: Vec<ExecutionId> = run.running().collect();
                let Some(&x) = running.get(arg % running.len().max(1)) else {
                    continue;
                };
                let attempt = run.execution(x).map(|e| e.attempt).unwrap_or(1);
                let outcome = if op % 6 == 4 && arg % 3 == 0 {
                    Outcome::Failed("fuzz".into())
                } else {
                    let step = &spec.steps[run.execution(x).map(|e| e.step).unwrap_or(0) as usize];
                    Outcome::Returned(
                        step.outputs
                            .iter()
                            .enumerate()
                            .map(|(i, t)| NewEvent::known(derived_event_id(9, x, i as u32), *t))
                            .collect(),
                    )
                };
                RunInput::Complete {
                    execution: x,
                    attempt,
                    outcome,
                }
            }
            _ => {
                let n = run.executions().len().max(1);
                let x = ExecutionId((arg % n) as u32);
                if arg % 2 == 0 {
                    // Stale or duplicate completions must be refused without effect.
                    let before = run.records().len();
                    let _ = run.complete(x, 0, Outcome::Returned(vec![]), &mut pre);
                    assert_eq!(before, run.records().len());
                    continue;
                }
                RunInput::Retry { execution: x }
            }
        };
        if run.apply(input.clone(), &mut pre).is_ok() {
            journal.push(input);
        }
    }
    let again = replay(spec, 9, None, &journal, &run.records().to_vec()).expect("the journal replays");
    assert_eq!(again.records(), run.records());
});
