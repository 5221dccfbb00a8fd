//! `saap explore` (not implemented yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ExploreArgs {}

pub fn run(_args: ExploreArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`saap explore` is not implemented yet")
}
