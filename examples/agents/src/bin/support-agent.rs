//! The support agent (written with `#[agent]`) as a command-line program:
//! `support-agent --help`.

fn main() -> std::process::ExitCode {
    saap::agent_main::<saap_examples::support::SupportAgent>()
}
