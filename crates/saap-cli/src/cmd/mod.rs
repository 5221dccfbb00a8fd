//! One module per subcommand.

pub mod check;
pub mod check_python;
pub mod demo;
pub mod diff;
pub mod explain;
mod explain_args;
mod explain_report;
mod explain_run;
pub mod explore;
pub mod inspect;
mod inspect_format;
mod nats_flags;
pub mod report;
pub mod simulate;
pub mod studio;
