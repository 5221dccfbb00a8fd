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
    // A link back to the package folder itself is walked once, not forever.
    std::os::unix::fs::symlink(pkg.path(), pkg.path().join("loop")).unwrap();
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

#[test]
fn operator_chains_neither_overflow_nor_pass_unbounded() {
    let dir = tempfile::tempdir().unwrap();
    // Just under the statement bound: parsed and walked without exhausting the stack.
    for (name, expr) in [
        ("not.py", format!("{}a", "not ".repeat(9_000))),
        ("attr.py", format!("a{}", ".a".repeat(4_500))),
        ("plus.py", format!("a{}", "+a".repeat(4_500))),
        ("lambda.py", format!("{}c", "lambda: ".repeat(4_500))),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("{AGENT}x = {expr}\n")).unwrap();
        let r = check_path(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.agents.len(), 1);
    }
    // Over it: refused with its code.
    let p = dir.path().join("long.py");
    std::fs::write(&p, format!("{AGENT}x = a{}\n", "+a".repeat(20_000))).unwrap();
    assert_eq!(check_path(&p).unwrap_err().code(), "SAAP-P009");
}

#[test]
fn odd_but_valid_source_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        "",
        "# only a comment\n",
        "class A(Agent):\n    @step\n    def s(self, *args, **kwargs): ...\n",
        "class A(Agent):\n    @step()\n    async def s(self, m: 'not valid ((') -> 'X': ...\n",
        "class A(Agent):\n    @step(precondition=lambda x: True, max_executions_per_run=-1, stop_on_error=maybe)\n    async def s(self, m: UserMessageEvent) -> StopEvent: ...\n",
        "class A(Agent):\n    @step()\n    @staticmethod\n    async def s(m: list[list[UserMessageEvent]]) -> FixedList(StopEvent) | None: ...\n",
        "class B(A): pass\nclass A(B): pass\nclass C(A, Agent):\n    @step()\n    async def s(self, m: A) -> None: ...\n",
        "from . import nothing\nfrom .. import far\nimport a.b.c\nclass A(Agent):\n    @step()\n    async def s(self, m: a.b.c.D, n: nothing.E) -> far.F: ...\n",
        "class A(Agent):\n    x: int = 1\n    @step()\n    async def s(self, m: UserMessageEvent) -> StopEvent:\n        self.x += 1\n        (self.y, self.z) = 1, 2\n        del self.w\n        return StopEvent()\n",
    ];
    for (i, text) in cases.iter().enumerate() {
        let p = dir.path().join(format!("case{i}.py"));
        std::fs::write(&p, text).unwrap();
        // An error or a report, never a panic (which the analysis thread turns into
        // SAAP-P010).
        if let Err(e) = check_path(&p) {
            assert_ne!(e.code(), "SAAP-P010", "case {i}: {e}");
        }
    }
}
