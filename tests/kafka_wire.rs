//! The Kafka listener driven over a real socket on 127.0.0.1 with kafka-protocol's
//! messages as the client, and the engine read back as `cat` would.

mod common;

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use kpfs::engine::format::{BatchBuilder, ClientBatch};

use common::kafka::{
    batch, capture_log, fetch, logged_about, metadata, name, produce, produce_request, values_of,
    Broker, Client, MAX_REQUEST,
};
use common::PartitionZero;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_producers_request;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    alter_configs_request, create_partitions_request, create_topics_request, fetch_request,
    produce_request,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, ApiVersionsRequest, CreateAclsRequest, CreatePartitionsRequest,
    CreateTopicsRequest, DeleteAclsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    DescribeAclsRequest, DescribeClusterRequest, DescribeConfigsRequest, DescribeProducersRequest,
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, FetchRequest,
    FindCoordinatorRequest, IncrementalAlterConfigsRequest, InitProducerIdRequest,
    ListOffsetsRequest, MetadataRequest, ResponseHeader, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;

#[test]
fn api_versions_lists_the_served_ranges_and_answers_unknown_versions_with_them() {
    let broker = Broker::start();
    let mut client = broker.client();
    let response = client.send(3, &ApiVersionsRequest::default());
    assert_eq!(response.error_code, 0);
    let range = |key: ApiKey| {
        let v = response
            .api_keys
            .iter()
            .find(|v| v.api_key == key as i16)
            .unwrap();
        (v.min_version, v.max_version)
    };
    assert_eq!(range(ApiKey::Produce), (3, 12));
    assert_eq!(range(ApiKey::Fetch), (4, 12));
    assert!(range(ApiKey::Metadata).1 >= 4);

    // KIP-511: a version from the future gets UNSUPPORTED_VERSION in a v0 response.
    let mut frame = client.frame(3, &ApiVersionsRequest::default());
    frame[6..8].copy_from_slice(&99i16.to_be_bytes());
    client.stream.write_all(&frame).unwrap();
    let mut body = client.read_response().unwrap();
    let header = ResponseHeader::decode(&mut body, 0).unwrap();
    assert_eq!(header.correlation_id, client.correlation_id);
    let error = kafka_protocol::messages::ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(error.error_code, 35);
    assert!(!error.api_keys.is_empty());
    // The connection stays open.
    assert_eq!(client.send(0, &ApiVersionsRequest::default()).error_code, 0);
}

/// DescribeTopicPartitions of `topics` (all of them when empty), at most `limit`
/// partitions, from `cursor` (a topic and partition) if any.
fn describe_topic_partitions(
    client: &mut Client,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsResponse {
    let mut request = DescribeTopicPartitionsRequest::default();
    request.topics = topics
        .iter()
        .map(|t| {
            let mut r = TopicRequest::default();
            r.name = name(t);
            r
        })
        .collect();
    request.response_partition_limit = limit;
    request.cursor = cursor.map(|(t, p)| {
        let mut c = Cursor::default();
        c.topic_name = name(t);
        c.partition_index = p;
        c
    });
    client.send(0, &request)
}

/// DescribeTopicPartitions as Kafka's handler pages it: sorted topics from the cursor's on,
/// at most `response_partition_limit` partitions, the next page's cursor at the first
/// topic left out; ELR and last known ELR empty.
#[test]
fn describe_topic_partitions_pages_with_kafkas_cursor() {
    let broker = Broker::start();
    let mut client = broker.client();
    for topic in ["c", "a", "b"] {
        broker.engine.create_topic(topic, 1).unwrap();
    }
    let ask = |client: &mut Client, topics: &[&str], limit: i32, cursor: Option<&str>| {
        describe_topic_partitions(client, topics, limit, cursor.map(|t| (t, 0)))
    };
    let names = |r: &DescribeTopicPartitionsResponse| -> Vec<(String, i16)> {
        r.topics
            .iter()
            .map(|t| (t.name.as_ref().unwrap().0.to_string(), t.error_code))
            .collect()
    };
    let next = |r: &DescribeTopicPartitionsResponse| {
        r.next_cursor
            .as_ref()
            .map(|c| (c.topic_name.0.to_string(), c.partition_index))
    };
    let page = ask(&mut client, &[], 2, None);
    assert_eq!(names(&page), [("a".into(), 0), ("b".into(), 0)]);
    assert_eq!(next(&page), Some(("c".into(), 0)));
    let partition = &page.topics[0].partitions[0];
    assert_eq!(partition.eligible_leader_replicas, Some(vec![]));
    assert_eq!(partition.last_known_elr, Some(vec![]));
    assert_eq!(partition.isr_nodes, partition.replica_nodes);
    assert_eq!(
        page.topics[0].topic_id.as_bytes(),
        &broker
            .engine
            .topic("a")
            .unwrap()
            .p0()
            .log()
            .topic_id()
            .to_bytes()
    );
    let rest = ask(&mut client, &[], 2, Some("c"));
    assert_eq!(names(&rest), [("c".into(), 0)]);
    assert_eq!(next(&rest), None);
    // Named topics: sorted, deduplicated; a missing one is UNKNOWN_TOPIC_OR_PARTITION, an
    // invalid name INVALID_TOPIC_EXCEPTION, and a cursor outside them INVALID_REQUEST.
    let named = ask(
        &mut client,
        &["c", "nope", "a", "c", "bad/name"],
        2000,
        None,
    );
    assert_eq!(
        names(&named),
        [
            ("a".into(), 0),
            ("bad/name".into(), 17),
            ("c".into(), 0),
            ("nope".into(), 3)
        ]
    );
    assert!(named.topics[1].partitions.is_empty());
    let refused = ask(&mut client, &["a", "b"], 2000, Some("c"));
    assert_eq!(names(&refused), [("a".into(), 42), ("b".into(), 42)]);
    // The broker's max.request.partition.size.limit bounds the page too.
    let capped = Broker::start_with(|c| c.max_request_partition_size_limit = 1);
    let mut client = capped.client();
    capped.engine.create_topic("x", 1).unwrap();
    capped.engine.create_topic("y", 1).unwrap();
    let page = ask(&mut client, &[], 2000, None);
    assert_eq!(names(&page), [("x".into(), 0)]);
    assert_eq!(next(&page), Some(("y".into(), 0)));
}

#[test]
fn metadata_creates_topics_when_allowed_and_reports_the_topic_id() {
    let broker = Broker::start();
    let mut client = broker.client();
    assert_eq!(metadata(&mut client, 12, "refused", false), 3);
    assert!(broker.engine.topic("refused").is_none());
    assert_eq!(metadata(&mut client, 12, "orders", true), 0);
    let topic = broker.engine.topic("orders").expect("auto-created");
    let mut request = MetadataRequest::default();
    request.topics = None;
    let response = client.send(12, &request);
    let listed = &response.topics[0];
    assert_eq!(listed.name.as_ref().unwrap().0.as_str(), "orders");
    assert_eq!(
        listed.topic_id.as_bytes(),
        &topic.p0().log().topic_id().to_bytes()
    );
    assert_eq!(listed.partitions.len(), 1);
    assert_eq!(listed.partitions[0].leader_id.0, 1);
    // v0 (empty list = every topic) and an invalid name.
    assert_eq!(metadata(&mut client, 0, "orders", true), 0);
    assert_eq!(metadata(&mut client, 4, "bad/name", true), 17);
}

/// Every operation of Kafka's `AclEntry.supportedOperations`, as `AclOperation` bits.
const TOPIC_OPERATIONS: i32 = 1 << 3 // READ
    | 1 << 4 // WRITE
    | 1 << 5 // CREATE
    | 1 << 6 // DELETE
    | 1 << 7 // ALTER
    | 1 << 8 // DESCRIBE
    | 1 << 10 // DESCRIBE_CONFIGS
    | 1 << 11; // ALTER_CONFIGS
const CLUSTER_OPERATIONS: i32 = 1 << 5 // CREATE
    | 1 << 7 // ALTER
    | 1 << 8 // DESCRIBE
    | 1 << 9 // CLUSTER_ACTION
    | 1 << 10 // DESCRIBE_CONFIGS
    | 1 << 11 // ALTER_CONFIGS
    | 1 << 12; // IDEMPOTENT_WRITE

#[test]
fn authorized_operations_are_every_supported_one_when_asked() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 1).unwrap();
    for version in 0..=12 {
        for asked in [false, true] {
            let mut request = MetadataRequest::default();
            request.topics = Some(
                ["t", "missing"]
                    .iter()
                    .map(|t| {
                        let mut topic = MetadataRequestTopic::default();
                        topic.name = Some(name(t));
                        topic
                    })
                    .collect(),
            );
            request.include_topic_authorized_operations = asked && version >= 8;
            request.include_cluster_authorized_operations = asked && (8..=10).contains(&version);
            let response = client.send(version, &request);
            let topics = if asked && version >= 8 {
                TOPIC_OPERATIONS
            } else {
                i32::MIN
            };
            for topic in &response.topics {
                assert_eq!(
                    topic.topic_authorized_operations, topics,
                    "Metadata v{version} {:?}, asked: {asked}",
                    topic.name
                );
            }
            if version <= 10 {
                let cluster = if asked && version >= 8 {
                    CLUSTER_OPERATIONS
                } else {
                    i32::MIN
                };
                assert_eq!(
                    response.cluster_authorized_operations, cluster,
                    "Metadata v{version}, asked: {asked}"
                );
            }
        }
    }
    for version in 0..=1 {
        for asked in [false, true] {
            let mut request = DescribeClusterRequest::default();
            request.include_cluster_authorized_operations = asked;
            let expected = if asked { CLUSTER_OPERATIONS } else { i32::MIN };
            assert_eq!(
                client.send(version, &request).cluster_authorized_operations,
                expected,
                "DescribeCluster v{version}, asked: {asked}"
            );
        }
    }
}

