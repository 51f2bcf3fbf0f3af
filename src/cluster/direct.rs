//! Requests librdkafka has no call for, sent straight to one broker with kafka-protocol's
//! codecs (the ones the Kafka listener decodes with) on a connection of their own:
//! - IncrementalAlterConfigs: the `rdkafka` crate has only the legacy AlterConfigs, which
//!   replaces a resource's whole set of overrides, and librdkafka names a broker resource
//!   by id only, never the cluster-wide default (the empty name);
//! - DescribeConfigs of that cluster-wide default;
//! - DescribeLogDirs, ListTransactions, FindCoordinator for transactions and
//!   DescribeTransactions, which librdkafka does not have.
//!
//! Each connection asks ApiVersions first and sends each request at the highest version
//! both sides know. Only a PLAINTEXT listener is reached this way: the mount's librdkafka
//! is built without TLS, and SASL would need its handshake written again here, so with
//! another `security.protocol` these requests fail with a text saying so.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::ResponseError;

use super::kafka_name;
use crate::engine::{EngineError, Result};

/// The largest response read: a DescribeConfigs of a broker is about 40 KB, a
/// DescribeLogDirs about 60 bytes a partition.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// ApiVersions at v3, the first flexible version, which every Kafka since 2.4 answers.
const API_VERSIONS_VERSION: i16 = 3;

/// How the mount reaches brokers directly: its client id, timeout and whether the
/// listener's security protocol allows it.
pub(super) struct Direct {
    client_id: String,
    timeout: Duration,
    /// Why no request can be sent this way (a `security.protocol` other than PLAINTEXT).
    refused: Option<String>,
}

impl Direct {
    /// From the client properties of `--command-config` (librdkafka's names, which are
    /// Kafka's for these).
    pub(super) fn new(properties: &[(String, String)], timeout: Duration) -> Direct {
        let property = |name: &str| {
            properties
                .iter()
                .rev()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.as_str())
        };
        let refused = property("security.protocol")
            .filter(|protocol| !protocol.eq_ignore_ascii_case("plaintext"))
            .map(|protocol| {
                format!(
                    "kpfs sends this request to the brokers itself, over PLAINTEXT only \
                     (security.protocol={protocol})"
                )
            });
        Direct {
            client_id: property("client.id").unwrap_or("kpfs").to_string(),
            timeout,
            refused,
        }
    }

    /// A connection to the broker at `address` (`host:port`), its API versions known.
    pub(super) fn connect(&self, address: &str) -> Result<Connection> {
        let action = || format!("connect to {address}");
        if let Some(reason) = &self.refused {
            return Err(client_error(
                action(),
                "UNSUPPORTED_VERSION",
                reason.clone(),
            ));
        }
        let network =
            |e: std::io::Error| client_error(action(), "NETWORK_EXCEPTION", e.to_string());
        let mut last = None;
        let mut stream = None;
        for socket in address.to_socket_addrs().map_err(network)? {
            match TcpStream::connect_timeout(&socket, self.timeout) {
                Ok(connected) => {
                    stream = Some(connected);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let stream = match (stream, last) {
            (Some(stream), _) => stream,
            (None, Some(e)) => return Err(network(e)),
            (None, None) => {
                return Err(client_error(
                    action(),
                    "NETWORK_EXCEPTION",
                    "the address resolves to nothing".to_string(),
                ))
            }
        };
        stream
            .set_read_timeout(Some(self.timeout))
            .map_err(network)?;
        stream
            .set_write_timeout(Some(self.timeout))
            .map_err(network)?;
        stream.set_nodelay(true).map_err(network)?;
        let mut connection = Connection {
            address: address.to_string(),
            stream,
            client_id: StrBytes::from_string(self.client_id.clone()),
            correlation_id: 0,
            versions: HashMap::new(),
        };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("kpfs"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let answer = connection.call_at(&request, API_VERSIONS_VERSION)?;
        connection.check("ask the API versions", answer.error_code, None)?;
        connection.versions = answer
            .api_keys
            .iter()
            .map(|key| (key.api_key, (key.min_version, key.max_version)))
            .collect();
        Ok(connection)
    }
}

/// A connection to one broker.
pub(super) struct Connection {
    address: String,
    stream: TcpStream,
    client_id: StrBytes,
    correlation_id: i32,
    /// The broker's versions of each API key it serves.
    versions: HashMap<i16, (i16, i16)>,
}

impl Connection {
    /// Sends `request` at the highest version the broker and kafka-protocol share.
    pub(super) fn call<R: Request>(&mut self, request: &R) -> Result<R::Response> {
        let version = self.version::<R>()?;
        self.call_at(request, version)
    }

    /// The highest version of `R` the broker and kafka-protocol share, for a request
    /// whose fields differ by version.
    pub(super) fn version<R: Request>(&self) -> Result<i16> {
        let ours = R::VERSIONS;
        match self.versions.get(&R::KEY) {
            Some(&(min, max)) if max.min(ours.max) >= min.max(ours.min) => Ok(max.min(ours.max)),
            _ => Err(client_error(
                format!("send API key {} to {}", R::KEY, self.address),
                "UNSUPPORTED_VERSION",
                format!(
                    "the broker serves no version of API key {} in {}-{}",
                    R::KEY,
                    ours.min,
                    ours.max
                ),
            )),
        }
    }

    /// Fails with the broker's error when `code` is not NONE.
    pub(super) fn check(&self, action: &str, code: i16, message: Option<&StrBytes>) -> Result<()> {
        broker_check(format!("{action} ({})", self.address), code, message)
    }

    /// Sends `request` at `version` and reads the answer.
    pub(super) fn call_at<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        let action = || format!("send API key {} v{version} to {}", R::KEY, self.address);
        let codec =
            |e: &dyn std::fmt::Display| client_error(action(), "CORRUPT_MESSAGE", e.to_string());
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        header
            .encode(&mut frame, R::header_version(version))
            .map_err(|e| codec(&e))?;
        request.encode(&mut frame, version).map_err(|e| codec(&e))?;
        let size = i32::try_from(frame.len() - 4).map_err(|e| codec(&e))?;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        let network =
            |e: std::io::Error| client_error(action(), "NETWORK_EXCEPTION", e.to_string());
        self.stream.write_all(&frame).map_err(network)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).map_err(network)?;
        let size = i32::from_be_bytes(size);
        let size = usize::try_from(size)
            .ok()
            .filter(|&size| size <= MAX_RESPONSE_BYTES)
            .ok_or_else(|| {
                client_error(
                    action(),
                    "CORRUPT_MESSAGE",
                    format!("a response of {size} bytes"),
                )
            })?;
        let mut body = vec![0u8; size];
        self.stream.read_exact(&mut body).map_err(network)?;
        let mut body = Bytes::from(body);
        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| codec(&e))?;
        if header.correlation_id != self.correlation_id {
            return Err(client_error(
                action(),
                "CORRUPT_MESSAGE",
                format!(
                    "the answer is to request {}, not {}",
                    header.correlation_id, self.correlation_id
                ),
            ));
        }
        R::Response::decode(&mut body, version).map_err(|e| codec(&e))
    }
}

