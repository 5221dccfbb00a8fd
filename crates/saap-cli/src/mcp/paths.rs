//! The root folder tools read files from (`saap mcp --root`), and the resolution of a tool's
//! path argument under it: relative paths only, no way out (no `..` past the root, no
//! symlink that leads outside), the file must exist.
//!
//! Must not read or write the files; it only says which path a child may be given.

use std::path::{Component, Path, PathBuf};

/// The canonical root folder.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
}

/// The longest path argument accepted, in bytes.
const MAX_PATH_BYTES: usize = 4096;

impl Root {
    /// The root folder, canonicalized; an error message when it is not a readable folder.
    pub fn new(dir: &Path) -> Result<Root, String> {
        let canon = dir.canonicalize().map_err(|e| {
            format!(
                "--root `{}` cannot be used: {e}; give an existing folder",
                dir.display()
            )
        })?;
        if !canon.is_dir() {
            return Err(format!(
                "--root `{}` is not a folder; give the folder your specs and agent source are in",
                dir.display()
            ));
        }
        Ok(Root { dir: canon })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `arg` resolved under the root, returned relative to it (symlinks resolved), or why
    /// it is refused.
    pub fn resolve(&self, arg: &str) -> Result<PathBuf, String> {
        if arg.is_empty() || arg.len() > MAX_PATH_BYTES || arg.contains('\0') {
            return Err(format!(
                "`path` must be a non-empty relative path of at most {MAX_PATH_BYTES} bytes"
            ));
        }
        let p = Path::new(arg);
        if p.is_absolute() || p.components().any(|c| matches!(c, Component::Prefix(_))) {
            return Err(format!(
                "`path` `{arg}` is absolute; give it relative to the server's root {} (the folder `saap mcp --root` names)",
                self.dir.display()
            ));
        }
        let joined = self.dir.join(p);
        let canon = joined.canonicalize().map_err(|e| {
            format!(
                "`path` `{arg}` cannot be opened under the root {}: {e}; list the folder to find the file",
                self.dir.display()
            )
        })?;
        match canon.strip_prefix(&self.dir) {
            Ok(rel) if rel.as_os_str().is_empty() => Ok(PathBuf::from(".")),
            Ok(rel) => Ok(rel.to_path_buf()),
            Err(_) => Err(format!(
                "`path` `{arg}` leads outside the server's root {} (through `..` or a symlink); only files under the root are read — restart `saap mcp --root DIR` with a folder that holds it",
                self.dir.display()
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_under_the_root() {
        let outer = tempfile::tempdir().unwrap();
        let root_dir = outer.path().join("root");
        std::fs::create_dir_all(root_dir.join("specs")).unwrap();
        std::fs::write(root_dir.join("specs/a.yaml"), "x").unwrap();
        std::fs::write(outer.path().join("secret.yaml"), "x").unwrap();
        let root = Root::new(&root_dir).unwrap();
        assert_eq!(
            root.resolve("specs/a.yaml").unwrap(),
            PathBuf::from("specs/a.yaml")
        );
        assert_eq!(
            root.resolve("specs/../specs/a.yaml").unwrap(),
            PathBuf::from("specs/a.yaml")
        );
        assert!(
            root.resolve("../secret.yaml")
                .unwrap_err()
                .contains("outside")
        );
        assert!(
            root.resolve("/etc/passwd")
                .unwrap_err()
                .contains("absolute")
        );
        assert!(
            root.resolve("nope.yaml")
                .unwrap_err()
                .contains("cannot be opened")
        );
        assert!(root.resolve("").is_err());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(
                outer.path().join("secret.yaml"),
                root_dir.join("link.yaml"),
            )
            .unwrap();
            assert!(root.resolve("link.yaml").unwrap_err().contains("outside"));
        }
    }
}