#[test]
fn produced_batches_are_read_back_by_cat_and_by_fetch() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 1).unwrap();
    for version in [3, 9, 12] {
        let (code, _) = produce(
            &mut client,
            version,
            "t",
            batch(&[(None, &format!("v{version}"))]),
        );
        assert_eq!(code, 0, "Produce v{version}");
    }
    let (code, base) = produce(&mut client, 12, "t", batch(&[(None, "a"), (None, "b")]));
    assert_eq!((code, base), (0, 3));
    let topic = broker.engine.topic("t").unwrap();
    assert_eq!(common::cat_string(&topic), "v3\nv9\nv12\na\nb\n");

    for version in [4, 11, 12] {
        let (code, records) = fetch(&mut client, version, "t", 0, 0);
        assert_eq!(code, 0, "Fetch v{version}");
        assert_eq!(
            values_of(records),
            ["v3", "v9", "v12", "a", "b"],
            "Fetch v{version}"
        );
    }
    // From inside the last batch: that batch whole (the client skips offset 3).
    let (_, records) = fetch(&mut client, 12, "t", 4, 0);
    assert_eq!(values_of(records), ["a", "b"]);
    // Unknown partition or topic.
    assert_eq!(
        produce(&mut client, 9, "missing", batch(&[(None, "x")])).0,
        3
    );
}

/// A refused Produce carries a message only where Kafka's does: for the records
/// LogValidator refused. Other refusals are the code alone, which clients show in the
/// error's own words (Java's RecordTooLargeException: "The request included a message
/// larger than the max message size the server will accept.").
#[test]
fn produce_refusals_carry_a_message_only_for_refused_records() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("small", 1).unwrap();
    common::set(
        &broker.engine.topic("small").unwrap(),
        "max.message.bytes=100\n",
    );
    broker.engine.create_topic("compacted", 1).unwrap();
    common::set(
        &broker.engine.topic("compacted").unwrap(),
        "cleanup.policy=compact\n",
    );
    let refusal = |client: &mut Client, acks: i16, topic: &str, records: Bytes| {
        let mut request = produce_request(topic, records);
        request.acks = acks;
        let response = client.send(9, &request);
        let p = &response.responses[0].partition_responses[0];
        (
            p.error_code,
            p.error_message.as_ref().map(|m| m.to_string()),
        )
    };
    let large = "x".repeat(200);
    assert_eq!(
        refusal(&mut client, -1, "small", batch(&[(None, &large)])),
        (10, None)
    );
    assert_eq!(
        refusal(&mut client, 2, "small", batch(&[(None, "x")])),
        (21, None)
    );
    assert_eq!(
        refusal(&mut client, -1, "missing", batch(&[(None, "x")])),
        (3, None)
    );
    let keyless = refusal(&mut client, -1, "compacted", batch(&[(None, "v")]));
    assert_eq!(keyless.0, 87);
    let message = keyless.1.unwrap_or_default();
    assert!(
        message.contains(
            "Compacted topic cannot accept message without key in topic partition compacted-0"
        ),
        "{message}"
    );
    assert_eq!(
        common::cat_string(&broker.engine.topic("small").unwrap()),
        ""
    );
}

/// kpfs has no authorizer, and its ACL APIs answer as Kafka's without one: every version
/// SECURITY_DISABLED in Kafka's words, whatever the ACLs (ANY and codes Kafka does not
/// define included); a request with an UNKNOWN (0) element, which Kafka's parser refuses,
/// closes the connection. As a Kafka 4.3.1 broker answered raw requests.
#[test]
fn acl_apis_answer_as_kafka_without_an_authorizer() {
    let broker = Broker::start();
    let mut client = broker.client();
    let describe = |resource_type: i8| {
        let mut r = DescribeAclsRequest::default();
        r.resource_type_filter = resource_type;
        r.pattern_type_filter = 1;
        r.operation = 1;
        r.permission_type = 1;
        r
    };
    let creation = |operation: i8| {
        let mut c = AclCreation::default();
        c.resource_type = 2;
        c.resource_name = StrBytes::from_static_str("t");
        c.resource_pattern_type = 3;
        c.principal = StrBytes::from_static_str("User:alice");
        c.host = StrBytes::from_static_str("*");
        c.operation = operation;
        c.permission_type = 3;
        c
    };
    let filter = || {
        let mut f = DeleteAclsFilter::default();
        f.resource_type_filter = 1;
        f.pattern_type_filter = 2;
        f.operation = 1;
        f.permission_type = 1;
        f
    };
    for version in 1..=3 {
        let described = client.send(version, &describe(2));
        assert_eq!(
            (described.error_code, described.error_message.as_deref()),
            (54, Some("No Authorizer is configured on the broker")),
            "DescribeAcls v{version}"
        );
        assert!(described.resources.is_empty());
        let mut create = CreateAclsRequest::default();
        create.creations = vec![creation(3), creation(1), creation(99)];
        let created = client.send(version, &create);
        assert_eq!(
            created
                .results
                .iter()
                .map(|r| (r.error_code, r.error_message.as_deref()))
                .collect::<Vec<_>>(),
            [(54, Some("No Authorizer is configured.")); 3],
            "CreateAcls v{version}"
        );
        let mut delete = DeleteAclsRequest::default();
        delete.filters = vec![filter()];
        let deleted = client.send(version, &delete);
        let result = &deleted.filter_results[0];
        assert_eq!(
            (result.error_code, result.error_message.as_deref()),
            (54, Some("No Authorizer is configured.")),
            "DeleteAcls v{version}"
        );
        assert!(result.matching_acls.is_empty());
    }

    let mut unknown = broker.client();
    let frame = unknown.frame(3, &describe(0));
    unknown.stream.write_all(&frame).unwrap();
    assert!(
        unknown.is_closed(),
        "DescribeAcls with an UNKNOWN resource type"
    );
    let mut unknown = broker.client();
    let mut create = CreateAclsRequest::default();
    create.creations = vec![creation(3), creation(0)];
    let frame = unknown.frame(3, &create);
    unknown.stream.write_all(&frame).unwrap();
    assert!(
        unknown.is_closed(),
        "CreateAcls of an ACL for an UNKNOWN operation"
    );
    let mut unknown = broker.client();
    let mut delete = DeleteAclsRequest::default();
    let mut f = filter();
    f.permission_type = 0;
    delete.filters = vec![f];
    let frame = unknown.frame(1, &delete);
    unknown.stream.write_all(&frame).unwrap();
    assert!(
        unknown.is_closed(),
        "DeleteAcls with an UNKNOWN permission type"
    );
    // The other connection goes on.
    assert_eq!(client.send(3, &describe(1)).error_code, 54);
}

/// DescribeProducers lists the producer state a partition keeps, as Kafka's
/// `Partition.activeProducerState`; a topic or partition that does not exist is the code
/// alone.
#[test]
fn describe_producers_lists_each_idempotent_producers_state() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 1).unwrap();
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = None;
    init.transaction_timeout_ms = -1;
    let producer = client.send(4, &init).producer_id.0;
    assert!(producer >= 0);
    for base_sequence in [0, 2] {
        let mut b = BatchBuilder::new(0);
        b.push(0, common::T0, None, Some(b"a"));
        b.push(1, common::T0 + 5, None, Some(b"b"));
        let records =
            Bytes::from(b.finish_client((producer, 0, base_sequence), ClientBatch::PLAIN));
        assert_eq!(produce(&mut client, 9, "t", records).0, 0);
    }
    assert_eq!(produce(&mut client, 9, "t", batch(&[(None, "plain")])).0, 0);

    let asked = |name: &str, partitions: Vec<i32>| {
        let mut t = describe_producers_request::TopicRequest::default();
        t.name = kafka_protocol::messages::TopicName(StrBytes::from_string(name.to_string()));
        t.partition_indexes = partitions;
        t
    };
    let mut request = DescribeProducersRequest::default();
    request.topics = vec![asked("t", vec![0, 1]), asked("missing", vec![0])];
    let response = client.send(0, &request);
    let t = &response.topics[0];
    let state = &t.partitions[0];
    assert_eq!((state.partition_index, state.error_code), (0, 0));
    assert_eq!(
        state
            .active_producers
            .iter()
            .map(|p| (
                p.producer_id.0,
                p.producer_epoch,
                p.last_sequence,
                p.last_timestamp,
                p.coordinator_epoch,
                p.current_txn_start_offset
            ))
            .collect::<Vec<_>>(),
        [(producer, 0, 3, common::T0 + 5, -1, -1)],
        "the idempotent producer, not the plain batch"
    );
    assert_eq!(
        (
            t.partitions[1].partition_index,
            t.partitions[1].error_code,
            t.partitions[1].error_message.as_deref()
        ),
        (1, 3, None)
    );
    let missing = &response.topics[1].partitions[0];
    assert_eq!((missing.error_code, missing.active_producers.len()), (3, 0));
}

#[test]
fn a_parked_fetch_answers_when_a_record_arrives() {
    let broker = Broker::start();
    broker.engine.create_topic("t", 1).unwrap();
    let mut consumer = broker.client();
    let topic = broker.engine.topic("t").unwrap();
    let writer = std::thread::spawn(move || {
        // The consumer is parked by now or soon; either way it must get the record.
        topic.append_lines(b"late\n").unwrap();
    });
    let (code, records) = fetch(&mut consumer, 12, "t", 0, 30_000);
    writer.join().unwrap();
    assert_eq!(code, 0);
    assert_eq!(values_of(records), ["late"]);
}

fn list_offset(client: &mut Client, version: i16, topic: &str, timestamp: i64) -> (i16, i64) {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = name(topic);
    t.partitions = vec![p];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = kafka_protocol::messages::BrokerId(-1);
    request.topics = vec![t];
    let response = client.send(version, &request);
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.offset)
}

#[test]
fn list_offsets_gives_the_log_start_and_end() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 1).unwrap();
    let topic = broker.engine.topic("t").unwrap();
    topic.append_lines(b"a\nb\nc\n").unwrap();
    for version in 1..=7 {
        assert_eq!(
            list_offset(&mut client, version, "t", -2),
            (0, 0),
            "v{version}"
        );
        assert_eq!(
            list_offset(&mut client, version, "t", -1),
            (0, 3),
            "v{version}"
        );
    }
}

