//! Language helpers and call templates (seed §2.3 `template`, §5 region markers).
//!
//! Each advertised language has exactly one ingest method. Helpers live in
//! `src/templates/` as real source files so they can be read, linted and tested as code;
//! every helper and call is wrapped in the language's region markers.

use crate::error::{DmError, ErrorCode, Result};

/// The five-field event schema shown by every template.
pub const EVENT_SCHEMA: [(&str, &str); 5] = [
    ("hypothesisId", "string"),
    ("location", "string"),
    ("message", "string"),
    ("data", "bounded JSON value"),
    ("timestamp", "Unix epoch milliseconds"),
];

/// One language + ingest template.
#[derive(Debug, Clone, Copy)]
pub struct Template {
    pub language: &'static str,
    pub ingest: &'static str,
    /// `native-json-value` or `serialized-json`.
    pub data_encoding: &'static str,
    /// `file-start` or `top-level`.
    pub helper_placement: &'static str,
    pub region_open: &'static str,
    pub region_close: &'static str,
    pub helper: &'static str,
    pub call: &'static str,
    pub placeholders: &'static [(&'static str, &'static str)],
    /// Oldest language standard the helper compiles with, where the language has several.
    pub standard: Option<&'static str>,
}

const HYP: (&str, &str) = (
    "__HYPOTHESIS_ID__",
    "hypothesis label this observation tests, e.g. H1",
);
const LOC: (&str, &str) = (
    "__LOCATION__",
    "stable source location of the call, preferably path:line",
);
const MSG: (&str, &str) = (
    "__MESSAGE__",
    "constant description of the observation (put changing values in data)",
);
const DATA: (&str, &str) = (
    "__DATA_EXPRESSION__",
    "native value with the smallest changing values that test the hypothesis; the helper serializes, bounds and redacts it",
);
const DATA_JSON: (&str, &str) = (
    "__DATA_JSON_EXPRESSION__",
    "expression evaluating to ONE complete serialized JSON value on one line, at most 32 KiB, inserted after \"data\": (use your serializer, or json_string(text) for plain text; never concatenate raw JSON). The helper drops an event whose data is not well-formed, spans lines or is larger, and writes nothing",
);
const URL: (&str, &str) = (
    "__INGEST_URL__",
    "the Ingest URL printed by `debug-mode create` or `debug-mode reset`",
);
const APPEND: (&str, &str) = (
    "__APPEND_PATH__",
    "the Append Path printed by `debug-mode create` or `debug-mode reset`, as an absolute path in a string literal",
);

const HTTP_NATIVE: &[(&str, &str)] = &[URL, HYP, LOC, MSG, DATA];
const FILE_NATIVE: &[(&str, &str)] = &[APPEND, HYP, LOC, MSG, DATA];
const FILE_SERIALIZED: &[(&str, &str)] = &[APPEND, HYP, LOC, MSG, DATA_JSON];

const SLASH: (&str, &str) = ("// #region agent log", "// #endregion");
const HASH_PS: (&str, &str) = ("#region agent log", "#endregion");
const HASH_PY: (&str, &str) = ("# region agent log", "# endregion");

#[allow(clippy::too_many_arguments)] // a table row constructor: positional reads best
const fn t(
    language: &'static str,
    ingest: &'static str,
    serialized: bool,
    file_start: bool,
    markers: (&'static str, &'static str),
    helper: &'static str,
    call: &'static str,
    placeholders: &'static [(&'static str, &'static str)],
) -> Template {
    Template {
        language,
        ingest,
        data_encoding: if serialized {
            "serialized-json"
        } else {
            "native-json-value"
        },
        helper_placement: if file_start {
            "file-start"
        } else {
            "top-level"
        },
        region_open: markers.0,
        region_close: markers.1,
        helper,
        call,
        placeholders,
        standard: None,
    }
}

/// The same template with its minimum language standard.
const fn std(t: Template, standard: &'static str) -> Template {
    Template {
        standard: Some(standard),
        ..t
    }
}

