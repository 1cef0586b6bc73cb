//! One connection to one broker: requests written in order, several in flight, each
//! response matched to its request by correlation id as it arrives.
//!
//! Kafka answers the requests of one connection in the order they were sent, so the
//! pending requests are a queue: a response must carry the correlation id at its head,
//! and anything else is a broker that cannot be trusted (the run ends with a message, it
//! does not hang waiting for an answer that will never match).

use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::metrics::NodeMetrics;

/// The largest response frame accepted: above any `fetch.max.bytes` the tools use, and
/// small enough that a broker announcing a huge frame cannot make the client allocate it.
const MAX_RESPONSE: usize = 256 << 20;
/// UNSUPPORTED_VERSION, which a broker answers to an ApiVersions version it lacks.
const UNSUPPORTED_VERSION: i16 = 35;

/// Why a request got no usable answer.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The connection closed or went silent: the request may be retried, on a new
    /// connection, possibly to another broker.
    Closed(String),
    /// No answer within the request's timeout; the connection was given up, and the
    /// request may be retried like a closed one (Kafka's REQUEST_TIMED_OUT).
    TimedOut(String),
    /// The broker broke the protocol (a frame that does not decode, an answer to no
    /// request, a wrong correlation id): nothing it says can be trusted, and the run
    /// ends with this message rather than retrying into the same answer.
    Violation(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed(reason) | Self::TimedOut(reason) | Self::Violation(reason) => {
                f.write_str(reason)
            }
        }
    }
}

impl std::error::Error for CallError {}

/// What a pending request waits for: the response frame after its size prefix.
type Reply = oneshot::Sender<Result<Bytes, CallError>>;

/// A request written and not yet answered.
struct Pending {
    correlation_id: i32,
    reply: Reply,
}

/// The write side, its queue of pending requests and the next correlation id: one lock,
/// so the order of the queue is the order of the bytes on the wire.
struct Writer {
    stream: OwnedWriteHalf,
    next_correlation_id: i32,
}

/// The API versions a broker supports, from its ApiVersions answer.
#[derive(Debug, Clone, Default)]
pub struct ApiVersions(HashMap<i16, (i16, i16)>);

impl ApiVersions {
    /// The highest version of `key` both sides speak, given the client's own range.
    pub fn pick(&self, key: ApiKey, client_min: i16, client_max: i16) -> Result<i16> {
        let (min, max) = self
            .0
            .get(&(key as i16))
            .copied()
            .ok_or_else(|| anyhow!("the broker does not support {key:?}"))?;
        let version = max.min(client_max);
        if version < min.max(client_min) {
            bail!(
                "the broker supports {key:?} v{min}-v{max}, the native client v{client_min}-v{client_max}"
            );
        }
        Ok(version)
    }
}

/// A connection to one broker.
pub struct Connection {
    /// `host:port`, for messages.
    pub address: String,
    client_id: String,
    writer: tokio::sync::Mutex<Writer>,
    pending: Arc<Mutex<VecDeque<Pending>>>,
    closed: Arc<AtomicBool>,
    pub versions: ApiVersions,
    metrics: Arc<NodeMetrics>,
}

impl Connection {
    /// Connects to `address` and negotiates API versions; its requests are counted in
    /// `metrics`.
    pub async fn connect(
        address: &str,
        client_id: &str,
        metrics: Arc<NodeMetrics>,
    ) -> Result<Arc<Self>> {
        let stream = TcpStream::connect(address)
            .await
            .with_context(|| format!("cannot connect to {address}"))?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        let pending = Arc::new(Mutex::new(VecDeque::new()));
        let closed = Arc::new(AtomicBool::new(false));
        tokio::spawn(read_responses(
            read,
            Arc::clone(&pending),
            Arc::clone(&closed),
            address.to_string(),
            Arc::clone(&metrics),
        ));
        let mut connection = Self {
            address: address.to_string(),
            client_id: client_id.to_string(),
            writer: tokio::sync::Mutex::new(Writer {
                stream: write,
                next_correlation_id: 0,
            }),
            pending,
            closed,
            versions: ApiVersions::default(),
            metrics,
        };
        connection.versions = connection.negotiate().await?;
        Ok(Arc::new(connection))
    }

