//! The parts of Kafka's consumer protocol (`ConsumerProtocolSubscription` and
//! `ConsumerProtocolAssignment`, versions 0-3, big-endian and non-flexible) the
//! coordinator reads: the topics a member subscribes to (OffsetDelete refuses those,
//! Kafka's `GROUP_SUBSCRIBED_TO_TOPIC`) and the partitions it was assigned (the group
//! view). The bytes stay opaque to everything else: the client's assignor computes
//! the assignment, as in Kafka.

/// The protocol type of Kafka's consumers.
pub(crate) const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The subscribed topics of a consumer's JoinGroup metadata; `None` when the bytes
/// are not a consumer subscription.
pub(crate) fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut r = Cursor(metadata);
    r.i16()?;
    let count = r.i32()?;
    (0..count).map(|_| r.string()).collect()
}

/// The (topic, partitions) of a consumer's assignment; `None` when the bytes are not
/// one (an empty assignment is `Some` of nothing).
pub(crate) fn assigned_partitions(assignment: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    if assignment.is_empty() {
        return Some(Vec::new());
    }
    let mut r = Cursor(assignment);
    r.i16()?;
    let count = r.i32()?;
    (0..count)
        .map(|_| {
            let topic = r.string()?;
            let partitions = r.i32()?;
            let partitions = (0..partitions)
                .map(|_| r.i32())
                .collect::<Option<Vec<_>>>()?;
            Some((topic, partitions))
        })
        .collect()
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let head = self.0.get(..N)?.try_into().ok()?;
        self.0 = &self.0[N..];
        Some(head)
    }
    fn i16(&mut self) -> Option<i16> {
        self.take::<2>().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take::<4>().map(i32::from_be_bytes)
    }
    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16()?).ok()?;
        let bytes = self.0.get(..len)?;
        self.0 = &self.0[len..];
        String::from_utf8(bytes.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kafka_python_subscription_and_assignment_bytes() {
        // Version 0, topics ["a", "bc"], null user data.
        let subscription = [
            0, 0, 0, 0, 0, 2, 0, 1, b'a', 0, 2, b'b', b'c', 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(
            subscribed_topics(&subscription),
            Some(vec!["a".to_string(), "bc".to_string()])
        );
        // Version 0, [("a", [0])], empty user data.
        let assignment = [
            0, 0, 0, 0, 0, 1, 0, 1, b'a', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(
            assigned_partitions(&assignment),
            Some(vec![("a".to_string(), vec![0])])
        );
        assert_eq!(assigned_partitions(&[]), Some(vec![]));
        assert_eq!(subscribed_topics(&[0, 0, 0, 0, 0, 5]), None);
    }
}
