// Command sarama-check drives IBM's sarama against a Kafka listener (kpfs serve, in
// tests/shell/t_sarama.sh) as an application would: producers, consumers, a consumer
// group and the cluster admin, each scenario checked against what was sent. It writes one
// SCENARIO<TAB>RESULT<TAB>NOTE row per scenario to -matrix and exits 1 when any failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

var (
	bootstrap = flag.String("bootstrap", "", "host:port of the listener")
	version   = flag.String("version", "", `sarama's config.Version: a Kafka version, or "max" for the newest sarama knows (default: sarama's default)`)
	matrix    = flag.String("matrix", "", "file the scenario rows are appended to")
	prefix    = flag.String("prefix", "sarama", "prefix of every topic and group this run makes")
)

// scenarioTimeout bounds each scenario, so a client that waits forever fails the run
// instead of hanging the test.
const scenarioTimeout = 25 * time.Second

func main() {
	flag.Parse()
	if *bootstrap == "" || *matrix == "" {
		log.Fatal("usage: sarama-check -bootstrap HOST:PORT -matrix FILE [-version V] [-prefix P]")
	}
	// KPFS_SARAMA_DEBUG=1 shows sarama's own log.
	if os.Getenv("KPFS_SARAMA_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
	conf := newConfig()
	rows, err := os.OpenFile(*matrix, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	c := &checks{conf: conf, rows: rows}
	c.run("produce", c.produceSync)
	c.run("produce-async", c.produceAsync)
	for _, codec := range []sarama.CompressionCodec{sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4, sarama.CompressionZSTD} {
		c.run("produce-compressed-"+codec.String(), func() error { return c.produceCompressed(codec) })
	}
	c.run("produce-idempotent", c.produceIdempotent)
	c.run("consume-from-beginning", c.consumeOldest)
	c.run("consume-from-end", c.consumeNewest)
	c.run("consume-from-offset", c.consumeFromOffset)
	c.run("consume-group", c.consumeGroup)
	c.run("commit-offsets", c.committedOffsets)
	c.run("admin-create-topics", c.adminCreateTopic)
	c.run("admin-list-topics", c.adminListTopics)
	c.run("admin-describe-topics", c.adminDescribeTopics)
	c.run("admin-create-partitions", c.adminCreatePartitions)
	c.run("admin-describe-configs", c.adminDescribeConfig)
	c.run("admin-alter-configs", c.adminAlterConfig)
	c.run("admin-incremental-alter-configs", c.adminIncrementalAlterConfig)
	c.run("admin-list-offsets", c.adminListOffsets)
	c.run("admin-delete-records", c.adminDeleteRecords)
	c.run("admin-list-groups", c.adminListGroups)
	c.run("admin-describe-groups", c.adminDescribeGroups)
	c.run("admin-list-group-offsets", c.adminListGroupOffsets)
	c.run("admin-delete-groups", c.adminDeleteGroup)
	c.run("admin-delete-topics", c.adminDeleteTopic)
	c.run("admin-describe-cluster", c.adminDescribeCluster)
	c.run("transactions", c.transactions)
	fmt.Printf("%d passed, %d failed\n", c.passed, c.failed)
	if c.failed > 0 {
		os.Exit(1)
	}
}

func newConfig() *sarama.Config {
	conf := sarama.NewConfig()
	conf.ClientID = "kpfs-sarama-check"
	switch *version {
	case "":
	case "max":
		conf.Version = sarama.MaxVersion
	default:
		v, err := sarama.ParseKafkaVersion(*version)
		if err != nil {
			log.Fatal(err)
		}
		conf.Version = v
	}
	fmt.Printf("sarama with config.Version %s\n", conf.Version)
	conf.Producer.Return.Successes = true
	conf.Producer.RequiredAcks = sarama.WaitForAll
	conf.Consumer.Return.Errors = true
	conf.Metadata.Retry.Backoff = 100 * time.Millisecond
	return conf
}

type checks struct {
	conf           *sarama.Config
	rows           *os.File
	passed, failed int
	// What consume-group left behind, for commit-offsets and the group admin scenarios.
	group       string
	groupTopics []string
	groupEnds   map[string]int64
}

// run runs check and writes its row: pass or fail.
func (c *checks) run(scenario string, check func() error) {
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- check() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(scenarioTimeout):
		err = fmt.Errorf("no result in %s", scenarioTimeout)
	}
	took := time.Since(start).Round(time.Millisecond)
	result, note := "pass", ""
	if err != nil {
		result, note = "fail", strings.ReplaceAll(err.Error(), "\t", " ")
		note = strings.ReplaceAll(note, "\n", " ")
		c.failed++
		fmt.Fprintf(os.Stderr, "FAIL %s (%s): %s\n", scenario, took, note)
	} else {
		c.passed++
		fmt.Printf("PASS %s (%s): %s\n", scenario, took, result)
	}
	fmt.Fprintf(c.rows, "%s\t%s\t%s\n", scenario, result, note)
}

func (c *checks) topic(name string) string { return *prefix + "-" + name }

func (c *checks) client() (sarama.Client, error) {
	return sarama.NewClient([]string{*bootstrap}, c.conf)
}

func (c *checks) admin() (sarama.ClusterAdmin, error) {
	return sarama.NewClusterAdmin([]string{*bootstrap}, c.conf)
}

func (c *checks) createTopic(topic string) error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	return admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
}

