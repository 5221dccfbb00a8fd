//! A broken agent (the optional trap, DESIGN §5) as a command-line program:
//! `optional-trap-agent check` names the cause (SAAP010).

fn main() -> std::process::ExitCode {
    saap::main(saap_examples::broken::optional_trap())
}
