//! The broker's current [`MetadataImage`], replaced whole on every publish, so a handler
//! reads one consistent image without holding a lock while it builds its response. The
//! metadata loader publishes the images it builds from the quorum's records.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use strom_metadata::MetadataImage;
use tokio::sync::watch;

/// The latest image.
#[derive(Debug)]
pub struct MetadataCache {
    image: RwLock<Arc<MetadataImage>>,
    /// The offset of the published image, for those waiting to see a change.
    offset: watch::Sender<i64>,
}

impl MetadataCache {
    pub fn new(image: MetadataImage) -> Self {
        let offset = image.offset;
        Self {
            image: RwLock::new(Arc::new(image)),
            offset: watch::channel(offset).0,
        }
    }

    /// The image as of now.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().clone()
    }

    /// Makes `image` the current image.
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