/// Fails with the broker's error `code` (and its `message`, Kafka's wording) unless it is
/// NONE.
pub(super) fn broker_check(action: String, code: i16, message: Option<&StrBytes>) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    let name = match ResponseError::try_from_code(code) {
        Some(ResponseError::Unknown(_)) | None => format!("error code {code}"),
        Some(known) => kafka_name(&known),
    };
    Err(EngineError::Broker {
        action,
        name,
        code: i32::from(code),
        message: message.map(ToString::to_string).unwrap_or_default(),
    })
}

/// An error of the connection itself, named as Kafka's client would.
fn client_error(action: String, name: &str, message: String) -> EngineError {
    EngineError::Broker {
        action,
        name: name.to_string(),
        code: -1,
        message,
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::list_transactions_response::TransactionState;
    use kafka_protocol::messages::{
        ApiKey, ApiVersionsResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
        TransactionalId,
    };
    use kafka_protocol::protocol::{decode_request_header_from_buffer, Message};

    use super::*;

    /// Reads one request off `stream`: its API key, version and correlation id.
    fn read_request(stream: &mut TcpStream) -> (i16, i16, i32) {
        let mut size = [0u8; 4];
        stream.read_exact(&mut size).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        stream.read_exact(&mut body).unwrap();
        let header = decode_request_header_from_buffer(&mut Bytes::from(body)).unwrap();
        (
            header.request_api_key,
            header.request_api_version,
            header.correlation_id,
        )
    }

    fn answer<R: Encodable + HeaderVersion>(
        stream: &mut TcpStream,
        correlation_id: i32,
        response: &R,
        version: i16,
    ) {
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut frame, R::header_version(version))
            .unwrap();
        response.encode(&mut frame, version).unwrap();
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        stream.write_all(&frame).unwrap();
    }

    /// A broker that serves ListTransactions up to `max_version` (and ApiVersions): it
    /// answers the version check, then one ListTransactions, and returns the version that
    /// request came at.
    fn broker_serving_list_transactions(max_version: i16) -> (String, thread::JoinHandle<i16>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let broker = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let (key, version, id) = read_request(&mut stream);
            assert_eq!(
                (key, version),
                (ApiKey::ApiVersions as i16, API_VERSIONS_VERSION)
            );
            let versions = ApiVersionsResponse::default().with_api_keys(vec![
                ApiVersion::default()
                    .with_api_key(ApiKey::ApiVersions as i16)
                    .with_max_version(4),
                ApiVersion::default()
                    .with_api_key(ApiKey::ListTransactions as i16)
                    .with_max_version(max_version),
            ]);
            answer(&mut stream, id, &versions, version);
            let (key, version, id) = read_request(&mut stream);
            assert_eq!(key, ApiKey::ListTransactions as i16);
            let listed = ListTransactionsResponse::default().with_transaction_states(vec![
                TransactionState::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_static_str("app")))
                    .with_producer_id(ProducerId(7))
                    .with_transaction_state(StrBytes::from_static_str("Ongoing")),
            ]);
            answer(&mut stream, id, &listed, version);
            version
        });
        (address, broker)
    }

    fn plaintext() -> Direct {
        Direct::new(&[], Duration::from_secs(10))
    }

    #[test]
    fn a_request_goes_at_the_highest_version_both_sides_know() {
        // The broker knows a version beyond kafka-protocol's: ours is the one sent.
        let (address, broker) = broker_serving_list_transactions(i16::MAX);
        let mut connection = plaintext().connect(&address).unwrap();
        let listed = connection
            .call(&ListTransactionsRequest::default())
            .unwrap();
        assert_eq!(
            broker.join().unwrap(),
            ListTransactionsRequest::VERSIONS.max
        );
        assert_eq!(listed.transaction_states.len(), 1);
        assert_eq!(
            listed.transaction_states[0].transactional_id.0.as_str(),
            "app"
        );
        assert_eq!(listed.transaction_states[0].producer_id.0, 7);

        // An older broker gets its own highest version.
        let (address, broker) = broker_serving_list_transactions(0);
        let mut connection = plaintext().connect(&address).unwrap();
        connection
            .call(&ListTransactionsRequest::default())
            .unwrap();
        assert_eq!(broker.join().unwrap(), 0);
    }

    #[test]
    fn an_api_the_broker_does_not_serve_is_refused_without_sending_it() {
        let (address, _broker) = broker_serving_list_transactions(1);
        let connection = plaintext().connect(&address).unwrap();
        let refused = connection
            .version::<kafka_protocol::messages::DescribeLogDirsRequest>()
            .unwrap_err();
        assert!(
            matches!(&refused, EngineError::Broker { name, .. } if name == "UNSUPPORTED_VERSION"),
            "{refused:?}"
        );
    }

    #[test]
    fn a_listener_other_than_plaintext_is_not_reached() {
        let properties = [(
            "security.protocol".to_string(),
            "SASL_PLAINTEXT".to_string(),
        )];
        let refused = Direct::new(&properties, Duration::from_secs(1))
            .connect("127.0.0.1:9")
            .err()
            .unwrap();
        assert!(refused.to_string().contains("PLAINTEXT only"), "{refused}");
    }

    #[test]
    fn a_broker_error_carries_kafkas_name_and_its_message() {
        let message =
            StrBytes::from_static_str("Invalid value soon for configuration retention.ms");
        let error = broker_check("alter".into(), 40, Some(&message)).unwrap_err();
        assert!(
            matches!(&error, EngineError::Broker { name, code: 40, message, .. }
                if name == "INVALID_CONFIG" && message.starts_with("Invalid value soon")),
            "{error:?}"
        );
        // Without a message: the error's name.
        let error = broker_check("alter".into(), 40, None).unwrap_err();
        assert_eq!(error.to_string(), "alter: INVALID_CONFIG");
        let error = broker_check("alter".into(), 999, None).unwrap_err();
        assert_eq!(error.to_string(), "alter: error code 999");
        assert!(broker_check("alter".into(), 0, None).is_ok());
    }
}
