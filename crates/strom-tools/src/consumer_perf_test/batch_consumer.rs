//! A librdkafka group consumer that hands out records a batch at a time.
//!
//! Kafka's consumer-perf-test polls up to `max.poll.records` (500) records per call. rdkafka's
//! `BaseConsumer` offers one record per call, each a queue operation, a clock reading and an
//! `Arc`; on this machine that held the tool near 1.7 M records/s while librdkafka's batch
//! call (`rd_kafka_consume_batch_queue`) reaches twice that. The batch call serves
//! rebalances itself, through a rebalance callback, which rdkafka's consumer does not set
//! (it receives rebalances as events), so this consumer is built on librdkafka directly:
//! configuration from rdkafka's `ClientConfig`, a rebalance callback that assigns as
//! librdkafka's default would (eagerly or incrementally, per the group's protocol) and
//! times the joins as Kafka's tool does, and a statistics callback for `--print-metrics`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{anyhow, Context, Result};
use parking_lot::Mutex;
use rdkafka::config::ClientConfig;
use rdkafka_sys as rdsys;
use rdsys::rd_kafka_resp_err_t as Err;

use strom_client::consumer::Record;

use super::run::wall_ms;

/// What the callbacks record, owned by the consumer and handed to librdkafka as opaque.
#[derive(Default)]
struct CallbackState {
    /// When the current join began: the start, or the last revocation (Kafka's listener).
    join_start_ms: AtomicU64,
    /// Sum of the join times, as Kafka's `joinTimeMs`.
    join_total_ms: AtomicU64,
    stats: Mutex<Option<Vec<u8>>>,
}

/// A subscribed group consumer.
pub struct BatchConsumer {
    rk: *mut rdsys::rd_kafka_t,
    queue: *mut rdsys::rd_kafka_queue_t,
    state: Box<CallbackState>,
    batch: Vec<*mut rdsys::rd_kafka_message_t>,
}

// SAFETY: the handles are used by the one thread that owns the consumer; librdkafka's own
// threads only call the callbacks, which touch `CallbackState` through atomics and a mutex.
unsafe impl Send for BatchConsumer {}

unsafe extern "C" fn on_rebalance(
    rk: *mut rdsys::rd_kafka_t,
    err: Err,
    partitions: *mut rdsys::rd_kafka_topic_partition_list_t,
    opaque: *mut c_void,
) {
    // SAFETY: `opaque` is the consumer's boxed state, alive until after rd_kafka_destroy.
    let state = unsafe { &*(opaque as *const CallbackState) };
    // SAFETY: `rk` is the live handle librdkafka calls back with; the answer is NULL or
    // one of librdkafka's static protocol names.
    let cooperative = unsafe { is_cooperative(rdsys::rd_kafka_rebalance_protocol(rk)) };
    // SAFETY: assignment calls on the calling consumer with the list librdkafka passed.
    unsafe {
        match err {
            Err::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                if cooperative {
                    destroy_error(rdsys::rd_kafka_incremental_assign(rk, partitions));
                } else {
                    rdsys::rd_kafka_assign(rk, partitions);
                }
                let took =
                    (wall_ms() as u64).saturating_sub(state.join_start_ms.load(Ordering::Relaxed));
                state.join_total_ms.fetch_add(took, Ordering::Relaxed);
            }
            Err::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                state
                    .join_start_ms
                    .store(wall_ms() as u64, Ordering::Relaxed);
                if cooperative {
                    destroy_error(rdsys::rd_kafka_incremental_unassign(rk, partitions));
                } else {
                    rdsys::rd_kafka_assign(rk, std::ptr::null());
                }
            }
            _ => {
                rdsys::rd_kafka_assign(rk, std::ptr::null());
            }
        }
    }
}

/// Whether `rd_kafka_rebalance_protocol` answered "COOPERATIVE".
///
/// The answer is NULL, not a string, when the group can no longer be asked: once the
/// consumer group has terminated, its ops queue is disabled and the query fails with
/// `_DESTROY`. A rebalance callback can still run then (`rd_kafka_consumer_close` serves
/// a revocation or assignment that was queued before the group terminated), and reading
/// the NULL as a C string crashed the tool with SIGSEGV in `strlen` during the closes after
/// a rebalance. NULL is taken as not cooperative, as rdkafka does: the eager
/// `rd_kafka_assign` that follows then fails harmlessly on the terminated group.
///
/// # Safety
/// `protocol` is NULL or a NUL-terminated string.
unsafe fn is_cooperative(protocol: *const c_char) -> bool {
    // SAFETY: non-NULL, so a NUL-terminated string by the caller's guarantee.
    !protocol.is_null() && unsafe { CStr::from_ptr(protocol) }.to_bytes() == b"COOPERATIVE"
}

unsafe fn destroy_error(error: *mut rdsys::rd_kafka_error_t) {
    if !error.is_null() {
        // SAFETY: an error object returned to us, destroyed once.
        unsafe { rdsys::rd_kafka_error_destroy(error) };
    }
}

unsafe extern "C" fn on_stats(
    _rk: *mut rdsys::rd_kafka_t,
    json: *mut c_char,
    json_len: usize,
    opaque: *mut c_void,
) -> c_int {
    // SAFETY: as in `on_rebalance`; `json` holds `json_len` bytes for this call.
    let (state, json) = unsafe {
        (
            &*(opaque as *const CallbackState),
            std::slice::from_raw_parts(json as *const u8, json_len),
        )
    };
    *state.stats.lock() = Some(json.to_vec());
    0 // librdkafka frees the string
}