/// Each served version of each API is answered with a response that decodes at that
/// version (kafka-protocol refuses to encode a field a version lacks).
#[test]
fn every_served_version_is_answered() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 1).unwrap();
    for version in 0..=4 {
        assert_eq!(
            client
                .send(version, &ApiVersionsRequest::default())
                .error_code,
            0
        );
    }
    for version in 0..=12 {
        assert_eq!(
            metadata(&mut client, version, "t", true),
            0,
            "Metadata v{version}"
        );
    }
    for version in 3..=12 {
        let (code, _) = produce(&mut client, version, "t", batch(&[(None, "x")]));
        assert_eq!(code, 0, "Produce v{version}");
    }
    for version in 4..=12 {
        assert_eq!(
            fetch(&mut client, version, "t", 0, 0).0,
            0,
            "Fetch v{version}"
        );
    }
    for version in 0..=6 {
        let mut request = FindCoordinatorRequest::default();
        if version < 4 {
            request.key = StrBytes::from_static_str("group");
        } else {
            request.coordinator_keys = vec![StrBytes::from_static_str("group")];
        }
        let response = client.send(version, &request);
        let (code, node) = if version < 4 {
            (response.error_code, response.node_id.0)
        } else {
            (
                response.coordinators[0].error_code,
                response.coordinators[0].node_id.0,
            )
        };
        assert_eq!((code, node), (0, 1), "FindCoordinator v{version}");
    }
    for version in 0..=1 {
        let response = client.send(version, &DescribeClusterRequest::default());
        assert_eq!(response.brokers.len(), 1, "DescribeCluster v{version}");
    }
    for version in 0..=5 {
        let mut request = InitProducerIdRequest::default();
        request.transactional_id = None;
        request.transaction_timeout_ms = -1;
        assert_eq!(
            client.send(version, &request).error_code,
            0,
            "InitProducerId v{version}"
        );
    }
    for version in 0..=2 {
        let mut p = DeleteRecordsPartition::default();
        p.partition_index = 0;
        p.offset = 0;
        let mut t = DeleteRecordsTopic::default();
        t.name = name("t");
        t.partitions = vec![p];
        let mut request = DeleteRecordsRequest::default();
        request.topics = vec![t];
        let response = client.send(version, &request);
        let code = response.topics[0].partitions[0].error_code;
        assert_eq!(code, 0, "DeleteRecords v{version}");
    }
    for version in 1..=4 {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = 2;
        r.resource_name = StrBytes::from_static_str("t");
        let mut request = DescribeConfigsRequest::default();
        request.resources = vec![r];
        let response = client.send(version, &request);
        assert_eq!(
            response.results[0].error_code, 0,
            "DescribeConfigs v{version}"
        );
    }
    for version in 0..=2 {
        let mut resource = alter_configs_request::AlterConfigsResource::default();
        resource.resource_type = 2;
        resource.resource_name = StrBytes::from_static_str("t");
        let mut request = AlterConfigsRequest::default();
        request.resources = vec![resource];
        let response = client.send(version, &request);
        assert_eq!(
            response.responses[0].error_code, 0,
            "AlterConfigs v{version}"
        );
    }
    for version in 2..=7 {
        let mut t = CreatableTopic::default();
        t.name = name(&format!("created-v{version}"));
        t.num_partitions = 1;
        t.replication_factor = 1;
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![t];
        let response = client.send(version, &request);
        assert_eq!(response.topics[0].error_code, 0, "CreateTopics v{version}");
    }
    for version in 1..=6 {
        let mut request = DeleteTopicsRequest::default();
        let topic = format!("created-v{}", version + 1);
        if version < 6 {
            request.topic_names = vec![name(&topic)];
        } else {
            let mut state = DeleteTopicState::default();
            state.name = Some(name(&topic));
            request.topics = vec![state];
        }
        let response = client.send(version, &request);
        assert_eq!(
            response.responses[0].error_code, 0,
            "DeleteTopics v{version}"
        );
        assert!(broker.engine.topic(&topic).is_none());
    }
}

#[test]
fn create_topics_refuses_partitions_and_bad_configs_in_kafkas_words() {
    let broker = Broker::start();
    let mut client = broker.client();
    let create = |client: &mut Client, topic: &str, partitions: i32, configs: &[(&str, &str)]| {
        let mut t = CreatableTopic::default();
        t.name = name(topic);
        t.num_partitions = partitions;
        t.replication_factor = -1;
        t.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut c = CreatableTopicConfig::default();
                c.name = StrBytes::from_string(k.to_string());
                c.value = Some(StrBytes::from_string(v.to_string()));
                c
            })
            .collect();
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![t];
        request.timeout_ms = 5000;
        let response = client.send(7, &request);
        let r = &response.topics[0];
        (
            r.error_code,
            r.error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        )
    };
    let (code, message) = create(&mut client, "none", 0, &[]);
    assert_eq!(code, 37);
    assert_eq!(
        message,
        "Number of partitions was set to an invalid non-positive value."
    );
    assert!(broker.engine.topic("none").is_none());

    let (code, message) = create(&mut client, "bad", 1, &[("retention.ms", "-7")]);
    assert_eq!(code, 40);
    assert!(message.contains("retention.ms"), "{message}");
    assert!(broker.engine.topic("bad").is_none());

    assert_eq!(
        create(&mut client, "good", 1, &[("retention.ms", "1000")]).0,
        0
    );
    assert!(broker
        .engine
        .topic("good")
        .unwrap()
        .config_text()
        .contains("retention.ms=1000\n"));
    assert_eq!(create(&mut client, "good", -1, &[]).0, 36);

    let mut request = DeleteTopicsRequest::default();
    request.topic_names = vec![name("good")];
    let response = client.send(5, &request);
    assert_eq!(response.responses[0].error_code, 0);
    assert!(broker.engine.topic("good").is_none());
}

#[test]
fn configs_are_described_and_altered_through_the_engines_validators() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 1).unwrap();
    let alter = |client: &mut Client, value: &str| {
        let mut c = AlterableConfig::default();
        c.name = StrBytes::from_static_str("cleanup.policy");
        c.config_operation = 0;
        c.value = Some(StrBytes::from_string(value.to_string()));
        let mut resource = AlterConfigsResource::default();
        resource.resource_type = 2;
        resource.resource_name = StrBytes::from_static_str("t");
        resource.configs = vec![c];
        let mut request = IncrementalAlterConfigsRequest::default();
        request.resources = vec![resource];
        let response = client.send(1, &request);
        let r = &response.responses[0];
        (
            r.error_code,
            r.error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        )
    };
    assert_eq!(alter(&mut client, "compact").0, 0);
    assert!(broker
        .engine
        .topic("t")
        .unwrap()
        .config_text()
        .contains("cleanup.policy=compact\n"));
    let (code, message) = alter(&mut client, "shred");
    assert_eq!(code, 40);
    assert!(message.contains("shred"), "{message}");

    let describe = |client: &mut Client, kind: i8, resource: &str| {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = kind;
        r.resource_name = StrBytes::from_string(resource.to_string());
        r.configuration_keys = None;
        let mut request = DescribeConfigsRequest::default();
        request.resources = vec![r];
        request.include_synonyms = true;
        client.send(4, &request).results.remove(0)
    };
    let topic = describe(&mut client, 2, "t");
    assert_eq!(topic.error_code, 0);
    let policy = topic
        .configs
        .iter()
        .find(|c| c.name.as_str() == "cleanup.policy")
        .unwrap();
    assert_eq!(policy.value.as_deref(), Some("compact"));
    assert_eq!(policy.config_source, 1);
    let broker_configs = describe(&mut client, 4, "1");
    assert_eq!(broker_configs.error_code, 0);
    assert!(broker_configs
        .configs
        .iter()
        .any(|c| c.name.as_str() == "log.retention.hours"));
    assert_eq!(describe(&mut client, 2, "missing").error_code, 3);
    // Kafka's ConfigDef type (LIST is 7); kpfs's own configs only when named.
    assert_eq!(policy.config_type, 7);
    assert!(topic.configs.iter().all(|c| c.name.as_str() != "parse.key"));
    let mut named = DescribeConfigsResource::default();
    named.resource_type = 2;
    named.resource_name = StrBytes::from_static_str("t");
    named.configuration_keys = Some(vec![StrBytes::from_static_str("parse.key")]);
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![named];
    let parse_key = client.send(4, &request).results.remove(0);
    assert_eq!(parse_key.configs.len(), 1);
    assert_eq!(parse_key.configs[0].value.as_deref(), Some("false"));
}

