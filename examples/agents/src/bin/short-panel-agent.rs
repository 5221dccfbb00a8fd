//! A broken agent as a command-line program: `combine` waits for a fixed list of four expert
//! answers but only three experts exist (DESIGN §5). `short-panel-agent check` names the
//! cause; `short-panel-agent run --message X --timeout 1` shows the symptom (the run never
//! ends) and `show RUN` what `combine` still waits for.

fn main() -> std::process::ExitCode {
    saap::main(saap_examples::broken::fixed_list_short())
}
