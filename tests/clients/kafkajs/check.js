// Drives KafkaJS against a Kafka listener (kpfs serve, in tests/shell/t_kafkajs.sh) as an
// application would: producers, consumers, a consumer group and the admin client, each
// scenario checked against what was sent. Appends one SCENARIO<TAB>RESULT<TAB>NOTE row per
// scenario to the matrix file and exits 1 when any failed.
//
//   node check.js BOOTSTRAP MATRIX_FILE
'use strict'

const assert = require('node:assert/strict')
const fs = require('node:fs')
const { Kafka, logLevel, CompressionTypes, ConfigResourceTypes, ConfigSource } = require('kafkajs')

const [bootstrap, matrixFile] = process.argv.slice(2)
if (!bootstrap || !matrixFile) {
  console.error('usage: node check.js BOOTSTRAP MATRIX_FILE')
  process.exit(2)
}

// Each scenario is bounded, so a client that waits forever fails the run instead of
// hanging the test.
const SCENARIO_TIMEOUT_MS = 25000

const newKafka = clientId => new Kafka({
  clientId,
  brokers: [bootstrap],
  // Quiet: the refusals the scenarios ask for would read as errors. KPFS_KAFKAJS_DEBUG=1
  // shows the client's log.
  logLevel: process.env.KPFS_KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
  retry: { retries: 3, initialRetryTime: 100 },
})
const kafka = newKafka('kpfs-kafkajs-check')

const topic = name => `${process.env.KPFS_KAFKAJS_PREFIX || "kafkajs"}-${name}`
const numbered = (what, from, to) =>
  Array.from({ length: to - from }, (_, i) => ({ key: `k${from + i}`, value: `${what} ${from + i}` }))

// waitFor polls cond every 50 ms until it holds, or fails after 15 s.
async function waitFor (what, cond) {
  const deadline = Date.now() + 15000
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`no ${what} in 15 s`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

// produce sends records in one request and checks the offset the first was stored at.
async function produce (name, records, { firstOffset = 0, producerConfig = {}, compression } = {}) {
  const producer = kafka.producer(producerConfig)
  await producer.connect()
  try {
    const [result] = await producer.send({ topic: name, acks: -1, compression, messages: records })
    assert.equal(result.errorCode, 0, `produce error code ${result.errorCode}`)
    assert.equal(result.partition, 0)
    assert.equal(result.baseOffset, String(firstOffset), `first record stored at ${result.baseOffset}`)
  } finally {
    await producer.disconnect()
  }
}

// A record as consumed, in the form records are sent in.
function asSent ({ key, value, headers, offset }) {
  const out = { offset: Number(offset), key: key === null ? null : key.toString(), value: value.toString() }
  const h = Object.fromEntries(Object.entries(headers || {}).map(([k, v]) => [k, v.toString()]))
  if (Object.keys(h).length) out.headers = h
  return out
}

function expectRecords (got, want, first) {
  assert.deepEqual(got, want.map((r, i) => ({ offset: first + i, key: r.key ?? null, value: r.value, ...(r.headers ? { headers: r.headers } : {}) })))
}

// consume runs a consumer of its own group on name until n records came, from the
// beginning or (seek) from an offset.
async function consume (name, n, { seek } = {}) {
  const consumer = kafka.consumer({ groupId: `${name}-reader`, maxWaitTimeInMs: 500 })
  await consumer.connect()
  const got = []
  try {
    await consumer.subscribe({ topics: [name], fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => { got.push(asSent(message)) } })
    if (seek !== undefined) consumer.seek({ topic: name, partition: 0, offset: String(seek) })
    await waitFor(`${n} records of ${name} (got ${got.length})`, () => got.length >= n)
  } finally {
    await consumer.disconnect()
  }
  return got
}

const admin = kafka.admin()

async function topicConfig (name) {
  const { resources } = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name }],
    includeSynonyms: false,
  })
  assert.equal(resources[0].errorCode, 0, resources[0].errorMessage)
  return Object.fromEntries(resources[0].configEntries.map(e => [e.configName, e]))
}

const headered = [
  { key: 'k1', value: 'v1', headers: { trace: 'abc', origin: 'kafkajs' } },
  { value: 'keyless' },
  { key: 'k3', value: 'with\nnewline', headers: { empty: '' } },
]

// What the group scenarios leave for the group admin scenarios.
const group = { id: topic('group'), topics: [topic('group-a'), topic('group-b')] }

