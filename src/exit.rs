//! The exit codes natsprobe promises (`natsprobe_core::exit`, where the verdicts map to
//! them); the README's table is tested against them here.

pub use natsprobe_core::exit::Exit;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_table() {
        let table: Vec<(u8, &str)> = Exit::ALL.iter().map(|e| (e.code(), e.meaning())).collect();
        assert_eq!(
            table,
            [
                (0, "healthy"),
                (1, "unhealthy"),
                (2, "usage or configuration error"),
                (3, "could not evaluate"),
            ]
        );
    }

    /// ARCHITECTURE.md maps the tree: every source file has its row.
    #[test]
    fn architecture_names_every_module() {
        fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path.to_string_lossy().to_string());
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        walk(&root.join("src"), &mut files);
        walk(&root.join("core/src"), &mut files);
        let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
        for file in files {
            let relative = file.strip_prefix(&format!("{}/", root.display())).unwrap();
            assert!(
                map.contains(&format!("| `{relative}` |")),
                "ARCHITECTURE.md has no row for {relative}"
            );
        }
    }

    #[test]
    fn readme_documents_every_code() {
        let readme = include_str!("../README.md");
        for exit in Exit::ALL {
            let row = format!("| {} | {} |", exit.code(), exit.meaning());
            assert!(
                readme.contains(&row),
                "README lacks the exit code row `{row}`"
            );
        }
    }
}
