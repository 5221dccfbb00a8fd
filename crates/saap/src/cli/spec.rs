//! `<agent> spec`: the agent's workflow spec as JSON (the input of `saap check`,
//! `simulate`, `explore`).

use super::fail::{Fail, io};
use crate::workflow::Workflow;
use std::io::Write;
#[derive(clap::Args)]
pub(super) struct SpecArgs {
    /// Accepted for uniformity: the spec is always JSON.
    #[arg(long)]
    pub(super) json: bool,
    /// Print the workflow graph as Mermaid instead of the JSON spec.
    #[arg(long, conflicts_with = "json")]
    pub(super) mermaid: bool,
}

pub(super) fn spec(workflow: &Workflow, a: &SpecArgs) -> Result<u8, Fail> {
    let mut out = std::io::stdout().lock();
    if a.mermaid {
        out.write_all(crate::snapshot::mermaid(workflow.spec()).as_bytes())
            .map_err(io)?;
    } else {
        writeln!(out, "{}", workflow.spec_json()).map_err(io)?;
    }
    Ok(0)
}