#[test]
fn a_transaction_goes_through_the_wire_from_init_to_a_read_committed_fetch() {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::{
        AddPartitionsToTxnRequest, DescribeTransactionsRequest, EndTxnRequest,
        ListTransactionsRequest,
    };
    let broker = Broker::start();
    broker.engine.create_topic("t", 1).unwrap();
    let mut client = broker.client();
    let mut find = FindCoordinatorRequest::default();
    find.key_type = 1;
    find.key = StrBytes::from_static_str("tx");
    assert_eq!(client.send(2, &find).error_code, 0, "this node coordinates");
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx")));
    init.transaction_timeout_ms = 60_000;
    let response = client.send(4, &init);
    assert_eq!((response.error_code, response.producer_epoch), (0, 0));
    let pid = response.producer_id;
    init.transaction_timeout_ms = 900_001;
    assert_eq!(
        client.send(4, &init).error_code,
        ResponseError::InvalidTransactionTimeout.code(),
        "above transaction.max.timeout.ms"
    );
    let txn_batch = |values: &[&str], seq: i32| {
        let mut b = BatchBuilder::new(0);
        for (i, v) in values.iter().enumerate() {
            b.push(i as u64, 1_764_430_000_000, None, Some(v.as_bytes()));
        }
        Bytes::from(b.finish_client(
            (pid.0, 0, seq),
            ClientBatch {
                transactional: true,
                ..ClientBatch::PLAIN
            },
        ))
    };
    let mut produce_txn = produce_request("t", txn_batch(&["a", "b"], 0));
    produce_txn.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx")));
    let refused = client.send(9, &produce_txn);
    let p = &refused.responses[0].partition_responses[0];
    // Kafka's ReplicaManager answers its verification's refusal with the code alone.
    assert_eq!(
        (p.error_code, p.error_message.as_ref()),
        (ResponseError::InvalidTxnState.code(), None)
    );
    let mut add = AddPartitionsToTxnRequest::default();
    add.v3_and_below_transactional_id = TransactionalId(StrBytes::from_static_str("tx"));
    add.v3_and_below_producer_id = pid;
    add.v3_and_below_producer_epoch = 0;
    let mut topic = AddPartitionsToTxnTopic::default();
    topic.name = name("t");
    topic.partitions = vec![0];
    add.v3_and_below_topics = vec![topic];
    let added = client.send(3, &add);
    assert_eq!(
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    let appended = client.send(9, &produce_txn);
    assert_eq!(appended.responses[0].partition_responses[0].error_code, 0);
    // Until the commit a read_committed fetch stops at the open transaction.
    let read_committed = |client: &mut Client| {
        let mut partition = kafka_protocol::messages::fetch_request::FetchPartition::default();
        partition.fetch_offset = 0;
        partition.partition_max_bytes = 1 << 20;
        let mut t = kafka_protocol::messages::fetch_request::FetchTopic::default();
        t.topic = name("t");
        t.partitions = vec![partition];
        let mut request = FetchRequest::default();
        request.max_bytes = 1 << 20;
        request.isolation_level = 1;
        request.topics = vec![t];
        let response = client.send(12, &request);
        let p = response.responses[0].partitions[0].clone();
        (
            p.high_watermark,
            p.last_stable_offset,
            p.aborted_transactions.map(|a| a.len()),
            values_of(p.records.unwrap_or_default()),
        )
    };
    assert_eq!(read_committed(&mut client), (2, 0, Some(0), vec![]));
    let mut end = EndTxnRequest::default();
    end.transactional_id = TransactionalId(StrBytes::from_static_str("tx"));
    end.producer_id = pid;
    end.producer_epoch = 0;
    end.committed = true;
    assert_eq!(client.send(4, &end).error_code, 0);
    let (hw, lso, aborted, values) = read_committed(&mut client);
    assert_eq!((hw, lso, aborted), (3, 3, Some(0)));
    // The marker's control batch comes too, as from Kafka (clients drop control batches):
    // its record is the value of an EndTransactionMarker, version 0, coordinator epoch 0.
    assert_eq!(values, vec!["a", "b", "\0\0\0\0\0\0"]);
    let listed = client.send(1, &ListTransactionsRequest::default());
    let states: Vec<(String, String)> = listed
        .transaction_states
        .iter()
        .map(|t| {
            (
                t.transactional_id.0.to_string(),
                t.transaction_state.to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        vec![("tx".to_string(), "CompleteCommit".to_string())]
    );
    let mut describe = DescribeTransactionsRequest::default();
    describe.transactional_ids = vec![
        TransactionalId(StrBytes::from_static_str("tx")),
        TransactionalId(StrBytes::from_static_str("nope")),
    ];
    let described = client.send(0, &describe);
    assert_eq!(described.transaction_states[0].producer_id, pid);
    assert_eq!(
        described.transaction_states[1].error_code,
        ResponseError::TransactionalIdNotFound.code()
    );
}

/// Every kind of bad input closes its own connection with a log line saying why, leaves
/// another client served and appends nothing.
#[test]
fn bad_input_closes_only_the_offending_connection() {
    capture_log();
    let broker = Broker::start();
    broker.engine.create_topic("t", 1).unwrap();
    let mut bystander = broker.client();
    assert_eq!(
        bystander.send(3, &ApiVersionsRequest::default()).error_code,
        0
    );

    // (what, bytes sent, what the log line says)
    let mut cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "garbage",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            // "GET " read as a size prefix.
            format!("Invalid receive (size = 1195725856 larger than {MAX_REQUEST})"),
        ),
        (
            "huge frame",
            ((MAX_REQUEST + 1) as i32).to_be_bytes().to_vec(),
            format!("larger than {MAX_REQUEST}"),
        ),
        (
            "negative size",
            (-5i32).to_be_bytes().to_vec(),
            "Invalid receive (size = -5)".into(),
        ),
    ];
    // Unknown API key 999 in an otherwise whole frame.
    let mut unknown = bystander.frame(0, &ApiVersionsRequest::default());
    unknown[4..6].copy_from_slice(&999i16.to_be_bytes());
    cases.push(("unknown api key", unknown, "unknown API key 999".into()));
    // Served APIs at versions kpfs does not serve (Produce v2 is magic 1, Fetch v13+
    // names topics by id).
    for (key, version, request) in [
        (
            ApiKey::Metadata,
            99i16,
            bystander.frame(12, &MetadataRequest::default()),
        ),
        (
            ApiKey::Produce,
            2,
            bystander.frame(3, &produce_request("t", batch(&[(None, "v2")]))),
        ),
        (
            ApiKey::Fetch,
            13,
            bystander.frame(12, &FetchRequest::default()),
        ),
    ] {
        let mut frame = request;
        frame[6..8].copy_from_slice(&version.to_be_bytes());
        cases.push((
            "unsupported version",
            frame,
            format!("{key:?} version {version} is not supported"),
        ));
    }
    // Whole frames whose body is cut short, the size prefix matching what was sent.
    let cut = |mut frame: Vec<u8>| {
        frame.truncate(frame.len() - 1);
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        frame
    };
    cases.push((
        "malformed body",
        cut(bystander.frame(12, &MetadataRequest::default())),
        "malformed Metadata v12 request".into(),
    ));
    cases.push((
        "produce with its records cut",
        cut(bystander.frame(9, &produce_request("t", batch(&[(None, "cut")])))),
        "malformed Produce v9 request".into(),
    ));
    // A real Produce request over socket.request.max.bytes: refused on its size prefix.
    let big = "x".repeat(MAX_REQUEST);
    cases.push((
        "produce over socket.request.max.bytes",
        bystander.frame(9, &produce_request("t", batch(&[(None, &big)]))),
        format!("larger than {MAX_REQUEST}"),
    ));
    for (what, bytes, reason) in cases {
        let mut client = broker.client();
        let peer = client.stream.local_addr().unwrap();
        // The server may close before all of a big frame is written.
        let _ = client.stream.write_all(&bytes);
        assert!(client.is_closed(), "{what}: the connection stays open");
        let logged = logged_about(peer);
        assert!(
            logged
                .iter()
                .any(|l| l.contains("closing Kafka connection") && l.contains(&reason)),
            "{what}: no log line saying {reason:?}: {logged:?}"
        );
    }
    // A frame that never completes: the client closes halfway.
    let mut truncated = broker.client();
    let peer = truncated.stream.local_addr().unwrap();
    truncated.stream.write_all(&100i32.to_be_bytes()).unwrap();
    truncated.stream.write_all(&[0; 10]).unwrap();
    truncated
        .stream
        .shutdown(std::net::Shutdown::Write)
        .unwrap();
    assert!(truncated.is_closed());
    assert!(logged_about(peer)
        .iter()
        .any(|l| l.contains("closed by the client 10 bytes into a request of 100 bytes")));

    // Records that are not a batch, in a well-formed request: Kafka's CORRUPT_MESSAGE,
    // and the connection stays open.
    let (code, _) = produce(
        &mut bystander,
        9,
        "t",
        bytes::Bytes::from_static(b"not a record batch at all"),
    );
    assert_ne!(code, 0);
    assert_eq!(
        bystander.send(3, &ApiVersionsRequest::default()).error_code,
        0
    );
    let topic = broker.engine.topic("t").unwrap();
    assert_eq!(
        topic.p0().log().log_end_offset(),
        0,
        "something was appended"
    );
    // The mount's side is unaffected too.
    topic.append_lines(b"from the mount\n").unwrap();
    assert_eq!(
        produce(&mut bystander, 12, "t", batch(&[(None, "wire")])),
        (0, 1)
    );
    assert_eq!(common::cat_string(&topic), "from the mount\nwire\n");
}

#[test]
fn idle_and_slow_connections_are_closed_after_connections_max_idle_ms() {
    capture_log();
    let broker = Broker::start_with(|c| c.connections_max_idle_ms = 300);
    let mut idle = broker.client();
    let idle_peer = idle.stream.local_addr().unwrap();
    assert!(idle.is_closed());
    assert!(logged_about(idle_peer)
        .iter()
        .any(|l| l.contains("idle for connections.max.idle.ms")));
    // One byte of a request, then nothing: the request does not arrive in time.
    let mut slow = broker.client();
    slow.stream.write_all(&[0]).unwrap();
    assert!(slow.is_closed());
    let mut fresh = broker.client();
    assert_eq!(fresh.send(3, &ApiVersionsRequest::default()).error_code, 0);
}

/// A client sending a request a byte at a time, each byte well within
/// `connections.max.idle.ms` of the last: Kafka counts every byte as activity and keeps
/// such a connection as long as the bytes come; kpfs wants the whole request within
/// `connections.max.idle.ms`, so one slow client holds a thread for that long at most.
#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "the client trickles its bytes in real time, against the server's real-time deadline"
)]
fn a_client_trickling_a_byte_at_a_time_is_closed_after_connections_max_idle_ms() {
    capture_log();
    let idle = Duration::from_millis(600);
    let broker = Broker::start_with(|c| c.connections_max_idle_ms = idle.as_millis() as u64);
    broker.engine.create_topic("t", 1).unwrap();
    let mut trickler = broker.client();
    let peer = trickler.stream.local_addr().unwrap();
    let frame = trickler.frame(9, &produce_request("t", batch(&[(None, "slow")])));
    let started = std::time::Instant::now();
    let mut sent = 0;
    for byte in &frame {
        if trickler
            .stream
            .write_all(std::slice::from_ref(byte))
            .is_err()
        {
            break;
        }
        sent += 1;
        std::thread::sleep(idle / 6);
        if started.elapsed() > idle * 4 {
            break;
        }
    }
    assert!(trickler.is_closed(), "a trickling client was kept open");
    let closed_after = started.elapsed();
    assert!(
        sent < frame.len(),
        "all {sent} bytes arrived: not a slow client"
    );
    assert!(
        closed_after < idle * 5,
        "closed only after {closed_after:?}"
    );
    assert!(
        logged_about(peer)
            .iter()
            .any(|l| l.contains("did not arrive within connections.max.idle.ms")),
        "{:?}",
        logged_about(peer)
    );
    assert_eq!(
        broker
            .engine
            .topic("t")
            .unwrap()
            .p0()
            .log()
            .log_end_offset(),
        0
    );
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "the listener frees a slot in real time: polled against a deadline"
)]
fn connections_over_max_connections_are_closed_at_once() {
    let broker = Broker::start_with(|c| c.max_connections = 2);
    let mut first = broker.client();
    let mut second = broker.client();
    assert_eq!(first.send(3, &ApiVersionsRequest::default()).error_code, 0);
    assert_eq!(second.send(3, &ApiVersionsRequest::default()).error_code, 0);
    let mut third = broker.client();
    assert!(third.is_closed());
    drop(first);
    // The slot frees once the server sees the close: poll with a deadline.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut again = broker.client();
        let frame = again.frame(3, &ApiVersionsRequest::default());
        if again.stream.write_all(&frame).is_ok() && again.read_response().is_some() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the freed slot is never reused"
        );
    }
}

