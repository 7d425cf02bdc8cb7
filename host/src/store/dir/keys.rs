//! What [`DirStore`](super::DirStore) keeps of tenant keys: `<root>/keys/<id>.json`, one
//! record each (a digest, label and quota, never a key), replaced whole.

use std::io;
use std::path::Path;

use super::super::{private_dir, write_atomically};

/// Writes `json` to `file` (made private, replaced whole), or removes it for `None`.
pub(super) fn save_or_remove(file: &Path, json: Option<String>) -> io::Result<()> {
    match json {
        Some(json) => {
            if let Some(dir) = file.parent() {
                private_dir(dir)?;
            }
            write_atomically(file, json.as_bytes())
        }
        None => match std::fs::remove_file(file) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

/// Every `<stem>.json` file in `dir` (none when it does not exist): its stem and contents; a
/// temporary file of a write cut short (`.<name>.tmp`) is not one.
pub(super) fn read_json_files(dir: &Path) -> io::Result<Vec<(String, String)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name
            .strip_suffix(".json")
            .filter(|_| !name.starts_with('.'))
        {
            out.push((stem.to_owned(), std::fs::read_to_string(entry.path())?));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_kept_replaced_and_forgotten() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("keys");
        assert!(read_json_files(&dir).unwrap().is_empty());
        save_or_remove(&dir.join("ka.json"), Some("{\"id\":\"ka\"}".into())).unwrap();
        save_or_remove(&dir.join("kb.json"), Some("{\"id\":\"kb\"}".into())).unwrap();
        save_or_remove(
            &dir.join("ka.json"),
            Some("{\"id\":\"ka\",\"label\":\"x\"}".into()),
        )
        .unwrap();
        let mut kept: Vec<String> = (read_json_files(&dir).unwrap().into_iter())
            .map(|(_, json)| json)
            .collect();
        kept.sort();
        assert_eq!(kept, ["{\"id\":\"ka\",\"label\":\"x\"}", "{\"id\":\"kb\"}"]);
        save_or_remove(&dir.join("kb.json"), None).unwrap();
        save_or_remove(&dir.join("kb.json"), None).unwrap();
        assert_eq!(read_json_files(&dir).unwrap().len(), 1);
    }
}
