//! The APIs and versions kpfs serves: what ApiVersions advertises and what a request is
//! checked against. Each range is Kafka 4.x's where kpfs handles every field of every
//! version in it, and stops lower where a newer version needs what kpfs lacks
//! (docs/KAFKA-PROTOCOL.md says which and why).

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;

/// Every served API with its versions, in ApiVersions's order (by key).
pub(crate) const SERVED: &[(ApiKey, i16, i16)] = &[
    // v13 names topics by id only.
    (ApiKey::Produce, 3, 12),
    // v13+ name topics by id; v4 is the first with magic 2 (librdkafka needs it advertised).
    (ApiKey::Fetch, 4, 12),
    // v8+ add tiered-storage timestamps (-4, -5) kpfs has no meaning for.
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    // The group APIs: every version Kafka 4.x serves and kafka-protocol encodes (Kafka 4
    // dropped OffsetCommit v0-1 and OffsetFetch v0; v10 of both, which name topics by
    // id, came in Kafka 4.1). KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe
    // are not served, so clients use these, the classic protocol.
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    // v6 names topics by id too; both are served.
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    // AddPartitionsToTxn v4+ are between brokers; EndTxn v5, TxnOffsetCommit v5 and
    // Produce v12 are transaction version 2's.
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    // Answered as by a Kafka without an authorizer, which kpfs is (Kafka 4 dropped v0).
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    // Kafka 4.3.1 serves v0-3 (v2 is flexible; v3 only marks the throttling of KIP-599).
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::OffsetDelete, 0, 0),
    // v2 lists controllers with endpoint type 2, which a single node does not split.
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    // v2's transactional id pattern (KIP-1152) is not served.
    (ApiKey::ListTransactions, 0, 1),
    (ApiKey::DescribeTopicPartitions, 0, 0),
];

/// The versions kpfs serves of `key`, `None` when it does not serve the API.
pub(crate) fn supported_versions(key: ApiKey) -> Option<VersionRange> {
    SERVED
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|&(_, min, max)| VersionRange { min, max })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_range_is_one_the_protocol_crate_can_encode() {
        for &(key, min, max) in SERVED {
            let known = key.valid_versions();
            assert!(min <= max, "{key:?}");
            assert!(
                known.min <= min && max <= known.max,
                "{key:?} {min}..{max} vs {known}"
            );
        }
    }

    #[test]
    fn librdkafka_writes_magic_2_only_with_produce_3_and_fetch_4() {
        assert!(supported_versions(ApiKey::Produce).unwrap().max >= 3);
        assert!(supported_versions(ApiKey::Fetch).unwrap().max >= 4);
        assert!(supported_versions(ApiKey::Metadata).unwrap().max >= 4);
    }
}