/// A config change made through the mount's files shows in DescribeConfigs, and one made
/// over the wire shows in the engine's broker config.
#[test]
fn config_changes_show_both_ways() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 1).unwrap();
    broker
        .engine
        .topic("t")
        .unwrap()
        .update_config(b"retention.ms=5000\n")
        .unwrap();
    broker
        .engine
        .update_broker_config(b"log.retention.bytes=777\n")
        .unwrap();
    let describe = |client: &mut Client, kind: i8, resource: &str, key: &str| {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = kind;
        r.resource_name = StrBytes::from_string(resource.to_string());
        r.configuration_keys = Some(vec![StrBytes::from_string(key.to_string())]);
        let mut request = DescribeConfigsRequest::default();
        request.resources = vec![r];
        let mut result = client.send(4, &request).results.remove(0);
        assert_eq!(result.configs.len(), 1);
        let c = result.configs.remove(0);
        (c.value.map(|v| v.to_string()), c.config_source)
    };
    assert_eq!(
        describe(&mut client, 2, "t", "retention.ms"),
        (Some("5000".into()), 1)
    );
    // Inherited from the dynamic broker config: DYNAMIC_DEFAULT_BROKER_CONFIG.
    assert_eq!(
        describe(&mut client, 2, "t", "retention.bytes"),
        (Some("777".into()), 3)
    );
    assert_eq!(
        describe(&mut client, 4, "", "log.retention.bytes"),
        (Some("777".into()), 3)
    );

    let mut c = AlterableConfig::default();
    c.name = StrBytes::from_static_str("log.retention.bytes");
    c.config_operation = 1;
    let mut resource = AlterConfigsResource::default();
    // Set through `.kpfs/config`'s cluster-wide level, so removed there (`""`).
    resource.resource_type = 4;
    resource.resource_name = StrBytes::from_static_str("");
    resource.configs = vec![c];
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource];
    assert_eq!(client.send(1, &request).responses[0].error_code, 0);
    // The topic's `config` file, as `cat` shows it, no longer inherits the removed value.
    let text = broker.engine.topic("t").unwrap().config_text();
    assert!(
        text.contains("# retention.bytes=-1 (DEFAULT_CONFIG"),
        "{text}"
    );
}

/// A Kafka broker config kpfs does not act on is accepted at the level Kafka accepts it,
/// with Kafka's refusal at the other, described as Kafka describes it, and kept in
/// `.kpfs/config` (issue 24, item 14).
#[test]
fn kafka_broker_configs_are_kept_per_broker_and_cluster_wide() {
    let broker = Broker::start();
    let mut client = broker.client();
    let incremental = |client: &mut Client, resource: &str, name: &str, value: &str| {
        let mut c = AlterableConfig::default();
        c.name = StrBytes::from_string(name.to_string());
        c.config_operation = 0;
        c.value = Some(StrBytes::from_string(value.to_string()));
        let mut r = AlterConfigsResource::default();
        r.resource_type = 4;
        r.resource_name = StrBytes::from_string(resource.to_string());
        r.configs = vec![c];
        let mut request = IncrementalAlterConfigsRequest::default();
        request.resources = vec![r];
        let response = client.send(1, &request);
        let r = &response.responses[0];
        (
            r.error_code,
            r.error_message.as_ref().map(|m| m.to_string()),
        )
    };
    let describe = |client: &mut Client, resource: &str| {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = 4;
        r.resource_name = StrBytes::from_string(resource.to_string());
        r.configuration_keys = None;
        let mut request = DescribeConfigsRequest::default();
        request.resources = vec![r];
        request.include_synonyms = true;
        client.send(4, &request).results.remove(0)
    };
    let relogin = "sasl.kerberos.min.time.before.relogin";
    assert_eq!(
        incremental(&mut client, "", relogin, "5"),
        (
            40,
            Some(format!("Cannot update these configs at default cluster level, broker id must be specified: [{relogin}]"))
        )
    );
    assert_eq!(incremental(&mut client, "1", relogin, "5").0, 0);
    // A static config is INVALID_REQUEST (42) in Kafka, as the seed's transcript shows
    // (InvalidRequestException), not INVALID_CONFIG.
    assert_eq!(
        incremental(&mut client, "1", "log.retention.check.interval.ms", "1000"),
        (
            42,
            Some(
                "Cannot update these configs dynamically: [log.retention.check.interval.ms]"
                    .to_string()
            )
        )
    );
    assert_eq!(
        incremental(&mut client, "", "background.threads", "12").0,
        0
    );
    assert_eq!(
        incremental(&mut client, "1", "foo.bar", "1"),
        (40, Some("Unknown broker config name: foo.bar".to_string()))
    );

    let this = describe(&mut client, "1");
    assert_eq!(this.error_code, 0);
    assert_eq!(this.configs.len(), 340);
    let entry = |name: &str| {
        this.configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap_or_else(|| panic!("{name} not described"))
    };
    let r = entry(relogin);
    assert_eq!(
        (r.value.as_deref(), r.config_source, r.read_only),
        (Some("5"), 2, false)
    );
    assert_eq!(
        r.synonyms
            .iter()
            .map(|s| (s.value.as_deref().unwrap_or_default().to_string(), s.source))
            .collect::<Vec<_>>(),
        [("5".to_string(), 2), ("60000".to_string(), 5)]
    );
    let threads = entry("background.threads");
    assert_eq!(
        (threads.value.as_deref(), threads.config_source),
        (Some("12"), 3)
    );
    let password = entry("ssl.key.password");
    assert!(password.is_sensitive && password.value.is_none());
    assert!(entry("process.roles").read_only);
    // The cluster-wide resource: only what is set there, the min.insync.replicas every
    // new cluster has (Kafka's ELR) among them, in Kafka's answer order.
    let cluster = describe(&mut client, "");
    assert_eq!(
        cluster
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.config_source))
            .collect::<Vec<_>>(),
        [
            ("min.insync.replicas".to_string(), 3),
            ("background.threads".to_string(), 3)
        ]
    );
    let other = describe(&mut client, "2");
    assert_eq!(
        (other.error_code, other.error_message.as_deref()),
        (
            42,
            Some("Unexpected broker id, expected 1 or empty string, but received 2")
        )
    );
    // AlterConfigs replaces one level's overrides, not the other's.
    let mut c = alter_configs_request::AlterableConfig::default();
    c.name = StrBytes::from_static_str("num.io.threads");
    c.value = Some(StrBytes::from_static_str("16"));
    let mut r = alter_configs_request::AlterConfigsResource::default();
    r.resource_type = 4;
    r.resource_name = StrBytes::from_static_str("1");
    r.configs = vec![c];
    let mut request = AlterConfigsRequest::default();
    request.resources = vec![r];
    assert_eq!(client.send(2, &request).responses[0].error_code, 0);
    let sources = |client: &mut Client| {
        let described = describe(client, "1");
        ["background.threads", "num.io.threads", relogin].map(|name| {
            let c = described
                .configs
                .iter()
                .find(|c| c.name.as_str() == name)
                .unwrap();
            (c.value.as_deref().map(String::from), c.config_source)
        })
    };
    assert_eq!(
        sources(&mut client),
        [
            (Some("12".to_string()), 3),
            (Some("16".to_string()), 2),
            (Some("60000".to_string()), 5)
        ]
    );
}

