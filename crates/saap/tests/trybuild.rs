//! Unsupported `#[agent]`/`#[step]` signatures are compile errors that say what to write
//! instead (the expected messages are the `.stderr` files in `tests/ui/`). Regenerate them
//! with `TRYBUILD=overwrite cargo test -p saap --test trybuild` after a deliberate change.

#[test]
fn unsupported_signatures_fail_with_what_to_write_instead() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