/// Every advertised combination, in the seed's order.
pub const ALL: [Template; 14] = [
    t(
        "javascript",
        "http",
        false,
        false,
        SLASH,
        include_str!("templates/javascript_http.js"),
        "// #region agent log\nagentDebugLog(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_EXPRESSION__);\n// #endregion\n",
        HTTP_NATIVE,
    ),
    t(
        "typescript",
        "http",
        false,
        false,
        SLASH,
        include_str!("templates/typescript_http.ts"),
        "// #region agent log\nagentDebugLog(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_EXPRESSION__);\n// #endregion\n",
        HTTP_NATIVE,
    ),
    t(
        "python",
        "file",
        false,
        false,
        HASH_PY,
        include_str!("templates/python_file.py"),
        "# region agent log\nagent_debug_log(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_EXPRESSION__)\n# endregion\n",
        FILE_NATIVE,
    ),
    t(
        "go",
        "file",
        false,
        false,
        SLASH,
        include_str!("templates/go_file.go"),
        "// #region agent log\nagentDebugLog(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_EXPRESSION__)\n// #endregion\n",
        FILE_NATIVE,
    ),
    t(
        "ruby",
        "file",
        false,
        false,
        HASH_PY,
        include_str!("templates/ruby_file.rb"),
        "# region agent log\nagent_debug_log(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_EXPRESSION__)\n# endregion\n",
        FILE_NATIVE,
    ),
    t(
        "php",
        "file",
        false,
        false,
        SLASH,
        include_str!("templates/php_file.php"),
        "// #region agent log\nagent_debug_log('__HYPOTHESIS_ID__', '__LOCATION__', '__MESSAGE__', __DATA_EXPRESSION__);\n// #endregion\n",
        FILE_NATIVE,
    ),
    t(
        "powershell",
        "file",
        false,
        false,
        HASH_PS,
        include_str!("templates/powershell_file.ps1"),
        "#region agent log\nWrite-AgentDebugLog -HypothesisId '__HYPOTHESIS_ID__' -Location '__LOCATION__' -Message '__MESSAGE__' -Data (__DATA_EXPRESSION__)\n#endregion\n",
        FILE_NATIVE,
    ),
    t(
        "csharp",
        "file",
        false,
        false,
        HASH_PS,
        include_str!("templates/csharp_file.cs"),
        "#region agent log\nAgentDebugLog.Log(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_EXPRESSION__);\n#endregion\n",
        FILE_NATIVE,
    ),
    t(
        "swift",
        "file",
        false,
        false,
        SLASH,
        include_str!("templates/swift_file.swift"),
        "// #region agent log\nagentDebugLog(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_EXPRESSION__)\n// #endregion\n",
        FILE_NATIVE,
    ),
    t(
        "rust",
        "file",
        true,
        false,
        SLASH,
        include_str!("templates/rust_file.rs"),
        "// #region agent log\nagent_debug_mode::emit(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_JSON_EXPRESSION__);\n// #endregion\n",
        FILE_SERIALIZED,
    ),
    std(
        t(
            "cpp",
            "file",
            true,
            true,
            SLASH,
            include_str!("templates/cpp_file.cpp"),
            "// #region agent log\nagent_debug_mode::emit(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_JSON_EXPRESSION__);\n// #endregion\n",
            FILE_SERIALIZED,
        ),
        "c++11",
    ),
    std(
        t(
            "c",
            "file",
            true,
            true,
            SLASH,
            include_str!("templates/c_file.c"),
            "// #region agent log\nagent_debug_emit(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_JSON_EXPRESSION__);\n// #endregion\n",
            FILE_SERIALIZED,
        ),
        "c99",
    ),
    t(
        "java",
        "file",
        false,
        false,
        SLASH,
        include_str!("templates/java_file.java"),
        "// #region agent log\nAgentDebugLog.log(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_EXPRESSION__);\n// #endregion\n",
        FILE_NATIVE,
    ),
    t(
        "kotlin",
        "file",
        false,
        false,
        SLASH,
        include_str!("templates/kotlin_file.kt"),
        "// #region agent log\nagentDebugLog(\"__HYPOTHESIS_ID__\", \"__LOCATION__\", \"__MESSAGE__\", __DATA_EXPRESSION__)\n// #endregion\n",
        FILE_NATIVE,
    ),
];

/// Maps user spellings to canonical language names.
pub fn canonical_language(s: &str) -> Option<&'static str> {
    Some(match s.trim().to_ascii_lowercase().as_str() {
        "javascript" | "js" | "node" | "nodejs" => "javascript",
        "typescript" | "ts" => "typescript",
        "python" | "py" | "python3" => "python",
        "go" | "golang" => "go",
        "ruby" | "rb" => "ruby",
        "php" => "php",
        "powershell" | "pwsh" | "ps1" => "powershell",
        "csharp" | "c#" | "cs" | "dotnet" => "csharp",
        "swift" => "swift",
        "rust" | "rs" => "rust",
        "cpp" | "c++" | "cxx" | "cc" => "cpp",
        "c" => "c",
        "java" => "java",
        "kotlin" | "kt" => "kotlin",
        _ => return None,
    })
}

