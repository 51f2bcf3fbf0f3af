//! `listeners` and `advertised.listeners`: Kafka's listener lists, parsed as
//! `SocketServerConfigs.listenerListToEndPoints` and checked as `CoreUtils` does, then
//! restricted to what kpfs serves: PLAINTEXT. Since listener names must differ and the
//! only name kpfs takes is `PLAINTEXT`, a list holds at most one listener.

use super::error::{ConfigError, ListenerRule};

/// Kafka's `SecurityProtocol` names: the default `listener.security.protocol.map` maps
/// each to itself, and kpfs has no other map.
const SECURITY_PROTOCOLS: [&str; 4] = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];
const PLAINTEXT: &str = "PLAINTEXT";

/// One entry of a listener list (Kafka's `Endpoint`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Upper case, as `ListenerName.normalised` makes it; always `PLAINTEXT` here.
    pub listener_name: String,
    /// `None` when the entry leaves it empty: bind every interface; advertise the
    /// machine's name.
    pub host: Option<String>,
    pub port: u16,
}

/// The endpoints of `text` (already trimmed, as Kafka's `STRING` type trims), or Kafka's
/// refusal, or kpfs's for what it does not serve.
pub(super) fn parse_listeners(text: &str) -> Result<Vec<Endpoint>, ConfigError> {
    let refuse = |rule: ListenerRule| Err(ConfigError::Listeners(rule));
    let listeners = || text.to_string();
    let mut endpoints: Vec<Endpoint> = Vec::new();
    // `Csv.parseCsvList`: split on commas with the spaces around them, empty items dropped.
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let unparsable = |reason: String| {
            refuse(ListenerRule::Unparsable {
                listeners: listeners(),
                reason,
            })
        };
        let Some((name, host, port)) = split_entry(entry) else {
            return unparsable(format!("Unable to parse {entry} to a broker endpoint"));
        };
        let Ok(port) = port.parse::<i32>() else {
            return unparsable(format!("For input string: \"{port}\""));
        };
        let name = name.to_uppercase();
        if !SECURITY_PROTOCOLS.contains(&name.as_str()) {
            return refuse(ListenerRule::NoSecurityProtocol {
                listeners: listeners(),
                name,
            });
        }
        if name != PLAINTEXT {
            return refuse(ListenerRule::NotPlaintext {
                listeners: listeners(),
                name,
            });
        }
        // `InetSocketAddress`'s refusal when the broker binds.
        let Ok(port) = u16::try_from(port) else {
            return unparsable(format!("port out of range:{port}"));
        };
        if port == 0 {
            return refuse(ListenerRule::PortZero {
                listeners: listeners(),
            });
        }
        if endpoints.iter().any(|e| e.listener_name == name) {
            return refuse(ListenerRule::DuplicateName {
                listeners: listeners(),
            });
        }
        endpoints.push(Endpoint {
            listener_name: name,
            host: (!host.is_empty()).then(|| host.to_string()),
            port,
        });
    }
    Ok(endpoints)
}

/// Kafka's `^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)` on a whole entry: the name,
/// the host (brackets of an IPv6 address dropped) and the port's digits.
fn split_entry(entry: &str) -> Option<(&str, &str, &str)> {
    let (name, address) = entry.rsplit_once("://")?;
    let (host, port) = address.rsplit_once(':')?;
    let host = host.strip_prefix('[').unwrap_or(host);
    let host = host.strip_suffix(']').unwrap_or(host);
    let host_ok = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '%' | '.' | '_' | ':'));
    let digits = port.strip_prefix('-').unwrap_or(port);
    let port_ok = !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit());
    (host_ok && port_ok).then_some((name, host, port))
}