/// Group config resources (type 32) as Kafka 4.3.1 serves them: every `GroupConfig` with
/// the broker synonym it falls back to, overrides as `GROUP_CONFIG` (8), Kafka's refusals
/// in its words (bounds from the broker's `group.consumer.*` configs included), and the
/// overrides kept across a restart (issue 24, item 13). Expected texts and sources are
/// what Kafka's `ConfigHelper` and `GroupConfig.validate` answer for the same broker.
#[test]
fn group_configs_are_described_altered_validated_and_kept() {
    let broker = Broker::start_configured(
        &[
            ("group.consumer.session.timeout.ms", "50000"),
            ("group.consumer.min.session.timeout.ms", "6000"),
        ],
        |_| {},
    );
    let mut client = broker.client();
    let describe = |client: &mut Client, group: &str| {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = 32;
        r.resource_name = StrBytes::from_string(group.to_string());
        r.configuration_keys = None;
        let mut request = DescribeConfigsRequest::default();
        request.resources = vec![r];
        request.include_synonyms = true;
        client.send(4, &request).results.remove(0)
    };
    type Synonyms = Vec<(String, Option<String>, i8)>;
    let entry =
        |result: &kafka_protocol::messages::describe_configs_response::DescribeConfigsResult,
         name: &str|
         -> (Option<String>, i8, Synonyms) {
            let c = result
                .configs
                .iter()
                .find(|c| c.name.as_str() == name)
                .unwrap_or_else(|| panic!("{name} not described"));
            assert!(!c.read_only && !c.is_sensitive);
            (
                c.value.as_deref().map(String::from),
                c.config_source,
                c.synonyms
                    .iter()
                    .map(|s| {
                        (
                            s.name.to_string(),
                            s.value.as_deref().map(String::from),
                            s.source,
                        )
                    })
                    .collect(),
            )
        };
    let s =
        |name: &str, value: &str, source: i8| (name.to_string(), Some(value.to_string()), source);
    let incremental =
        |client: &mut Client, group: &str, configs: &[(&str, &str)], validate_only: bool| {
            let mut r = AlterConfigsResource::default();
            r.resource_type = 32;
            r.resource_name = StrBytes::from_string(group.to_string());
            r.configs = configs
                .iter()
                .map(|(name, value)| {
                    let mut c = AlterableConfig::default();
                    c.name = StrBytes::from_string(name.to_string());
                    c.config_operation = 0;
                    c.value = Some(StrBytes::from_string(value.to_string()));
                    c
                })
                .collect();
            let mut request = IncrementalAlterConfigsRequest::default();
            request.resources = vec![r];
            request.validate_only = validate_only;
            let response = client.send(1, &request);
            let r = &response.responses[0];
            (
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        };

    // A group that does not exist is described, with the broker's values.
    let fresh = describe(&mut client, "orders-app");
    assert_eq!(fresh.error_code, 0);
    assert_eq!(fresh.configs.len(), 17);
    assert_eq!(
        entry(&fresh, "consumer.session.timeout.ms"),
        (
            Some("50000".into()),
            4,
            vec![
                s("group.consumer.session.timeout.ms", "50000", 4),
                s("group.consumer.session.timeout.ms", "45000", 5)
            ]
        )
    );
    assert_eq!(
        entry(&fresh, "share.isolation.level"),
        (
            Some("read_uncommitted".into()),
            5,
            vec![s("share.isolation.level", "read_uncommitted", 5)]
        )
    );
    let empty = describe(&mut client, "");
    assert_eq!(
        (empty.error_code, empty.error_message.as_deref()),
        (42, Some("Group name must not be empty"))
    );

    assert_eq!(
        incremental(
            &mut client,
            "orders-app",
            &[("consumer.heartbeat.interval.ms", "6000")],
            false
        )
        .0,
        0
    );
    let refused = |text: &str| (40, Some(text.to_string()));
    for (configs, text) in [
        (
            &[("consumer.session.timeout.ms", "5000")][..],
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            &[("consumer.session.timeout.ms", "70000")],
            "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
        ),
        // With the heartbeat interval set above.
        (
            &[("consumer.session.timeout.ms", "6000")],
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms",
        ),
        (
            &[("consumer.session.timeout.ms", "abc")],
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT",
        ),
        (
            &[("share.delivery.count.limit", "1")],
            "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2",
        ),
        (
            &[("streams.num.standby.replicas", "3")],
            "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas",
        ),
        (&[("foo", "1")], "Unknown group config name: foo"),
    ] {
        assert_eq!(incremental(&mut client, "orders-app", configs, false), refused(text));
    }
    assert_eq!(
        incremental(
            &mut client,
            "",
            &[("consumer.session.timeout.ms", "50000")],
            false
        ),
        (
            42,
            Some("Default group resources are not allowed.".to_string())
        )
    );
    // validate_only checks and changes nothing.
    assert_eq!(
        incremental(
            &mut client,
            "orders-app",
            &[("consumer.session.timeout.ms", "55000")],
            true
        )
        .0,
        0
    );
    let set = describe(&mut client, "orders-app");
    assert_eq!(entry(&set, "consumer.session.timeout.ms").1, 4);
    assert_eq!(
        entry(&set, "consumer.heartbeat.interval.ms"),
        (
            Some("6000".into()),
            8,
            vec![
                s("consumer.heartbeat.interval.ms", "6000", 8),
                s("group.consumer.heartbeat.interval.ms", "5000", 5)
            ]
        )
    );
    // Another group keeps the broker's values.
    assert_eq!(
        entry(
            &describe(&mut client, "other"),
            "consumer.heartbeat.interval.ms"
        )
        .1,
        5
    );

    // AlterConfigs sets exactly the given overrides.
    let mut c = alter_configs_request::AlterableConfig::default();
    c.name = StrBytes::from_static_str("share.isolation.level");
    c.value = Some(StrBytes::from_static_str("read_committed"));
    let mut r = alter_configs_request::AlterConfigsResource::default();
    r.resource_type = 32;
    r.resource_name = StrBytes::from_static_str("orders-app");
    r.configs = vec![c];
    let mut request = AlterConfigsRequest::default();
    request.resources = vec![r];
    assert_eq!(client.send(2, &request).responses[0].error_code, 0);

    let broker = broker.restart();
    let mut client = broker.client();
    let kept = describe(&mut client, "orders-app");
    assert_eq!(entry(&kept, "consumer.heartbeat.interval.ms").1, 5);
    assert_eq!(
        entry(&kept, "share.isolation.level"),
        (
            Some("read_committed".into()),
            8,
            vec![
                s("share.isolation.level", "read_committed", 8),
                s("share.isolation.level", "read_uncommitted", 5)
            ]
        )
    );
}

// ---- Topics of several partitions -------------------------------------------------

/// A Produce of `records` to each (partition, records) of `topic` in one request, acks=all;
/// the (index, code, base offset) of each partition answered.
fn produce_to(client: &mut Client, topic: &str, parts: &[(i32, Bytes)]) -> Vec<(i32, i16, i64)> {
    let mut request = produce_request(topic, Bytes::new());
    request.topic_data[0].partition_data = parts
        .iter()
        .map(|(index, records)| {
            let mut p = produce_request::PartitionProduceData::default();
            p.index = *index;
            p.records = Some(records.clone());
            p
        })
        .collect();
    let response = client.send(9, &request);
    response.responses[0]
        .partition_responses
        .iter()
        .map(|p| (p.index, p.error_code, p.base_offset))
        .collect()
}

/// A partition of a Fetch answer: (index, code, high watermark, values).
type FetchedPartition = (i32, i16, i64, Vec<String>);

/// A Fetch request's topic: each `(partition, offset)` with a 1 MiB partition limit.
fn fetch_topic(topic: &str, parts: &[(i32, i64)]) -> fetch_request::FetchTopic {
    let mut t = fetch_request::FetchTopic::default();
    t.topic = name(topic);
    t.partitions = parts
        .iter()
        .map(|&(index, offset)| {
            let mut p = fetch_request::FetchPartition::default();
            p.partition = index;
            p.fetch_offset = offset;
            p.partition_max_bytes = 1 << 20;
            p
        })
        .collect();
    t
}

/// A Fetch of each (partition, offset) of `topic` in one request with `max_bytes` for the
/// whole answer: each partition's (index, code, high watermark, values).
fn fetch_from(
    client: &mut Client,
    topic: &str,
    parts: &[(i32, i64)],
    max_bytes: i32,
) -> Vec<FetchedPartition> {
    let t = fetch_topic(topic, parts);
    let mut request = FetchRequest::default();
    request.max_wait_ms = 0;
    request.min_bytes = 1;
    request.max_bytes = max_bytes;
    request.topics = vec![t];
    let response = client.send(12, &request);
    response.responses[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.error_code,
                p.high_watermark,
                values_of(p.records.clone().unwrap_or_default()),
            )
        })
        .collect()
}

/// A Metadata partition: (index, leader, leader epoch, replicas, ISR).
type MetadataPartition = (i32, i32, i32, Vec<i32>, Vec<i32>);

/// A CreatePartitions topic: (name, count, manual assignments).
type GrownTopic<'a> = (&'a str, i32, Option<Vec<Vec<i32>>>);

#[test]
fn metadata_lists_every_partition_and_auto_creation_makes_num_partitions() {
    let broker = Broker::start_configured(&[("num.partitions", "3")], |_| {});
    let mut client = broker.client();
    broker.engine.create_topic("five", 5).unwrap();
    let mut request = MetadataRequest::default();
    request.topics = Some(
        ["five", "auto"]
            .iter()
            .map(|t| {
                let mut r = MetadataRequestTopic::default();
                r.name = Some(name(t));
                r
            })
            .collect(),
    );
    request.allow_auto_topic_creation = true;
    let response = client.send(12, &request);
    let shape = |i: usize| -> Vec<MetadataPartition> {
        response.topics[i]
            .partitions
            .iter()
            .map(|p| {
                (
                    p.partition_index,
                    p.leader_id.0,
                    p.leader_epoch,
                    p.replica_nodes.iter().map(|n| n.0).collect(),
                    p.isr_nodes.iter().map(|n| n.0).collect(),
                )
            })
            .collect()
    };
    let expect = |n: i32| -> Vec<MetadataPartition> {
        (0..n).map(|i| (i, 1, 0, vec![1], vec![1])).collect()
    };
    assert_eq!(shape(0), expect(5));
    // Auto-created with num.partitions.
    assert_eq!(response.topics[1].error_code, 0);
    assert_eq!(shape(1), expect(3));
    assert_eq!(broker.engine.topic("auto").unwrap().partition_count(), 3);
}

