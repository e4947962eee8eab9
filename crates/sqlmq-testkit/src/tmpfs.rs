//! [`Tmpfs`]: a small file system of the test's own, to fill up (a full disk without touching
//! the machine's).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of a fixed size mounted on a fresh directory; unmounted and removed on drop. Needs
/// root (`mount`), as the suite has in CI.
///
/// ```no_run
/// let fs = sqlmq_testkit::Tmpfs::mount(4);
/// std::fs::write(fs.path().join("f"), b"x").unwrap();
/// ```
#[derive(Debug)]
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mount a tmpfs of `size_mb` MiB (panics with the reason when it cannot).
    pub fn mount(size_mb: u32) -> Tmpfs {
        let dir = std::env::temp_dir().join(format!(
            "sqlmq-tmpfs-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "cannot mount a {size_mb} MiB tmpfs on {} (this test fills a disk: run it as root)",
            dir.display()
        );
        Tmpfs { dir }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
