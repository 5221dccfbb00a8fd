//! Live end-to-end test per advertised language x ingest combination: the test fills the
//! template's placeholders, builds/runs a real program with the helper inserted, and checks
//! that the event arrives intact (and redacted) through the real service. A missing
//! toolchain prints "skipped: no toolchain" and passes; `scripts/debug-mode-install-toolchains`
//! installs what Debian and npm provide.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::Env;
use serde_json::Value;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool} >/dev/null 2>&1")])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

struct Case {
    language: &'static str,
    ingest: &'static str,
    tools: &'static [&'static str],
    /// Data expression in the language.
    data: &'static str,
    /// Builds the program source from (helper, call).
    program: fn(&str, &str) -> String,
    file: &'static str,
    /// Shell commands run in the work dir (build + run).
    run: &'static [&'static str],
}

/// Native helpers redact exact secret key names only: `passwordPolicy` and `tokenCount`
/// describe something else and are kept.
const NATIVE_EXPECTED: &str = r#"{"count":3,"items":["a","b"],"nested":{"ok":true},"password":"[REDACTED]","passwordPolicy":"visible","tokenCount":7}"#;
const SERIALIZED_EXPECTED: &str =
    "{\"count\":3,\"label\":\"say \\\"hi\\\"\\n\",\"password\":\"[REDACTED]\"}";

fn fill(text: &str, env_target: &str, case: &Case) -> String {
    text.replace("__INGEST_URL__", env_target)
        .replace("__APPEND_PATH__", env_target)
        .replace("__HYPOTHESIS_ID__", "H1")
        .replace("__LOCATION__", &format!("{}:1", case.file))
        .replace("__MESSAGE__", "Probe reached")
        .replace("__DATA_EXPRESSION__", case.data)
        .replace("__DATA_JSON_EXPRESSION__", case.data)
}

/// A session with a program built from a template and run; the events it recorded.
struct Ran {
    env: Env,
    id: String,
    target: String,
    stdout: String,
    data_encoding: String,
}

impl Ran {
    fn records(&self) -> Vec<Value> {
        self.env
            .json(&["logs", "--session", &self.id, "--limit", "1000"])["data"]["records"]
            .as_array()
            .unwrap()
            .clone()
    }

    fn malformed(&self) -> Value {
        self.env.json(&["status", "--session", &self.id])["data"]["malformedCount"].clone()
    }
}

fn missing_tools(case: &Case) -> bool {
    let missing: Vec<&str> = case.tools.iter().copied().filter(|t| !have(t)).collect();
    if !missing.is_empty() {
        println!(
            "skipped: no toolchain ({}+{} needs {})",
            case.language,
            case.ingest,
            missing.join(", ")
        );
    }
    !missing.is_empty()
}

fn run_case(case: &Case) {
    let Some(ran) = build_and_run(case) else {
        return;
    };
    let events = ran.records();
    let status = ran.env.json(&["status", "--session", &ran.id]);
    assert_eq!(
        events.len(),
        1,
        "{}+{}: expected one event; status: {status:#}",
        case.language,
        case.ingest
    );
    let e = &events[0];
    assert_eq!(e["hypothesisId"], "H1");
    assert_eq!(e["location"], format!("{}:1", case.file).as_str());
    assert_eq!(e["message"], "Probe reached");
    assert_eq!(e["sequence"], 1);
    assert!(e["timestamp"].as_u64().unwrap() > 1_700_000_000_000);
    let expected: Value = if ran.data_encoding == "serialized-json" {
        serde_json::from_str(SERIALIZED_EXPECTED).unwrap()
    } else {
        serde_json::from_str(NATIVE_EXPECTED).unwrap()
    };
    assert_eq!(e["data"], expected, "{}+{}", case.language, case.ingest);
    assert_eq!(status["data"]["malformedCount"], 0);
}