// record is what a test sends and expects back.
type record struct {
	key, value string
	headers    map[string]string
}

func (r record) message(topic string) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(r.value)}
	if r.key != "" {
		m.Key = sarama.StringEncoder(r.key)
	}
	for k, v := range r.headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	return m
}

func numbered(what string, from, to int) []record {
	var out []record
	for i := from; i < to; i++ {
		out = append(out, record{key: fmt.Sprintf("k%d", i), value: fmt.Sprintf("%s %d", what, i)})
	}
	return out
}

// produce sends records with a sync producer of conf and checks the offsets it was told.
func (c *checks) produce(conf *sarama.Config, topic string, records []record, firstOffset int64) error {
	producer, err := sarama.NewSyncProducer([]string{*bootstrap}, conf)
	if err != nil {
		return err
	}
	defer producer.Close()
	var msgs []*sarama.ProducerMessage
	for _, r := range records {
		msgs = append(msgs, r.message(topic))
	}
	if err := producer.SendMessages(msgs); err != nil {
		return err
	}
	for i, m := range msgs {
		if m.Offset != firstOffset+int64(i) || m.Partition != 0 {
			return fmt.Errorf("record %d was stored at partition %d offset %d, expected 0/%d", i, m.Partition, m.Offset, firstOffset+int64(i))
		}
	}
	return nil
}

// consume reads n records of topic from offset (or OffsetOldest/OffsetNewest).
func (c *checks) consume(topic string, offset int64, n int) ([]*sarama.ConsumerMessage, error) {
	consumer, err := sarama.NewConsumer([]string{*bootstrap}, c.conf)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, offset)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	return receive(pc, n)
}

func receive(pc sarama.PartitionConsumer, n int) ([]*sarama.ConsumerMessage, error) {
	var got []*sarama.ConsumerMessage
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case m := <-pc.Messages():
			got = append(got, m)
		case err := <-pc.Errors():
			return got, err
		case <-deadline:
			return got, fmt.Errorf("consumed %d of %d records in 10 s", len(got), n)
		}
	}
	return got, nil
}

// expectRecords checks that got holds want, in order, from offset first.
func expectRecords(got []*sarama.ConsumerMessage, want []record, first int64) error {
	if len(got) != len(want) {
		return fmt.Errorf("consumed %d records, expected %d", len(got), len(want))
	}
	for i, m := range got {
		w := want[i]
		headers := map[string]string{}
		for _, h := range m.Headers {
			headers[string(h.Key)] = string(h.Value)
		}
		if len(w.headers) == 0 {
			w.headers = map[string]string{}
		}
		if m.Offset != first+int64(i) || string(m.Key) != w.key || string(m.Value) != w.value || fmt.Sprint(headers) != fmt.Sprint(w.headers) {
			return fmt.Errorf("offset %d: got key %q value %q headers %v, expected offset %d key %q value %q headers %v",
				m.Offset, m.Key, m.Value, headers, first+int64(i), w.key, w.value, w.headers)
		}
	}
	return nil
}

func (c *checks) roundTrip(conf *sarama.Config, topic string, records []record) error {
	if err := c.produce(conf, topic, records, 0); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	got, err := c.consume(topic, sarama.OffsetOldest, len(records))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	return expectRecords(got, records, 0)
}

var headered = []record{
	{key: "k1", value: "v1", headers: map[string]string{"trace": "abc", "origin": "sarama"}},
	{value: "keyless"},
	{key: "k3", value: "with\nnewline", headers: map[string]string{"empty": ""}},
}

func (c *checks) produceSync() error {
	return c.roundTrip(c.conf, c.topic("sync"), headered)
}

func (c *checks) produceAsync() error {
	topic := c.topic("async")
	producer, err := sarama.NewAsyncProducer([]string{*bootstrap}, c.conf)
	if err != nil {
		return err
	}
	records := numbered("async", 0, 20)
	for _, r := range records {
		producer.Input() <- r.message(topic)
	}
	offsets := map[int64]bool{}
	for range records {
		select {
		case m := <-producer.Successes():
			offsets[m.Offset] = true
		case e := <-producer.Errors():
			producer.AsyncClose()
			return e.Err
		}
	}
	if err := producer.Close(); err != nil {
		return err
	}
	for i := range records {
		if !offsets[int64(i)] {
			return fmt.Errorf("no success for offset %d (got %v)", i, offsets)
		}
	}
	got, err := c.consume(topic, sarama.OffsetOldest, len(records))
	if err != nil {
		return err
	}
	return expectRecords(got, records, 0)
}

