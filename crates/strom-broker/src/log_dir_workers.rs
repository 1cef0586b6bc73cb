//! Running one piece of work per partition on `num.recovery.threads.per.data.dir` threads
//! per log dir, as Kafka does at start-up and shutdown: partitions are independent, and
//! at thousands of partitions one thread doing them one after another is what made
//! start-up and shutdown take seconds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Runs `work` on every item, `threads_per_dir` threads per log dir (`dir_of` tells which
/// dir an item belongs to), and returns the results in the items' order.
pub fn run<I: Sync, R: Send>(
    items: &[I],
    dirs: &[PathBuf],
    threads_per_dir: usize,
    dir_of: impl Fn(&I) -> &Path + Sync,
    work: impl Fn(&I) -> R + Sync,
) -> Vec<R> {
    let results: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    let mut per_dir: Vec<Vec<usize>> = vec![Vec::new(); dirs.len().max(1)];
    for (i, item) in items.iter().enumerate() {
        let dir = dirs
            .iter()
            .position(|d| dir_of(item).starts_with(d))
            .unwrap_or(0);
        per_dir[dir].push(i);
    }
    let cursors: Vec<AtomicUsize> = per_dir.iter().map(|_| AtomicUsize::new(0)).collect();
    std::thread::scope(|scope| {
        for (indexes, next) in per_dir
            .iter()
            .zip(&cursors)
            .filter(|(ix, _)| !ix.is_empty())
        {
            for _ in 0..threads_per_dir.clamp(1, indexes.len()) {
                let (work, results) = (&work, &results);
                scope.spawn(move || loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&i) = indexes.get(n) else { return };
                    *results[i].lock() = Some(work(&items[i]));
                });
            }
        }
    });
    results
        .into_iter()
        .map(|r| r.into_inner().expect("every item ran"))
        .collect()
}