function member (name) {
  // A Kafka instance of its own, as a member in another process has: the consumers of one
  // instance share its committed offsets per group, and a second member of the group
  // clears the first's at its join (its autoCommit then crashes the first).
  const consumer = newKafka(name).consumer({
    groupId: group.id,
    heartbeatInterval: 300,
    sessionTimeout: 6000,
    rebalanceTimeout: 10000,
    maxWaitTimeInMs: 500,
  })
  const m = { consumer, assignment: {}, consumed: {} }
  consumer.on(consumer.events.GROUP_JOIN, e => { m.assignment = e.payload.memberAssignment })
  m.start = async () => {
    await consumer.connect()
    await consumer.subscribe({ topics: group.topics, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ topic, message }) => {
        (m.consumed[topic] ||= []).push(Number(message.offset))
      },
    })
  }
  m.topics = () => Object.keys(m.assignment).filter(t => m.assignment[t].length).sort()
  return m
}

const upTo = n => Array.from({ length: n }, (_, i) => i)

const scenarios = [
  ['produce', async () => {
    await produce(topic('plain'), headered)
    expectRecords(await consume(topic('plain'), 3), headered, 0)
  }],
  ['produce-idempotent', async () => {
    const producerConfig = { idempotent: true, maxInFlightRequests: 1 }
    await produce(topic('idempotent'), numbered('idempotent', 0, 5), { producerConfig })
    // A second producer, with a producer id of its own, appends after the first's.
    await produce(topic('idempotent'), numbered('idempotent', 5, 10), { producerConfig, firstOffset: 5 })
    expectRecords(await consume(topic('idempotent'), 10), numbered('idempotent', 0, 10), 0)
  }],
  ['produce-compressed-gzip', async () => {
    await produce(topic('gzip'), numbered('gzip', 0, 10), { compression: CompressionTypes.GZIP })
    expectRecords(await consume(topic('gzip'), 10), numbered('gzip', 0, 10), 0)
  }],
  ...['snappy', 'lz4', 'zstd'].map(codec => [`produce-compressed-${codec}`, 'unsupported',
    `KafkaJS has no ${codec} codec of its own (only gzip; others are plugin packages)`]),
  ['consume-from-beginning', async () => {
    await produce(topic('beginning'), numbered('beginning', 0, 7))
    expectRecords(await consume(topic('beginning'), 7), numbered('beginning', 0, 7), 0)
  }],
  ['consume-from-offset', async () => {
    // One batch: the consumer gets it whole and must skip offsets 0-5.
    await produce(topic('seek'), numbered('seek', 0, 10))
    expectRecords(await consume(topic('seek'), 4, { seek: 6 }), numbered('seek', 6, 10), 6)
  }],
  ['consume-group', async () => {
    // Two members share two one-partition topics, one each (KafkaJS's round robin);
    // when one leaves, the other takes its topic over from the offset it committed.
    await admin.createTopics({ topics: group.topics.map(t => ({ topic: t })) })
    const m1 = member('member-1')
    const m2 = member('member-2')
    group.m1 = m1
    await Promise.all([m1.start(), m2.start()])
    await waitFor('split of the two topics over the two members', () =>
      m1.topics().length === 1 && m2.topics().length === 1 && m1.topics()[0] !== m2.topics()[0])
    // The records come once each member has its topic, so that each consumes its own.
    for (const t of group.topics) await produce(t, numbered(t, 0, 10))
    const all = n => () => group.topics.every(t => (m1.consumed[t] || []).length + (m2.consumed[t] || []).length >= n)
    await waitFor('10 records of each topic', all(10))
    const [m1Topic] = m1.topics()
    const [m2Topic] = m2.topics()
    assert.deepEqual([m1.consumed[m1Topic], m2.consumed[m2Topic]], [upTo(10), upTo(10)], 'each member consumed its topic')
    await m2.consumer.disconnect()
    for (const t of group.topics) await produce(t, numbered(t, 10, 15), { firstOffset: 10 })
    await waitFor('member-1 with both topics after member-2 left', () => m1.topics().length === 2)
    await waitFor('15 records of each topic', all(15))
    for (const t of group.topics) {
      const got = [...(m1.consumed[t] || []), ...(m2.consumed[t] || [])].sort((a, b) => a - b)
      assert.deepEqual(got, upTo(15), `${t}: each of offsets 0-14 consumed once`)
    }
    assert.deepEqual(m1.consumed[m2Topic], [10, 11, 12, 13, 14], `member-1 read member-2's ${m2Topic} from its commit`)
  }],
  ['commit-offsets', async () => {
    assert.ok(group.m1, 'consume-group did not run')
    // Disconnecting commits what member-1 consumed; a new member starts from there.
    await group.m1.consumer.disconnect()
    for (const t of group.topics) await produce(t, numbered(t, 15, 17), { firstOffset: 15 })
    const m3 = member('member-3')
    await m3.start()
    try {
      await waitFor('member-3\'s records', () => group.topics.every(t => (m3.consumed[t] || []).length >= 2))
    } finally {
      await m3.consumer.disconnect()
    }
    for (const t of group.topics) assert.deepEqual(m3.consumed[t], [15, 16], `${t}: member-3 resumed after the committed 15`)
  }],
  ['admin-list-group-offsets', async () => {
    const offsets = await admin.fetchOffsets({ groupId: group.id, topics: [...group.topics, topic('plain')] })
    const byTopic = Object.fromEntries(offsets.map(t => [t.topic, t.partitions.map(p => [p.partition, p.offset])]))
    assert.deepEqual(byTopic, { [group.topics[0]]: [[0, '17']], [group.topics[1]]: [[0, '17']], [topic('plain')]: [[0, '-1']] })
  }],
  ['admin-create-topics', async () => {
    const created = await admin.createTopics({
      topics: [{ topic: topic('admin'), numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '86400000' }] }],
    })
    assert.equal(created, true)
    assert.equal(await admin.createTopics({ topics: [{ topic: topic('admin') }] }), false, 'creating it again')
    assert.equal(await admin.createTopics({ topics: [{ topic: topic('admin-three'), numPartitions: 3 }] }), true, '3 partitions')
    await assert.rejects(admin.createTopics({ topics: [{ topic: topic('admin-none'), numPartitions: 0 }] }),
      e => e.errors?.[0]?.type === 'INVALID_PARTITIONS' || assert.fail(`0 partitions: ${e}`))
    await assert.rejects(admin.createTopics({ topics: [{ topic: topic('admin-bad'), configEntries: [{ name: 'retention.bytes', value: '-7' }, { name: 'min.insync.replicas', value: '-7' }] }] }),
      e => e.errors?.[0]?.type === 'INVALID_CONFIG' || assert.fail(`an invalid config: ${e}`))
    const topics = await admin.listTopics()
    assert.ok(!topics.includes(topic('admin-none')) && !topics.includes(topic('admin-bad')), `refused topics exist: ${topics}`)
  }],
  // admin-three (admin-create-topics) grows from 3 partitions to 5; fewer is refused.
  ['admin-create-partitions', async () => {
    const partitions = async () => (await admin.fetchTopicMetadata({ topics: [topic('admin-three')] })).topics[0].partitions.length
    assert.equal(await partitions(), 3, 'partitions before')
    await admin.createPartitions({ topicPartitions: [{ topic: topic('admin-three'), count: 5 }], validateOnly: true })
    assert.equal(await partitions(), 3, 'partitions after validateOnly')
    await admin.createPartitions({ topicPartitions: [{ topic: topic('admin-three'), count: 5 }] })
    assert.equal(await partitions(), 5, 'partitions after count 5')
    await assert.rejects(admin.createPartitions({ topicPartitions: [{ topic: topic('admin-three'), count: 2 }] }),
      e => e.type === 'INVALID_PARTITIONS' || assert.fail(`fewer partitions: ${e} ${e.type}`))
  }],
  ['admin-list-topics', async () => {
    const topics = await admin.listTopics()
    assert.ok(topics.includes(topic('admin')) && topics.includes(topic('plain')), `listed: ${topics}`)
  }],
  ['admin-describe-topics', async () => {
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic('admin')] })
    assert.equal(topics.length, 1)
    const [p] = topics[0].partitions
    assert.equal(topics[0].partitions.length, 1)
    assert.deepEqual([p.partitionId, p.partitionErrorCode, p.replicas, p.isr], [0, 0, [p.leader], [p.leader]])
  }],
  ['admin-describe-configs', async () => {
    const conf = await topicConfig(topic('admin'))
    assert.deepEqual([conf['retention.ms'].configValue, conf['retention.ms'].configSource], ['86400000', ConfigSource.TOPIC_CONFIG])
    assert.deepEqual([conf['cleanup.policy'].configValue, conf['cleanup.policy'].isDefault], ['delete', true])
  }],
  ['admin-alter-configs', async () => {
    // AlterConfigs replaces the topic's whole config: retention.ms goes back to its default.
    await admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic('admin'), configEntries: [{ name: 'retention.bytes', value: '1048576' }] }] })
    let conf = await topicConfig(topic('admin'))
    assert.deepEqual([conf['retention.bytes'].configValue, conf['retention.ms'].isDefault], ['1048576', true])
    await assert.rejects(admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic('admin'), configEntries: [{ name: 'cleanup.policy', value: 'sometimes' }] }] }),
      e => e.type === 'INVALID_CONFIG' || assert.fail(`cleanup.policy=sometimes: ${e}`))
    conf = await topicConfig(topic('admin'))
    assert.deepEqual([conf['retention.bytes'].configValue, conf['cleanup.policy'].configValue], ['1048576', 'delete'], 'a refused alter changed nothing')
  }],
  ['admin-list-offsets', async () => {
    await produce(topic('offsets'), numbered('offsets', 0, 6))
    assert.deepEqual(await admin.fetchTopicOffsets(topic('offsets')), [{ partition: 0, offset: '6', high: '6', low: '0' }])
  }],
  ['admin-list-offsets-by-timestamp', async () => {
    // Timestamps a minute before now: the test means the same on any day, and retention
    // (7 days) leaves them alone.
    const t0 = Date.now() - 60000
    const records = [0, 1, 2].map(i => ({ key: `t${i}`, value: `at t0+${i}s`, timestamp: String(t0 + i * 1000) }))
    await produce(topic('times'), records)
    const at = async ts => (await admin.fetchTopicOffsetsByTimestamp(topic('times'), ts))[0].offset
    assert.deepEqual([await at(t0 - 1), await at(t0 + 500), await at(t0 + 2000), await at(Date.now() + 60000)], ['0', '1', '2', '3'])
  }],
  ['admin-delete-records', async () => {
    await admin.deleteTopicRecords({ topic: topic('offsets'), partitions: [{ partition: 0, offset: '4' }] })
    assert.deepEqual(await admin.fetchTopicOffsets(topic('offsets')), [{ partition: 0, offset: '6', high: '6', low: '4' }])
    expectRecords(await consume(topic('offsets'), 2), numbered('offsets', 4, 6), 4)
    await assert.rejects(admin.deleteTopicRecords({ topic: topic('offsets'), partitions: [{ partition: 0, offset: '9' }] }),
      e => e.cause?.partitions?.[0]?.error?.type === 'OFFSET_OUT_OF_RANGE' || assert.fail(`deleting before 9 of 6: ${e}`))
  }],
  ['admin-list-groups', async () => {
    const { groups } = await admin.listGroups()
    assert.ok(groups.some(g => g.groupId === group.id && g.protocolType === 'consumer'), `groups: ${JSON.stringify(groups)}`)
  }],
  ['admin-describe-groups', async () => {
    const { groups: [g] } = await admin.describeGroups([group.id])
    assert.deepEqual([g.errorCode, g.groupId, g.state, g.protocolType, g.members.length], [0, group.id, 'Empty', 'consumer', 0])
  }],
  ['admin-reset-offsets', async () => {
    await admin.resetOffsets({ groupId: group.id, topic: group.topics[0], earliest: true })
    const [{ partitions: [p] }] = await admin.fetchOffsets({ groupId: group.id, topics: [group.topics[0]], resolveOffsets: true })
    assert.equal(p.offset, '0')
  }],
  ['admin-set-offsets', async () => {
    await admin.setOffsets({ groupId: group.id, topic: group.topics[1], partitions: [{ partition: 0, offset: '3' }] })
    const offsets = await admin.fetchOffsets({ groupId: group.id, topics: [group.topics[1]] })
    assert.deepEqual(offsets, [{ topic: group.topics[1], partitions: [{ partition: 0, offset: '3', metadata: null }] }])
  }],
  ['admin-delete-groups', async () => {
    const [deleted] = await admin.deleteGroups([group.id])
    assert.equal(deleted.errorCode, 0)
    const { groups } = await admin.listGroups()
    assert.ok(!groups.some(g => g.groupId === group.id), `${group.id} still listed`)
    await assert.rejects(admin.deleteGroups([group.id]), e => e.groups?.[0]?.error?.type === 'GROUP_ID_NOT_FOUND' || assert.fail(`deleting it again: ${e}`))
  }],
  ['admin-delete-topics', async () => {
    await admin.deleteTopics({ topics: [topic('admin')] })
    assert.ok(!(await admin.listTopics()).includes(topic('admin')))
    await assert.rejects(admin.deleteTopics({ topics: [topic('admin')] }), e => /UNKNOWN_TOPIC_OR_PARTITION|does not host/.test(`${e.type} ${e.message}`) || assert.fail(`deleting it again: ${e}`))
  }],
  // A transactional producer commits a transaction, aborts one (its records are in the
  // log: send waits for their acks) and commits another, the first with a group's offset
  // (sendOffsets: AddOffsetsToTxn, TxnOffsetCommit), the aborted one with another that
  // must not stick. A read_committed consumer (readUncommitted: false) gets the
  // committed records alone, at their offsets past the markers.
  ['transactions', async () => {
    const name = topic('transactions')
    const offsetsGroup = topic('transactions-group')
    const producer = kafka.producer({ transactionalId: topic('transactional'), idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    try {
      for (const [records, end, groupOffset, baseOffset] of [
        [numbered('committed', 0, 3), 'commit', '3', '0'], // its COMMIT marker at 3
        [numbered('aborted', 0, 2), 'abort', '6', '4'], // ABORT at 6
        [numbered('committed', 3, 5), 'commit', null, '7'], // COMMIT at 9
      ]) {
        const transaction = await producer.transaction()
        const [result] = await transaction.send({ topic: name, acks: -1, messages: records.map(r => ({ ...r, partition: 0 })) })
        assert.deepEqual([result.errorCode, result.partition, result.baseOffset], [0, 0, baseOffset], `${end}: ${JSON.stringify(result)}`)
        if (groupOffset !== null) {
          await transaction.sendOffsets({ consumerGroupId: offsetsGroup, topics: [{ topic: name, partitions: [{ partition: 0, offset: groupOffset }] }] })
        }
        await transaction[end]()
      }
    } finally {
      await producer.disconnect()
    }
    const consumer = kafka.consumer({ groupId: `${name}-reader`, readUncommitted: false, maxWaitTimeInMs: 500 })
    await consumer.connect()
    const got = []
    try {
      await consumer.subscribe({ topics: [name], fromBeginning: true })
      await consumer.run({ eachMessage: async ({ message }) => { got.push(asSent(message)) } })
      await waitFor(`5 committed records of ${name} (got ${got.length})`, () => got.length >= 5)
    } finally {
      await consumer.disconnect()
    }
    assert.deepEqual(got, [...numbered('committed', 0, 3), ...numbered('committed', 3, 5)]
      .map((r, i) => ({ offset: [0, 1, 2, 7, 8][i], ...r })))
    const [{ partitions: [p] }] = await admin.fetchOffsets({ groupId: offsetsGroup, topics: [name] })
    assert.equal(p.offset, '3', `${offsetsGroup}'s offset: the committed transaction's`)
  }],
  ['admin-describe-cluster', async () => {
    const { brokers, controller } = await admin.describeCluster()
    assert.equal(brokers.length, 1)
    assert.deepEqual([`${brokers[0].host}:${brokers[0].port}`, brokers[0].nodeId], [bootstrap, controller])
  }],
]

async function main () {
  const rows = []
  let passed = 0
  let failed = 0
  await admin.connect()
  // [name, check] passes when check does; [name, check, reason] is unsupported when check
  // (that kpfs refuses what the scenario needs) passes; [name, 'unsupported', reason] is a
  // client's lack, with nothing to run.
  for (const [name, check, reason] of scenarios) {
    if (check === 'unsupported') {
      rows.push([name, 'unsupported', reason])
      continue
    }
    let timer
    const start = Date.now()
    try {
      await Promise.race([check(), new Promise((resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`no result in ${SCENARIO_TIMEOUT_MS} ms`)), SCENARIO_TIMEOUT_MS)
      })])
      rows.push(reason ? [name, 'unsupported', reason] : [name, 'pass', ''])
      passed++
      console.log(`PASS ${name} (${Date.now() - start} ms)${reason ? ': unsupported' : ''}`)
    } catch (e) {
      const why = String(e.message || e).replace(/\s+/g, ' ')
      rows.push([name, 'fail', why])
      failed++
      console.error(`FAIL ${name} (${Date.now() - start} ms): ${why}`)
    } finally {
      clearTimeout(timer)
    }
  }
  await admin.disconnect()
  fs.appendFileSync(matrixFile, rows.map(r => r.join('\t') + '\n').join(''))
  console.log(`${passed} passed, ${failed} failed`)
  return failed === 0
}

main().then(ok => process.exit(ok ? 0 : 1), e => { console.error(e); process.exit(1) })