func (c *checks) produceCompressed(codec sarama.CompressionCodec) error {
	conf := *c.conf
	conf.Producer.Compression = codec
	return c.roundTrip(&conf, c.topic("codec-"+codec.String()), numbered(codec.String(), 0, 10))
}

func (c *checks) produceIdempotent() error {
	conf := *c.conf
	conf.Producer.Idempotent = true
	conf.Net.MaxOpenRequests = 1
	conf.Producer.RequiredAcks = sarama.WaitForAll
	conf.Producer.Retry.Max = 3
	topic := c.topic("idempotent")
	if err := c.produce(&conf, topic, numbered("idempotent", 0, 5), 0); err != nil {
		return err
	}
	// A second producer gets a producer id of its own and appends after the first's.
	if err := c.produce(&conf, topic, numbered("idempotent", 5, 10), 5); err != nil {
		return fmt.Errorf("second producer: %w", err)
	}
	got, err := c.consume(topic, sarama.OffsetOldest, 10)
	if err != nil {
		return err
	}
	return expectRecords(got, numbered("idempotent", 0, 10), 0)
}

func (c *checks) consumeOldest() error {
	return c.roundTrip(c.conf, c.topic("oldest"), numbered("oldest", 0, 7))
}

// consumeNewest starts a consumer at the end, then produces: it sees only the new records.
func (c *checks) consumeNewest() error {
	topic := c.topic("newest")
	if err := c.produce(c.conf, topic, numbered("before", 0, 4), 0); err != nil {
		return err
	}
	consumer, err := sarama.NewConsumer([]string{*bootstrap}, c.conf)
	if err != nil {
		return err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetNewest)
	if err != nil {
		return err
	}
	defer pc.Close()
	after := numbered("after", 4, 7)
	if err := c.produce(c.conf, topic, after, 4); err != nil {
		return err
	}
	got, err := receive(pc, len(after))
	if err != nil {
		return err
	}
	return expectRecords(got, after, 4)
}

func (c *checks) consumeFromOffset() error {
	topic := c.topic("from-offset")
	records := numbered("at", 0, 10)
	// One batch: the consumer gets it whole from the broker and must skip offsets 0-5.
	if err := c.produce(c.conf, topic, records, 0); err != nil {
		return err
	}
	got, err := c.consume(topic, 6, 4)
	if err != nil {
		return err
	}
	if err := expectRecords(got, records[6:], 6); err != nil {
		return err
	}
	// Past the end is Kafka's OFFSET_OUT_OF_RANGE.
	consumer, err := sarama.NewConsumer([]string{*bootstrap}, c.conf)
	if err != nil {
		return err
	}
	defer consumer.Close()
	if _, err := consumer.ConsumePartition(topic, 0, 11); !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		return fmt.Errorf("consuming from offset 11 of 10: got %v, expected %v", err, sarama.ErrOffsetOutOfRange)
	}
	return nil
}

// member is one consumer of the group: it records what it was given and consumed, and
// commits each record it consumes.
type member struct {
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan error

	mu       sync.Mutex
	claims   []string // the topics of the current generation's claims
	consumed map[string][]int64
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = nil
	for topic := range s.Claims() {
		m.claims = append(m.claims, topic)
	}
	slices.Sort(m.claims)
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		m.mu.Lock()
		m.consumed[msg.Topic] = append(m.consumed[msg.Topic], msg.Offset)
		m.mu.Unlock()
		s.MarkMessage(msg, "")
		s.Commit()
	}
	return nil
}

func (m *member) state() ([]string, map[string][]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	consumed := map[string][]int64{}
	for t, o := range m.consumed {
		consumed[t] = slices.Clone(o)
	}
	return slices.Clone(m.claims), consumed
}

func (c *checks) startMember(group, name string, topics []string) (*member, error) {
	conf := *c.conf
	conf.ClientID = name
	conf.Consumer.Offsets.Initial = sarama.OffsetOldest
	conf.Consumer.Offsets.AutoCommit.Enable = false
	// Round-robin spreads the two one-partition topics over two members (range would give
	// both to the first).
	conf.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	conf.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	conf.Consumer.Group.Session.Timeout = 6 * time.Second
	conf.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cg, err := sarama.NewConsumerGroup([]string{*bootstrap}, group, &conf)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{group: cg, cancel: cancel, done: make(chan error, 1), consumed: map[string][]int64{}}
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, topics, m); err != nil {
				m.done <- err
				return
			}
		}
		m.done <- nil
	}()
	return m, nil
}

