//! One parsed Python module: its text, its syntax tree and the mapping from byte offsets to
//! `line:column` (1-based; columns count characters) that every finding uses.
//!
//! Parsing is Ruff's parser (error-recovering: every syntax error of a file is known, the
//! first is reported with its location). Before parsing, the token stream is scanned for
//! nesting depth and statement length, so that neither the parser nor a later recursive walk
//! can exhaust the stack (the analysis also runs on a thread with a large stack, see
//! [`crate::check_path`]).

use crate::error::PythonError;
use crate::files::RawFile;
use ruff_python_ast::token::TokenKind;
use ruff_python_ast::{ModModule, PySourceType};
use ruff_python_parser::{Mode, lexer::lex, parse_unchecked_source};
use ruff_text_size::{Ranged, TextSize};
use serde::Serialize;

/// Deepest nesting of brackets plus indented blocks accepted.
pub const MAX_NESTING: usize = 100;
/// Most tokens in one statement (one logical line). Operator chains (`a + a + …`,
/// `not not …`, `x.a.a…`) nest the syntax tree without brackets; this bounds them.
pub const MAX_STATEMENT_TOKENS: usize = 10_000;

/// A place in a source file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Location {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// A parsed module.
pub struct SourceFile {
    pub shown: String,
    pub module: String,
    pub text: String,
    line_starts: Vec<usize>,
    pub ast: ModModule,
}

impl SourceFile {
    /// Parses a file read by [`crate::files`]; a syntax error is located and reported.
    pub fn parse(raw: RawFile) -> Result<SourceFile, PythonError> {
        let mut line_starts = vec![0];
        line_starts.extend(
            raw.text
                .bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        check_nesting(&raw.text, &raw.shown)?;
        let parsed = parse_unchecked_source(&raw.text, PySourceType::Python);
        let errors: Vec<(TextSize, String)> = parsed
            .errors()
            .iter()
            .map(|e| (e.location.start(), e.error.to_string()))
            .collect();
        let file = SourceFile {
            shown: raw.shown,
            module: raw.module,
            text: raw.text,
            line_starts,
            ast: parsed.into_syntax(),
        };
        if let Some((offset, message)) = errors.first() {
            let at = file.location(*offset);
            let n = errors.len();
            return Err(PythonError::Syntax {
                file: at.file,
                line: at.line,
                column: at.column,
                message: message.clone(),
                more: if n > 1 {
                    format!(" (and {} more)", n - 1)
                } else {
                    String::new()
                },
            });
        }
        Ok(file)
    }
}

/// Refuses source whose brackets and blocks nest deeper than [`MAX_NESTING`].
fn check_nesting(text: &str, shown: &str) -> Result<(), PythonError> {
    {
        let mut lexer = lex(text, Mode::Module);
        let mut depth: usize = 0;
        let mut statement: usize = 0;
        loop {
            let token = lexer.next_token();
            statement += 1;
            if statement > MAX_STATEMENT_TOKENS {
                return Err(PythonError::TooComplex {
                    file: shown.to_string(),
                    max: MAX_STATEMENT_TOKENS,
                });
            }
            match token {
                TokenKind::EndOfFile => break,
                TokenKind::Newline => statement = 0,
                TokenKind::Lpar | TokenKind::Lsqb | TokenKind::Lbrace | TokenKind::Indent => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(PythonError::TooDeep {
                            file: shown.to_string(),
                            max: MAX_NESTING,
                        });
                    }
                }
                TokenKind::Rpar | TokenKind::Rsqb | TokenKind::Rbrace | TokenKind::Dedent => {
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl SourceFile {
    /// The location of a byte offset.
    pub fn location(&self, offset: TextSize) -> Location {
        let off = (u32::from(offset) as usize).min(self.text.len());
        let line = self.line_starts.partition_point(|s| *s <= off).max(1);
        let start = self.line_starts[line - 1];
        let column = self
            .text
            .get(start..off)
            .map(|s| s.chars().count())
            .unwrap_or(0);
        Location {
            file: self.shown.clone(),
            line: line as u32,
            column: column as u32 + 1,
        }
    }

    /// The location where a node starts.
    pub fn at<T: Ranged>(&self, node: &T) -> Location {
        self.location(node.start())
    }

    /// The source text of a node (for messages).
    pub fn snippet<T: Ranged>(&self, node: &T) -> String {
        let r = node.range();
        let text = self
            .text
            .get(usize::from(r.start())..usize::from(r.end()))
            .unwrap_or("");
        let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > 80 {
            let cut: String = one_line.chars().take(77).collect();
            format!("{cut}...")
        } else {
            one_line
        }
    }
}
