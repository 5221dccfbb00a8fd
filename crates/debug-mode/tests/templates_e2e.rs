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

const NATIVE_EXPECTED: &str =
    r#"{"count":3,"items":["a","b"],"nested":{"ok":true},"password":"[REDACTED]"}"#;
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

fn run_case(case: &Case) {
    let missing: Vec<&str> = case.tools.iter().copied().filter(|t| !have(t)).collect();
    if !missing.is_empty() {
        println!(
            "skipped: no toolchain ({}+{} needs {})",
            case.language,
            case.ingest,
            missing.join(", ")
        );
        return;
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
    let helper = fill(t["data"]["helper"].as_str().unwrap(), &target, case);
    let call = fill(t["data"]["call"].as_str().unwrap(), &target, case);
    let placeholder = regex::Regex::new("__[A-Z][A-Z_]*__").unwrap();
    assert!(
        !placeholder.is_match(&helper) && !placeholder.is_match(&call),
        "unfilled placeholder"
    );
    let work = env.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join(case.file), (case.program)(&helper, &call)).unwrap();
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
    }
    let v = env.json(&["logs", "--session", &id]);
    let events = v["data"]["events"].as_array().unwrap();
    let status = env.json(&["status", "--session", &id]);
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
    let expected: Value = if t["data"]["dataEncoding"] == "serialized-json" {
        serde_json::from_str(SERIALIZED_EXPECTED).unwrap()
    } else {
        serde_json::from_str(NATIVE_EXPECTED).unwrap()
    };
    assert_eq!(e["data"], expected, "{}+{}", case.language, case.ingest);
    assert_eq!(status["data"]["malformedCount"], 0);
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
        data: r#"{ count: 3, items: ["a", "b"], nested: { ok: true }, password: "hunter2" }"#,
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
        data: r#"{ count: 3, items: ["a", "b"], nested: { ok: true }, password: "hunter2" }"#,
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
        data: r#"{"count": 3, "items": ["a", "b"], "nested": {"ok": True}, "password": "hunter2"}"#,
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
        data: r#"map[string]any{"count": 3, "items": []string{"a", "b"}, "nested": map[string]any{"ok": true}, "password": "hunter2"}"#,
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
        data: r#"{ count: 3, items: ["a", "b"], nested: { ok: true }, password: "hunter2" }"#,
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
        data: r#"['count' => 3, 'items' => ['a', 'b'], 'nested' => ['ok' => true], 'password' => 'hunter2']"#,
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
        data: r#"@{ count = 3; items = @('a', 'b'); nested = @{ ok = $true }; password = 'hunter2' }"#,
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
        data: r#"new System.Collections.Generic.Dictionary<string, object> { ["count"] = 3, ["items"] = new[] { "a", "b" }, ["nested"] = new System.Collections.Generic.Dictionary<string, object> { ["ok"] = true }, ["password"] = "hunter2" }"#,
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
        data: r#"["count": 3, "items": ["a", "b"], "nested": ["ok": true], "password": "hunter2"] as [String: Any]"#,
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
            "gcc -std=c11 -Wall -Wextra -Werror -o probe probe.c",
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
        data: r#"new java.util.TreeMap<String, Object>(java.util.Map.of("count", 3, "items", java.util.List.of("a", "b"), "nested", java.util.Map.of("ok", true), "password", "hunter2"))"#,
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
        data: r#"mapOf("count" to 3, "items" to listOf("a", "b"), "nested" to mapOf("ok" to true), "password" to "hunter2")"#,
        program: |h, c| format!("{h}\n\nfun main() {{\n{c}\n}}\n"),
        file: "probe.kt",
        run: &[
            "kotlinc probe.kt -include-runtime -d probe.jar",
            "java -jar probe.jar"
        ],
    }
);
