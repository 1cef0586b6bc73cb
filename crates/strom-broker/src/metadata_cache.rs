//! The broker's current [`MetadataImage`], replaced whole on every publish, so a handler
//! reads one consistent image without holding a lock while it builds its response.

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strom_metadata::{MetadataImage, MetadataRecord};

/// The latest image and the way to publish records into it.
#[derive(Debug)]
pub struct MetadataCache {
    image: RwLock<Arc<MetadataImage>>,
    /// Held by the controller across a change and its publish, so that records reach the
    /// image in the order the changes were made (a topic's removal never before its
    /// creation).
    changes: Mutex<()>,
}

impl MetadataCache {
    pub fn new(image: MetadataImage) -> Self {
        Self {
            image: RwLock::new(Arc::new(image)),
            changes: Mutex::new(()),
        }
    }

    /// The image as of now.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().clone()
    }

    /// Runs one change (a log operation and the publish of its records) alone.
    pub fn change<T>(&self, f: impl FnOnce() -> T) -> T {
        let _serialized = self.changes.lock();
        f()
    }

    /// Applies `records` and makes the result the current image. Publishers are
    /// serialized by the write lock, so no record is lost between two of them.
    pub fn publish(&self, records: &[MetadataRecord]) {
        if records.is_empty() {
            return;
        }
        let mut image = self.image.write();
        *image = Arc::new(image.apply(records));
    }
}
