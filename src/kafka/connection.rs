//! One client connection: read a whole request, handle it, write the response, and only
//! then read the next (Kafka's muting, so memory per connection is one request and one
//! response). Anything wrong with the bytes closes this connection with a log line.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::io::AsRawFd;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseKind};
use kafka_protocol::ResponseError;

use super::api::{self, FetchReply, Reply};
use super::frame::{decode_request, read_frame, FrameError, RequestError};
use super::response::{encode_response, framed_response, splice_records};
use super::Shared;
use crate::deadline::Deadline;
use crate::engine::FetchedRange;

pub(crate) fn serve(shared: &Shared, mut stream: TcpStream, peer: SocketAddr) {
    let idle = Duration::from_millis(shared.config.connections_max_idle_ms.max(1));
    if let Err(e) = stream.set_nodelay(true) {
        tracing::warn!(%peer, error = %e, "closing a Kafka connection: socket setup failed");
        return;
    }
    tracing::debug!(%peer, "Kafka connection opened");
    let reason = loop {
        let frame = match read_frame(&mut stream, shared.config.socket_request_max_bytes, idle) {
            Ok(frame) => frame,
            Err(FrameError::Closed) => break None,
            Err(e) => break Some(e.to_string()),
        };
        let written = match decode_request(frame) {
            Ok(request) => {
                let (api_key, version) = (request.api_key, request.version);
                let correlation_id = request.header.correlation_id;
                match api::handle(shared, request, peer) {
                    Reply::Message(body) => {
                        ResponseOut::new(&mut stream, idle).and_then(|mut out| {
                            write_message(&mut out, api_key, version, correlation_id, &body)
                        })
                    }
                    Reply::Fetch(reply) => ResponseOut::new(&mut stream, idle)
                        .and_then(|mut out| write_fetch(&mut out, version, correlation_id, reply)),
                    Reply::Nothing => Ok(()),
                    Reply::Close(reason) => break Some(reason),
                }
            }
            Err(RequestError::ApiVersionsUnsupported {
                version,
                correlation_id,
            }) => {
                tracing::debug!(%peer, version, "ApiVersions of an unknown version: answered with v0 (KIP-511)");
                let body = ResponseKind::ApiVersions(api::api_versions(
                    ResponseError::UnsupportedVersion.code(),
                ));
                ResponseOut::new(&mut stream, idle).and_then(|mut out| {
                    write_message(&mut out, ApiKey::ApiVersions, 0, correlation_id, &body)
                })
            }
            Err(e) => break Some(e.to_string()),
        };
        if let Err(e) = written {
            if is_client_gone(&e) {
                // The client closed first (e.g. kcat exiting while its Fetch was parked):
                // nothing wrong with the connection to report.
                tracing::debug!(%peer, error = %e, "Kafka client left before its response");
                break None;
            }
            break Some(format!("writing a response failed: {e}"));
        }
    };
    if let Some(reason) = reason {
        tracing::warn!(%peer, %reason, "closing Kafka connection");
    } else {
        tracing::debug!(%peer, "Kafka connection closed by the client");
    }
    // The listener holds a second descriptor of the socket until this thread removes it:
    // shut the connection down now rather than at the last close(2).
    let _ = stream.shutdown(Shutdown::Both);
}

/// Where a response goes: the client must take the whole of it within
/// `connections.max.idle.ms` (a client that stops reading then loses its connection, and
/// its thread is free). The socket is non-blocking while the response goes out, and
/// waits for room are `poll(2)`s bounded by what is left of that one deadline. A send
/// timeout (`SO_SNDTIMEO`) would not do: it bounds each wait inside a call, and a client
/// whose kernel frees a little receive space now and then (collapsing its receive queue)
/// lets every wait end in some progress, so one blocking sendfile(2) ran three times
/// `connections.max.idle.ms` that way, and a timeout per call four times
/// (tests/kafka_load.rs).
struct ResponseOut<'a> {
    stream: &'a mut TcpStream,
    deadline: Deadline,
}