#[test]
fn produce_fetch_and_offsets_work_per_partition() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 3).unwrap();
    let answered = produce_to(
        &mut client,
        "t",
        &[
            (0, batch(&[(None, "a0"), (None, "a1")])),
            (2, batch(&[(None, "c0")])),
            (3, batch(&[(None, "nowhere")])),
            (-1, batch(&[(None, "nowhere")])),
        ],
    );
    assert_eq!(
        answered,
        [(0, 0, 0), (2, 0, 0), (3, 3, -1), (-1, 3, -1)],
        "an unknown partition is UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        produce_to(&mut client, "t", &[(2, batch(&[(None, "c1")]))]),
        [(2, 0, 1)]
    );
    let topic = broker.engine.topic("t").unwrap();
    let sizes: Vec<u64> = (0..3)
        .map(|p| topic.partition(p).unwrap().log().log_end_offset())
        .collect();
    assert_eq!(sizes, [2, 0, 2]);

    let fetched = fetch_from(&mut client, "t", &[(0, 0), (1, 0), (2, 1), (9, 0)], 1 << 20);
    assert_eq!(
        fetched,
        [
            (0, 0, 2, vec!["a0".to_string(), "a1".to_string()]),
            (1, 0, 0, vec![]),
            (2, 0, 2, vec!["c1".to_string()]),
            (9, 3, -1, vec![]),
        ]
    );
    // Only the first partition with records may go over the answer's max_bytes
    // (Kafka's minOneMessage); the others give their offsets alone.
    let fetched = fetch_from(&mut client, "t", &[(1, 0), (0, 0), (2, 0)], 1);
    assert_eq!(
        fetched,
        [
            (1, 0, 0, vec![]),
            (0, 0, 2, vec!["a0".to_string(), "a1".to_string()]),
            (2, 0, 2, vec![]),
        ]
    );

    // ListOffsets: each partition's own end and start.
    let mut t = ListOffsetsTopic::default();
    t.name = name("t");
    t.partitions = [(0, -1), (1, -1), (2, -1), (2, -2), (3, -1)]
        .iter()
        .map(|&(index, timestamp)| {
            let mut p = ListOffsetsPartition::default();
            p.partition_index = index;
            p.timestamp = timestamp;
            p
        })
        .collect();
    let mut request = ListOffsetsRequest::default();
    request.replica_id = kafka_protocol::messages::BrokerId(-1);
    request.topics = vec![t];
    let response = client.send(7, &request);
    let offsets: Vec<(i32, i16, i64)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.offset))
        .collect();
    assert_eq!(
        offsets,
        [(0, 0, 2), (1, 0, 0), (2, 0, 2), (2, 0, 0), (3, 3, -1)]
    );

    // DeleteRecords: partition 2 only; -1 is its high watermark.
    let mut t = DeleteRecordsTopic::default();
    t.name = name("t");
    t.partitions = [(2, -1), (0, 1), (5, 0)]
        .iter()
        .map(|&(index, offset)| {
            let mut p = DeleteRecordsPartition::default();
            p.partition_index = index;
            p.offset = offset;
            p
        })
        .collect();
    let mut request = DeleteRecordsRequest::default();
    request.topics = vec![t];
    let response = client.send(2, &request);
    let low: Vec<(i32, i16, i64)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.low_watermark))
        .collect();
    assert_eq!(low, [(2, 0, 2), (0, 0, 1), (5, 3, -1)]);
    assert_eq!(topic.partition(2).unwrap().log().log_start_offset(), 2);
    assert_eq!(topic.p0().log().log_start_offset(), 1);
    assert_eq!(topic.partition(1).unwrap().log().log_start_offset(), 0);
}

#[test]
fn describe_producers_answers_per_partition() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 2).unwrap();
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = None;
    init.transaction_timeout_ms = -1;
    let producer = client.send(4, &init).producer_id.0;
    let mut b = BatchBuilder::new(0);
    b.push(0, common::T0, None, Some(b"a"));
    let records = Bytes::from(b.finish_client((producer, 0, 0), ClientBatch::PLAIN));
    assert_eq!(produce_to(&mut client, "t", &[(1, records)]), [(1, 0, 0)]);
    let mut t = describe_producers_request::TopicRequest::default();
    t.name = name("t");
    t.partition_indexes = vec![0, 1, 2];
    let mut request = DescribeProducersRequest::default();
    request.topics = vec![t];
    let response = client.send(0, &request);
    let answered: Vec<(i32, i16, Vec<i64>)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.error_code,
                p.active_producers.iter().map(|s| s.producer_id.0).collect(),
            )
        })
        .collect();
    assert_eq!(
        answered,
        [(0, 0, vec![]), (1, 0, vec![producer]), (2, 3, vec![])]
    );
}

fn create_topic_request(
    topic: &str,
    partitions: i32,
    assignments: &[Vec<i32>],
) -> CreateTopicsRequest {
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = partitions;
    t.replication_factor = -1;
    t.assignments = assignments
        .iter()
        .enumerate()
        .map(|(i, brokers)| {
            let mut a = create_topics_request::CreatableReplicaAssignment::default();
            a.partition_index = i as i32;
            a.broker_ids = brokers
                .iter()
                .map(|&b| kafka_protocol::messages::BrokerId(b))
                .collect();
            a
        })
        .collect();
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![t];
    request.timeout_ms = 5000;
    request
}

#[test]
fn create_topics_makes_the_asked_partitions() {
    let broker = Broker::start_configured(&[("num.partitions", "4")], |_| {});
    let mut client = broker.client();
    let create = |client: &mut Client, request: &CreateTopicsRequest| {
        let response = client.send(7, request);
        let r = &response.topics[0];
        (
            r.error_code,
            r.num_partitions,
            r.error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        )
    };
    let count = |topic: &str| broker.engine.topic(topic).map(|t| t.partition_count());
    assert_eq!(
        create(&mut client, &create_topic_request("three", 3, &[])),
        (0, 3, String::new())
    );
    assert_eq!(count("three"), Some(3));
    // -1 is num.partitions.
    assert_eq!(
        create(&mut client, &create_topic_request("default", -1, &[])),
        (0, 4, String::new())
    );
    assert_eq!(count("default"), Some(4));
    // A manual assignment: one partition per list, each of this node alone.
    assert_eq!(
        create(
            &mut client,
            &create_topic_request("manual", -1, &[vec![1], vec![1]])
        ),
        (0, 2, String::new())
    );
    assert_eq!(count("manual"), Some(2));
    // Sorted before they are checked, as Kafka's controller does: broker 0 first.
    let (code, _, message) = create(
        &mut client,
        &create_topic_request("twice", -1, &[vec![1, 1, 0]]),
    );
    assert_eq!(code, 39);
    assert_eq!(
        message,
        "The manual partition assignment includes broker 0, but no such broker is registered."
    );
    let (code, _, message) = create(
        &mut client,
        &create_topic_request("twice", -1, &[vec![1, 1]]),
    );
    assert_eq!(
        (code, message.as_str()),
        (
            39,
            "The manual partition assignment includes the broker 1 more than once."
        )
    );
    // validate_only: the count answered, nothing made.
    let mut request = create_topic_request("checked", 7, &[]);
    request.validate_only = true;
    assert_eq!(create(&mut client, &request), (0, 7, String::new()));
    assert_eq!(count("checked"), None);
    // kpfs's bound, 10000 partitions a topic, in the engine's words.
    for validate_only in [false, true] {
        let mut request = create_topic_request("huge", 10_001, &[]);
        request.validate_only = validate_only;
        let (code, _, message) = create(&mut client, &request);
        assert_eq!(code, 37);
        assert_eq!(
            message,
            "Number of partitions was set to 10001, more than the 10000 partitions a kpfs topic may have."
        );
        assert_eq!(count("huge"), None);
    }
}

