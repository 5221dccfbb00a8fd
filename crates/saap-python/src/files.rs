//! Finding the Python files to analyse: one `.py` file, or every `.py` file under a package
//! folder, each read whole into memory within bounds (file size, number of files, folder
//! depth). Symbolic links are followed only when they stay inside the package folder.
//!
//! This module reads files and nothing else; it does not parse them.

use crate::error::PythonError;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest Python file read (bytes).
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Most Python files read from one package folder.
pub const MAX_FILES: usize = 2_000;
/// Deepest folder nesting walked below the package folder.
pub const MAX_FOLDER_DEPTH: usize = 32;
/// Folders never walked (virtual environments, caches, VCS data).
const SKIPPED_DIRS: &[&str] = &[
    "__pycache__",
    ".git",
    ".venv",
    "venv",
    ".tox",
    "node_modules",
    ".mypy_cache",
];

/// One Python file as read.
#[derive(Debug, Clone)]
pub struct RawFile {
    /// The path as shown to the user (the argument joined with the relative path).
    pub shown: String,
    /// Dotted module name: the package folder's name, then the path below it
    /// (`pkg/events.py` → `pkg.events`, `pkg/__init__.py` → `pkg`); a single file is its stem.
    pub module: String,
    pub text: String,
}

/// Reads `path`: a `.py` file, or a folder whose `.py` files are read (sorted by path).
pub fn read_input(path: &Path) -> Result<Vec<RawFile>, PythonError> {
    let meta = std::fs::metadata(path).map_err(|source| PythonError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_file() {
        if path.extension().is_none_or(|e| e != "py") {
            return Err(PythonError::NotPython {
                path: path.to_path_buf(),
            });
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        return Ok(vec![read_one(path, path.display().to_string(), stem)?]);
    }
    if !meta.is_dir() {
        return Err(PythonError::NotPython {
            path: path.to_path_buf(),
        });
    }
    let root = std::fs::canonicalize(path).map_err(|source| PythonError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let package = root
        .file_name()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut found = Vec::new();
    let mut walker = Walker {
        root: &root,
        shown_root: path,
        seen_dirs: std::collections::HashSet::new(),
    };
    walker.walk(&root, Path::new(""), 0, &mut found)?;
    found.sort();
    let mut out = Vec::with_capacity(found.len());
    for rel in found {
        let shown = path.join(&rel).display().to_string();
        let mut parts: Vec<String> = vec![package.clone()];
        for c in rel.components() {
            parts.push(c.as_os_str().to_string_lossy().to_string());
        }
        if let Some(last) = parts.last_mut() {
            *last = last.trim_end_matches(".py").to_string();
            if last == "__init__" {
                parts.pop();
            }
        }
        out.push(read_one(&root.join(&rel), shown, parts.join("."))?);
    }
    Ok(out)
}

/// Walks the package folder; a folder reached twice (through a link inside the package) is
/// walked once.
struct Walker<'a> {
    root: &'a Path,
    shown_root: &'a Path,
    seen_dirs: std::collections::HashSet<PathBuf>,
}

impl Walker<'_> {
    fn walk(
        &mut self,
        dir: &Path,
        rel: &Path,
        depth: usize,
        found: &mut Vec<PathBuf>,
    ) -> Result<(), PythonError> {
        if depth > MAX_FOLDER_DEPTH {
            return Ok(());
        }
        let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        if !self.seen_dirs.insert(canonical) {
            return Ok(());
        }
        let shown_root = self.shown_root;
        let unreadable = |source| PythonError::Unreadable {
            path: shown_root.join(rel),
            source,
        };
        let entries = std::fs::read_dir(dir).map_err(unreadable)?;
        for entry in entries {
            let entry = entry.map_err(unreadable)?;
            let name = entry.file_name().to_string_lossy().to_string();
            let path = entry.path();
            let mut meta = entry.metadata().map_err(unreadable)?;
            if meta.file_type().is_symlink() {
                // Followed only when the target stays inside the package folder.
                match std::fs::canonicalize(&path) {
                    Ok(target) if target.starts_with(self.root) => {
                        meta = std::fs::metadata(&target).map_err(unreadable)?;
                    }
                    _ => continue,
                }
            }
            let child = rel.join(&name);
            if meta.is_dir() {
                if SKIPPED_DIRS.contains(&name.as_str()) || name.starts_with('.') {
                    continue;
                }
                self.walk(&path, &child, depth + 1, found)?;
            } else if meta.is_file() && name.ends_with(".py") {
                if found.len() >= MAX_FILES {
                    return Err(PythonError::TooManyFiles {
                        path: shown_root.to_path_buf(),
                        max: MAX_FILES,
                    });
                }
                found.push(child);
            }
        }
        Ok(())
    }
}

fn read_one(path: &Path, shown: String, module: String) -> Result<RawFile, PythonError> {
    let file = std::fs::File::open(path).map_err(|source| PythonError::Unreadable {
        path: PathBuf::from(&shown),
        source,
    })?;
    let mut buf = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|source| PythonError::Unreadable {
            path: PathBuf::from(&shown),
            source,
        })?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Err(PythonError::FileTooLarge {
            path: PathBuf::from(&shown),
            max: MAX_FILE_BYTES,
        });
    }
    let text = String::from_utf8(buf).map_err(|_| PythonError::NotUtf8 {
        path: PathBuf::from(&shown),
    })?;
    Ok(RawFile {
        shown,
        module,
        text,
    })
}