fn supported_list() -> String {
    ALL.iter()
        .map(|t| format!("{}+{}", t.language, t.ingest))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Finds the template for a language + ingest pair, with actionable errors.
pub fn find(language: &str, ingest: &str) -> Result<Template> {
    let ingest_norm = ingest.trim().to_ascii_lowercase();
    if ingest_norm != "http" && ingest_norm != "file" {
        return Err(DmError::new(
            ErrorCode::InvalidArguments,
            format!(
                "`--ingest {}` is not an ingest method",
                ingest.chars().take(40).collect::<String>()
            ),
            "use --ingest http (Ingest URL) or --ingest file (Append Path)",
        ));
    }
    let Some(lang) = canonical_language(language) else {
        return Err(DmError::new(
            ErrorCode::UnsupportedLanguage,
            format!(
                "language `{}` is not supported",
                language.chars().take(40).collect::<String>()
            ),
            format!(
                "supported combinations: {}. For other languages, probe code written in a supported language that runs nearby",
                supported_list()
            ),
        ));
    };
    ALL.iter()
        .find(|t| t.language == lang)
        .filter(|t| t.ingest == ingest_norm)
        .copied()
        .ok_or_else(|| {
            let other = ALL
                .iter()
                .find(|t| t.language == lang)
                .map_or("file", |t| t.ingest);
            DmError::new(
                ErrorCode::UnsupportedLanguage,
                format!("{lang} with --ingest {ingest_norm} is not a supported combination"),
                format!("use: debug-mode template --language {lang} --ingest {other}"),
            )
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_template_is_wrapped_in_markers_and_names_its_placeholders() {
        for t in ALL {
            for text in [t.helper, t.call] {
                assert!(
                    text.trim_start().starts_with(t.region_open),
                    "{} open",
                    t.language
                );
                assert!(
                    text.trim_end().ends_with(t.region_close),
                    "{} close",
                    t.language
                );
            }
            for (name, _) in t.placeholders {
                assert!(
                    t.helper.contains(name) || t.call.contains(name),
                    "{} does not use {name}",
                    t.language
                );
            }
            let target = if t.ingest == "http" {
                "__INGEST_URL__"
            } else {
                "__APPEND_PATH__"
            };
            assert!(t.helper.contains(target), "{}", t.language);
            let data = if t.data_encoding == "serialized-json" {
                "__DATA_JSON_EXPRESSION__"
            } else {
                "__DATA_EXPRESSION__"
            };
            assert!(t.call.contains(data), "{}", t.language);
        }
    }

    #[test]
    fn placement_and_encoding_follow_the_seed() {
        for t in ALL {
            let serialized = matches!(t.language, "rust" | "cpp" | "c");
            assert_eq!(
                t.data_encoding == "serialized-json",
                serialized,
                "{}",
                t.language
            );
            assert_eq!(
                t.helper_placement == "file-start",
                matches!(t.language, "cpp" | "c")
            );
        }
        assert!(
            ALL.iter()
                .find(|t| t.language == "rust")
                .is_some_and(|t| t.helper.contains("pub fn json_string"))
        );
        assert!(ALL.iter().find(|t| t.language == "c").is_some_and(|t| {
            t.helper.contains("agent_debug_json_string") && t.standard == Some("c99")
        }));
        // The serialized-JSON helpers' function is `..._emit`, as in the original.
        for t in ALL.iter().filter(|t| t.data_encoding == "serialized-json") {
            assert!(
                t.call.contains("agent_debug_mode::emit(") || t.call.contains("agent_debug_emit("),
                "{}",
                t.language
            );
        }
    }

    #[test]
    fn rejects_unknown_languages_and_wrong_ingest() {
        assert_eq!(
            find("cobol", "file").unwrap_err().code,
            ErrorCode::UnsupportedLanguage
        );
        assert_eq!(
            find("python", "http").unwrap_err().code,
            ErrorCode::UnsupportedLanguage
        );
        assert_eq!(
            find("python", "carrier-pigeon").unwrap_err().code,
            ErrorCode::InvalidArguments
        );
        assert_eq!(find("C++", "FILE").map(|t| t.language).ok(), Some("cpp"));
    }
}
