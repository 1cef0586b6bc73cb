//! The broker's current [`MetadataImage`], replaced whole on every publish, so a handler
//! reads one consistent image without holding a lock while it builds its response. A
//! standalone node publishes records of its own controller; a broker of a cluster
//! publishes the images its metadata loader builds from the quorum's records.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use strom_metadata::{MetadataImage, MetadataRecord};
use tokio::sync::watch;

use crate::log_manager::off_async_workers;

/// The latest image and the way to publish records into it.
#[derive(Debug)]
pub struct MetadataCache {
    image: RwLock<Arc<MetadataImage>>,
    /// Held by the controller across a change and its publish, so that records reach the
    /// image in the order the changes were made (a topic's removal never before its
    /// creation).
    changes: Mutex<()>,
    /// The offset of the published image, for those waiting to see a change.
    offset: watch::Sender<i64>,
}

impl MetadataCache {
    pub fn new(image: MetadataImage) -> Self {
        let offset = image.offset;
        Self {
            image: RwLock::new(Arc::new(image)),
            changes: Mutex::new(()),
            offset: watch::channel(offset).0,
        }
    }

    /// The image as of now.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().clone()
    }

    /// Runs one change (a log operation and the publish of its records) alone, off the
    /// async workers: it waits for the changes before it, and for start-up to have opened
    /// every partition.
    pub fn change<T>(&self, f: impl FnOnce() -> T) -> T {
        off_async_workers(|| {
            let _serialized = self.changes.lock();
            f()
        })
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

    /// Makes `image` the current image (a cluster broker's loader).
    pub fn publish_image(&self, image: Arc<MetadataImage>) {
        let offset = image.offset;
        *self.image.write() = image;
        self.offset.send_replace(offset);
    }

    /// A receiver of the published offset.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.offset.subscribe()
    }

    /// Waits until the image is at `offset` or later, or `timeout` passed.
    pub async fn wait_for_offset(&self, offset: i64, timeout: Duration) {
        let mut rx = self.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|o| *o >= offset)).await;
    }
}