/// Creates a session, fills the template, builds and runs the program; `None` when the
/// toolchain is missing.
fn build_and_run(case: &Case) -> Option<Ran> {
    if missing_tools(case) {
        return None;
    }
    let env = Env::new();
    let created = env.json(&["create"]);
    let id = created["data"]["sessionId"].as_str().unwrap().to_owned();
    let target = if case.ingest == "http" {
        created["data"]["ingestUrl"].as_str().unwrap().to_owned()
    } else {
        created["data"]["appendPath"].as_str().unwrap().to_owned()
    };
    let t = env.json(&[
        "template",
        "--language",
        case.language,
        "--ingest",
        case.ingest,
    ]);
    let helper = fill(t["data"]["helperTemplate"].as_str().unwrap(), &target, case);
    let call = fill(t["data"]["callTemplate"].as_str().unwrap(), &target, case);
    for name in t["data"]["placeholders"].as_object().unwrap().keys() {
        assert!(
            !helper.contains(name.as_str()) && !call.contains(name.as_str()),
            "unfilled placeholder {name}"
        );
    }
    let work = env.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join(case.file), (case.program)(&helper, &call)).unwrap();
    let mut stdout = String::new();
    for step in case.run {
        let o = Command::new("sh")
            .args(["-c", step])
            .current_dir(&work)
            .env("HOME", env.dir.path())
            .env("GOCACHE", env.dir.path().join("gocache"))
            .env("GOPATH", env.dir.path().join("gopath"))
            .env("GO111MODULE", "off")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}+{}: `{step}` failed\nstdout: {}\nstderr: {}",
            case.language,
            case.ingest,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        stdout.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    Some(Ran {
        env,
        id,
        target,
        stdout,
        data_encoding: t["data"]["dataEncoding"].as_str().unwrap().to_owned(),
    })
}

macro_rules! e2e {
    ($name:ident, $case:expr) => {
        #[test]
        fn $name() {
            run_case(&$case);
        }
    };
}

e2e!(
    javascript_http,
    Case {
        language: "javascript",
        ingest: "http",
        tools: &["node"],
        data: r#"{ count: 3, items: ["a", "b"], nested: { ok: true }, password: "hunter2", passwordPolicy: "visible", tokenCount: 7 }"#,
        program: |h, c| format!("{h}\n{c}\n"),
        file: "probe.js",
        run: &["node probe.js"],
    }
);

e2e!(
    typescript_http,
    Case {
        language: "typescript",
        ingest: "http",
        tools: &["tsx", "tsc"],
        data: r#"{ count: 3, items: ["a", "b"], nested: { ok: true }, password: "hunter2", passwordPolicy: "visible", tokenCount: 7 }"#,
        program: |h, c| format!("{h}\n{c}\nexport {{}};\n"),
        file: "probe.ts",
        run: &[
            "tsc --noEmit --strict --target es2022 --module es2022 --lib es2022,dom probe.ts",
            "tsx probe.ts",
        ],
    }
);

e2e!(
    python_file,
    Case {
        language: "python",
        ingest: "file",
        tools: &["python3"],
        data: r#"{"count": 3, "items": ["a", "b"], "nested": {"ok": True}, "password": "hunter2", "passwordPolicy": "visible", "tokenCount": 7}"#,
        program: |h, c| format!("{h}\n\n{c}\n"),
        file: "probe.py",
        run: &["python3 probe.py"],
    }
);

e2e!(
    go_file,
    Case {
        language: "go",
        ingest: "file",
        tools: &["go"],
        data: r#"map[string]any{"count": 3, "items": []string{"a", "b"}, "nested": map[string]any{"ok": true}, "password": "hunter2", "passwordPolicy": "visible", "tokenCount": 7}"#,
        program: |h, c| format!("package main\n\n{h}\n\nfunc main() {{\n{c}\n}}\n"),
        file: "probe.go",
        run: &["go vet probe.go", "go run probe.go"],
    }
);

e2e!(
    ruby_file,
    Case {
        language: "ruby",
        ingest: "file",
        tools: &["ruby"],
        data: r#"{ count: 3, items: ["a", "b"], nested: { ok: true }, password: "hunter2", passwordPolicy: "visible", tokenCount: 7 }"#,
        program: |h, c| format!("{h}\n\n{c}\n"),
        file: "probe.rb",
        run: &["ruby -w probe.rb"],
    }
);

