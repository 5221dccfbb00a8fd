//! `saap simulate` (not implemented yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct SimulateArgs {}

pub fn run(_args: SimulateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`saap simulate` is not implemented yet")
}
