//! The onboarding process (`examples/agents/src/onboarding.rs`) as a command-line program:
//! the process and the welcome writer it hands work to run in this process on one store.
//! `onboarding-process run --event '{"_event_name": "NewHire", "name": "Ada"}'` starts one;
//! it waits for HR's `HumanWorkEvent`, then the accounts program's `ProgramWorkEvent`, each
//! sent with `onboarding-process send RUN --event …` naming the request it answers.

fn main() -> std::process::ExitCode {
    saap::main(saap_examples::onboarding::onboarding())
}
