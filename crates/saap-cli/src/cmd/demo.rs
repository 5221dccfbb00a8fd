//! `saap demo` (not implemented yet).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`saap demo` is not implemented yet")
}