    /// ApiVersions v3, or v0 when the broker does not know v3 (it then answers v0).
    async fn negotiate(&self) -> Result<ApiVersions> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("strom-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut response = self.call(3, &request).await?;
        if response.error_code == UNSUPPORTED_VERSION {
            response = self.call(0, &ApiVersionsRequest::default()).await?;
        }
        if response.error_code != 0 {
            bail!(
                "{} answered ApiVersions with error {}",
                self.address,
                response.error_code
            );
        }
        Ok(ApiVersions(
            response
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect(),
        ))
    }

    /// Whether the broker closed the connection or broke the protocol.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Sends `body` at `version` and waits for its response.
    pub async fn call<R>(&self, version: i16, body: &R) -> Result<R::Response>
    where
        R: Request + Encodable,
        R::Response: Decodable + HeaderVersion,
    {
        Ok(self.send(version, body, &[], None).await?.await?)
    }

    /// Writes `body` at `version` and returns the future of its response, so that more
    /// requests can be written before the first is answered. A response that does not
    /// come within `timeout` gives up on the connection, as Kafka's clients disconnect
    /// on `request.timeout.ms`: the next request opens a new one. Each of `records` the
    /// body holds goes to the socket from where it lies, not copied into the frame.
    pub async fn send<R>(
        &self,
        version: i16,
        body: &R,
        records: &[Bytes],
        timeout: Option<std::time::Duration>,
    ) -> Result<impl std::future::Future<Output = Result<R::Response, CallError>>>
    where
        R: Request + Encodable,
        R::Response: Decodable + HeaderVersion,
    {
        let written = std::time::Instant::now();
        let (correlation_id, rx) = self.write(version, body, records, true).await?;
        let rx = rx.expect("a response was asked for");
        let address = self.address.clone();
        let closed = Arc::clone(&self.closed);
        let metrics = Arc::clone(&self.metrics);
        Ok(async move {
            let answer = async {
                rx.await.map_err(|_| {
                    CallError::Closed(format!("the connection to {address} was dropped"))
                })?
            };
            let frame = match timeout {
                None => answer.await?,
                Some(timeout) => match tokio::time::timeout(timeout, answer).await {
                    Ok(frame) => frame?,
                    Err(_) => {
                        closed.store(true, Ordering::Relaxed);
                        return Err(CallError::TimedOut(format!(
                            "no answer from {address} within request.timeout.ms"
                        )));
                    }
                },
            };
            metrics
                .latency_us
                .record(written.elapsed().as_micros() as u64);
            let (id, response) =
                strom_wire::client::decode_response::<R>(version, frame).map_err(|e| {
                    let api = ApiKey::try_from(R::KEY)
                        .map_or_else(|_| format!("API {}", R::KEY), |k| format!("{k:?}"));
                    let reason = match e {
                        strom_wire::WireError::Malformed { reason, .. } => reason,
                        other => other.to_string(),
                    };
                    CallError::Violation(format!(
                        "{address} sent a malformed {api} response (v{version}): {reason}"
                    ))
                })?;
            debug_assert_eq!(id, correlation_id, "the reader matched the queue's head");
            Ok(response)
        })
    }

    /// Writes `body` expecting no response (a Produce with acks=0).
    pub async fn send_without_response<R: Request + Encodable>(
        &self,
        version: i16,
        body: &R,
        records: &[Bytes],
    ) -> Result<()> {
        self.write(version, body, records, false).await.map(|_| ())
    }

