//! The human-approval agent as a command-line program: `approval-agent run --message X`
//! leaves the run waiting for a human; `approval-agent send RUN --event '{"_event_name":
//! "ApprovalGiven", "approved": true, "by": "ann"}'` answers it.

fn main() -> std::process::ExitCode {
    saap::main(saap_examples::approval::workflow())
}