impl BatchConsumer {
    /// Creates the consumer from `settings` and subscribes it to `topic`.
    pub fn subscribe(settings: &[(String, String)], topic: &str, batch: usize) -> Result<Self> {
        let mut config = ClientConfig::new();
        for (k, v) in settings {
            config.set(k, v);
        }
        let native = config
            .create_native_config()
            .context("invalid consumer configuration")?;
        let state = Box::new(CallbackState::default());
        state
            .join_start_ms
            .store(wall_ms() as u64, Ordering::Relaxed);
        let conf = native.ptr();
        // SAFETY: `conf` is a fresh configuration; `state` outlives the handle (it is
        // dropped after rd_kafka_destroy in `Drop`). rd_kafka_new takes `conf` on success.
        let rk = unsafe {
            rdsys::rd_kafka_conf_set_rebalance_cb(conf, Some(on_rebalance));
            rdsys::rd_kafka_conf_set_stats_cb(conf, Some(on_stats));
            rdsys::rd_kafka_conf_set_opaque(conf, &*state as *const CallbackState as *mut c_void);
            let mut errstr = [0 as c_char; 512];
            let rk = rdsys::rd_kafka_new(
                rdsys::rd_kafka_type_t::RD_KAFKA_CONSUMER,
                conf,
                errstr.as_mut_ptr(),
                errstr.len(),
            );
            if rk.is_null() {
                return Err(anyhow!(
                    "cannot create the consumer: {}",
                    CStr::from_ptr(errstr.as_ptr()).to_string_lossy()
                ));
            }
            std::mem::forget(native);
            rk
        };
        // SAFETY: `rk` is live; the queue reference is released in `Drop`.
        let queue = unsafe {
            rdsys::rd_kafka_poll_set_consumer(rk);
            rdsys::rd_kafka_queue_get_consumer(rk)
        };
        let consumer = Self {
            rk,
            queue,
            state,
            batch: vec![std::ptr::null_mut(); batch.max(1)],
        };
        let name = CString::new(topic).map_err(|_| anyhow!("topic name contains a NUL byte"))?;
        // SAFETY: a list built, used and destroyed here; subscribe copies it.
        let err = unsafe {
            let list = rdsys::rd_kafka_topic_partition_list_new(1);
            rdsys::rd_kafka_topic_partition_list_add(list, name.as_ptr(), -1);
            let err = rdsys::rd_kafka_subscribe(consumer.rk, list);
            rdsys::rd_kafka_topic_partition_list_destroy(list);
            err
        };
        if err != Err::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(anyhow!(
                "subscribe failed: {}",
                rdkafka::error::RDKafkaErrorCode::from(err)
            ));
        }
        Ok(consumer)
    }

    /// Waits up to `timeout_ms` for records and passes each to `on_record` (errors, such
    /// as a lost connection, to `on_error`). Returns how many records there were.
    pub fn consume(
        &mut self,
        timeout_ms: i32,
        mut on_record: impl FnMut(&Record<'_>),
        mut on_error: impl FnMut(String),
    ) -> usize {
        // SAFETY: `batch` has room for its length in message pointers.
        let n = unsafe {
            rdsys::rd_kafka_consume_batch_queue(
                self.queue,
                timeout_ms,
                self.batch.as_mut_ptr(),
                self.batch.len(),
            )
        };
        let mut records = 0;
        for &message in &self.batch[..n.max(0) as usize] {
            // SAFETY: each returned message is live until destroyed below; its key and
            // payload pointers are valid for their lengths (or null with length 0).
            unsafe {
                let m = &*message;
                if m.err == Err::RD_KAFKA_RESP_ERR_NO_ERROR {
                    let mut kind =
                        rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
                    let ts = rdsys::rd_kafka_message_timestamp(message, &mut kind);
                    on_record(&Record {
                        key: bytes(m.key, m.key_len),
                        value: bytes(m.payload, m.len),
                        timestamp: (kind
                            != rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE)
                            .then_some(ts),
                    });
                    records += 1;
                } else if m.err != Err::RD_KAFKA_RESP_ERR__PARTITION_EOF {
                    on_error(rdkafka::error::RDKafkaErrorCode::from(m.err).to_string());
                }
                rdsys::rd_kafka_message_destroy(message);
            }
        }
        records
    }

    /// Kafka's `joinTimeMs`: the time spent joining, summed over rebalances.
    pub fn join_time_ms(&self) -> u64 {
        self.state.join_total_ms.load(Ordering::Relaxed)
    }

    /// The last statistics JSON librdkafka emitted (`statistics.interval.ms`).
    pub fn last_stats(&self) -> Option<Vec<u8>> {
        self.state.stats.lock().clone()
    }
}

/// A borrowed byte slice from librdkafka's pointer and length.
unsafe fn bytes<'a>(ptr: *const c_void, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller guarantees `ptr` holds `len` bytes for `'a`.
        unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
    }
}

impl Drop for BatchConsumer {
    fn drop(&mut self) {
        // SAFETY: close (leaves the group, serving the final revocation through the
        // callback), then release the queue and the handle, each once; `state` is dropped
        // after this, so no callback can outlive it.
        unsafe {
            rdsys::rd_kafka_consumer_close(self.rk);
            rdsys::rd_kafka_queue_destroy(self.queue);
            rdsys::rd_kafka_destroy(self.rk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_rebalance_protocol_is_not_cooperative() {
        // SAFETY: NULL, or NUL-terminated literals.
        unsafe {
            assert!(!is_cooperative(std::ptr::null()));
            assert!(!is_cooperative(c"EAGER".as_ptr()));
            assert!(is_cooperative(c"COOPERATIVE".as_ptr()));
        }
    }
}