// leave stops the member: its Close sends LeaveGroup.
func (m *member) leave() error {
	m.cancel()
	if err := <-m.done; err != nil {
		return err
	}
	return m.group.Close()
}

// waitFor polls cond every 50 ms for up to 15 s.
func waitFor(what string, cond func() bool) error {
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s in 15 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func upTo(n int64) []int64 {
	var out []int64
	for i := int64(0); i < n; i++ {
		out = append(out, i)
	}
	return out
}

// consumeGroup: two members share two topics, one each; when one leaves, the other takes
// its topic over from the offset it committed; no record is consumed twice or missed.
func (c *checks) consumeGroup() error {
	c.group = *prefix + "-group"
	c.groupTopics = []string{c.topic("group-a"), c.topic("group-b")}
	for _, t := range c.groupTopics {
		if err := c.createTopic(t); err != nil {
			return err
		}
	}
	m1, err := c.startMember(c.group, "member-1", c.groupTopics)
	if err != nil {
		return err
	}
	m2, err := c.startMember(c.group, "member-2", c.groupTopics)
	if err != nil {
		return err
	}
	defer m1.leave()
	split := func() bool {
		c1, _ := m1.state()
		c2, _ := m2.state()
		return len(c1) == 1 && len(c2) == 1 && c1[0] != c2[0]
	}
	if err := waitFor("split of the two topics over the two members", split); err != nil {
		c1, _ := m1.state()
		c2, _ := m2.state()
		return fmt.Errorf("%w: member-1 has %v, member-2 %v", err, c1, c2)
	}
	// The records come once each member has its topic, so that each consumes its own.
	for _, t := range c.groupTopics {
		if err := c.produce(c.conf, t, numbered(t, 0, 10), 0); err != nil {
			return err
		}
	}
	all := func(n int64) func() bool {
		return func() bool {
			_, d1 := m1.state()
			_, d2 := m2.state()
			for _, t := range c.groupTopics {
				if len(d1[t])+len(d2[t]) < int(n) {
					return false
				}
			}
			return true
		}
	}
	if err := waitFor("10 records of each topic", all(10)); err != nil {
		return err
	}
	c1, d1 := m1.state()
	c2, d2 := m2.state()
	if !slices.Equal(d1[c1[0]], upTo(10)) || !slices.Equal(d2[c2[0]], upTo(10)) {
		return fmt.Errorf("member-1 consumed %v of %s, member-2 %v of %s; expected 0-9 each", d1[c1[0]], c1[0], d2[c2[0]], c2[0])
	}
	if err := m2.leave(); err != nil {
		return fmt.Errorf("member-2 leaving: %w", err)
	}
	for _, t := range c.groupTopics {
		if err := c.produce(c.conf, t, numbered(t, 10, 15), 10); err != nil {
			return err
		}
	}
	if err := waitFor("member-1 with both topics after member-2 left", func() bool {
		c1, _ := m1.state()
		return len(c1) == 2
	}); err != nil {
		return err
	}
	if err := waitFor("15 records of each topic", all(15)); err != nil {
		return err
	}
	_, d1 = m1.state()
	for _, t := range c.groupTopics {
		got := append(slices.Clone(d1[t]), d2[t]...)
		slices.Sort(got)
		if !slices.Equal(got, upTo(15)) {
			return fmt.Errorf("%s: offsets consumed %v, expected each of 0-14 once", t, got)
		}
	}
	if got := d1[c2[0]]; !slices.Equal(got, []int64{10, 11, 12, 13, 14}) {
		return fmt.Errorf("member-1 consumed %v of member-2's topic %s, expected 10-14 (from member-2's commit)", got, c2[0])
	}
	c.groupEnds = map[string]int64{c.groupTopics[0]: 15, c.groupTopics[1]: 15}
	return nil
}

// committedOffsets: a new member of the group starts where the others committed.
func (c *checks) committedOffsets() error {
	if c.groupEnds == nil {
		return errors.New("consume-group did not finish")
	}
	for _, t := range c.groupTopics {
		if err := c.produce(c.conf, t, numbered(t, 15, 17), 15); err != nil {
			return err
		}
	}
	m, err := c.startMember(c.group, "member-3", c.groupTopics)
	if err != nil {
		return err
	}
	if err := waitFor("member-3's records", func() bool {
		_, d := m.state()
		return len(d[c.groupTopics[0]]) >= 2 && len(d[c.groupTopics[1]]) >= 2
	}); err != nil {
		m.leave()
		return err
	}
	if err := m.leave(); err != nil {
		return err
	}
	_, d := m.state()
	for _, t := range c.groupTopics {
		if !slices.Equal(d[t], []int64{15, 16}) {
			return fmt.Errorf("%s: member-3 consumed %v, expected 15-16 (after the committed 15)", t, d[t])
		}
	}
	c.groupEnds = map[string]int64{c.groupTopics[0]: 17, c.groupTopics[1]: 17}
	return nil
}

func (c *checks) adminCreateTopic() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	retention := "86400000"
	detail := &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": &retention}}
	if err := admin.CreateTopic(c.topic("admin"), detail, false); err != nil {
		return err
	}
	err = admin.CreateTopic(c.topic("admin"), detail, false)
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("creating it again: got %v, expected %v", err, sarama.ErrTopicAlreadyExists)
	}
	if err := admin.CreateTopic(c.topic("admin-three"), &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		return fmt.Errorf("3 partitions: %w", err)
	}
	err = admin.CreateTopic(c.topic("admin-none"), &sarama.TopicDetail{NumPartitions: 0, ReplicationFactor: 1}, false)
	if !errors.Is(err, sarama.ErrInvalidPartitions) || !strings.Contains(err.Error(), "Number of partitions was set to an invalid non-positive value.") {
		return fmt.Errorf("0 partitions: got %v, expected %v with Kafka's reason", err, sarama.ErrInvalidPartitions)
	}
	invalid := "-7"
	err = admin.CreateTopic(c.topic("admin-bad"), &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.bytes": &invalid, "min.insync.replicas": &invalid}}, false)
	if !errors.Is(err, sarama.ErrInvalidConfig) {
		return fmt.Errorf("an invalid config: got %v, expected %v", err, sarama.ErrInvalidConfig)
	}
	topics, err := admin.ListTopics()
	if err != nil {
		return err
	}
	for _, refused := range []string{"admin-none", "admin-bad"} {
		if _, ok := topics[c.topic(refused)]; ok {
			return fmt.Errorf("the refused topic %s exists", c.topic(refused))
		}
	}
	return nil
}