e2e!(
    php_file,
    Case {
        language: "php",
        ingest: "file",
        tools: &["php"],
        data: r#"['count' => 3, 'items' => ['a', 'b'], 'nested' => ['ok' => true], 'password' => 'hunter2', 'passwordPolicy' => 'visible', 'tokenCount' => 7]"#,
        program: |h, c| format!("<?php\n{h}\n\n{c}\n"),
        file: "probe.php",
        run: &["php -l probe.php", "php probe.php"],
    }
);

e2e!(
    powershell_file,
    Case {
        language: "powershell",
        ingest: "file",
        tools: &["pwsh"],
        data: r#"@{ count = 3; items = @('a', 'b'); nested = @{ ok = $true }; password = 'hunter2'; passwordPolicy = 'visible'; tokenCount = 7 }"#,
        program: |h, c| format!("{h}\n\n{c}\n"),
        file: "probe.ps1",
        run: &["pwsh -NoProfile -NonInteractive -File probe.ps1"],
    }
);

e2e!(
    csharp_file,
    Case {
        language: "csharp",
        ingest: "file",
        tools: &["dotnet"],
        data: r#"new System.Collections.Generic.Dictionary<string, object> { ["count"] = 3, ["items"] = new[] { "a", "b" }, ["nested"] = new System.Collections.Generic.Dictionary<string, object> { ["ok"] = true }, ["password"] = "hunter2", ["passwordPolicy"] = "visible", ["tokenCount"] = 7 }"#,
        program: |h, c| format!("{c}\n\n{h}\n"),
        file: "Program.cs",
        run: &[
            "printf '%s' '<Project Sdk=\"Microsoft.NET.Sdk\"><PropertyGroup><OutputType>Exe</OutputType><TargetFramework>net8.0</TargetFramework><Nullable>enable</Nullable></PropertyGroup></Project>' > probe.csproj",
            "dotnet run --project probe.csproj",
        ],
    }
);

e2e!(
    swift_file,
    Case {
        language: "swift",
        ingest: "file",
        tools: &["swiftc"],
        data: r#"["count": 3, "items": ["a", "b"], "nested": ["ok": true], "password": "hunter2", "passwordPolicy": "visible", "tokenCount": 7] as [String: Any]"#,
        program: |h, c| format!("{h}\n\n{c}\n"),
        file: "main.swift",
        run: &["swiftc main.swift -o probe", "./probe"],
    }
);

e2e!(
    rust_file,
    Case {
        language: "rust",
        ingest: "file",
        tools: &["rustc"],
        data: r#"format!("{{\"count\":{},\"label\":{},\"password\":\"hunter2\"}}", 3, agent_debug_mode::json_string("say \"hi\"\n"))"#,
        program: |h, c| format!("{h}\n\nfn main() {{\n{c}\n}}\n"),
        file: "probe.rs",
        run: &[
            "rustc --edition 2021 -D warnings -o probe probe.rs",
            "./probe"
        ],
    }
);

e2e!(
    cpp_file,
    Case {
        language: "cpp",
        ingest: "file",
        tools: &["g++"],
        data: r#""{\"count\":" + std::to_string(3) + ",\"label\":" + agent_debug_mode::json_string("say \"hi\"\n") + ",\"password\":\"hunter2\"}""#,
        program: |h, c| format!("{h}\n\nint main() {{\n{c}\n  return 0;\n}}\n"),
        file: "probe.cpp",
        run: &[
            "g++ -std=c++17 -Wall -Wextra -Werror -o probe probe.cpp",
            "./probe"
        ],
    }
);

e2e!(
    c_file,
    Case {
        language: "c",
        ingest: "file",
        tools: &["gcc"],
        data: "data",
        program: |h, c| {
            format!(
                "{h}\n\nint main(void) {{\n  char data[256];\n  snprintf(data, sizeof data, \"{{\\\"count\\\":%d,\\\"label\\\":%s,\\\"password\\\":\\\"hunter2\\\"}}\", 3, agent_debug_json_string(\"say \\\"hi\\\"\\n\"));\n{c}\n  return 0;\n}}\n"
            )
        },
        file: "probe.c",
        run: &[
            "gcc -std=c99 -pedantic -Wall -Wextra -Werror -o probe probe.c",
            "./probe"
        ],
    }
);

