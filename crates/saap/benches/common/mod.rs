//! What several benches share: the `ev!` macro that declares plain events (one `v: u32`
//! field) and the tick loop the replay and studio benches time. Included with
//! `#[macro_use] mod common;`; not a bench of its own (cargo finds `benches/*.rs` only).
#![allow(dead_code)]

/// Declares events `Name: "Parent"`, each with one `v: u32` field.
macro_rules! ev {
    ($($name:ident : $parent:literal),* $(,)?) => {$(
        #[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
        pub struct $name { #[serde(default)] pub v: u32 }
        impl saap::Event for $name {
            const NAME: &'static str = stringify!($name);
            const PARENTS: &'static [&'static str] = &[$parent];
        }
    )*};
}

/// The tick loop's events.
pub mod tick {
    ev!(Tick: "ControlEvent", Done: "StopEvent");
}

/// A workflow named `name` where a message "N" runs a loop of N ticks (one execution each,
/// each returning the next tick) before the stop; any other message stops at once.
pub fn tick_loop(name: &str) -> saap::Workflow {
    use saap::{Either, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
    use tick::{Done, Tick};
    Workflow::builder(name)
        .step(Step::new(
            "start",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(match q.message.parse::<u32>() {
                    Ok(n) => Either::<Tick, Done>::Left(Tick { v: n }),
                    Err(_) => Either::Right(Done { v: 0 }),
                })
            },
        ))
        .step(Step::new(
            "tick",
            |t: Required<Tick>, _: StepCtx| async move {
                Ok::<_, StepError>(if t.v <= 1 {
                    Either::<Tick, Done>::Right(Done { v: 0 })
                } else {
                    Either::Left(Tick { v: t.v - 1 })
                })
            },
        ))
        .build()
        .unwrap_or_else(|e| panic!("the tick loop is well formed: {e}"))
}
