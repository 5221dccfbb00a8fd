//! The editor that delegates to a researcher (`examples/agents/src/research.rs`) as a
//! command-line program: both agents run in this process on one store, the researcher
//! declared with `with_delegate`. `research-agent run --message "ants, bees"` ends with the
//! brief; a topic the researcher does not know leaves its child run waiting for a human
//! source; `research-agent runs --tree RUN` shows the editor's run and its children.

fn main() -> std::process::ExitCode {
    saap::main(saap_examples::research::editor_with_researcher())
}