e2e!(
    java_file,
    Case {
        language: "java",
        ingest: "file",
        tools: &["javac", "java"],
        data: r#"new java.util.TreeMap<String, Object>(java.util.Map.of("count", 3, "items", java.util.List.of("a", "b"), "nested", java.util.Map.of("ok", true), "password", "hunter2", "passwordPolicy", "visible", "tokenCount", 7))"#,
        program: |h, c| format!(
            "{h}\n\npublic class Main {{\n  public static void main(String[] args) {{\n{c}\n  }}\n}}\n"
        ),
        file: "Main.java",
        run: &["javac -Xlint:all -Werror Main.java", "java -cp . Main"],
    }
);

e2e!(
    kotlin_file,
    Case {
        language: "kotlin",
        ingest: "file",
        tools: &["kotlinc", "java"],
        data: r#"mapOf("count" to 3, "items" to listOf("a", "b"), "nested" to mapOf("ok" to true), "password" to "hunter2", "passwordPolicy" to "visible", "tokenCount" to 7)"#,
        program: |h, c| format!("{h}\n\nfun main() {{\n{c}\n}}\n"),
        file: "probe.kt",
        run: &[
            "kotlinc probe.kt -include-runtime -d probe.jar",
            "java -jar probe.jar"
        ],
    }
);

// ------------------------------------------------- serialized-JSON helpers bound their output

/// What every serialized-JSON scenario program records: one escaped label (H1), nothing for
/// oversize (H2), split or control-character (H3) and malformed (H4) data, and 8 x 50
/// records of ~12 KB (several pipe buffers; under the service's 16k-character string
/// bound) from concurrent emitters (H5), then prints `done`.
fn check_bounded(ran: &Ran, language: &str) {
    assert_eq!(
        ran.stdout.trim(),
        "done",
        "{language}: control flow continued"
    );
    let records = ran.records();
    let count = |h: &str| records.iter().filter(|e| e["hypothesisId"] == h).count();
    assert!(
        !records.iter().any(|e| e["hypothesisId"] == "FORGED"),
        "{language}: a forged record was accepted"
    );
    assert_eq!(count("H1"), 1, "{language}: escaping");
    let h1 = records.iter().find(|e| e["hypothesisId"] == "H1").unwrap();
    assert_eq!(
        h1["data"],
        serde_json::json!({"label": "q\"b\\n\nt\tc\u{1}\u{1f} é"}),
        "{language}: json_string escapes quotes, backslashes, newlines and control characters"
    );
    assert_eq!(count("H2"), 0, "{language}: oversize data is dropped");
    assert_eq!(
        count("H3"),
        0,
        "{language}: raw control characters are dropped"
    );
    assert_eq!(count("H4"), 0, "{language}: malformed data is dropped");
    let mut seen: Vec<(u64, u64)> = records
        .iter()
        .filter(|e| e["hypothesisId"] == "H5")
        .map(|e| {
            assert_eq!(
                e["data"]["pad"].as_str().map(str::len),
                Some(12_000),
                "{language}"
            );
            (
                e["data"]["t"].as_u64().unwrap(),
                e["data"]["i"].as_u64().unwrap(),
            )
        })
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen.len(),
        400,
        "{language}: every concurrent record arrives intact"
    );
    assert_eq!(
        ran.malformed(),
        0,
        "{language}: nothing malformed reached the service"
    );
}

const FORGED_RUST: &str = r#""1\n{\"hypothesisId\":\"FORGED\",\"location\":\"x:1\",\"message\":\"m\",\"data\":1,\"timestamp\":1}\n\"x\"""#;

