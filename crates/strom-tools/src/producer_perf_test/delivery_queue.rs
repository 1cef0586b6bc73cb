//! Serving delivery reports straight from librdkafka's event queue.
//!
//! rdkafka's `BaseProducer::poll` wraps every reported message in a `BorrowedMessage`
//! holding an `Arc` of its event, and the statistics then read the clock once per message.
//! A delivery-report event carries every message of one produce response, all delivered at
//! the same instant, so this reads the clock and takes the statistics lock once per event,
//! and hands the context plain indexes. At two million records a second that is the difference between the load
//! generator and librdkafka's own rdkafka_performance.

use std::time::{Duration, Instant};

use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka_sys as rdsys;

use super::context::PerfContext;

/// Messages taken from one event per call into librdkafka.
const BATCH: usize = 1024;

/// The producer's main event queue, where librdkafka posts delivery reports.
pub struct DeliveryQueue<'p> {
    queue: *mut rdsys::rd_kafka_queue_t,
    producer: &'p BaseProducer<PerfContext>,
    messages: Vec<*mut rdsys::rd_kafka_message_t>,
}

impl<'p> DeliveryQueue<'p> {
    pub fn new(producer: &'p BaseProducer<PerfContext>) -> Self {
        // SAFETY: the client pointer is valid while `producer` lives (lifetime `'p`); the
        // returned queue reference is released in `drop`.
        let queue = unsafe { rdsys::rd_kafka_queue_get_main(producer.client().native_ptr()) };
        Self {
            queue,
            producer,
            messages: vec![std::ptr::null_mut(); BATCH],
        }
    }

    /// Serves every ready event, waiting up to `wait` for the first one.
    pub fn serve(&mut self, wait: Duration) {
        let mut timeout_ms = wait.as_millis().min(i32::MAX as u128) as i32;
        loop {
            // SAFETY: `queue` is live until drop.
            let event = unsafe { rdsys::rd_kafka_queue_poll(self.queue, timeout_ms) };
            if event.is_null() {
                return;
            }
            timeout_ms = 0;
            // SAFETY: `event` is a live event until destroyed below.
            match unsafe { rdsys::rd_kafka_event_type(event) } {
                rdsys::RD_KAFKA_EVENT_DR => self.deliver(event),
                rdsys::RD_KAFKA_EVENT_ERROR => {
                    // SAFETY: error events carry a code and a NUL-terminated string.
                    let (code, reason) = unsafe {
                        (
                            RDKafkaErrorCode::from(rdsys::rd_kafka_event_error(event)),
                            std::ffi::CStr::from_ptr(rdsys::rd_kafka_event_error_string(event))
                                .to_string_lossy()
                                .into_owned(),
                        )
                    };
                    eprintln!("WARNING: producer error: {code}: {reason}");
                }
                _ => {}
            }
            // SAFETY: each polled event is destroyed exactly once.
            unsafe { rdsys::rd_kafka_event_destroy(event) };
        }
    }

    fn deliver(&mut self, event: *mut rdsys::rd_kafka_event_t) {
        let context = self.producer.context();
        loop {
            // SAFETY: `messages` has room for BATCH pointers; librdkafka fills at most that
            // many and advances its own cursor, so repeated calls drain the event.
            let n = unsafe {
                rdsys::rd_kafka_event_message_array(
                    event,
                    self.messages.as_mut_ptr() as *mut *const rdsys::rd_kafka_message_t,
                    BATCH,
                )
            };
            if n == 0 {
                return;
            }
            let now = Instant::now();
            let mut recorder = context.recorder.lock();
            for &message in &self.messages[..n] {
                // SAFETY: the messages belong to `event`, alive until it is destroyed; the
                // opaque is the record index the send loop passed, never a pointer.
                let (err, index, len) =
                    unsafe { ((*message).err, (*message)._private as usize, (*message).len) };
                let code = RDKafkaErrorCode::from(err);
                let result = match code {
                    RDKafkaErrorCode::NoError => Ok(len),
                    _ => Err(&code as &dyn std::fmt::Display),
                };
                context.on_delivery(&mut recorder, index, result, now);
            }
            recorder.add_progress(n as u64);
        }
    }
}

impl Drop for DeliveryQueue<'_> {
    fn drop(&mut self) {
        // SAFETY: obtained from rd_kafka_queue_get_main and released exactly once.
        unsafe { rdsys::rd_kafka_queue_destroy(self.queue) };
    }
}
