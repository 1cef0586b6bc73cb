//! Batch buffers kept for reuse once their batch is acknowledged, as Kafka's producer
//! keeps freed `batch.size` buffers in its `BufferPool`.
//!
//! Without it every batch was a fresh allocation, and at hundreds of batches a second the
//! allocator handed back memory the kernel had to fault in and zero again: a profile of
//! `producer-perf-test --client native` put a quarter of the tool's CPU in page faults
//! under the copy of each record into its batch. A buffer that comes back keeps its pages.

use bytes::Bytes;

/// Spare record buffers, holding at most `limit` bytes of capacity.
pub struct BufferPool {
    buffers: Vec<Vec<u8>>,
    held: usize,
    limit: usize,
}

impl BufferPool {
    /// A pool holding at most `limit` bytes of spare buffers (the producer's
    /// `buffer.memory`, which bounds what it has in flight anyway).
    pub fn new(limit: usize) -> Self {
        Self {
            buffers: Vec::new(),
            held: 0,
            limit,
        }
    }

    /// A buffer of at least `capacity` bytes, a spare one when there is one. A spare one
    /// still holds its last batch, which a [`strom_wire::BatchBuilder`] overwrites: it
    /// need not zero those bytes again.
    pub fn buffer(&mut self, capacity: usize) -> Vec<u8> {
        match self.buffers.pop() {
            Some(mut buffer) => {
                self.held -= buffer.capacity();
                buffer.reserve(capacity.saturating_sub(buffer.len()));
                buffer
            }
            None => Vec::with_capacity(capacity),
        }
    }

    /// Takes back a finished batch's bytes. They are reused only when nothing else holds
    /// them (a request still being written would); otherwise they are dropped, as they are
    /// when the pool is full.
    pub fn give_back(&mut self, bytes: Bytes) {
        if let Ok(bytes) = bytes.try_into_mut() {
            let buffer = Vec::from(bytes);
            if self.held + buffer.capacity() <= self.limit {
                self.held += buffer.capacity();
                self.buffers.push(buffer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acknowledged_batch_buffer_is_handed_out_again_without_a_new_allocation() {
        let mut pool = BufferPool::new(1 << 20);
        let mut buffer = pool.buffer(16_384);
        buffer.extend_from_slice(&[7; 10_000]);
        let address = buffer.as_ptr();
        pool.give_back(Bytes::from(buffer));
        let again = pool.buffer(16_384);
        assert_eq!(again.as_ptr(), address);
        assert!(again.capacity() >= 16_384);
    }

    #[test]
    fn a_buffer_still_shared_or_beyond_the_limit_is_not_kept() {
        let mut pool = BufferPool::new(20_000);
        let shared = Bytes::from(vec![1u8; 100]);
        let _request = shared.clone();
        pool.give_back(shared);
        assert_eq!(pool.buffers.len(), 0);
        pool.give_back(Bytes::from(Vec::with_capacity(16_384)));
        pool.give_back(Bytes::from(Vec::with_capacity(16_384)));
        assert_eq!(
            pool.buffers.len(),
            1,
            "a second buffer would exceed 20,000 bytes"
        );
    }
}