#[test]
fn rust_helper_bounds_its_output() {
    let case = Case {
        language: "rust",
        ingest: "file",
        tools: &["rustc"],
        data: "\"null\"",
        program: |h, _| {
            format!(
                r#"{h}

fn main() {{
    use agent_debug_mode::{{emit, json_string}};
    emit("H1", "probe.rs:1", "escaping", format!("{{{{\"label\":{{}}}}}}", json_string("q\"b\\n\nt\tc\u{{1}}\u{{1f}} é")));
    emit("H2", "probe.rs:2", "oversize", json_string(&"x".repeat(80_000)));
    emit("H3", "probe.rs:3", "forged", {FORGED_RUST});
    emit("H3", "probe.rs:4", "control", "\"a\u{{1}}b\"");
    emit("H3", "probe.rs:5", "tab in a string", "\"a\tb\"");
    emit("H3", "probe.rs:6", "carriage return", "{{\"a\":1}}\r");
    for bad in ["{{\"a\":1", "1 2", "", "{{\"a\":1}}}}", "[1,]", "'x'", "01", "[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]"] {{
        emit("H4", "probe.rs:7", "malformed", bad);
    }}
    let threads: Vec<_> = (0..8u32)
        .map(|t| std::thread::spawn(move || {{
            for i in 0..50u32 {{
                emit("H5", "probe.rs:8", "concurrent", format!("{{{{\"t\":{{t}},\"i\":{{i}},\"pad\":{{}}}}}}", json_string(&"p".repeat(12_000))));
            }}
        }}))
        .collect();
    for t in threads {{
        t.join().expect("emitter thread");
    }}
    println!("done");
}}
"#
            )
        },
        file: "probe.rs",
        run: &[
            "rustc --edition 2021 -D warnings -O -o probe probe.rs",
            "./probe",
        ],
    };
    if let Some(ran) = build_and_run(&case) {
        check_bounded(&ran, "rust");
    }
}

#[test]
fn cpp_helper_bounds_its_output() {
    let case = Case {
        language: "cpp",
        ingest: "file",
        tools: &["g++"],
        data: "\"null\"",
        program: |h, _| {
            format!(
                r#"{h}
#include <thread>
#include <vector>

int main() {{
    using agent_debug_mode::emit;
    using agent_debug_mode::json_string;
    emit("H1", "probe.cpp:1", "escaping", "{{\"label\":" + json_string("q\"b\\n\nt\tc\x01\x1f \xc3\xa9") + "}}");
    emit("H2", "probe.cpp:2", "oversize", json_string(std::string(80000, 'x')));
    emit("H3", "probe.cpp:3", "forged", {FORGED_RUST});
    emit("H3", "probe.cpp:4", "control", "\"a\x01" "b\"");
    emit("H3", "probe.cpp:5", "tab in a string", "\"a\tb\"");
    emit("H3", "probe.cpp:6", "carriage return", "{{\"a\":1}}\r");
    for (const char *bad : {{"{{\"a\":1", "1 2", "", "{{\"a\":1}}}}", "[1,]", "'x'", "01", "[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]"}}) {{
        emit("H4", "probe.cpp:7", "malformed", bad);
    }}
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {{
        threads.emplace_back([t] {{
            for (int i = 0; i < 50; ++i) {{
                emit("H5", "probe.cpp:8", "concurrent", "{{\"t\":" + std::to_string(t) + ",\"i\":" + std::to_string(i) + ",\"pad\":" + json_string(std::string(12000, 'p')) + "}}");
            }}
        }});
    }}
    for (auto &th : threads) th.join();
    std::puts("done");
    return 0;
}}
"#
            )
        },
        file: "probe.cpp",
        run: &[
            "g++ -std=c++11 -Wall -Wextra -Werror -pthread -o probe probe.cpp",
            "./probe",
        ],
    };
    if let Some(ran) = build_and_run(&case) {
        check_bounded(&ran, "cpp");
    }
}

