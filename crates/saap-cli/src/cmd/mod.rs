//! One module per subcommand.

pub mod check;
pub mod check_python;
pub mod demo;
pub mod explain;
pub mod explore;
pub mod inspect;
mod inspect_format;
pub mod report;
pub mod simulate;