impl<'a> ResponseOut<'a> {
    fn new(stream: &'a mut TcpStream, within: Duration) -> io::Result<ResponseOut<'a>> {
        stream.set_nonblocking(true)?;
        Ok(ResponseOut {
            stream,
            deadline: Deadline::after(within),
        })
    }

    /// Waits until the socket has room for more bytes (or is closed: the next write
    /// says so), or fails once the deadline has passed.
    fn wait_for_room(&self) -> io::Result<()> {
        let left = self.deadline.remaining();
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not take the response within connections.max.idle.ms",
            ));
        }
        // Rounded up: a wait that ends a little early only polls again.
        let millis = i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        let mut fd = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call; the borrowed stream keeps its descriptor
        // open.
        if unsafe { libc::poll(&mut fd, 1, millis) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }
}

impl Drop for ResponseOut<'_> {
    fn drop(&mut self) {
        // Requests are read blocking, with a receive timeout. Should this fail, the next
        // read finds no data and the connection closes as idle.
        let _ = self.stream.set_nonblocking(false);
    }
}

impl Write for ResponseOut<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.stream.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_for_room()?,
                done => return done,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

fn is_client_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    )
}

fn write_message(
    out: &mut ResponseOut<'_>,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> io::Result<()> {
    out.write_all(&framed_response(api_key, version, correlation_id, body)?)
}

/// A response as it goes out: encoded bytes, and file ranges sent with sendfile(2).
enum Piece {
    Bytes(Bytes),
    File(FetchedRange),
}

impl Piece {
    fn len(&self) -> u64 {
        match self {
            Piece::Bytes(b) => b.len() as u64,
            Piece::File(r) => r.len,
        }
    }
}

/// Splits the encoded response at each records marker, putting the marker's file ranges
/// in its place.
fn fetch_pieces(
    encoded: BytesMut,
    version: i16,
    ranges: Vec<Vec<FetchedRange>>,
) -> io::Result<Vec<Piece>> {
    let lens: Vec<u64> = ranges
        .iter()
        .map(|partition| partition.iter().map(|r| r.len).sum())
        .collect();
    let mut around = splice_records(encoded.freeze(), version, &lens)?.into_iter();
    let mut pieces = Vec::new();
    for partition in ranges {
        pieces.extend(around.next().map(Piece::Bytes));
        pieces.extend(partition.into_iter().map(Piece::File));
    }
    pieces.extend(around.map(Piece::Bytes));
    Ok(pieces)
}

fn write_fetch(
    out: &mut ResponseOut<'_>,
    version: i16,
    correlation_id: i32,
    reply: FetchReply,
) -> io::Result<()> {
    let body = ResponseKind::Fetch(reply.response);
    let mut encoded = encode_response(ApiKey::Fetch, version, correlation_id, &body)?;
    let pieces = fetch_pieces(encoded.split_off(4), version, reply.ranges)?;
    let size: u64 = pieces.iter().map(Piece::len).sum();
    let size = i32::try_from(size).map_err(|_| io::Error::other("Fetch response over 2 GiB"))?;
    out.write_all(&size.to_be_bytes())?;
    for piece in pieces {
        match piece {
            Piece::Bytes(b) => out.write_all(&b)?,
            Piece::File(range) => send_range(out, &range)?,
        }
    }
    Ok(())
}

/// Kafka's `FileRecords.transferTo`: the range goes from the page cache to the socket
/// without passing through this process. The frame's size is already sent, so a range
/// that comes up short (its segment was truncated) can only end the connection.
fn send_range(out: &mut ResponseOut<'_>, range: &FetchedRange) -> io::Result<()> {
    let mut offset = libc::off_t::try_from(range.position)
        .map_err(|_| io::Error::other("segment position over off_t"))?;
    let mut left = range.len;
    while left > 0 {
        let chunk = usize::try_from(left).unwrap_or(usize::MAX).min(1 << 30);
        // SAFETY: both descriptors are open for the call (the stream and the file are
        // borrowed), and `offset` is a valid off_t the kernel advances.
        let sent = unsafe {
            libc::sendfile(
                out.stream.as_raw_fd(),
                range.file.as_raw_fd(),
                &mut offset,
                chunk,
            )
        };
        match sent {
            n if n > 0 => left -= n as u64,
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "a segment ended before its fetched range",
                ))
            }
            _ => {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => {}
                    io::ErrorKind::WouldBlock => out.wait_for_room()?,
                    _ => return Err(e),
                }
            }
        }
    }
    Ok(())
}