#[test]
fn c_helper_bounds_its_output() {
    let case = Case {
        language: "c",
        ingest: "file",
        tools: &["gcc"],
        data: "\"null\"",
        program: |h, _| {
            format!(
                r#"{h}
#include <pthread.h>

static char pad[12001];

static void *worker(void *arg) {{
    long t = (long)arg;
    char *buf = (char *)malloc(13000);
    int i;
    for (i = 0; i < 50; i++) {{
        snprintf(buf, 13000, "{{\"t\":%ld,\"i\":%d,\"pad\":\"%s\"}}", t, i, pad);
        agent_debug_emit("H5", "probe.c:8", "concurrent", buf);
    }}
    free(buf);
    return NULL;
}}

int main(void) {{
    char label[128];
    char *big = (char *)malloc(80010);
    const char *bad[] = {{"{{\"a\":1", "1 2", "", "{{\"a\":1}}}}", "[1,]", "'x'", "01", "[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]"}};
    pthread_t threads[8];
    long t;
    size_t k;
    snprintf(label, sizeof label, "{{\"label\":%s}}", agent_debug_json_string("q\"b\\n\nt\tc\x01\x1f \xc3\xa9"));
    agent_debug_emit("H1", "probe.c:1", "escaping", label);
    memset(big, 'x', 80008);
    big[0] = '"';
    big[80008] = '"';
    big[80009] = '\0';
    agent_debug_emit("H2", "probe.c:2", "oversize", big);
    agent_debug_emit("H3", "probe.c:3", "forged", {FORGED_RUST});
    agent_debug_emit("H3", "probe.c:4", "control", "\"a\x01" "b\"");
    agent_debug_emit("H3", "probe.c:5", "tab in a string", "\"a\tb\"");
    agent_debug_emit("H3", "probe.c:6", "carriage return", "{{\"a\":1}}\r");
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) agent_debug_emit("H4", "probe.c:7", "malformed", bad[k]);
    memset(pad, 'p', 12000);
    for (t = 0; t < 8; t++) pthread_create(&threads[t], NULL, worker, (void *)t);
    for (t = 0; t < 8; t++) pthread_join(threads[t], NULL);
    free(big);
    puts("done");
    return 0;
}}
"#
            )
        },
        file: "probe.c",
        run: &[
            "gcc -std=c11 -Wall -Wextra -Werror -pthread -o probe probe.c",
            "./probe",
        ],
    };
    if let Some(ran) = build_and_run(&case) {
        check_bounded(&ran, "c");
    }
}

// ------------------------------------------------- native helpers: a failed observation

/// Runs a program whose only observation is a cyclic value: the program goes on (prints
/// `done`) and the helper writes nothing at all (the append file stays empty; no request).
fn check_cyclic_writes_nothing(case: &Case) {
    let Some(ran) = build_and_run(case) else {
        return;
    };
    assert_eq!(
        ran.stdout.trim(),
        "done",
        "{}: control flow continued",
        case.language
    );
    if case.ingest == "file" {
        let len = std::fs::metadata(&ran.target).map_or(0, |m| m.len());
        assert_eq!(len, 0, "{}: the append file was written to", case.language);
    }
    assert_eq!(ran.records().len(), 0, "{}", case.language);
    assert_eq!(ran.malformed(), 0, "{}", case.language);
}

macro_rules! cyclic {
    ($name:ident, $language:expr, $ingest:expr, $tools:expr, $file:expr, $program:expr, $run:expr) => {
        #[test]
        fn $name() {
            check_cyclic_writes_nothing(&Case {
                language: $language,
                ingest: $ingest,
                tools: $tools,
                data: "null",
                program: $program,
                file: $file,
                run: $run,
            });
        }
    };
}

cyclic!(
    python_cyclic_value_writes_nothing,
    "python",
    "file",
    &["python3"],
    "probe.py",
    |h, _| format!(
        "{h}\n\nd = {{\"a\": 1}}\nd[\"self\"] = [d]\nagent_debug_log(\"H1\", \"probe.py:1\", \"cyclic\", d)\nprint(\"done\")\n"
    ),
    &["python3 probe.py"]
);

cyclic!(
    javascript_cyclic_value_writes_nothing,
    "javascript",
    "http",
    &["node"],
    "probe.js",
    |h, _| format!(
        "{h}\nconst d = {{ a: 1 }};\nd.self = [d];\nagentDebugLog(\"H1\", \"probe.js:1\", \"cyclic\", d);\nconsole.log(\"done\");\n"
    ),
    &["node probe.js"]
);

cyclic!(
    typescript_cyclic_value_writes_nothing,
    "typescript",
    "http",
    &["tsx", "tsc"],
    "probe.ts",
    |h, _| format!(
        "{h}\nconst d: Record<string, unknown> = {{ a: 1 }};\nd.self = [d];\nagentDebugLog(\"H1\", \"probe.ts:1\", \"cyclic\", d);\nconsole.log(\"done\");\nexport {{}};\n"
    ),
    &[
        "tsc --noEmit --strict --target es2022 --module es2022 --lib es2022,dom probe.ts",
        "tsx probe.ts"
    ]
);

