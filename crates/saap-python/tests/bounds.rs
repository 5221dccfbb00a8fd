//! Bad and hostile input: not Python, too large, nested too deep, symbolic links out of the
//! package folder, a folder with no agent. Each is a clear error with its code, or skipped.
#![allow(clippy::unwrap_used)]

use saap_python::check_path;

const AGENT: &str = "from x import Agent, step, UserMessageEvent, StopEvent\n\n\nclass A(Agent):\n    @step()\n    async def go(self, m: UserMessageEvent) -> StopEvent:\n        return StopEvent()\n";

#[test]
fn not_python() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("agent.txt");
    std::fs::write(&p, AGENT).unwrap();
    assert_eq!(check_path(&p).unwrap_err().code(), "SAAP-P002");
    let missing = dir.path().join("missing.py");
    let e = check_path(&missing).unwrap_err();
    assert_eq!(e.code(), "SAAP-P001");
    assert!(e.to_string().contains("missing.py"), "{e}");
}

#[test]
fn too_large_and_too_deep() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.py");
    let mut text = String::from(AGENT);
    while text.len() as u64 <= saap_python::files::MAX_FILE_BYTES {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&big, &text).unwrap();
    assert_eq!(check_path(&big).unwrap_err().code(), "SAAP-P003");

    let deep = dir.path().join("deep.py");
    let nested = format!("x = {}1{}\n", "(".repeat(5_000), ")".repeat(5_000));
    std::fs::write(&deep, format!("{AGENT}{nested}")).unwrap();
    let e = check_path(&deep).unwrap_err();
    assert_eq!(e.code(), "SAAP-P007", "{e}");
}

#[test]
fn not_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("latin.py");
    std::fs::write(&p, b"# caf\xe9\n").unwrap();
    assert_eq!(check_path(&p).unwrap_err().code(), "SAAP-P005");
}

#[test]
fn folder_without_agent() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("util.py"), "def f():\n    return 1\n").unwrap();
    let e = check_path(dir.path()).unwrap_err();
    assert_eq!(e.code(), "SAAP-P008");
}

#[cfg(unix)]
#[test]
fn symlinks_out_of_the_package_are_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.py"), "this is not python (\n").unwrap();
    let pkg = tempfile::tempdir().unwrap();
    std::fs::write(pkg.path().join("agent.py"), AGENT).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.py"), pkg.path().join("link.py"))
        .unwrap();
    std::os::unix::fs::symlink(outside.path(), pkg.path().join("linked_dir")).unwrap();
    // Inside the package, a link is followed.
    std::os::unix::fs::symlink(pkg.path().join("agent.py"), pkg.path().join("again.py")).unwrap();
    let r = check_path(pkg.path()).unwrap();
    assert_eq!(
        r.files, 2,
        "agent.py and the link to it; nothing from outside"
    );
}

#[test]
fn many_syntax_errors_name_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.py");
    std::fs::write(&p, "def f(:\n    pass\nclass (:\n").unwrap();
    let e = check_path(&p).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("bad.py:1:7: syntax error"), "{text}");
    assert!(text.contains("more)"), "{text}");
}
