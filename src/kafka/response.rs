//! Kafka's response framing: an `int32` size, then the response header and body, encoded
//! with kafka-protocol. A Fetch response's records are not encoded with it: each stands as
//! a marker in the encoded response, which is split there so that the records (file ranges
//! sent with sendfile(2)) go out between the pieces.
//!
//! Public under `internals` for examples/wire_floor.rs, the benchmark's floor, which must
//! encode exactly as the listener does.

use std::io;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

/// The response header and body of `api_key` at `version`, behind a placeholder size.
pub fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> io::Result<BytesMut> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, api_key.response_header_version(version))
        .and_then(|()| body.encode(&mut buf, version))
        .map_err(|e| io::Error::other(format!("encode {api_key:?} v{version}: {e}")))?;
    Ok(buf)
}

/// A whole response frame: its size, header and body.
pub fn framed_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> io::Result<BytesMut> {
    let mut buf = encode_response(api_key, version, correlation_id, body)?;
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf)
}

/// The bytes standing for the `i`th partition's records in an encoded Fetch response until
/// it is written: `MARKER_PREFIX` and `i`. Nothing else in a Fetch response holds these
/// bytes (topic names are `[a-zA-Z0-9._-]`, and the numbers around them are not 8 ASCII
/// bytes of this).
const MARKER_PREFIX: &[u8; 8] = b"\0kpfs\0rg";

pub fn records_marker(i: usize) -> Bytes {
    let mut m = MARKER_PREFIX.to_vec();
    m.extend_from_slice(&(i as u64).to_be_bytes());
    Bytes::from(m)
}

/// Fetch v12+ is a flexible version: the records' length is an unsigned varint of
/// length + 1 rather than an `int32`.
const FIRST_FLEXIBLE_FETCH: i16 = 12;

/// Splits an encoded Fetch response (without its size) at each records marker, `0` to
/// `lens.len() - 1`, rewriting the length before each marker for `lens[i]` bytes of
/// records: the caller sends the first piece, partition 0's records, the second piece,
/// and so on (`lens.len() + 1` pieces).
pub fn splice_records(mut encoded: Bytes, version: i16, lens: &[u64]) -> io::Result<Vec<Bytes>> {
    let mut pieces = Vec::with_capacity(lens.len() + 1);
    let flexible = version >= FIRST_FLEXIBLE_FETCH;
    let prefix_len = if flexible { 1 } else { 4 };
    for (i, &len) in lens.iter().enumerate() {
        let marker = records_marker(i);
        let at = memchr::memmem::find(&encoded, &marker).ok_or_else(|| {
            io::Error::other(format!("Fetch response lost the marker of partition {i}"))
        })?;
        let mut head = BytesMut::from(&encoded[..at - prefix_len]);
        if flexible {
            put_unsigned_varint(&mut head, len + 1);
        } else {
            let len =
                i32::try_from(len).map_err(|_| io::Error::other("Fetch records over 2 GiB"))?;
            head.put_i32(len);
        }
        pieces.push(head.freeze());
        encoded = encoded.slice(at + marker.len()..);
    }
    pieces.push(encoded);
    Ok(pieces)
}

fn put_unsigned_varint(buf: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Decodable, StrBytes};

    #[test]
    fn varints_are_kafkas_unsigned_varints() {
        let mut buf = BytesMut::new();
        put_unsigned_varint(&mut buf, 1);
        put_unsigned_varint(&mut buf, 300);
        assert_eq!(&buf[..], &[1, 0xac, 0x02]);
    }

    /// A Fetch response spliced around records decodes as one with those records in place,
    /// in a version with an `int32` length and in a flexible one.
    #[test]
    fn records_spliced_into_a_fetch_response_decode_in_place() {
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        use kafka_protocol::messages::FetchResponse;
        let records = Bytes::from(vec![7u8; 300]);
        for version in [4, 12] {
            let mut partition = PartitionData::default();
            partition.records = Some(records_marker(0));
            let mut topic = FetchableTopicResponse::default();
            topic.topic = TopicName(StrBytes::from_static_str("t"));
            topic.partitions = vec![partition];
            let mut response = FetchResponse::default();
            response.responses = vec![topic];
            let body = ResponseKind::Fetch(response);
            let encoded = encode_response(ApiKey::Fetch, version, 9, &body).unwrap();
            let pieces = splice_records(encoded.freeze().slice(4..), version, &[300]).unwrap();
            assert_eq!(pieces.len(), 2);
            let mut whole = BytesMut::new();
            whole.extend_from_slice(&pieces[0]);
            whole.extend_from_slice(&records);
            whole.extend_from_slice(&pieces[1]);
            let mut whole = whole.freeze();
            let header =
                ResponseHeader::decode(&mut whole, ApiKey::Fetch.response_header_version(version))
                    .unwrap();
            assert_eq!(header.correlation_id, 9);
            let decoded = FetchResponse::decode(&mut whole, version).unwrap();
            assert_eq!(
                decoded.responses[0].partitions[0].records,
                Some(records.clone())
            );
            assert!(
                !whole.has_remaining(),
                "v{version}: bytes after the response"
            );
        }
    }
}