cyclic!(
    go_cyclic_value_writes_nothing,
    "go",
    "file",
    &["go"],
    "probe.go",
    |h, _| format!(
        "package main\n\nimport \"fmt\"\n\n{h}\n\nfunc main() {{\n\td := map[string]any{{\"a\": 1}}\n\td[\"self\"] = []any{{d}}\n\tagentDebugLog(\"H1\", \"probe.go:1\", \"cyclic\", d)\n\tfmt.Println(\"done\")\n}}\n"
    ),
    &["go vet probe.go", "go run probe.go"]
);

cyclic!(
    ruby_cyclic_value_writes_nothing,
    "ruby",
    "file",
    &["ruby"],
    "probe.rb",
    |h, _| format!(
        "{h}\n\nd = {{ a: 1 }}\nd[:self] = [d]\nagent_debug_log(\"H1\", \"probe.rb:1\", \"cyclic\", d)\nputs \"done\"\n"
    ),
    &["ruby -w probe.rb"]
);

cyclic!(
    java_cyclic_value_writes_nothing,
    "java",
    "file",
    &["javac", "java"],
    "Main.java",
    |h, _| format!(
        "{h}\n\npublic class Main {{\n  static class Node {{ int a = 1; Node self; }}\n  public static void main(String[] args) {{\n    Node n = new Node();\n    n.self = n;\n    AgentDebugLog.log(\"H1\", \"Main.java:1\", \"cyclic\", n);\n    System.out.println(\"done\");\n  }}\n}}\n"
    ),
    &["javac -Xlint:all -Werror Main.java", "java -cp . Main"]
);

// ------------------------------------------------- JavaScript/TypeScript: response bodies

/// Wraps `fetch` to keep the responses, emits one event, and prints whether every
/// response body was released (cancelled: `bodyUsed`) once the response arrived.
fn check_bodies_released(case: &Case) {
    let Some(ran) = build_and_run(case) else {
        return;
    };
    assert_eq!(ran.stdout.trim(), "released 1 true", "{}", case.language);
    assert_eq!(ran.records().len(), 1, "{}", case.language);
}

const FETCH_SPY_TS: &str = "const __responses: Response[] = [];\nconst __fetch = globalThis.fetch;\n(globalThis as { fetch: typeof fetch }).fetch = (input: RequestInfo | URL, init?: RequestInit) => __fetch(input, init).then((r) => { __responses.push(r); return r; });\n";
const FETCH_SPY_JS: &str = "const __responses = [];\nconst __fetch = globalThis.fetch;\nglobalThis.fetch = (input, init) => __fetch(input, init).then((r) => { __responses.push(r); return r; });\n";
const FETCH_REPORT: &str = "const __wait = () => new Promise((r) => setTimeout(r, 10));\n(async () => {\n  while (__responses.length < 1) await __wait();\n  await __wait();\n  console.log(\"released\", __responses.length, __responses.every((r) => r.bodyUsed));\n})();\n";

#[test]
fn javascript_helper_releases_response_bodies() {
    check_bodies_released(&Case {
        language: "javascript",
        ingest: "http",
        tools: &["node"],
        data: "{ n: 1 }",
        program: |h, c| format!("{FETCH_SPY_JS}{h}\n{c}\n{FETCH_REPORT}"),
        file: "probe.js",
        run: &["node probe.js"],
    });
}

#[test]
fn typescript_helper_releases_response_bodies() {
    check_bodies_released(&Case {
        language: "typescript",
        ingest: "http",
        tools: &["tsx", "tsc"],
        data: "{ n: 1 }",
        program: |h, c| format!("{FETCH_SPY_TS}{h}\n{c}\n{FETCH_REPORT}export {{}};\n"),
        file: "probe.ts",
        run: &[
            "tsc --noEmit --strict --target es2022 --module es2022 --lib es2022,dom probe.ts",
            "tsx probe.ts",
        ],
    });
}