    async fn write<R: Request + Encodable>(
        &self,
        version: i16,
        body: &R,
        records: &[Bytes],
        expect_response: bool,
    ) -> Result<(i32, Option<oneshot::Receiver<Result<Bytes, CallError>>>)> {
        if self.is_closed() {
            bail!("the connection to {} is closed", self.address);
        }
        let mut writer = self.writer.lock().await;
        let correlation_id = writer.next_correlation_id;
        writer.next_correlation_id = correlation_id.wrapping_add(1);
        let parts = strom_wire::client::encode_request_parts(
            correlation_id,
            &self.client_id,
            version,
            body,
            records,
        )
        .map_err(|e| anyhow!("{e}"))?;
        let rx = expect_response.then(|| {
            let (tx, rx) = oneshot::channel();
            self.pending.lock().push_back(Pending {
                correlation_id,
                reply: tx,
            });
            rx
        });
        if let Err(e) = write_all_parts(&mut writer.stream, &parts).await {
            self.closed.store(true, Ordering::Relaxed);
            return Err(anyhow!("cannot write to {}: {e}", self.address));
        }
        let written: usize = parts.iter().map(Bytes::len).sum();
        self.metrics.requests.record(written as u64);
        Ok((correlation_id, rx))
    }
}

/// Writes a frame's parts with gathering writes, at most `IOV_MAX` (1024) parts each.
async fn write_all_parts(stream: &mut OwnedWriteHalf, parts: &[Bytes]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        let batch = slices.len().min(1024);
        let n = stream.write_vectored(&slices[..batch]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut slices, n);
    }
    Ok(())
}

/// Reads response frames and hands each to the request at the head of the queue; on a
/// closed connection or a protocol violation fails every pending request with the reason.
async fn read_responses(
    mut read: OwnedReadHalf,
    pending: Arc<Mutex<VecDeque<Pending>>>,
    closed: Arc<AtomicBool>,
    address: String,
    metrics: Arc<NodeMetrics>,
) {
    let reason = loop {
        match read_frame(&mut read, &address).await {
            Ok(frame) => {
                metrics.responses.record(frame.len() as u64 + 4);
                let head = pending.lock().pop_front();
                let Some(head) = head else {
                    break CallError::Violation(format!("{address} sent a response to no request"));
                };
                let id = i32::from_be_bytes(frame[..4].try_into().expect("4 bytes"));
                if id != head.correlation_id {
                    let error = CallError::Violation(format!(
                        "{address} answered correlation id {id} where {} was next",
                        head.correlation_id
                    ));
                    let _ = head.reply.send(Err(error.clone()));
                    break error;
                }
                let _ = head.reply.send(Ok(frame));
            }
            Err(reason) => break reason,
        }
    };
    closed.store(true, Ordering::Relaxed);
    for waiting in pending.lock().drain(..) {
        let _ = waiting.reply.send(Err(reason.clone()));
    }
}

/// One size-prefixed frame; a size outside 4..=MAX_RESPONSE is a broken peer.
async fn read_frame(read: &mut OwnedReadHalf, address: &str) -> Result<Bytes, CallError> {
    let size = read
        .read_i32()
        .await
        .map_err(|e| CallError::Closed(format!("{address} closed the connection ({e})")))?;
    if size < 4 || size as usize > MAX_RESPONSE {
        return Err(CallError::Violation(format!(
            "{address} sent a response frame of {size} bytes"
        )));
    }
    // Read straight into spare capacity: a Fetch answer is up to `fetch.max.bytes`, and
    // zero-filling a buffer about to be overwritten cost a memset of every answer.
    let size = size as usize;
    let mut frame = BytesMut::with_capacity(size);
    let mut body = read.take(size as u64);
    let closed = |e: String| {
        CallError::Closed(format!(
            "{address} closed the connection within a response ({e})"
        ))
    };
    while frame.len() < size {
        match body.read_buf(&mut frame).await {
            Ok(0) => return Err(closed("end of stream".to_string())),
            Ok(_) => {}
            Err(e) => return Err(closed(e.to_string())),
        }
    }
    Ok(frame.freeze())
}