func (c *checks) adminListTopics() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		return err
	}
	d, ok := topics[c.topic("admin")]
	if !ok {
		return fmt.Errorf("%s is not listed", c.topic("admin"))
	}
	if d.NumPartitions != 1 || d.ReplicationFactor != 1 {
		return fmt.Errorf("%s has %d partitions, replication %d", c.topic("admin"), d.NumPartitions, d.ReplicationFactor)
	}
	if v := d.ConfigEntries["retention.ms"]; v == nil || *v != "86400000" {
		return fmt.Errorf("%s's retention.ms is %v, expected 86400000", c.topic("admin"), v)
	}
	return nil
}

// partitionsOf is the number of partitions DescribeTopics lists of topic.
func partitionsOf(admin sarama.ClusterAdmin, topic string) (int, error) {
	meta, err := admin.DescribeTopics([]string{topic})
	if err != nil {
		return 0, err
	}
	if len(meta) != 1 || !errors.Is(meta[0].Err, sarama.ErrNoError) {
		return 0, fmt.Errorf("describing %s: %+v", topic, meta)
	}
	return len(meta[0].Partitions), nil
}

// adminCreatePartitions grows admin-three (of adminCreateTopic) from 3 partitions to 5,
// validateOnly first; fewer is refused in Kafka's words.
func (c *checks) adminCreatePartitions() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	topic := c.topic("admin-three")
	if n, err := partitionsOf(admin, topic); err != nil || n != 3 {
		return fmt.Errorf("%s before: %d partitions, %v", topic, n, err)
	}
	if err := admin.CreatePartitions(topic, 5, nil, true); err != nil {
		return fmt.Errorf("validateOnly: %w", err)
	}
	if n, err := partitionsOf(admin, topic); err != nil || n != 3 {
		return fmt.Errorf("%s after validateOnly: %d partitions, %v", topic, n, err)
	}
	if err := admin.CreatePartitions(topic, 5, nil, false); err != nil {
		return err
	}
	if n, err := partitionsOf(admin, topic); err != nil || n != 5 {
		return fmt.Errorf("%s after growing to 5: %d partitions, %v", topic, n, err)
	}
	err = admin.CreatePartitions(topic, 2, nil, false)
	want := fmt.Sprintf("The topic %s currently has 5 partition(s); 2 would not be an increase.", topic)
	if !errors.Is(err, sarama.ErrInvalidPartitions) || !strings.Contains(err.Error(), want) {
		return fmt.Errorf("fewer partitions: got %v, expected %v with %q", err, sarama.ErrInvalidPartitions, want)
	}
	return nil
}

