//! Files and directories in a tree a tenant controls, reached without following a link.
//!
//! A tenant's tools write its home, working and temporary directories as they please:
//! anything there may be a symbolic link planted to send the gateway elsewhere, swapped in
//! between a check and a use. The gateway (outside the sandbox, with its own rights) therefore
//! never hands such a path to the kernel whole: it opens a directory it owns ([`Dir::open`]),
//! then walks down one component at a time, each opened relative to the last with
//! `O_NOFOLLOW | O_DIRECTORY` ([`Dir::dir`]). A link at any level is an error (`ELOOP` or
//! `ENOTDIR`), whoever put it there and whenever. Files are created with
//! `O_CREAT | O_EXCL | O_NOFOLLOW` under a name of their own and renamed into place inside
//! the same directory handle ([`Dir::write_atomically`]): a link at the final name is
//! replaced, never written through. Hard links need no more care: a new file is a new inode,
//! and the rename replaces a directory entry, not the file it named.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, CWD};

/// An open directory: the root of walks that follow no link.
#[derive(Debug)]
pub struct Dir(OwnedFd);

impl Dir {
    /// Opens the directory `path`, which must not itself be a link. Its parents are looked up
    /// as usual: `path` is one the gateway owns (its state directory, a tenant's directory,
    /// never a path inside one).
    ///
    /// # Errors
    /// When `path` is missing, not a directory, or a link.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let fd = rustix::fs::openat(CWD, path, dir_flags(), Mode::empty())?;
        Ok(Dir(fd))
    }

    /// The directory `relative` below this one (made owner-only when missing and `create`),
    /// reached one component at a time without following a link.
    ///
    /// # Errors
    /// When `relative` has a component other than a plain name (`..`, `/`), when a component
    /// is a link or not a directory, or when a missing one cannot be made.
    pub fn dir(&self, relative: &Path, create: bool) -> io::Result<Dir> {
        let mut names = components(relative)?.into_iter();
        let Some(first) = names.next() else {
            let fd = rustix::fs::openat(&self.0, ".", dir_flags(), Mode::empty())?;
            return Ok(Dir(fd));
        };
        let mut dir = self.child(first, create)?;
        for name in names {
            dir = dir.child(name, create)?;
        }
        Ok(dir)
    }

    /// The directory `name` right below this one.
    fn child(&self, name: &OsStr, create: bool) -> io::Result<Dir> {
        if create {
            match rustix::fs::mkdirat(&self.0, name, Mode::RWXU) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let fd = rustix::fs::openat(&self.0, name, dir_flags(), Mode::empty())?;
        Ok(Dir(fd))
    }

    /// Replaces the file `name` of this directory with `bytes` all at once, owner-only: a new
    /// file of a name of its own, synced, renamed over `name`, then the directory synced.
    /// Whatever `name` was (a link included) is replaced, not followed.
    ///
    /// # Errors
    /// When `name` is not a plain name, or the file cannot be written or renamed (`name` a
    /// directory, say).
    pub fn write_atomically(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if components(Path::new(name))?.len() != 1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a file name: {name}"),
            ));
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = format!(".{name}.{}.{n}.tmp", std::process::id());
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        let fd = match rustix::fs::openat(
            &self.0,
            &tmp,
            flags | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        ) {
            // Put there to be in the way: the entry goes (a link is removed, not followed).
            Err(rustix::io::Errno::EXIST) => {
                rustix::fs::unlinkat(&self.0, &tmp, AtFlags::empty())?;
                rustix::fs::openat(
                    &self.0,
                    &tmp,
                    flags | OFlags::CLOEXEC,
                    Mode::RUSR | Mode::WUSR,
                )?
            }
            other => other?,
        };
        let mut file = std::fs::File::from(fd);
        let written = file.write_all(bytes).and_then(|()| file.sync_data());
        let renamed = written.and_then(|()| {
            rustix::fs::renameat(&self.0, &tmp, &self.0, name).map_err(io::Error::from)
        });
        if let Err(e) = renamed {
            let _ = rustix::fs::unlinkat(&self.0, &tmp, AtFlags::empty());
            return Err(e);
        }
        rustix::fs::fsync(&self.0)?;
        Ok(())
    }

    /// Whether this directory is a directory on the same device and inode as `other`'s (one
    /// handle of the two may have been opened by path after the other).
    pub fn same_as(&self, other: &Dir) -> bool {
        match (rustix::fs::fstat(&self.0), rustix::fs::fstat(&other.0)) {
            (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
            _ => false,
        }
    }
}