fn create_partitions(
    client: &mut Client,
    version: i16,
    topics: &[GrownTopic<'_>],
    validate_only: bool,
) -> Vec<(String, i16, Option<String>)> {
    let mut request = CreatePartitionsRequest::default();
    request.topics = topics
        .iter()
        .map(|(topic, count, assignments)| {
            let mut t = create_partitions_request::CreatePartitionsTopic::default();
            t.name = name(topic);
            t.count = *count;
            t.assignments = assignments.as_ref().map(|lists| {
                lists
                    .iter()
                    .map(|brokers| {
                        let mut a =
                            create_partitions_request::CreatePartitionsAssignment::default();
                        a.broker_ids = brokers
                            .iter()
                            .map(|&b| kafka_protocol::messages::BrokerId(b))
                            .collect();
                        a
                    })
                    .collect()
            });
            t
        })
        .collect();
    request.timeout_ms = 5000;
    request.validate_only = validate_only;
    client
        .send(version, &request)
        .results
        .iter()
        .map(|r| {
            (
                r.name.0.to_string(),
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

#[test]
fn create_partitions_grows_topics_and_refuses_in_kafkas_words() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 1).unwrap();
    broker
        .engine
        .topic("t")
        .unwrap()
        .append_lines(b"old\n")
        .unwrap();
    broker.engine.create_topic("u", 2).unwrap();
    let count = |topic: &str| broker.engine.topic(topic).unwrap().partition_count();
    let ok = |topic: &str| (topic.to_string(), 0, None);
    let refused = |topic: &str, code: i16, message: Option<&str>| {
        (topic.to_string(), code, message.map(str::to_string))
    };
    for version in 0..=3 {
        assert_eq!(
            create_partitions(
                &mut client,
                version,
                &[("t", 2 + i32::from(version), None)],
                false
            ),
            [ok("t")],
            "v{version}"
        );
    }
    assert_eq!(count("t"), 5);
    // The new partitions take records; the old one kept its own.
    assert_eq!(
        produce_to(&mut client, "t", &[(4, batch(&[(None, "new")]))]),
        [(4, 0, 0)]
    );
    assert_eq!(
        broker
            .engine
            .topic("t")
            .unwrap()
            .p0()
            .log()
            .log_end_offset(),
        1
    );
    assert_eq!(
        create_partitions(
            &mut client,
            3,
            &[
                ("t", 5, None),
                ("u", 1, None),
                ("u2", 3, None),
                ("t", -1, None),
            ],
            false
        ),
        [
            refused("t", 42, Some("Duplicate topic name.")),
            refused(
                "u",
                37,
                Some("The topic u currently has 2 partition(s); 1 would not be an increase.")
            ),
            refused("u2", 3, None),
        ]
    );
    assert_eq!(
        create_partitions(&mut client, 3, &[("u", 2, None), ("u", -1, None)], false),
        [refused("u", 42, Some("Duplicate topic name."))]
    );
    assert_eq!(
        create_partitions(&mut client, 3, &[("u", 2, None)], false),
        [refused("u", 37, Some("Topic already has 2 partition(s)."))]
    );
    assert_eq!(
        create_partitions(&mut client, 3, &[("u", -3, None)], false),
        [refused(
            "u",
            37,
            Some("The topic u currently has 2 partition(s); -3 would not be an increase.")
        )]
    );
    // Manual assignments: one per added partition, of registered brokers, one replica.
    assert_eq!(
        create_partitions(&mut client, 3, &[("u", 4, Some(vec![vec![1]]))], false),
        [refused(
            "u",
            39,
            Some("Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")
        )]
    );
    assert_eq!(
        create_partitions(&mut client, 3, &[("u", 3, Some(vec![vec![2]]))], false),
        [refused(
            "u",
            39,
            Some("The manual partition assignment includes broker 2, but no such broker is registered.")
        )]
    );
    assert_eq!(
        create_partitions(&mut client, 3, &[("u", 3, Some(vec![vec![]]))], false),
        [refused(
            "u",
            39,
            Some("The manual partition assignment includes an empty replica list.")
        )]
    );
    assert_eq!(
        create_partitions(&mut client, 3, &[("u", 3, Some(vec![vec![1, 1]]))], false),
        [refused(
            "u",
            39,
            Some("The manual partition assignment includes the broker 1 more than once.")
        )]
    );
    assert_eq!(count("u"), 2, "nothing refused was added");
    // validate_only checks and adds nothing; then the same for real.
    assert_eq!(
        create_partitions(
            &mut client,
            3,
            &[("u", 4, Some(vec![vec![1], vec![1]]))],
            true
        ),
        [ok("u")]
    );
    assert_eq!(count("u"), 2);
    assert_eq!(
        create_partitions(
            &mut client,
            3,
            &[("u", 4, Some(vec![vec![1], vec![1]]))],
            false
        ),
        [ok("u")]
    );
    assert_eq!(count("u"), 4);
    // kpfs's bound, in the engine's words, validate_only or not.
    for validate_only in [true, false] {
        assert_eq!(
            create_partitions(&mut client, 3, &[("u", 10_001, None)], validate_only),
            [refused(
                "u",
                37,
                Some("Number of partitions was set to 10001, more than the 10000 partitions a kpfs topic may have.")
            )]
        );
    }
    assert_eq!(count("u"), 4);
    // Metadata shows the new count at once.
    let mut request = MetadataRequest::default();
    let mut r = MetadataRequestTopic::default();
    r.name = Some(name("u"));
    request.topics = Some(vec![r]);
    assert_eq!(client.send(12, &request).topics[0].partitions.len(), 4);
}

#[test]
fn describe_topic_partitions_pages_through_partitions() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("a", 3).unwrap();
    broker.engine.create_topic("b", 2).unwrap();
    broker.engine.create_topic("c", 1).unwrap();
    let ask = |client: &mut Client, topics: &[&str], limit: i32, cursor: Option<(&str, i32)>| {
        let response = describe_topic_partitions(client, topics, limit, cursor);
        let topics: Vec<(String, i16, Vec<i32>)> = response
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().unwrap().0.to_string(),
                    t.error_code,
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        let next = response
            .next_cursor
            .as_ref()
            .map(|c| (c.topic_name.0.to_string(), c.partition_index));
        (topics, next)
    };
    let t = |name: &str, partitions: &[i32]| (name.to_string(), 0, partitions.to_vec());
    // A topic cut short ends the page with a cursor at its next partition.
    assert_eq!(
        ask(&mut client, &[], 2, None),
        (vec![t("a", &[0, 1])], Some(("a".into(), 2)))
    );
    assert_eq!(
        ask(&mut client, &[], 2, Some(("a", 2))),
        (vec![t("a", &[2]), t("b", &[0])], Some(("b".into(), 1)))
    );
    assert_eq!(
        ask(&mut client, &[], 2, Some(("b", 1))),
        (vec![t("b", &[1]), t("c", &[0])], None)
    );
    // A page that ends with a topic's last partition points at the next topic's first.
    assert_eq!(
        ask(&mut client, &[], 3, None),
        (vec![t("a", &[0, 1, 2])], Some(("b".into(), 0)))
    );
    // Named topics page the same way.
    assert_eq!(
        ask(&mut client, &["c", "b"], 1, Some(("b", 1))),
        (vec![t("b", &[1])], Some(("c".into(), 0)))
    );
    // A cursor past a topic's end lists none of it; a negative one is INVALID_REQUEST.
    assert_eq!(
        ask(&mut client, &["b"], 10, Some(("b", 5))),
        (vec![t("b", &[])], None)
    );
    assert_eq!(
        ask(&mut client, &["a", "b"], 10, Some(("a", -1))),
        (
            vec![("a".to_string(), 42, vec![]), ("b".to_string(), 42, vec![])],
            None
        )
    );
}

/// A Fetch of `topic` in a session: (session id, epoch), the (partition, offset)s named
/// and those forgotten; the answer's (error, session id, [(partition, code, high
/// watermark, values)]).
fn fetch_in_session(
    client: &mut Client,
    session: (i32, i32),
    topic: &str,
    parts: &[(i32, i64)],
    forgotten: &[i32],
) -> (i16, i32, Vec<FetchedPartition>) {
    let t = fetch_topic(topic, parts);
    let mut request = FetchRequest::default();
    request.max_wait_ms = 0;
    request.min_bytes = 0;
    request.max_bytes = 1 << 20;
    request.session_id = session.0;
    request.session_epoch = session.1;
    if !parts.is_empty() {
        request.topics = vec![t];
    }
    if !forgotten.is_empty() {
        let mut f = fetch_request::ForgottenTopic::default();
        f.topic = name(topic);
        f.partitions = forgotten.to_vec();
        request.forgotten_topics_data = vec![f];
    }
    let response = client.send(12, &request);
    let partitions = response
        .responses
        .iter()
        .flat_map(|t| {
            assert_eq!(t.topic.0.as_str(), topic);
            t.partitions.iter().map(|p| {
                (
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    values_of(p.records.clone().unwrap_or_default()),
                )
            })
        })
        .collect();
    (response.error_code, response.session_id, partitions)
}

#[test]
fn fetch_sessions_answer_only_the_partitions_that_changed() {
    let broker = Broker::start();
    let mut client = broker.client();
    broker.engine.create_topic("t", 3).unwrap();
    produce_to(
        &mut client,
        "t",
        &[(0, batch(&[(None, "a")])), (2, batch(&[(None, "c")]))],
    );
    let v = |s: &[&str]| -> Vec<String> { s.iter().map(|s| s.to_string()).collect() };
    // A full fetch (epoch 0) of every partition and one that does not exist (answered
    // last, as Kafka's erroneous partitions): a session is opened.
    let (code, id, parts) = fetch_in_session(
        &mut client,
        (0, 0),
        "t",
        &[(0, 0), (5, 0), (1, 0), (2, 0)],
        &[],
    );
    assert_eq!(code, 0);
    assert_ne!(id, 0, "a session");
    assert_eq!(
        parts,
        [
            (0, 0, 1, v(&["a"])),
            (1, 0, 0, v(&[])),
            (2, 0, 1, v(&["c"])),
            (5, 3, -1, v(&[])),
        ]
    );
    // Epoch 1: the client moved past what it read; nothing changed since, so only the
    // unknown partition (an error is always answered) comes back.
    let (code, same, parts) = fetch_in_session(&mut client, (id, 1), "t", &[(0, 1), (2, 1)], &[]);
    assert_eq!((code, same), (0, id));
    assert_eq!(parts, [(5, 3, -1, v(&[]))]);
    // A record in partition 1 and the unknown one forgotten: partition 1 alone.
    produce_to(&mut client, "t", &[(1, batch(&[(None, "b")]))]);
    let (_, _, parts) = fetch_in_session(&mut client, (id, 2), "t", &[], &[5]);
    assert_eq!(parts, [(1, 0, 1, v(&["b"]))]);
    // Nothing new: an empty answer.
    let (code, _, parts) = fetch_in_session(&mut client, (id, 3), "t", &[(1, 1)], &[]);
    assert_eq!((code, parts), (0, vec![]));
    // A stale epoch and an unknown session are refused, with no partition.
    assert_eq!(
        fetch_in_session(&mut client, (id, 3), "t", &[], &[]),
        (71, 0, vec![]),
        "INVALID_FETCH_SESSION_EPOCH"
    );
    assert_eq!(
        fetch_in_session(&mut client, (id ^ 1, 1), "t", &[], &[]),
        (70, 0, vec![]),
        "FETCH_SESSION_ID_NOT_FOUND"
    );
    // Epoch 4 goes on; then a sessionless full fetch (epoch -1) closes the session.
    produce_to(&mut client, "t", &[(2, batch(&[(None, "c2")]))]);
    let (_, _, parts) = fetch_in_session(&mut client, (id, 4), "t", &[], &[]);
    assert_eq!(parts, [(2, 0, 2, v(&["c2"]))]);
    let (_, none, parts) = fetch_in_session(&mut client, (id, -1), "t", &[(0, 1)], &[]);
    assert_eq!((none, parts.len()), (0, 1));
    assert_eq!(
        fetch_in_session(&mut client, (id, 5), "t", &[], &[]).0,
        70,
        "the session is gone"
    );
}

#[test]
fn a_parked_fetch_of_several_partitions_answers_when_any_gets_a_record() {
    let broker = Broker::start();
    broker.engine.create_topic("t", 3).unwrap();
    let mut consumer = broker.client();
    let topic = broker.engine.topic("t").unwrap();
    let writer = std::thread::spawn(move || {
        // The consumer is parked by now or soon; either way it must get the record.
        topic.append_produced(1, &batch(&[(None, "late")])).unwrap();
    });
    let mut t = fetch_request::FetchTopic::default();
    t.topic = name("t");
    t.partitions = (0..3)
        .map(|index| {
            let mut p = fetch_request::FetchPartition::default();
            p.partition = index;
            p.partition_max_bytes = 1 << 20;
            p
        })
        .collect();
    let mut request = FetchRequest::default();
    request.max_wait_ms = 30_000;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.topics = vec![t];
    let response = consumer.send(12, &request);
    writer.join().unwrap();
    let got: Vec<(i32, Vec<String>)> = response.responses[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                values_of(p.records.clone().unwrap_or_default()),
            )
        })
        .collect();
    assert_eq!(
        got,
        [(0, vec![]), (1, vec!["late".to_string()]), (2, vec![])]
    );
}