func (c *checks) adminDescribeTopics() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	meta, err := admin.DescribeTopics([]string{c.topic("admin"), c.topic("no-such")})
	if err != nil {
		return err
	}
	if len(meta) != 2 {
		return fmt.Errorf("%d topics described, expected 2", len(meta))
	}
	for _, m := range meta {
		switch m.Name {
		case c.topic("admin"):
			if !errors.Is(m.Err, sarama.ErrNoError) || len(m.Partitions) != 1 || m.Partitions[0].ID != 0 ||
				len(m.Partitions[0].Replicas) != 1 || m.Partitions[0].Leader != m.Partitions[0].Replicas[0] {
				return fmt.Errorf("%s: error %v, partitions %+v", m.Name, m.Err, m.Partitions)
			}
		case c.topic("no-such"):
			// Admin's Metadata does not create topics.
			if !errors.Is(m.Err, sarama.ErrUnknownTopicOrPartition) {
				return fmt.Errorf("a missing topic: got %v, expected %v", m.Err, sarama.ErrUnknownTopicOrPartition)
			}
		default:
			return fmt.Errorf("described a topic not asked for: %s", m.Name)
		}
	}
	return nil
}

func (c *checks) topicConfig(admin sarama.ClusterAdmin, topic string) (map[string]sarama.ConfigEntry, error) {
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		return nil, err
	}
	out := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		out[e.Name] = e
	}
	return out, nil
}

func (c *checks) adminDescribeConfig() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	conf, err := c.topicConfig(admin, c.topic("admin"))
	if err != nil {
		return err
	}
	if e := conf["retention.ms"]; e.Value != "86400000" || e.Default || e.Source != sarama.SourceTopic {
		return fmt.Errorf("retention.ms: %+v, expected 86400000 set on the topic", e)
	}
	if e := conf["cleanup.policy"]; e.Value != "delete" || e.Source != sarama.SourceDefault {
		return fmt.Errorf("cleanup.policy: %+v, expected the default delete", e)
	}
	broker, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "1", ConfigNames: []string{"log.retention.hours"}})
	if err != nil {
		return fmt.Errorf("the broker's config: %w", err)
	}
	if len(broker) != 1 || broker[0].Name != "log.retention.hours" || broker[0].Value != "168" {
		return fmt.Errorf("the broker's log.retention.hours: %+v", broker)
	}
	return nil
}

func (c *checks) adminAlterConfig() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	// AlterConfigs replaces the topic's whole config: retention.ms goes back to its default.
	bytes := "1048576"
	if err := admin.AlterConfig(sarama.TopicResource, c.topic("admin"), map[string]*string{"retention.bytes": &bytes}, false); err != nil {
		return err
	}
	conf, err := c.topicConfig(admin, c.topic("admin"))
	if err != nil {
		return err
	}
	if conf["retention.bytes"].Value != bytes || conf["retention.ms"].Source != sarama.SourceDefault {
		return fmt.Errorf("after AlterConfig: retention.bytes %+v, retention.ms %+v", conf["retention.bytes"], conf["retention.ms"])
	}
	bad := "sometimes"
	err = admin.AlterConfig(sarama.TopicResource, c.topic("admin"), map[string]*string{"cleanup.policy": &bad}, false)
	if !errors.Is(err, sarama.ErrInvalidConfig) {
		return fmt.Errorf("cleanup.policy=sometimes: got %v, expected %v", err, sarama.ErrInvalidConfig)
	}
	conf, err = c.topicConfig(admin, c.topic("admin"))
	if err != nil {
		return err
	}
	if conf["retention.bytes"].Value != bytes || conf["cleanup.policy"].Value != "delete" {
		return fmt.Errorf("a refused AlterConfig changed the config: %+v %+v", conf["retention.bytes"], conf["cleanup.policy"])
	}
	return nil
}

func (c *checks) adminIncrementalAlterConfig() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	compact, ms := "compact", "3600000"
	err = admin.IncrementalAlterConfig(sarama.TopicResource, c.topic("admin"), map[string]sarama.IncrementalAlterConfigsEntry{
		"cleanup.policy":  {Operation: sarama.IncrementalAlterConfigsOperationAppend, Value: &compact},
		"retention.ms":    {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &ms},
		"retention.bytes": {Operation: sarama.IncrementalAlterConfigsOperationDelete},
	}, false)
	if err != nil {
		return err
	}
	conf, err := c.topicConfig(admin, c.topic("admin"))
	if err != nil {
		return err
	}
	if conf["cleanup.policy"].Value != "delete,compact" || conf["retention.ms"].Value != ms || conf["retention.bytes"].Source != sarama.SourceDefault {
		return fmt.Errorf("after IncrementalAlterConfig: %+v %+v %+v", conf["cleanup.policy"], conf["retention.ms"], conf["retention.bytes"])
	}
	return nil
}

