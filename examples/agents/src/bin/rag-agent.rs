//! The retrieval agent as a command-line program: `rag-agent --help`.
//!
//! One call gives it `spec`, `check`, `run`, `runs` and `show` (see `saap::cli`).

fn main() -> std::process::ExitCode {
    saap::main(saap_examples::rag::workflow())
}