/// The flags every directory is opened with.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// The plain names `relative` is made of (`.` components dropped).
fn components(relative: &Path) -> io::Result<Vec<&OsStr>> {
    relative
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a path below a directory: {}", relative.display()),
            )),
        })
        .collect()
}

/// Makes the directory `path` (owner-only, its missing parents too) below `root`, which the
/// gateway owns: `path` must lie inside `root`, and nothing between them may be a link.
///
/// # Errors
/// When `path` is not inside `root`, a component is a link or not a directory, or a missing
/// one cannot be made.
pub fn make_dir_below(root: &Path, path: &Path) -> io::Result<Dir> {
    let relative = path.strip_prefix(root).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not inside {}", path.display(), root.display()),
        )
    })?;
    Dir::open(root)?.dir(relative, true)
}

/// Writes `bytes` to the file `path` below `root` (its missing directories made owner-only),
/// with no link followed anywhere below `root`.
///
/// # Errors
/// As [`make_dir_below`] and [`Dir::write_atomically`].
pub fn write_below(root: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(OsStr::to_str))
    else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a file: {}", path.display()),
        ));
    };
    make_dir_below(root, parent)?.write_atomically(name, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_file_is_written_below_its_root_and_replaces_what_was_there() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("a/b/c.jsonl");
        write_below(root.path(), &path, b"one").unwrap();
        write_below(root.path(), &path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(root.path().join("a/b"))
            .unwrap()
            .collect();
        assert_eq!(names.len(), 1, "no temporary file is left");
    }

    #[test]
    fn a_link_at_any_level_is_never_followed() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        std::fs::write(&target, "untouched").unwrap();
        // A link as a directory on the way.
        std::fs::create_dir(root.path().join("a")).unwrap();
        symlink(outside.path(), root.path().join("a/b")).unwrap();
        let err = write_below(root.path(), &root.path().join("a/b/victim"), b"x").unwrap_err();
        let refused =
            [rustix::io::Errno::LOOP, rustix::io::Errno::NOTDIR].map(|e| e.raw_os_error());
        assert!(refused.contains(&err.raw_os_error().unwrap_or(0)), "{err}");
        // A link at the file's own name: replaced, the target untouched.
        std::fs::create_dir(root.path().join("c")).unwrap();
        symlink(&target, root.path().join("c/file")).unwrap();
        write_below(root.path(), &root.path().join("c/file"), b"mine").unwrap();
        assert!(!root.path().join("c/file").is_symlink());
        // A link at every temporary name the writer might pick: removed, not followed.
        for n in 0..64 {
            let name = format!(".file.{}.{n}.tmp", std::process::id());
            let _ = symlink(&target, root.path().join("c").join(name));
        }
        write_below(root.path(), &root.path().join("c/file"), b"again").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
        // A link as the root's child made to look like a plain directory name.
        symlink(outside.path(), root.path().join("home")).unwrap();
        assert!(make_dir_below(root.path(), &root.path().join("home/x")).is_err());
        assert!(!outside.path().join("x").exists());
        // A hard link at the file's own name: the entry is replaced, the file it shared with
        // another name is not written to.
        std::fs::remove_file(root.path().join("c/file")).unwrap();
        std::fs::hard_link(&target, root.path().join("c/file")).unwrap();
        write_below(root.path(), &root.path().join("c/file"), b"linked").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
        assert_eq!(
            std::fs::read(root.path().join("c/file")).unwrap(),
            b"linked"
        );
        // Paths that climb out.
        assert!(make_dir_below(root.path(), &root.path().join("c/../../x")).is_err());
        assert!(make_dir_below(root.path(), outside.path()).is_err());
    }
}