func (c *checks) adminListOffsets() error {
	topic := c.topic("offsets")
	if err := c.produce(c.conf, topic, numbered("offsets", 0, 6), 0); err != nil {
		return err
	}
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	res, err := admin.ListOffsets(map[string]map[int32]int64{topic: {0: sarama.OffsetNewest}}, nil)
	if err != nil {
		return err
	}
	if r := res[topic][0]; r == nil || (r.Err != nil && !errors.Is(r.Err, sarama.ErrNoError)) || r.Offset != 6 {
		return fmt.Errorf("latest offset: %+v, expected 6", r)
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	defer client.Close()
	if oldest, err := client.GetOffset(topic, 0, sarama.OffsetOldest); err != nil || oldest != 0 {
		return fmt.Errorf("earliest offset: %d (%v), expected 0", oldest, err)
	}
	return nil
}

func (c *checks) adminDeleteRecords() error {
	topic := c.topic("offsets")
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.DeleteRecords(topic, map[int32]int64{0: 4}); err != nil {
		return err
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	defer client.Close()
	if oldest, err := client.GetOffset(topic, 0, sarama.OffsetOldest); err != nil || oldest != 4 {
		return fmt.Errorf("earliest offset after deleting before 4: %d (%v)", oldest, err)
	}
	got, err := c.consume(topic, sarama.OffsetOldest, 2)
	if err != nil {
		return err
	}
	if err := expectRecords(got, numbered("offsets", 4, 6), 4); err != nil {
		return err
	}
	if err := admin.DeleteRecords(topic, map[int32]int64{0: 9}); !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		return fmt.Errorf("deleting before 9 of 6: got %v, expected %v", err, sarama.ErrOffsetOutOfRange)
	}
	return nil
}

func (c *checks) adminListGroups() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	groups, err := admin.ListConsumerGroups()
	if err != nil {
		return err
	}
	if groups[c.group] != "consumer" {
		return fmt.Errorf("%s is not listed as a consumer group: %v", c.group, groups)
	}
	return nil
}

func (c *checks) adminDescribeGroups() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	groups, err := admin.DescribeConsumerGroups([]string{c.group})
	if err != nil {
		return err
	}
	if len(groups) != 1 {
		return fmt.Errorf("%d groups described", len(groups))
	}
	g := groups[0]
	if !errors.Is(g.Err, sarama.ErrNoError) || g.GroupId != c.group || g.State != "Empty" || g.ProtocolType != "consumer" || len(g.Members) != 0 {
		return fmt.Errorf("%s: %+v, expected an Empty consumer group", c.group, g)
	}
	return nil
}

func (c *checks) adminListGroupOffsets() error {
	if c.groupEnds == nil {
		return errors.New("consume-group did not finish")
	}
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	res, err := admin.ListConsumerGroupOffsets(c.group, map[string][]int32{c.groupTopics[0]: {0}, c.groupTopics[1]: {0}})
	if err != nil {
		return err
	}
	for topic, end := range c.groupEnds {
		b := res.GetBlock(topic, 0)
		if b == nil || !errors.Is(b.Err, sarama.ErrNoError) || b.Offset != end {
			return fmt.Errorf("%s: committed %+v, expected %d", topic, b, end)
		}
	}
	return nil
}

func (c *checks) adminDeleteGroup() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.DeleteConsumerGroup(c.group); err != nil {
		return err
	}
	groups, err := admin.ListConsumerGroups()
	if err != nil {
		return err
	}
	if _, ok := groups[c.group]; ok {
		return fmt.Errorf("%s is still listed after its deletion", c.group)
	}
	if err := admin.DeleteConsumerGroup(c.group); !errors.Is(err, sarama.ErrGroupIDNotFound) {
		return fmt.Errorf("deleting it again: got %v, expected %v", err, sarama.ErrGroupIDNotFound)
	}
	return nil
}

func (c *checks) adminDeleteTopic() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.DeleteTopic(c.topic("admin")); err != nil {
		return err
	}
	topics, err := admin.ListTopics()
	if err != nil {
		return err
	}
	if _, ok := topics[c.topic("admin")]; ok {
		return fmt.Errorf("%s is still listed after its deletion", c.topic("admin"))
	}
	if err := admin.DeleteTopic(c.topic("admin")); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return fmt.Errorf("deleting it again: got %v, expected %v", err, sarama.ErrUnknownTopicOrPartition)
	}
	return nil
}

func (c *checks) adminDescribeCluster() error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	brokers, controller, err := admin.DescribeCluster()
	if err != nil {
		return err
	}
	if len(brokers) != 1 || brokers[0].ID() != controller || brokers[0].Addr() != *bootstrap {
		var seen []string
		for _, b := range brokers {
			seen = append(seen, fmt.Sprintf("%d@%s", b.ID(), b.Addr()))
		}
		return fmt.Errorf("brokers %v, controller %d; expected one broker at %s, the controller", seen, controller, *bootstrap)
	}
	return nil
}

