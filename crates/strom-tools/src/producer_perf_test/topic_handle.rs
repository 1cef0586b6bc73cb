//! Producing through a librdkafka topic handle, the way rdkafka_performance does.
//!
//! `BaseProducer::send` allocates a C string for the topic name and makes librdkafka look
//! the topic up by name on every record; at a million records a second that is a visible
//! share of the load generator's time. A topic handle created once avoids both. Delivery
//! reports still flow through the `BaseProducer`'s context as usual.

use std::ffi::{c_void, CString};

use anyhow::{anyhow, Result};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka_sys as rdsys;

use super::context::PerfContext;

/// librdkafka's `RD_KAFKA_PARTITION_UA` (a macro the bindings lack): let the partitioner pick.
const PARTITION_UNASSIGNED: i32 = -1;

/// Why one record was not accepted.
pub enum SendError {
    /// librdkafka's queue is full: serve delivery reports and retry.
    QueueFull,
    Other(RDKafkaErrorCode),
}

/// A `rd_kafka_topic_t` bound to the producer that created it; destroyed on drop.
pub struct TopicHandle<'p> {
    rkt: *mut rdsys::rd_kafka_topic_t,
    _producer: &'p BaseProducer<PerfContext>,
}

impl<'p> TopicHandle<'p> {
    pub fn new(producer: &'p BaseProducer<PerfContext>, topic: &str) -> Result<Self> {
        let name = CString::new(topic).map_err(|_| anyhow!("topic name contains a NUL byte"))?;
        // SAFETY: the client pointer is valid while `producer` lives, which the lifetime
        // `'p` guarantees for the handle; a null topic conf means the default one.
        let rkt = unsafe {
            rdsys::rd_kafka_topic_new(
                producer.client().native_ptr(),
                name.as_ptr(),
                std::ptr::null_mut(),
            )
        };
        if rkt.is_null() {
            // SAFETY: reads librdkafka's thread-local last error.
            let code: RDKafkaErrorCode = unsafe { rdsys::rd_kafka_last_error() }.into();
            return Err(anyhow!("cannot create a handle for topic {topic}: {code}"));
        }
        Ok(Self {
            rkt,
            _producer: producer,
        })
    }

    /// Hands one record to librdkafka (copied), with the record index as delivery opaque.
    #[inline]
    pub fn produce(&self, value: &[u8], key: Option<&[u8]>, index: usize) -> Result<(), SendError> {
        let (key_ptr, key_len) = key.map_or((std::ptr::null(), 0), |k| (k.as_ptr(), k.len()));
        // SAFETY: `rkt` is live; RD_KAFKA_MSG_F_COPY makes librdkafka copy value and key
        // before returning, so the borrowed slices need not outlive the call. The opaque is
        // an integer, never dereferenced.
        let rc = unsafe {
            rdsys::rd_kafka_produce(
                self.rkt,
                PARTITION_UNASSIGNED,
                rdsys::RD_KAFKA_MSG_F_COPY,
                value.as_ptr() as *mut c_void,
                value.len(),
                key_ptr as *const c_void,
                key_len,
                index as *mut c_void,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: reads librdkafka's thread-local last error, set by the failed produce.
        let code: RDKafkaErrorCode = unsafe { rdsys::rd_kafka_last_error() }.into();
        match code {
            RDKafkaErrorCode::QueueFull => Err(SendError::QueueFull),
            other => Err(SendError::Other(other)),
        }
    }
}

impl Drop for TopicHandle<'_> {
    fn drop(&mut self) {
        // SAFETY: created by rd_kafka_topic_new and destroyed exactly once, before the
        // producer (borrowed for `'p`) is dropped.
        unsafe { rdsys::rd_kafka_topic_destroy(self.rkt) };
    }
}
