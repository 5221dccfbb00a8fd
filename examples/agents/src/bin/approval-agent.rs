//! The human-approval agent as a command-line program: `approval-agent run --message X`
//! leaves the run waiting for a human; `approval-agent send RUN --event '{"_event_name":
//! "ApprovalGiven", "approved": true, "by": "ann"}'` answers it. The human has 24 hours, or
//! `APPROVAL_DEADLINE_SECS` seconds; a deadline that passed while no command had the store
//! open is delivered when the next one opens it (the run then ends as `Expired`).

use std::time::Duration;

fn main() -> std::process::ExitCode {
    let deadline = match std::env::var("APPROVAL_DEADLINE_SECS") {
        Ok(s) => match s.trim().parse::<u64>() {
            Ok(secs) => Duration::from_secs(secs),
            Err(_) => {
                eprintln!(
                    "error: APPROVAL_DEADLINE_SECS must be a whole number of seconds, not `{s}`"
                );
                return std::process::ExitCode::from(2);
            }
        },
        Err(_) => saap_examples::approval::DEFAULT_DEADLINE,
    };
    saap::main(saap_examples::approval::workflow_with_deadline(deadline))
}