// transactions: a transactional producer commits a transaction, aborts one and commits
// another; the first also commits a group's offset through the transaction
// (AddOffsetsToTxn, TxnOffsetCommit), the aborted one another offset that must not stick.
// A read_committed consumer gets the committed records alone, a read_uncommitted one all
// of them; neither gets the markers.
func (c *checks) transactions() error {
	conf := *c.conf
	conf.Producer.Idempotent = true
	conf.Net.MaxOpenRequests = 1
	conf.Producer.RequiredAcks = sarama.WaitForAll
	conf.Producer.Transaction.ID = *prefix + "-transactional"
	topic, group := c.topic("transactions"), c.topic("transactions-group")
	producer, err := sarama.NewSyncProducer([]string{*bootstrap}, &conf)
	if err != nil {
		return fmt.Errorf("a transactional producer: %w", err)
	}
	defer producer.Close()
	// Each transaction: its records, the offsets they must get, the group offset it commits.
	steps := []struct {
		commit      bool
		records     []record
		offsets     []int64
		groupOffset int64
	}{
		{true, numbered("committed", 0, 3), []int64{0, 1, 2}, 3}, // its COMMIT marker at 3
		{false, numbered("aborted", 0, 2), []int64{4, 5}, 6},     // ABORT at 6
		{true, numbered("committed", 3, 5), []int64{7, 8}, -1},   // COMMIT at 9
	}
	for i, step := range steps {
		if err := producer.BeginTxn(); err != nil {
			return fmt.Errorf("transaction %d: BeginTxn: %w", i, err)
		}
		var msgs []*sarama.ProducerMessage
		for _, r := range step.records {
			msgs = append(msgs, r.message(topic))
		}
		if err := producer.SendMessages(msgs); err != nil {
			return fmt.Errorf("transaction %d: %w", i, err)
		}
		for j, m := range msgs {
			if m.Partition != 0 || m.Offset != step.offsets[j] {
				return fmt.Errorf("transaction %d: record %d stored at %d/%d, expected 0/%d", i, j, m.Partition, m.Offset, step.offsets[j])
			}
		}
		if step.groupOffset >= 0 {
			offsets := map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: step.groupOffset}}}
			if err := producer.AddOffsetsToTxn(offsets, group); err != nil {
				return fmt.Errorf("transaction %d: AddOffsetsToTxn: %w", i, err)
			}
		}
		if step.commit {
			err = producer.CommitTxn()
		} else {
			err = producer.AbortTxn()
		}
		if err != nil {
			return fmt.Errorf("transaction %d: ending it: %w", i, err)
		}
		if producer.TxnStatus()&sarama.ProducerTxnFlagReady == 0 {
			return fmt.Errorf("transaction %d: status %v after its end, expected ready", i, producer.TxnStatus())
		}
	}
	committed := append(numbered("committed", 0, 3), numbered("committed", 3, 5)...)
	all := slices.Concat(numbered("committed", 0, 3), numbered("aborted", 0, 2), numbered("committed", 3, 5))
	for _, isolation := range []struct {
		level   sarama.IsolationLevel
		want    []record
		offsets []int64
	}{
		{sarama.ReadCommitted, committed, []int64{0, 1, 2, 7, 8}},
		{sarama.ReadUncommitted, all, []int64{0, 1, 2, 4, 5, 7, 8}},
	} {
		got, err := c.consumeIsolated(topic, isolation.level, len(isolation.want))
		if err != nil {
			return fmt.Errorf("isolation level %d: %w", isolation.level, err)
		}
		var values []string
		var offsets []int64
		for _, m := range got {
			values = append(values, string(m.Value))
			offsets = append(offsets, m.Offset)
		}
		var want []string
		for _, r := range isolation.want {
			want = append(want, r.value)
		}
		if !slices.Equal(values, want) || !slices.Equal(offsets, isolation.offsets) {
			return fmt.Errorf("isolation level %d: consumed %q at %v, expected %q at %v", isolation.level, values, offsets, want, isolation.offsets)
		}
	}
	admin, err := c.admin()
	if err != nil {
		return err
	}
	defer admin.Close()
	res, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	if err != nil {
		return err
	}
	if b := res.GetBlock(topic, 0); b == nil || !errors.Is(b.Err, sarama.ErrNoError) || b.Offset != 3 {
		return fmt.Errorf("%s's offset: %+v, expected the committed transaction's 3", group, b)
	}
	return nil
}

// consumeIsolated reads n records of partition 0 of topic from its start at an isolation
// level (aborted records, which come before the last committed ones, would show in them).
func (c *checks) consumeIsolated(topic string, level sarama.IsolationLevel, n int) ([]*sarama.ConsumerMessage, error) {
	conf := *c.conf
	conf.Consumer.IsolationLevel = level
	consumer, err := sarama.NewConsumer([]string{*bootstrap}, &conf)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	return receive(pc, n)
}
