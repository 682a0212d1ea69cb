//! A scratch directory for tests (this crate's and others'), removed when dropped. Test
//! support only: it panics when the system temp directory cannot be written.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Dir(pub PathBuf);

impl Dir {
    /// A fresh, empty directory under the system temp dir, unique to this process and call.
    pub fn new(tag: &str) -> Dir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "ndflow-io-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }

    /// The names of the files in it, sorted.
    pub fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
